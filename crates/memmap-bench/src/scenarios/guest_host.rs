//! What both guest-memory scenarios share: the guest memory, its two regions, its workers, and
//! the error of a host that ignores the advice they measure.

use stream_vm_memory::{Placement, Workers};
use vm_memory::bitmap::AtomicBitmap;
use vm_memory::{GuestAddress, GuestMemoryMmap};

use super::scenario::RunError;

/// The scenarios' guest memory.
pub type Mem = GuestMemoryMmap<AtomicBitmap>;

/// Which half of the scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// `guest-memory-populate`.
    Populate,
    /// `guest-memory-reset`.
    Reset,
}

/// `size` bytes of guest memory in two regions.
#[derive(Debug, Clone)]
pub struct GuestMemory {
    /// Which half.
    pub part: Part,
    /// Bytes of guest memory (a multiple of 4 MiB).
    pub size: u64,
    /// Whether the user gave the size (it is then never scaled).
    pub fixed: bool,
}

impl GuestMemory {
    /// The two regions: guest `[0, size / 2)` and `[size / 2, size)`, whole 2 MiB pages each.
    pub fn ranges(&self) -> [(GuestAddress, usize); 2] {
        let half = (self.size / 2) as usize;
        [(GuestAddress(0), half), (GuestAddress(half as u64), self.size as usize - half)]
    }
}

/// `threads` workers, each pinned to the NUMA node of its memory where the host has several.
pub fn workers(threads: usize) -> Workers {
    Workers::new(crate::threads::policy(threads)).with_placement(Placement::Auto)
}

/// The scenario's error when the host lacks `madvise` advice it measures (an emulator).
pub fn unsupported(name: &'static str, what: &str) -> RunError {
    RunError::of(name, format!("this host ignores {what} (an emulator?): nothing to measure"))(
        std::io::ErrorKind::Unsupported.into(),
    )
}
