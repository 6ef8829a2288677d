//! What a sweep runs: its initializers and strategies, the sizes (checked against the budget
//! by the command line: [`Sweep`]), the rounds at a size and the cold runs' flush buffer.

use memmap_core::{KernelConfig, Strategy};
use schemars::JsonSchema;
use serde::Serialize;

use crate::progress::ProgressMode;

/// The strategies, in table order; auto is measured after them.
pub const STRATEGIES: [Strategy; 4] =
    [Strategy::Slow, Strategy::Template, Strategy::Streaming, Strategy::Auto];

/// The smallest memmap a sweep can start at (1024 struct pages: one `MAX_PAGE_ORDER` block,
/// a 4 MiB device), and the unit of `--min-size`.
pub const MIN_SIZE: u64 = 64 << 10;

/// The two initializers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Init {
    /// `memmap_init_zone_device`, fsdax, one thread.
    ZoneDevice,
    /// The eager node boot, fused order.
    NodeBoot,
}

impl Init {
    /// Both.
    pub const ALL: [Init; 2] = [Init::ZoneDevice, Init::NodeBoot];

    /// The name in the table and the JSON.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Init::ZoneDevice => "zone-device-fsdax",
            Init::NodeBoot => "node-boot-eager",
        }
    }
}

/// A validated `sweep` command line: the sizes that fit, the ones that do not, the options.
#[derive(Debug)]
pub struct Sweep {
    /// Memmap sizes (bytes) to run, ascending.
    pub sizes: Vec<u64>,
    /// Sizes left out, and why.
    pub skipped: Vec<Skip>,
    /// `--rounds` (`None`: by size, [`rounds_for`]).
    pub rounds: Option<usize>,
    /// `--quick`: three rounds at every size.
    pub quick: bool,
    /// Kernel config.
    pub config: KernelConfig,
    /// Bytes of the buffer written before each cold run.
    pub flush_bytes: u64,
    /// `--json`.
    pub json: bool,
    /// `--verbose`: every round.
    pub verbose: bool,
    /// Progress bars.
    pub progress: ProgressMode,
    /// `--plot FILE`, checked.
    pub plot: Option<memmap_dump::OutputFile>,
}

/// A size that was not run.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Skip {
    /// Memmap bytes.
    pub memmap_bytes: u64,
    /// Why the size was not run (it does not fit the memory budget, say), printed as is.
    pub reason: String,
}

/// Rounds at a size: 101 up to 1 MiB of memmap and 51 up to 4 MiB (runs of microseconds,
/// where the noise is largest and a round costs little more than its cache flush), 31 up to
/// 64 MiB, 7 up to 1 GiB, 5 above (3 under `--quick`).
#[must_use]
pub fn rounds_for(memmap_bytes: u64, quick: bool) -> usize {
    match memmap_bytes {
        _ if quick => 3,
        b if b <= 1 << 20 => 101,
        b if b <= 4 << 20 => 51,
        b if b <= 64 << 20 => 31,
        b if b <= 1 << 30 => 7,
        _ => 5,
    }
}

/// The sizes of a sweep: `min`, `min * step`, ... up to `max`.
#[must_use]
pub fn sizes(min: u64, max: u64, step: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut s = min;
    while s <= max {
        v.push(s);
        match s.checked_mul(step.max(2)) {
            Some(n) => s = n,
            None => break,
        }
    }
    v
}

/// The last-level cache of CPU 0 in bytes (sysfs; `None` where unknown).
#[must_use]
pub fn llc_bytes() -> Option<u64> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let mut best = None;
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let size = std::fs::read_to_string(e.path().join("size")).ok();
        let bytes = size.and_then(|s| crate::size::parse_size(s.trim()).ok());
        best = best.max(bytes);
    }
    best
}

/// The cold runs' flush buffer: twice the last-level cache (64 MiB where unknown), at least
/// 16 MiB.
#[must_use]
pub fn flush_bytes(llc: Option<u64>) -> u64 {
    llc.map_or(64 << 20, |l| (2 * l).max(16 << 20)).next_multiple_of(4096)
}
