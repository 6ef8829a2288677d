//! The machine's limits, measured in the same run as the scenarios: how fast it fills memory
//! with zero, non-zero and struct-page-shaped data, and copies it, on one thread and on every
//! core. The limit of a kind at a thread count is its best method there (`methods` lists
//! them); struct page init is judged against the struct page fill limit, clearing against the
//! zero fill limit. Methods and thread counts run interleaved round by round on resident
//! buffers, and a figure is the median of the rounds after the first.

use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;

use stream_par::{PadataJob, padata_do_multithreaded};

use crate::measure::{Runner, gbps, interleaved};

/// What a method fills (or copies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FillKind {
    /// Zero fill.
    Zero,
    /// Non-zero fill.
    Nonzero,
    /// Copy (bytes copied per second).
    Copy,
    /// A fill with struct-page-shaped records ([`STRUCT_PAGE_RECORD`]).
    StructPage,
}

/// The record the struct page fill limit writes: a boot-time struct page as Linux leaves a
/// reserved one (flags with the node and zone bits and `PG_reserved`, `lru` pointing at itself,
/// `_mapcount` -1 and `_refcount` 1), the words non-zero where a real one's are.
pub const STRUCT_PAGE_RECORD: [u64; 8] =
    [0x0003_ffff_c000_2000, 0xffff_ea00_0000_0048, 0xffff_ea00_0000_0048, 0, 0, 0, 0x0000_0001_ffff_ffff, 0];

/// One method's rate at one thread count.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MethodRate {
    /// Method name (`memset`, `rep_stosb`, `stream_fill`, `clzero`, `clear_pages`, `memcpy`,
    /// `memcpy_nontemporal`, ...).
    pub method: String,
    /// What it fills.
    pub kind: FillKind,
    /// Median GB/s.
    #[schemars(range(min = 0))]
    pub gbps: f64,
}

/// The limits at one thread count.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ThreadLimits {
    /// Threads (each on its own slice of the buffer).
    #[schemars(range(min = 1))]
    pub threads: usize,
    /// Best zero fill, GB/s.
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub fill_zero_gbps: f64,
    /// The method that set it.
    pub fill_zero_method: String,
    /// Best non-zero fill, GB/s.
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub fill_nonzero_gbps: f64,
    /// The method that set it.
    pub fill_nonzero_method: String,
    /// Best copy, GB/s.
    pub copy_gbps: f64,
    /// The method that set it.
    pub copy_method: String,
    /// Best struct page fill (the bytes struct page init writes), GB/s.
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub fill_struct_page_gbps: f64,
    /// The method that set it.
    pub fill_struct_page_method: String,
    /// Every method measured.
    pub methods: Vec<MethodRate>,
}

impl ThreadLimits {
    fn from_methods(threads: usize, methods: Vec<MethodRate>) -> ThreadLimits {
        let best = |k: FillKind| {
            methods
                .iter()
                .filter(|m| m.kind == k)
                .max_by(|a, b| a.gbps.total_cmp(&b.gbps))
                .map_or((f64::NAN, String::new()), |m| (m.gbps, m.method.clone()))
        };
        let (fill_zero_gbps, fill_zero_method) = best(FillKind::Zero);
        let (fill_nonzero_gbps, fill_nonzero_method) = best(FillKind::Nonzero);
        let (copy_gbps, copy_method) = best(FillKind::Copy);
        let (fill_struct_page_gbps, fill_struct_page_method) = best(FillKind::StructPage);
        ThreadLimits {
            threads,
            fill_zero_gbps,
            fill_zero_method,
            fill_nonzero_gbps,
            fill_nonzero_method,
            copy_gbps,
            copy_method,
            fill_struct_page_gbps,
            fill_struct_page_method,
            methods,
        }
    }

    /// The rate of `method` of `kind`, if measured.
    #[must_use]
    pub fn method(&self, kind: FillKind, method: &str) -> Option<f64> {
        self.methods.iter().find(|m| m.kind == kind && m.method == method).map(|m| m.gbps)
    }
}

