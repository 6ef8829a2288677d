//! The machine's data caches ([`CacheInfo`]) and the rule that turns them and the caller's
//! [`Reuse`] hint into the size from which Auto streams ([`streaming_threshold`]).

use core::fmt;

mod slot;
use slot::Slot;

/// The cache levels [`CacheInfo`] describes: 1 to 4.
pub(crate) const MAX_CACHE_LEVELS: usize = 4;

/// Where [`Reuse::WriteOnce`] streams from: 4 KiB, one base page of records.
pub const WRITE_ONCE_FLOOR: usize = 4096;

/// [`Reuse::ReadSoon`]'s threshold when the last-level cache is unknown: 1 MiB.
pub const READ_SOON_FALLBACK: usize = 1 << 20;

/// How soon the caller reads what a fill writes: the hint that, with the cache, sets where
/// Auto starts to stream ([`streaming_threshold`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Reuse {
    /// Written once and read much later (a kernel's memmap at boot or device bind): stream
    /// from [`WRITE_ONCE_FLOOR`].
    #[default]
    WriteOnce,
    /// Read right after the fill: stream only what one CPU's share of the last-level cache
    /// could not hold (three quarters of it, as glibc's `memcpy` does).
    ReadSoon,
}

impl Reuse {
    /// Lower-case name: `write-once`, `read-soon`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Reuse::WriteOnce => "write-once",
            Reuse::ReadSoon => "read-soon",
        }
    }
}

impl fmt::Display for Reuse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The size from which Auto streams a fill for `reuse` on a machine with `cache`: the one
/// rule of [`FillMode::AUTO`](crate::FillMode::AUTO) and [`FillMode::Reuse`](crate::FillMode::Reuse)
/// here and of memmap-core's `Strategy::Auto` (a fill of `bytes` streams when `bytes >=` this).
///
/// * [`Reuse::WriteOnce`]: [`WRITE_ONCE_FLOOR`] whatever the cache; streaming never reads the
///   destination, and below one page the drain makes it no faster than normal stores.
/// * [`Reuse::ReadSoon`]: three quarters of one CPU's share of the last-level cache
///   ([`CacheInfo::last_level_share`]), at least [`WRITE_ONCE_FLOOR`], as glibc's non-temporal
///   `memcpy` threshold on x86: the quarter left keeps the caller's hot data cached.
///   [`READ_SOON_FALLBACK`] where the last level is unknown.
///
/// ```
/// use stream_hal::{CacheInfo, Reuse, WRITE_ONCE_FLOOR, streaming_threshold};
///
/// // 32 MiB of L3 shared by 2 CPUs.
/// let cache = CacheInfo::new(64, [32 << 10, 1 << 20, 32 << 20, 0], 2);
/// assert_eq!(streaming_threshold(Reuse::WriteOnce, &cache), WRITE_ONCE_FLOOR);
/// assert_eq!(streaming_threshold(Reuse::ReadSoon, &cache), 12 << 20);
/// ```
#[must_use]
pub const fn streaming_threshold(reuse: Reuse, cache: &CacheInfo) -> usize {
    match reuse {
        Reuse::WriteOnce => WRITE_ONCE_FLOOR,
        Reuse::ReadSoon => match cache.last_level_share() {
            Some(share) => {
                let three_quarters = share / 4 * 3 + share % 4 * 3 / 4;
                let t = if three_quarters > usize::MAX as u64 { usize::MAX } else { three_quarters as usize };
                if t < WRITE_ONCE_FLOOR { WRITE_ONCE_FLOOR } else { t }
            }
            None => READ_SOON_FALLBACK,
        },
    }
}

/// [`streaming_threshold`] on this machine's [`cache_info`].
#[must_use]
pub fn auto_threshold(reuse: Reuse) -> usize {
    streaming_threshold(reuse, &cache_info())
}

/// Where a [`CacheInfo`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CacheSource {
    /// x86-64 `CPUID` leaf 4 (deterministic cache parameters: Intel, Zhaoxin), the last
    /// level's sharers capped by the package's logical processors from leaf `0x1F` or `0xB`.
    CpuidLeaf4,
    /// x86-64 `CPUID` leaf `0x8000_001D` (AMD and Hygon cache topology).
    CpuidLeaf8000001D,
    /// x86-64 `CPUID` leaves `0x8000_0005` and `0x8000_0006` (AMD CPUs without topology
    /// extensions); the last level's sharers are the package's cores (leaf `0x8000_0008`).
    CpuidLeaf80000006,
    /// Linux sysfs, `/sys/devices/system/cpu/cpu0/cache/index*/`.
    Sysfs,
    /// [`set_cache_info`].
    Caller,
    /// Nothing is known, for the reason given.
    Unknown(NoCacheInfo),
}

