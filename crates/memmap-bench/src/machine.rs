//! The machine line: CPU model, CPU count, memory, stream-hal backend (the build and the CPU's
//! identity are the report's [`crate::report::Provenance`]).

use schemars::JsonSchema;
use serde::Serialize;

/// What the report says about the machine.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Machine {
    /// CPU model name (`/proc/cpuinfo`), or the architecture.
    pub cpu: String,
    /// Logical CPUs available to this process.
    #[schemars(range(min = 1))]
    pub cpus: usize,
    /// Physical memory in bytes (`MemTotal`), if known.
    pub mem_total_bytes: Option<u64>,
    /// Memory available for new allocations in bytes (`MemAvailable`), if known.
    pub mem_available_bytes: Option<u64>,
    /// `stream_hal::backend()`: its description.
    pub backend: String,
    /// `stream_hal::backend().name()`: its machine-readable name (`x86_64`, `aarch64`,
    /// `generic`, ...).
    pub backend_name: String,
    /// Whether the backend issues streaming stores.
    pub streaming: bool,
    /// How `stream_hal::clear_pages` zeroes large ranges on this CPU.
    pub streaming_clear: String,
    /// Target triple architecture.
    pub arch: String,
}

impl Machine {
    /// Reads the machine description.
    #[must_use]
    pub fn detect() -> Machine {
        let mem = crate::memory::MemInfo::read();
        Machine {
            cpu: crate::report::provenance::CpuModel::detect().name,
            cpus: stream_par::available_cpus(),
            mem_total_bytes: mem.total,
            mem_available_bytes: mem.available,
            backend: stream_hal::backend().to_string(),
            backend_name: stream_hal::backend().name().to_string(),
            streaming: stream_hal::backend().is_streaming(),
            streaming_clear: stream_hal::streaming_clear_method().to_string(),
            arch: std::env::consts::ARCH.to_string(),
        }
    }
}