/// Measured limits, GB/s (10^9 bytes per second). The top-level figures are the one-thread
/// limits (as in earlier reports); `per_threads` has every thread count measured.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Limits {
    /// Best all-zero fill on one thread.
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub fill_zero_gbps: f64,
    /// Best non-zero fill on one thread.
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub fill_nonzero_gbps: f64,
    /// Best struct page fill on one thread.
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub fill_struct_page_gbps: f64,
    /// `memset(0)` alone, one thread.
    pub memset_zero_gbps: f64,
    /// `stream_hal::clear_pages` alone, one thread.
    pub clear_pages_gbps: f64,
    /// Best copy on one thread (bytes copied per second).
    pub copy_gbps: f64,
    /// Nanoseconds per 64-byte line written at a 32 KiB stride (normal stores, cold caches): the
    /// cost of touching one struct page per 2 MiB block, which bounds what on-demand init gains.
    pub scattered_line_ns: f64,
    /// Buffer size used.
    pub buffer_bytes: u64,
    /// Rounds per variant.
    pub rounds: usize,
    /// The CPUs available to this process: the "all cores" thread count.
    #[schemars(range(min = 1))]
    pub all_cores: usize,
    /// The limits per thread count, one thread first.
    #[schemars(length(min = 1))]
    pub per_threads: Vec<ThreadLimits>,
}

impl Limits {
    /// The limits measured at `threads`, else at the largest count below it (one at least).
    #[must_use]
    pub fn at(&self, threads: usize) -> &ThreadLimits {
        self.per_threads
            .iter()
            .filter(|t| t.threads <= threads.max(1))
            .max_by_key(|t| t.threads)
            .unwrap_or(&self.per_threads[0])
    }
}

/// An anonymous mapping of `bytes` (at least one page), transparent huge pages requested, every
/// page touched so that none is the shared zero page.
///
/// # Errors
///
/// The mapping's error (`ENOMEM` where the memory is not there).
pub fn resident_buffer(bytes: usize) -> std::io::Result<memmap2::MmapMut> {
    let mut map = memmap2::MmapOptions::new().len(bytes.max(4096)).map_anon()?;
    #[cfg(target_os = "linux")]
    let _ = map.advise(memmap2::Advice::HugePage);
    map.iter_mut().step_by(4096).for_each(|b| *b = 1);
    Ok(map)
}

/// Lines written by the scattered-line probe: one per 2 MiB block of a 64 GiB zone.
const SCATTER_LINES: usize = 32768;
/// Their stride: one 64-byte struct page per 512 (a 2 MiB block's memmap is 32 KiB).
const SCATTER_STRIDE: usize = 32768;

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

/// One method: fills (or copies into) `[dst, dst + len)` from `src` (copies only).
pub type Method = unsafe fn(dst: *mut u8, src: *const u8, len: usize);