/// Why [`cache_info`] knows nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NoCacheInfo {
    /// The build has `--cfg stream_hal_no_cpuid` (or `STREAM_HAL_NO_CPUID=1`) and
    /// [`set_cache_info`] was not called.
    NoCpuid,
    /// This target reads Linux's sysfs, which needs the crate's `std` feature.
    NeedsStd,
    /// The target has nothing this crate can read (bare metal, another operating system,
    /// Miri, an emulated build): the caller supplies the caches.
    NoSource,
    /// The CPU or the operating system reported no data cache.
    NotReported,
}

impl fmt::Display for NoCacheInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NoCacheInfo::NoCpuid => "stream_hal_no_cpuid and no set_cache_info",
            NoCacheInfo::NeedsStd => "sysfs needs the std feature",
            NoCacheInfo::NoSource => "nothing to read on this target: set_cache_info",
            NoCacheInfo::NotReported => "no data cache reported",
        })
    }
}

impl fmt::Display for CacheSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheSource::CpuidLeaf4 => f.write_str("CPUID leaf 4"),
            CacheSource::CpuidLeaf8000001D => f.write_str("CPUID leaf 0x8000001D"),
            CacheSource::CpuidLeaf80000006 => f.write_str("CPUID leaves 0x80000005/6"),
            CacheSource::Sysfs => f.write_str("sysfs"),
            CacheSource::Caller => f.write_str("set_cache_info"),
            CacheSource::Unknown(why) => write!(f, "unknown: {why}"),
        }
    }
}

/// The data caches one CPU sees: the line size, the data (or unified) cache of each level,
/// and how many CPUs share the last level. Instruction caches are left out.
///
/// Made by detection ([`CacheInfo::detect`], [`cache_info`]) or by the caller
/// ([`CacheInfo::new`], then [`set_cache_info`]):
///
/// ```
/// use stream_hal::{CacheInfo, Reuse, streaming_threshold};
///
/// // 48 KiB L1d, 2 MiB L2, a 96 MiB L3 shared by 16 CPUs, 64-byte lines.
/// let c = CacheInfo::new(64, [48 << 10, 2 << 20, 96 << 20, 0], 16);
/// assert_eq!(c.last_level(), Some(3));
/// assert_eq!(c.last_level_share(), Some(6 << 20));
/// assert_eq!(streaming_threshold(Reuse::ReadSoon, &c), 4608 << 10); // 3/4 of 6 MiB
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CacheInfo {
    /// Line size in bytes, 0 if unknown.
    line_size: u32,
    /// Data or unified cache size of levels 1 to 4 in bytes, 0 where there is none.
    sizes: [u64; MAX_CACHE_LEVELS],
    /// CPUs sharing the last level, 0 if unknown.
    shared_by: u32,
    source: CacheSource,
}

impl CacheInfo {
    /// Nothing known, for the reason `why`.
    #[must_use]
    pub const fn unknown(why: NoCacheInfo) -> CacheInfo {
        CacheInfo {
            line_size: 0,
            sizes: [0; MAX_CACHE_LEVELS],
            shared_by: 0,
            source: CacheSource::Unknown(why),
        }
    }

    /// A caller's description ([`CacheSource::Caller`]): `line_size` bytes per line (0 if
    /// unknown), `data_sizes[i]` bytes of data or unified cache at level `i + 1` (0 where the
    /// level does not exist), and the number of CPUs that share the last (highest) level
    /// (0 if unknown, which counts as 1).
    #[must_use]
    pub const fn new(
        line_size: u32,
        data_sizes: [u64; MAX_CACHE_LEVELS],
        last_level_shared_by: u32,
    ) -> CacheInfo {
        CacheInfo {
            line_size,
            sizes: data_sizes,
            shared_by: last_level_shared_by,
            source: CacheSource::Caller,
        }
    }

    /// Where this description came from.
    #[must_use]
    pub const fn source(&self) -> CacheSource {
        self.source
    }

    /// The line size in bytes, if known.
    #[must_use]
    pub const fn line_size(&self) -> Option<u32> {
        if self.line_size == 0 { None } else { Some(self.line_size) }
    }

    /// The data or unified cache of `level` (1 to 4) in bytes, if there is
    /// one.
    #[must_use]
    pub const fn level_size(&self, level: usize) -> Option<u64> {
        if level == 0 || level > MAX_CACHE_LEVELS || self.sizes[level - 1] == 0 {
            None
        } else {
            Some(self.sizes[level - 1])
        }
    }

    /// The data or unified cache size of each level, 1 first, 0 where there is none.
    #[must_use]
    pub const fn data_sizes(&self) -> [u64; MAX_CACHE_LEVELS] {
        self.sizes
    }

