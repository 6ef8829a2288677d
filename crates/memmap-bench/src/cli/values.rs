//! Parsers of the command line's values: sizes, counts, PFNs, kernel releases (`--threads` is
//! [`crate::threads::ThreadPolicy::parse`]).

use crate::size::{PAGE_SIZE, SizeError, parse_size};

/// A size of at least one 4 KiB page, not necessarily whole pages (`--memory-budget`).
pub(super) fn size_any(s: &str) -> Result<u64, SizeError> {
    let bytes = parse_size(s)?;
    if bytes < PAGE_SIZE {
        return Err(SizeError::BelowOnePage { input: s.to_string(), unit: PAGE_SIZE });
    }
    Ok(bytes)
}

/// A count of at least 1 (`--count`, `--hugetlb-count`, `--nodes`), at most `T::MAX`.
pub(super) fn count<T: TryFrom<u64> + Copy>(s: &str) -> Result<T, String> {
    let limit = |e: u64| format!("{s} is more than {e}, the largest count this accepts");
    match s.parse::<u64>() {
        Ok(0) => Err("the count must be at least 1".to_string()),
        Ok(n) => T::try_from(n).map_err(|_| limit(largest::<T>())),
        Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => Err(limit(u64::MAX)),
        Err(_) => Err(format!("`{s}` is not a count (a whole number of at least 1, such as 4)")),
    }
}

/// The largest `u64` that converts to `T`.
fn largest<T: TryFrom<u64>>() -> u64 {
    [u64::MAX, u64::from(u32::MAX), u64::from(u16::MAX), u64::from(u8::MAX)]
        .into_iter()
        .find(|&v| T::try_from(v).is_ok())
        .unwrap_or(0)
}

/// A kernel release: `MAJOR.MINOR`.
pub(super) fn kernel_version(s: &str) -> Result<memmap_core::KernelVersion, String> {
    memmap_core::KernelVersion::parse(s)
        .ok_or_else(|| format!("bad kernel release {s:?} (MAJOR.MINOR, e.g. 6.12 or 7.2)"))
}

/// A PFN: decimal or `0x` hexadecimal.
pub(super) fn pfn(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("bad number {s:?}: {e} (decimal, or hexadecimal with 0x)"))
}

/// `PFN[@NID]` of `dump hugetlb --place`.
pub(super) fn placed_folio(s: &str) -> Result<(u64, u32), String> {
    let (p, n) = s.split_once('@').unwrap_or((s, "0"));
    Ok((pfn(p)?, n.parse().map_err(|e| format!("node {n:?}: {e}"))?))
}