/// The methods of this machine: name, kind, body.
fn methods() -> Vec<(&'static str, FillKind, Method)> {
    // Every body's contract (see `measure`): `dst` (and `src` for copies) valid for `len`
    // bytes, disjoint, page-aligned, `len` a multiple of 4096, nothing else touching them.
    let mut v: Vec<(&'static str, FillKind, Method)> = vec![
        ("memset", FillKind::Zero, |d, _, n| {
            // SAFETY: the contract above.
            unsafe { std::ptr::write_bytes(d, 0, n) }
        }),
        ("memset", FillKind::Nonzero, |d, _, n| {
            // SAFETY: the contract above.
            unsafe { std::ptr::write_bytes(d, 0x5a, n) }
        }),
        ("stream_fill", FillKind::Zero, |d, _, n| {
            // SAFETY: the contract above (page-aligned, so 8-byte aligned).
            unsafe { stream_fill(d, n, [0; 8]) }
        }),
        ("stream_fill", FillKind::Nonzero, |d, _, n| {
            // SAFETY: the contract above (page-aligned, so 8-byte aligned).
            unsafe { stream_fill(d, n, PATTERNS[1]) }
        }),
        ("stream_fill", FillKind::StructPage, |d, _, n| {
            // SAFETY: the contract above (page-aligned, so 8-byte aligned).
            unsafe { stream_fill(d, n, STRUCT_PAGE_RECORD) }
        }),
        ("store_loop", FillKind::StructPage, |d, _, n| {
            let d = d.cast::<[u64; 8]>();
            for i in 0..n / 64 {
                // SAFETY: the contract above: record `i` of `n / 64` is inside `[d, d + n)`,
                // 64-byte aligned (page-aligned base).
                unsafe { d.add(i).write(STRUCT_PAGE_RECORD) };
            }
        }),
        ("clear_pages", FillKind::Zero, |d, _, n| {
            // SAFETY: the contract above: whole pages; drained before anything reads them.
            unsafe { stream_hal::clear_pages(d, n / 4096) };
            stream_hal::drain();
        }),
        ("memcpy", FillKind::Copy, |d, s, n| {
            // SAFETY: the contract above.
            unsafe { std::ptr::copy_nonoverlapping(s, d, n) }
        }),
        ("memcpy_nontemporal", FillKind::Copy, |d, s, n| {
            // SAFETY: the contract above; drained before anything reads `dst`.
            unsafe { stream_hal::memcpy_nontemporal(d, s, n) };
            stream_hal::drain();
        }),
    ];
    // `clear_cached` is `rep stosb` on x86-64 and `dc zva` on aarch64 (`memset` elsewhere).
    let cached = match stream_hal::backend().name() {
        "x86_64" => Some("rep_stosb"),
        "aarch64" => Some("dc_zva"),
        _ => None,
    };
    if let Some(name) = cached {
        v.push((name, FillKind::Zero, |d, _, n| {
            // SAFETY: the contract above; drained before anything reads `dst`.
            unsafe { stream_hal::clear_cached(d, n) };
            stream_hal::drain();
        }));
    }
    // Wider streaming stores than the library's own, where the CPU has them.
    let wide: Vec<&str> = stream_hal::bench_kit::wide_fill_methods().map(|m| m.name).collect();
    let variants: [(&'static str, [Method; 3]); 2] = [
        (WIDE[0], [wide_fill::<0, 0>, wide_fill::<0, 1>, wide_fill::<0, 2>]),
        (WIDE[1], [wide_fill::<1, 0>, wide_fill::<1, 1>, wide_fill::<1, 2>]),
    ];
    for (name, fills) in variants {
        if wide.contains(&name) {
            for (kind, f) in [FillKind::Zero, FillKind::Nonzero, FillKind::StructPage].into_iter().zip(fills)
            {
                v.push((name, kind, f));
            }
        }
    }
    if stream_hal::streaming_clear_method() == "clzero" {
        v.push(("clzero", FillKind::Zero, |d, _, n| {
            // SAFETY: the contract above; drained before anything reads `dst`.
            unsafe { stream_hal::clear_streaming(d, n) };
            stream_hal::drain();
        }));
    }
    v
}

/// Streams the 64-byte record `rec` over `len` bytes at `dst` (`stream_hal::fill`, drained).
///
/// # Safety
///
/// `dst` is valid for writes of `len` bytes, 8-byte aligned, and nothing else accesses it.
unsafe fn stream_fill(dst: *mut u8, len: usize, rec: [u64; 8]) {
    // SAFETY: the caller's contract; `MaybeUninit` slots may hold anything.
    let slots =
        unsafe { std::slice::from_raw_parts_mut(dst.cast::<std::mem::MaybeUninit<[u64; 8]>>(), len / 64) };
    stream_hal::fill(slots, &rec);
}

/// The wide streaming fills the limits try, by index ([`stream_hal::bench_kit::wide_fill_methods`] names).
const WIDE: [&str; 2] = ["vmovntdq_ymm", "vmovntdq_zmm"];

/// The lines of the zero, non-zero and struct page fills, by index.
const PATTERNS: [[u64; 8]; 3] = [[0; 8], [0x5a5a_5a5a_5a5a_5a5a; 8], STRUCT_PAGE_RECORD];

/// Fills `[dst, dst + len)` with the wide method `WIDE[K]` (lines of `PATTERNS[P]`) and drains;
/// nothing if this CPU lacks it.
///
/// # Safety
///
/// The contract of every [`Method`] body (see `methods`): `dst` page-aligned, valid for `len`
/// bytes (a multiple of 4096), nothing else touching it.
unsafe fn wide_fill<const K: usize, const P: usize>(dst: *mut u8, _: *const u8, len: usize) {
    let line = PATTERNS[P];
    if let Some(m) = stream_hal::bench_kit::wide_fill_methods().find(|m| m.name == WIDE[K]) {
        // SAFETY: `dst` is page-aligned (so 64-byte aligned) and writable for `len` bytes, a
        // whole number of lines; the drain below runs before anything else touches them.
        unsafe { m.fill(dst.cast(), len / 64, &line) };
        stream_hal::drain();
    }
}

/// The method `name` of `kind` (as [`MethodRate::method`] names it), if this machine has it.
#[must_use]
pub fn method_fn(kind: FillKind, name: &str) -> Option<Method> {
    methods().into_iter().find(|&(n, k, _)| k == kind && n == name).map(|(_, _, f)| f)
}

/// Runs of each method in [`best_on`].
const CALIBRATION_RUNS: usize = 3;

/// How far behind the fastest a third method of [`best_on`] may be and still be kept.
const CALIBRATION_SLACK: f64 = 0.10;

/// Whether `bytes` is whole 4 KiB pages at a page-aligned address (what the methods need).
fn whole_pages(bytes: &[u8]) -> bool {
    bytes.as_ptr().addr() % 4096 == 0 && bytes.len() % 4096 == 0 && !bytes.is_empty()
}

/// The best methods of `kind` at `threads` on the storage `bytes`, fastest first: each measured
/// method runs `CALIBRATION_RUNS` times here, interleaved, and the fastest two and a third within
/// `CALIBRATION_SLACK` are kept, since a few runs do not rank close methods reliably; the limit
/// is whichever is fastest at the moment ([`run_fastest`]). Empty for [`FillKind::Copy`], for an
/// unmeasured kind, and for storage that is not whole, page-aligned pages.
pub fn best_on(limits: &Limits, kind: FillKind, threads: usize, bytes: &mut [u8]) -> Vec<String> {
    if !whole_pages(bytes) {
        return Vec::new();
    }
    let (dst, len) = (bytes.as_mut_ptr() as usize, bytes.len());
    let candidates: Vec<(&str, Method)> = limits
        .at(threads)
        .methods
        .iter()
        .filter(|m| m.kind == kind && kind != FillKind::Copy)
        .filter_map(|m| method_fn(kind, &m.method).map(|f| (m.method.as_str(), f)))
        .collect();
    let mut best: Vec<Duration> = vec![Duration::MAX; candidates.len()];
    for _ in 0..CALIBRATION_RUNS {
        for (b, &(_, f)) in best.iter_mut().zip(&candidates) {
            // `bytes` is exclusively borrowed, page-aligned whole pages: `run_split`'s contract.
            *b = (*b).min(run_split(threads, dst, dst, len, f));
        }
    }
    let mut ranked: Vec<(Duration, &str)> = best.into_iter().zip(candidates.iter().map(|c| c.0)).collect();
    ranked.sort_by_key(|r| r.0);
    let fastest = ranked.first().map_or(Duration::MAX, |r| r.0);
    ranked
        .iter()
        .enumerate()
        .filter(|&(i, r)| i < 2 || r.0.as_secs_f64() <= fastest.as_secs_f64() * (1.0 + CALIBRATION_SLACK))
        .take(3)
        .map(|(_, r)| r.1.to_string())
        .collect()
}

/// Runs each of `methods` ([`best_on`]'s answer) once over `bytes` on `threads` threads, from
/// `methods[first % n]`, and returns the fastest wall time (zero if none ran).
pub fn run_fastest(
    methods: &[String],
    kind: FillKind,
    threads: usize,
    first: usize,
    bytes: &mut [u8],
) -> Duration {
    if !whole_pages(bytes) {
        return Duration::ZERO;
    }
    let (dst, len, n) = (bytes.as_mut_ptr(), bytes.len(), methods.len());
    (0..n)
        // SAFETY: `bytes` is exclusively borrowed, page-aligned whole pages (checked above).
        .filter_map(|k| unsafe { run_method(&methods[(first + k) % n], kind, threads, dst, len) })
        .min()
        .unwrap_or_default()
}

/// Runs the method `name` of `kind` over `[dst, dst + len)` split between `threads` threads;
/// returns the wall time. `None` if this machine has no such method.
///
/// # Safety
///
/// As for [`best_on`].
pub unsafe fn run_method(
    name: &str,
    kind: FillKind,
    threads: usize,
    dst: *mut u8,
    len: usize,
) -> Option<Duration> {
    if kind == FillKind::Copy {
        return None;
    }
    let f = method_fn(kind, name)?;
    Some(run_split(threads, dst as usize, dst as usize, len, f))
}

/// The chunk [`run_split`] never splits below (a thread start costs about a short fill).
const SPLIT_MIN_CHUNK: u64 = 2 << 20;

/// Runs `f` over `[dst, dst + len)` (and the same bytes of `src`) on `threads` workers as the
/// scenarios' padata job, so a limit run is balanced as the rounds it judges; returns the wall
/// time.
fn run_split(threads: usize, dst: usize, src: usize, len: usize, f: Method) -> Duration {
    let job = PadataJob {
        start: 0,
        size: len as u64,
        align: 4096,
        min_chunk: SPLIT_MIN_CHUNK,
        max_threads: threads.max(1),
    };
    let t = Instant::now();
    // A job from 0 cannot end past u64::MAX, padata's only error.
    let done = padata_do_multithreaded(&job, |start, end| {
        // SAFETY: padata hands every `[start, end)` of `[0, len)` to exactly one call, so the
        // calls cover disjoint, page-aligned whole pages of both buffers (`align` 4096, `len`
        // a multiple of it: see `measure` and `best_on`'s contract).
        unsafe {
            f((dst + start as usize) as *mut u8, (src + start as usize) as *const u8, (end - start) as usize)
        }
    });
    debug_assert!(done.is_ok(), "a padata job from 0: {done:?}");
    t.elapsed()
}

/// Measures the limits on a `bytes`-byte buffer for one thread, every available CPU, and each of
/// `extra_threads`.
///
/// # Errors
///
/// The `mmap` error of a buffer.
pub fn measure(
    bytes: u64,
    rounds: usize,
    extra_threads: &[usize],
    phase: &crate::progress::Phase,
) -> std::io::Result<Limits> {
    let len = usize::try_from(bytes / 4096).map_err(std::io::Error::other)?.max(1) * 4096;
    let mut a = resident_buffer(len)?;
    let mut b = resident_buffer(len)?;
    let pa = a.as_mut_ptr() as usize;
    let pb = b.as_mut_ptr() as usize;
    let all_cores = stream_par::available_cpus();
    let mut counts = vec![1, all_cores];
    counts.extend_from_slice(extra_threads);
    counts.sort_unstable();
    counts.dedup();
    let methods = methods();
    let mut runners = Vec::new();
    for &t in &counts {
        for &(name, kind, f) in &methods {
            // Fills write `a`; copies read `a` and write `b`. Both buffers are `len` bytes,
            // page-aligned, distinct, and live until `interleaved` returns.
            let (dst, src) = if kind == FillKind::Copy { (pb, pa) } else { (pa, pb) };
            runners
                .push(Runner::new(format!("{name}/{kind:?}/{t}"), move |_| run_split(t, dst, src, len, f)));
        }
    }
    let scatter = runners.len();
    runners.push(Runner::new("scattered_lines", move |r| {
        let t = Instant::now();
        for k in 0..SCATTER_LINES {
            let off = (k * SCATTER_STRIDE) % len;
            // SAFETY: `off + 64 <= len` (`len` and `off` are multiples of 4096), inside `b`,
            // which is page-aligned; nothing else runs during this runner.
            unsafe { ((pb + off) as *mut [u64; 8]).write([(k + r) as u64; 8]) };
        }
        t.elapsed()
    }));
    let rounds = rounds.max(2);
    phase.step(format!("limits: {} methods x {} thread counts", methods.len(), counts.len()));
    let s = interleaved(rounds, &mut runners, phase);
    drop(runners);
    std::hint::black_box((&mut a, &mut b));
    let mut per_threads = Vec::new();
    for (ci, &t) in counts.iter().enumerate() {
        let rates = methods
            .iter()
            .enumerate()
            .map(|(mi, &(name, kind, _))| MethodRate {
                method: name.to_string(),
                kind,
                gbps: gbps(len as u64, crate::measure::median(s[ci * methods.len() + mi].rebinds())),
            })
            .collect();
        per_threads.push(ThreadLimits::from_methods(t, rates));
    }
    let one = &per_threads[0];
    Ok(Limits {
        fill_zero_gbps: one.fill_zero_gbps,
        fill_nonzero_gbps: one.fill_nonzero_gbps,
        fill_struct_page_gbps: one.fill_struct_page_gbps,
        memset_zero_gbps: one.method(FillKind::Zero, "memset").unwrap_or(f64::NAN),
        clear_pages_gbps: one.method(FillKind::Zero, "clear_pages").unwrap_or(f64::NAN),
        copy_gbps: one.copy_gbps,
        scattered_line_ns: crate::measure::median(s[scatter].rebinds()) * 1e9 / SCATTER_LINES as f64,
        buffer_bytes: len as u64,
        rounds,
        all_cores,
        per_threads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_method_sets_the_limit() {
        let m = |method: &str, kind, gbps| MethodRate { method: method.into(), kind, gbps };
        let t = ThreadLimits::from_methods(
            2,
            vec![
                m("memset", FillKind::Nonzero, 10.5),
                m("stream_fill", FillKind::Nonzero, 23.7),
                m("memset", FillKind::Zero, 11.0),
                m("clzero", FillKind::Zero, 31.0),
                m("memcpy", FillKind::Copy, 8.0),
            ],
        );
        assert_eq!((t.fill_nonzero_gbps, t.fill_nonzero_method.as_str()), (23.7, "stream_fill"));
        assert_eq!((t.fill_zero_gbps, t.fill_zero_method.as_str()), (31.0, "clzero"));
        assert_eq!((t.copy_gbps, t.copy_method.as_str()), (8.0, "memcpy"));
    }

    #[test]
    fn every_method_runs_on_split_slices() {
        let l = measure(8 << 20, 2, &[3], &crate::progress::Phase::hidden()).unwrap();
        let counts: Vec<usize> = l.per_threads.iter().map(|t| t.threads).collect();
        assert!(counts.contains(&1) && counts.contains(&3) && counts.contains(&l.all_cores));
        for t in &l.per_threads {
            assert!(t.fill_zero_gbps > 0.0 && t.fill_nonzero_gbps > 0.0 && t.copy_gbps > 0.0);
            assert!(t.method(FillKind::Nonzero, "stream_fill").is_some());
        }
        assert_eq!(l.at(3).threads, 3);
        assert_eq!(l.at(1).threads, 1);
    }

    #[test]
    fn the_paired_limit_methods_are_measured_methods_of_the_kind() {
        let l = measure(8 << 20, 2, &[], &crate::progress::Phase::hidden()).unwrap();
        let mut buf = resident_buffer(8 << 20).unwrap();
        let n = buf.len();
        for kind in [FillKind::Zero, FillKind::Nonzero] {
            let best = best_on(&l, kind, 2, &mut buf);
            assert!((1..=3).contains(&best.len()), "{best:?}");
            assert!(best.iter().all(|m| l.at(2).method(kind, m).is_some()), "{best:?}");
            assert!(run_fastest(&best, kind, 2, 1, &mut buf) > Duration::ZERO);
        }
        assert!(best_on(&l, FillKind::Copy, 1, &mut buf).is_empty());
        // The last fills were non-zero ones, over the whole buffer.
        assert_eq!((buf[0], buf[n - 1]), (0x5a, 0x5a));
    }
}