    /// The highest level with a data or unified cache.
    #[must_use]
    pub const fn last_level(&self) -> Option<usize> {
        let mut level = MAX_CACHE_LEVELS;
        while level > 0 {
            if self.sizes[level - 1] != 0 {
                return Some(level);
            }
            level -= 1;
        }
        None
    }

    /// The last level's size in bytes.
    #[must_use]
    pub const fn last_level_size(&self) -> Option<u64> {
        match self.last_level() {
            Some(level) => Some(self.sizes[level - 1]),
            None => None,
        }
    }

    /// How many CPUs share the last level, if known.
    #[must_use]
    pub const fn last_level_shared_by(&self) -> Option<u32> {
        if self.shared_by == 0 { None } else { Some(self.shared_by) }
    }

    /// One CPU's share of the last level: its size divided by the CPUs sharing it (the whole
    /// of it when that number is unknown).
    #[must_use]
    pub const fn last_level_share(&self) -> Option<u64> {
        match self.last_level_size() {
            Some(size) => Some(size / if self.shared_by == 0 { 1 } else { self.shared_by as u64 }),
            None => None,
        }
    }

    /// This description with the last level's sharers replaced.
    pub(crate) const fn with_shared_by(mut self, cpus: u32) -> CacheInfo {
        self.shared_by = cpus;
        self
    }

    /// This description with its source replaced.
    pub(crate) const fn with_source(mut self, source: CacheSource) -> CacheInfo {
        self.source = source;
        self
    }

    /// This description, or nothing known ([`NoCacheInfo::NotReported`]) when it has no cache
    /// level.
    #[allow(dead_code)] // for the CPUID and sysfs decoders, which some builds leave out
    pub(crate) const fn or_not_reported(self) -> CacheInfo {
        if self.last_level().is_some() { self } else { CacheInfo::unknown(NoCacheInfo::NotReported) }
    }
}

impl fmt::Display for CacheInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(last) = self.last_level() else {
            return write!(f, "no cache known ({})", self.source);
        };
        let mut first = true;
        for level in 1..=last {
            if let Some(size) = self.level_size(level) {
                let sep = if first { "" } else { ", " };
                let d = if level == 1 { "d" } else { "" };
                write!(f, "{sep}L{level}{d} ")?;
                write_size(f, size)?;
                first = false;
            }
        }
        match self.shared_by {
            0 => f.write_str(" (sharers unknown)")?,
            1 => f.write_str(" for 1 CPU")?,
            n => write!(f, " shared by {n} CPUs")?,
        }
        if let Some(line) = self.line_size() {
            write!(f, ", {line}-byte lines")?;
        }
        write!(f, " ({})", self.source)
    }
}

/// `bytes` as a whole number of GiB, MiB or KiB where it is one, else in bytes.
fn write_size(f: &mut fmt::Formatter<'_>, bytes: u64) -> fmt::Result {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes % (1 << shift) == 0 {
            return write!(f, "{} {unit}", bytes >> shift);
        }
    }
    write!(f, "{bytes} B")
}

/// What [`set_cache_info`] gave.
static CALLER: Slot = Slot::new();
/// What detection found, written once.
static DETECTED: Slot = Slot::new();

/// Sets the caches this crate plans with ([`cache_info`]), replacing any earlier value, with
/// source [`CacheSource::Caller`]; a kernel calls it once at boot with what its CPU setup found.
///
/// Safe: a wrong size is a speed mistake, never undefined behaviour. A reader during the
/// replacement may get the previous value (or the detected one); readers never wait. Overlapping
/// calls are serialized: in a kernel, do not call it from an interrupt handler that may
/// interrupt another call on the same CPU.
pub fn set_cache_info(info: CacheInfo) {
    CALLER.write(&info.with_source(CacheSource::Caller));
}

/// The caches in effect: the last [`set_cache_info`], else (without `--cfg
/// stream_hal_no_cpuid`) [`CacheInfo::detect`] on the first call, cached, else nothing known
/// ([`NoCacheInfo::NoCpuid`]); [`CacheInfo::source`] says which.
#[must_use]
pub fn cache_info() -> CacheInfo {
    if let Some(info) = CALLER.read() {
        return info;
    }
    if cfg!(stream_hal_no_cpuid) {
        return CacheInfo::unknown(NoCacheInfo::NoCpuid);
    }
    if let Some(info) = DETECTED.read() {
        return info;
    }
    let info = CacheInfo::detect();
    // Another thread may have published its (identical) detection meanwhile: either is fine.
    DETECTED.write_once(&info);
    info
}

