//! The benchmark's measurement kit (`bench-kit` feature; unstable, not part of the API):
//! [`wide_fill_methods`], fills wider than the library's, and [`flush_cache_range`], for cold
//! runs.

/// A streaming fill loop of one register width ([`wide_fill_methods`]).
#[derive(Debug, Clone, Copy)]
pub struct FillMethod {
    /// The instruction and register width: `vmovntdq_ymm`, `vmovntdq_zmm`.
    pub name: &'static str,
    #[allow(dead_code)] // only constructed by the x86-64 backend
    pub(crate) fill: unsafe fn(*mut [u64; 8], usize, &[u64; 8]),
}

impl FillMethod {
    /// Stores `line` into each of the `lines` 64-byte lines at `dst` with this method's
    /// streaming stores. Does **not** fence.
    ///
    /// # Safety
    ///
    /// * `dst` is 64-byte aligned and valid for writes of `lines * 64` bytes (the product does
    ///   not overflow);
    /// * until [`drain`](crate::drain) has run on this thread, no code reads or writes those
    ///   bytes, and they are not published to another thread before that.
    #[inline]
    pub unsafe fn fill(&self, dst: *mut [u64; 8], lines: usize, line: &[u64; 8]) {
        // SAFETY: forwarded; a `FillMethod` is only made by `wide_fill_methods`, for a width the
        // CPU and OS support, and the caller upholds the rest of the contract above.
        unsafe { (self.fill)(dst, lines, line) }
    }
}

/// The streaming fills wider than the library's that this CPU has, narrowest first (x86-64
/// `vmovntdq` of `ymm` and `zmm`, detected on every call); empty elsewhere.
pub fn wide_fill_methods() -> impl Iterator<Item = FillMethod> {
    super::selected_kit::wide_fill_methods()
}

/// Writes back and invalidates every cache line that holds a byte of `data` and waits: on
/// `true` no cache of any CPU holds the range. `false`, having done nothing, where the backend
/// has no such instruction (generic, riscv64). It changes no value, so any readable data may
/// be flushed.
#[inline]
pub fn flush_cache_range<T>(data: &[T]) -> bool {
    // SAFETY: a shared slice is valid for reads of all its bytes.
    unsafe { super::selected_kit::flush_cache_range(data.as_ptr().cast(), core::mem::size_of_val(data)) }
}

/// Calls `flush(p)` once for every `line`-byte cache line that holds a byte of
/// `start..start + len`, with `p` inside the range (the line's start, or `start` for the
/// first). A `line` smaller than the CPU's visits some lines twice, never skips one.
///
/// # Safety
///
/// `start..start + len` is valid for reads, `line` is a power of two, and `flush(p)` may be
/// called for any readable `p`.
#[inline(always)]
#[allow(dead_code)] // unused by the backends without a flush instruction
pub(crate) unsafe fn for_each_line(
    start: *const u8,
    len: usize,
    line: usize,
    mut flush: impl FnMut(*const u8),
) {
    if len == 0 {
        return;
    }
    let end = start.addr() + len;
    let mut p = start;
    loop {
        flush(p);
        // The next line's start, as an offset from `start` (no pointer leaves the range).
        let next = (p.addr() & !(line - 1)) + line;
        if next >= end {
            break;
        }
        p = start.wrapping_add(next - start.addr());
    }
}

/// The kit of a backend without a cache-flush instruction or wide registers: nothing flushed
/// (the caller learns it from `false`), no wide fill.
#[allow(dead_code)] // unused by the backends with instructions of their own
pub(crate) mod none {
    /// Nothing is flushed.
    ///
    /// # Safety
    ///
    /// None beyond the surface's (`start..start + len` readable); nothing is accessed.
    #[inline(always)]
    pub(crate) unsafe fn flush_cache_range(_start: *const u8, _len: usize) -> bool {
        false
    }

    /// No wide fill.
    pub(crate) fn wide_fill_methods() -> impl Iterator<Item = super::FillMethod> {
        core::iter::empty()
    }
}

#[cfg(test)]
mod tests {
    use super::for_each_line;
    use std::vec;
    use std::vec::Vec;

    /// Every line of the range is visited once, in order, at an address inside the range.
    #[test]
    fn every_line_once_inside_the_range() {
        let buf = [0u8; 1024];
        // Under Miri (twice per CI run, minutes for every start) the starts next to a line
        // boundary only.
        let starts: Vec<usize> =
            if cfg!(miri) { vec![0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129] } else { (0..130).collect() };
        for line in [16usize, 64, 128] {
            for &start in &starts {
                for len in [0usize, 1, 2, 15, 16, 63, 64, 65, 127, 128, 300, 700] {
                    let base = buf.as_ptr().wrapping_add(start);
                    let (lo, hi) = (base.addr(), base.addr() + len);
                    let mut seen = Vec::new();
                    // SAFETY: `start + len <= 830 < 1024`: the range is readable; the closure
                    // reads nothing.
                    unsafe { for_each_line(base, len, line, |p| seen.push(p.addr())) };
                    let lines = if len == 0 { 0 } else { (hi - 1) / line - lo / line + 1 };
                    assert_eq!(seen.len(), lines, "line {line} start {start} len {len}");
                    for (i, &p) in seen.iter().enumerate() {
                        assert!(lo <= p && p < hi, "{p:#x} outside {lo:#x}..{hi:#x}");
                        assert_eq!(p / line, lo / line + i, "line {i} of {start}+{len}");
                    }
                }
            }
        }
    }
}
