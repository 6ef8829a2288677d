//! The machine's limits, measured in the same run as the scenarios: how fast this machine can
//! fill memory with zero and with non-zero data, and copy it.
//!
//! A `struct page` template is non-zero, so the limit for initializing struct pages is the
//! non-zero fill rate; clearing pages is judged against the zero fill rate (zero fills are
//! cheaper on some machines). Buffers are faulted in before measuring, and the variants run
//! interleaved; the result is the median.

use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;

use crate::measure::{Runner, gbps, interleaved};

/// Measured limits, GB/s (10^9 bytes per second).
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
pub struct Limits {
    /// Best all-zero fill: `memset(0)` or `stream_hal::clear_pages` (`rep stosb`).
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub fill_zero_gbps: f64,
    /// `memset` with a non-zero byte.
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub fill_nonzero_gbps: f64,
    /// `memset(0)` alone.
    pub memset_zero_gbps: f64,
    /// `stream_hal::clear_pages` alone.
    pub clear_pages_gbps: f64,
    /// `memcpy` bandwidth (bytes copied per second).
    pub copy_gbps: f64,
    /// Nanoseconds per 64-byte line written at a 32 KiB stride (32,768 lines spread over 1 GiB,
    /// normal stores, caches cold from the other variants): the cost of touching one struct page
    /// per 2 MiB block, which bounds what on-demand init can gain at boot (no hardware
    /// prefetcher follows that stride, and on a guest every line is a TLB miss with a nested
    /// page walk unless the host maps huge pages).
    pub scattered_line_ns: f64,
    /// Buffer size used.
    pub buffer_bytes: u64,
    /// Rounds per variant.
    pub rounds: usize,
}

/// A pre-faulted anonymous mapping with transparent huge pages requested, like the memmaps and
/// arenas the scenarios write (and the kernel's direct map and vmemmap).
struct Buffer {
    map: memmap2::MmapMut,
}

impl Buffer {
    fn new(bytes: usize) -> std::io::Result<Buffer> {
        let mut map = memmap2::MmapOptions::new().len(bytes.max(4096)).map_anon()?;
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        // Touch every page with a non-zero value so that none is a shared zero page.
        map.iter_mut().step_by(4096).for_each(|b| *b = 1);
        Ok(Buffer { map })
    }
    fn page_aligned(&mut self, bytes: usize) -> *mut u8 {
        assert!(bytes <= self.map.len());
        self.map.as_mut_ptr()
    }
}

/// Lines written by the scattered-line probe: one per 2 MiB block of a 64 GiB zone.
const SCATTER_LINES: usize = 32768;
/// Their stride: one 64-byte struct page per 512 (a 2 MiB block's memmap is 32 KiB).
const SCATTER_STRIDE: usize = 32768;

fn time(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

/// The memory [`measure`] needs for a `bytes`-byte buffer: two of them, resident.
#[must_use]
pub fn memory_needed(bytes: u64) -> crate::memory::MemoryNeed {
    let len = (bytes / 4096).max(1).saturating_mul(4096);
    crate::memory::MemoryNeed {
        resident: len.saturating_mul(2),
        mapped: len.saturating_mul(2),
        largest_mapping: len,
    }
}

/// Measures the limits on a `bytes`-byte buffer (rounded down to whole pages).
///
/// # Errors
///
/// The `mmap` error of a buffer.
pub fn measure(bytes: u64, rounds: usize) -> std::io::Result<Limits> {
    let len = usize::try_from(bytes / 4096).map_err(std::io::Error::other)?.max(1) * 4096;
    let mut a = Buffer::new(len)?;
    let mut b = Buffer::new(len)?;
    let pa = a.page_aligned(len);
    let pb = b.page_aligned(len);
    // SAFETY (every closure below): `pa` and `pb` point to distinct buffers of at least `len`
    // bytes, page-aligned, that live until `interleaved` returns; `len` is a whole number of
    // pages.
    let mut runners = vec![
        Runner::new("memset_zero", move |_| {
            time(|| {
                // SAFETY: see above.
                unsafe { std::ptr::write_bytes(pa, 0, len) }
            })
        }),
        Runner::new("memset_nonzero", move |_| {
            time(|| {
                // SAFETY: see above.
                unsafe { std::ptr::write_bytes(pa, 0x5a, len) }
            })
        }),
        Runner::new("clear_pages", move |_| {
            time(|| {
                // SAFETY: see above.
                unsafe { stream_hal::clear_pages(pa, len / 4096) };
                stream_hal::drain();
            })
        }),
        Runner::new("scattered_lines", move |r| {
            time(|| {
                for k in 0..SCATTER_LINES {
                    let off = (k * SCATTER_STRIDE) % len;
                    // SAFETY: see above; `off + 64 <= len` (`len` is a multiple of 4096 and
                    // `off` of 4096 too), and the buffer is 8-byte aligned (page-aligned).
                    unsafe { pb.add(off).cast::<[u64; 8]>().write([(k + r) as u64; 8]) };
                }
            })
        }),
        Runner::new("memcpy", move |_| {
            time(|| {
                // SAFETY: see above.
                unsafe { std::ptr::copy_nonoverlapping(pa, pb, len) }
            })
        }),
    ];
    let s = interleaved(rounds.max(2), &mut runners);
    std::hint::black_box((&mut a, &mut b));
    let g = |i: usize| gbps(len as u64, crate::measure::median(s[i].rebinds()));
    let (memset_zero, memset_nonzero, clear_pages, copy) = (g(0), g(1), g(2), g(4));
    let scattered_line_ns = crate::measure::median(s[3].rebinds()) * 1e9 / SCATTER_LINES as f64;
    Ok(Limits {
        fill_zero_gbps: memset_zero.max(clear_pages),
        fill_nonzero_gbps: memset_nonzero,
        memset_zero_gbps: memset_zero,
        clear_pages_gbps: clear_pages,
        copy_gbps: copy,
        scattered_line_ns,
        buffer_bytes: len as u64,
        rounds: rounds.max(2),
    })
}