/// Reading Linux's `/sys/devices/system/cpu/cpuN/cache/` (the `std` feature; the tests read
/// fake trees with it in every build).
#[cfg(any(test, feature = "std"))]
pub(crate) mod sysfs {
    use std::io::Read;
    use std::path::Path;

    use super::{CacheInfo, CacheSource, MAX_CACHE_LEVELS};

    /// CPU 0's caches, as the kernel sees them.
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    pub(crate) const CPU0: &str = "/sys/devices/system/cpu/cpu0/cache";

    /// `index` directories read at most (real CPUs have 3 to 5).
    const MAX_INDEXES: usize = 16;

    /// Bytes read at most from one attribute file (each is one short line).
    const MAX_ATTR: u64 = 4096;

    /// The caches described under `dir` (`index0/`, `index1/`, ... with `level`, `type`,
    /// `size`, `coherency_line_size` and `shared_cpu_list`); entries that lack a level, a size
    /// or a data or unified type are skipped.
    pub(crate) fn read(dir: &Path) -> CacheInfo {
        let (mut sizes, mut line, mut shared, mut top) = ([0u64; MAX_CACHE_LEVELS], 0u32, 0u32, 0usize);
        for i in 0..MAX_INDEXES {
            let index = dir.join(std::format!("index{i}"));
            if !index.is_dir() {
                break;
            }
            let attr = |name: &str| attribute(&index.join(name));
            let level = attr("level").and_then(|s| s.parse::<usize>().ok());
            let Some(level) = level.filter(|l| (1..=MAX_CACHE_LEVELS).contains(l)) else { continue };
            if !matches!(attr("type").as_deref(), Some("Data" | "Unified")) {
                continue;
            }
            let Some(size) = attr("size").as_deref().and_then(parse_size) else { continue };
            sizes[level - 1] = sizes[level - 1].max(size);
            if let Some(l) = attr("coherency_line_size").and_then(|s| s.parse::<u32>().ok()) {
                if line == 0 || level == 1 {
                    line = l;
                }
            }
            if level >= top {
                top = level;
                shared = attr("shared_cpu_list").as_deref().and_then(count_cpus).unwrap_or(0);
            }
        }
        CacheInfo::new(line, sizes, shared).with_source(CacheSource::Sysfs).or_not_reported()
    }

    /// The trimmed first [`MAX_ATTR`] bytes of `path`, if it can be read as UTF-8.
    fn attribute(path: &Path) -> Option<std::string::String> {
        let mut s = std::string::String::new();
        std::fs::File::open(path).ok()?.take(MAX_ATTR).read_to_string(&mut s).ok()?;
        Some(std::string::String::from(s.trim()))
    }

    /// A sysfs cache size: a number of bytes with an optional `K`, `M` or `G` suffix (Linux
    /// writes KiB, `32K`).
    pub(crate) fn parse_size(s: &str) -> Option<u64> {
        let (digits, shift) = match s.as_bytes().last()? {
            b'K' => (&s[..s.len() - 1], 10),
            b'M' => (&s[..s.len() - 1], 20),
            b'G' => (&s[..s.len() - 1], 30),
            _ => (s, 0),
        };
        let n: u64 = digits.parse().ok()?;
        n.checked_mul(1 << shift).filter(|&b| b != 0)
    }

    /// The number of CPUs in a cpulist (`0-3,8,10-11`), if it is one.
    pub(crate) fn count_cpus(list: &str) -> Option<u32> {
        let mut n: u32 = 0;
        for part in list.split(',') {
            let (lo, hi) = match part.split_once('-') {
                Some((lo, hi)) => (lo.parse::<u32>().ok()?, hi.parse::<u32>().ok()?),
                None => {
                    let cpu = part.parse::<u32>().ok()?;
                    (cpu, cpu)
                }
            };
            n = n.checked_add(hi.checked_sub(lo)?.checked_add(1)?)?;
        }
        Some(n)
    }
}

/// Detection for the targets that read Linux's sysfs: every backend but x86-64's.
#[allow(dead_code)] // unused by the x86-64 backend
pub(crate) fn detect_from_sysfs() -> CacheInfo {
    #[cfg(all(feature = "std", target_os = "linux", not(miri), not(stream_hal_emulate)))]
    {
        sysfs::read(std::path::Path::new(sysfs::CPU0))
    }
    #[cfg(all(not(feature = "std"), target_os = "linux", not(miri), not(stream_hal_emulate)))]
    {
        CacheInfo::unknown(NoCacheInfo::NeedsStd)
    }
    #[cfg(not(all(target_os = "linux", not(miri), not(stream_hal_emulate))))]
    {
        CacheInfo::unknown(NoCacheInfo::NoSource)
    }
}

#[cfg(test)]
mod tests;
