//! `guest-memory`: what a VMM does with guest RAM, through `stream-vm-memory`, on a
//! `GuestMemoryMmap<AtomicBitmap>` of `--size` bytes in two anonymous regions (default 4 GiB).
//!
//! * `guest-memory-populate`: faulting fresh guest memory in before a guest boots. Every
//!   round of every strategy maps new regions (not timed), faults them in (timed) and unmaps
//!   them (not timed):
//!   * `ch-prefault`: Cloud Hypervisor's algorithm (`stream_vm_memory::baseline`: region after
//!     region, `min(CPUs, 16, size / 4 GiB)` threads each, one `MADV_POPULATE_WRITE` per thread);
//!   * `populate`: `stream_vm_memory::populate_all` without huge-page advice, on one thread
//!     (the one-thread report) and on the all-core count (the all-core report);
//!   * `ch-prefault-thp`, `populate-thp`: the same on memory advised `MADV_HUGEPAGE` (what
//!     Cloud Hypervisor's `thp=on`, its default, does when it creates a region; the advice is
//!     set before the clock starts for `ch-prefault-thp`, and is part of `populate`'s own timed
//!     call for `populate-thp`).
//!
//!   Before each round, untimed, as much memory is faulted in with huge pages and unmapped, so
//!   that every round starts from the same free memory (without it, on a machine whose memory
//!   is mostly page cache, a THP round's time was mostly the kernel reclaiming and compacting
//!   for it: from 0.6 s to 31 s for the same strategy; and the first touch of guest-physical
//!   memory the hypervisor has not backed yet costs several times a later one).
//!
//!   The Cloud Hypervisor rows are the same measurements in both reports (they use their own
//!   thread rule). Judged against the zero-fill limit of the limits phase at the report's
//!   thread count (the kernel zeroes every page it faults in); no paired limit runs, since
//!   they would fault the memory in.
//! * `guest-memory-reset`: making used guest memory read as zero again (a VM reset or
//!   reboot, a pooled region handed to the next guest). The regions are advised
//!   `MADV_HUGEPAGE` and faulted in once before the rounds (the time is reported apart), and
//!   every round of every strategy writes all of them:
//!   * `write-slice`: vm-memory's `Bytes::write_slice` of a 2 MiB zero buffer, in a loop (what
//!     a VMM without a bulk zero does);
//!   * `memset`: `libc::memset` on each region's host mapping (unsafe, no dirty bits);
//!   * `zero`: `stream_vm_memory::reset` in place (streaming zero, drained, dirty-marked), on
//!     one thread and on the all-core count;
//!   * `reset-auto`: `stream_vm_memory::reset` with `ResetPolicy::Auto` (resident memory: in
//!     place, after its `mincore`);
//!   * `discard-refault`: `ResetPolicy::Discard { repopulate: true }`: `MADV_DONTNEED`, then
//!     `MADV_POPULATE_WRITE` of the same pages.
//!
//!   Each round is paired with a run of the best zero-fill method at its thread count on the
//!   same regions right before it (as the clear scenario does). The all-core report has the
//!   strategies that use the all-core count.
//!
//! The populate strategies run in two groups, the 4 KiB ones interleaved round by round, then
//! the THP ones: memory an unmapped THP round frees comes back in 2 MiB blocks, a 4 KiB round's
//! does not, so a THP round right after a 4 KiB one would also pay the kernel's compaction
//! (rotating the order would not change which strategy follows which). On a host that ignores
//! the `madvise` advice measured (qemu-user before 8.1) both scenarios stop with an error.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use stream_vm_memory::baseline::cloud_hypervisor_prefault;
use stream_vm_memory::{
    HugePageAdvice, Placement, PopulateOptions, ResetPolicy, Workers, advise_huge_pages, populate_all, reset,
};
use vm_memory::bitmap::AtomicBitmap;
use vm_memory::{
    Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion, MemoryRegionAddress,
};

use super::paired::{calibrate, limit_run};
use super::scenario::{CatalogEntry, Context, RunError, Scenario, Setup};
use super::spec::{CommandSpec, Rounds, SizeSpec};
use crate::budget::Knob;
use crate::limits::FillKind;
use crate::measure::{Runner, Samples, interleaved, interleaved_paired};
use crate::memory::{MemoryNeed, Overflow};
use crate::report::scenario::{Figure, LimitKind, ScenarioReport, ScenarioSpec};
use crate::size::Bytes as Size;

/// The populate scenario's name.
pub const POPULATE: &str = "guest-memory-populate";
/// The reset scenario's name.
pub const RESET: &str = "guest-memory-reset";

/// The populate scenario's strategies, baseline first.
pub const POPULATE_STRATEGIES: &[&str] = &["ch-prefault", "populate", "ch-prefault-thp", "populate-thp"];
/// The reset scenario's strategies, baseline first.
pub const RESET_STRATEGIES: &[&str] = &["write-slice", "memset", "zero", "reset-auto", "discard-refault"];

/// The size unit: two regions of whole 2 MiB pages.
pub const SIZE_UNIT: u64 = 4 << 20;

/// The default guest memory: 4 GiB (the size the VMM measurements used).
pub const DEFAULT_SIZE: u64 = 4 << 30;

/// The `--quick` guest memory.
pub const QUICK_SIZE: u64 = 256 << 20;

/// The smallest guest memory the suite scales down to.
pub const MIN_SIZE: u64 = 256 << 20;

/// The `guest-memory` subcommand.
pub const COMMAND: CommandSpec = CommandSpec::new(
    "guest-memory",
    "Guest memory for VMMs: populate (against Cloud Hypervisor's prefault) and reset",
    SizeSpec::bytes(
        "guest-memory-size",
        SIZE_UNIT,
        "Guest memory, in two regions, a multiple of 4 MiB",
        DEFAULT_SIZE,
        QUICK_SIZE,
    ),
);

/// The populate rounds: 5 (3 under `--quick`).
const POPULATE_ROUNDS: Rounds = Rounds::new(5, 3);

/// The reset rounds: 7 (3 under `--quick`).
const RESET_ROUNDS: Rounds = Rounds::new(7, 3);

/// The catalog row of `guest-memory-populate`.
pub const POPULATE_ENTRY: CatalogEntry =
    CatalogEntry::new(POPULATE, &COMMAND, POPULATE_STRATEGIES, POPULATE_ROUNDS, |s| {
        Box::new(GuestMemory::new(s, Part::Populate))
    });

/// The catalog row of `guest-memory-reset`.
pub const RESET_ENTRY: CatalogEntry =
    CatalogEntry::new(RESET, &COMMAND, RESET_STRATEGIES, RESET_ROUNDS, |s| {
        Box::new(GuestMemory::new(s, Part::Reset))
    });

/// The chunk `write-slice` loops over.
const CHUNK: usize = 2 << 20;

type Mem = GuestMemoryMmap<AtomicBitmap>;

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
    /// The scenario's `part` with `setup`'s size.
    #[must_use]
    pub fn new(setup: &Setup, part: Part) -> GuestMemory {
        let (size, fixed) = setup.size(&COMMAND.size);
        GuestMemory { part, size, fixed }
    }

    /// The two regions: guest `[0, size / 2)` and `[size / 2, size)`, whole 2 MiB pages each.
    fn ranges(&self) -> [(GuestAddress, usize); 2] {
        let half = (self.size / 2) as usize;
        [(GuestAddress(0), half), (GuestAddress(half as u64), self.size as usize - half)]
    }
}

impl Scenario for GuestMemory {
    fn name(&self) -> &'static str {
        match self.part {
            Part::Populate => POPULATE,
            Part::Reset => RESET,
        }
    }

    fn description(&self) -> String {
        format!("{}: {} of guest memory in 2 regions", self.name(), Size(self.size))
    }

    /// One guest memory of `size` bytes, resident, at a time.
    fn memory_needed(&self) -> Result<MemoryNeed, Overflow> {
        Ok(MemoryNeed { resident: self.size, mapped: self.size, largest_mapping: self.size / 2 })
    }

    fn check(&self) -> Result<(), String> {
        if self.size == 0 || self.size % SIZE_UNIT != 0 {
            return Err(format!("guest memory size {} is not a whole number of 4 MiB", Size(self.size)));
        }
        usize::try_from(self.size)
            .map(|_| ())
            .map_err(|_| format!("guest memory size {} does not fit this machine", Size(self.size)))
    }

    fn knob(&self) -> Option<Knob> {
        Some(Knob::bytes(self.size, SIZE_UNIT, MIN_SIZE, self.fixed))
    }

    fn resized(&self, value: u64) -> Option<Box<dyn Scenario>> {
        Some(Box::new(GuestMemory { size: value, ..self.clone() }))
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Vec<ScenarioReport>, RunError> {
        match self.part {
            Part::Populate => run_populate(self, ctx),
            Part::Reset => run_reset(self, ctx),
        }
    }
}

/// Whether every base page of every region is resident (`mincore`).
fn all_resident(mem: &Mem) -> bool {
    let page = rustix::param::page_size();
    mem.iter().all(|r| {
        let Ok(h) = r.get_host_address(MemoryRegionAddress(0)) else { return false };
        let len = r.len() as usize;
        let mut vec = vec![0u8; len.div_ceil(page)];
        // SAFETY: mincore reads no byte of the region (it looks the pages up in the page
        // tables) and writes one byte per page to `vec`, which has exactly that many.
        let rc = unsafe { libc::mincore(h.cast(), len, vec.as_mut_ptr()) };
        rc == 0 && vec.iter().all(|&v| v & 1 == 1)
    })
}

/// Bytes of the regions' mappings backed by transparent huge pages (`AnonHugePages` of
/// `/proc/self/smaps`), 0 if it cannot be read.
fn thp_bytes(mem: &Mem) -> u64 {
    let ranges: Vec<(usize, usize)> = mem
        .iter()
        .filter_map(|r| {
            r.get_host_address(MemoryRegionAddress(0)).ok().map(|h| (h as usize, r.len() as usize))
        })
        .collect();
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else { return 0 };
    let mut inside = false;
    let mut total = 0u64;
    for line in smaps.lines() {
        let vma_start = line
            .split_once('-')
            .filter(|(a, rest)| {
                !a.is_empty() && a.bytes().all(|b| b.is_ascii_hexdigit()) && rest.contains(' ')
            })
            .and_then(|(a, _)| usize::from_str_radix(a, 16).ok());
        if let Some(a) = vma_start {
            inside = ranges.iter().any(|&(h, n)| a >= h && a < h + n);
        } else if let Some(kb) = line.strip_prefix("AnonHugePages:").filter(|_| inside) {
            total += kb.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap_or(0) << 10;
        }
    }
    total
}

fn workers(threads: usize) -> Workers {
    Workers::new(crate::threads::policy(threads)).with_placement(Placement::Auto)
}

/// The scenario's error when the host lacks `madvise` advice it measures (an emulator).
fn unsupported(name: &'static str, what: &str) -> RunError {
    RunError::of(name, format!("this host ignores {what} (an emulator?): nothing to measure"))(
        std::io::ErrorKind::Unsupported.into(),
    )
}

/// What the populate rounds saw besides their times.
#[derive(Debug, Default)]
struct Seen {
    /// The regions' threads under Cloud Hypervisor's rule (the same for every round).
    ch_threads: RefCell<Vec<usize>>,
    /// Rounds that left a page of guest memory out of memory.
    failures: Cell<usize>,
    /// THP coverage after each round, per strategy (name, fractions).
    coverage: RefCell<Vec<(String, Vec<f64>)>>,
}

impl Seen {
    /// After a round of `name` that populated `mem` (of `size` bytes): whether every page is
    /// resident, and how much of it is backed by huge pages.
    fn after(&self, name: String, mem: &Mem, size: u64) {
        self.failures.set(self.failures.get() + usize::from(!all_resident(mem)));
        let f = thp_bytes(mem) as f64 / size as f64;
        let mut c = self.coverage.borrow_mut();
        match c.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(f),
            None => c.push((name, vec![f])),
        }
    }
}

fn run_populate(s: &GuestMemory, ctx: &Context<'_>) -> Result<Vec<ScenarioReport>, RunError> {
    if !stream_vm_memory::host_support().populate_write {
        return Err(unsupported(POPULATE, "MADV_POPULATE_WRITE"));
    }
    let rounds = ctx.common.rounds(POPULATE_ROUNDS);
    let counts = ctx.threads.counts();
    let phase = ctx.phase(POPULATE);
    let seen = Seen::default();
    // Two groups, each interleaved on its own: the 4 KiB strategies, then the THP ones, so
    // that every round of a strategy starts after a round of the same kind. (The memory an
    // unmapped THP round frees is in 2 MiB blocks, a 4 KiB round's is not; a THP round after a
    // 4 KiB one would pay the kernel's compaction, rotating the order would not change that.)
    let mut samples: Vec<Samples> = Vec::new();
    for thp in [false, true] {
        let mut runners = populate_runners(s, &counts, ctx.threads.count(), thp, &seen);
        phase.step(format!("{POPULATE}: {rounds} rounds{}", if thp { " with THP advice" } else { "" }));
        samples.extend(interleaved(rounds, &mut runners, &phase));
    }
    phase.finish();
    assert_eq!(seen.failures.get(), 0, "a populate left pages out of memory");
    Ok(populate_reports(s, ctx, &counts, rounds, &samples, seen))
}

/// One group of the populate strategies (`thp`: the ones on memory advised `MADV_HUGEPAGE`):
/// Cloud Hypervisor's prefault, then `populate` at each of `counts`; `all` is the all-core
/// count the untimed warm-up uses.
fn populate_runners<'a>(
    s: &GuestMemory,
    counts: &[usize],
    all: usize,
    thp: bool,
    seen: &'a Seen,
) -> Vec<Runner<'a>> {
    let (ranges, size) = (s.ranges(), s.size);
    let cpus = memmap_core::available_cpus();
    let map = move || Mem::from_ranges(&ranges);
    // Before every round, untimed: as much memory faulted in (with huge pages) and freed, so
    // that every strategy finds the same free memory: 2 MiB blocks the kernel need not
    // reclaim or compact first, guest-physical pages the hypervisor has backed already.
    let warm = move || {
        if let Ok(m) = map() {
            let _ = populate_all(&m, &PopulateOptions::new(workers(all)));
        }
    };
    let mut runners: Vec<Runner<'a>> = Vec::new();
    let ch = if thp { "ch-prefault-thp" } else { "ch-prefault" };
    runners.push(Runner::new(ch, move |_| {
        warm();
        let mem = map().expect("map guest memory");
        if thp {
            let _ = advise_huge_pages(&mem, GuestAddress(0), size as usize);
        }
        let t = Instant::now();
        let r = cloud_hypervisor_prefault(&mem, cpus).expect("Cloud Hypervisor prefault");
        let e = t.elapsed();
        if seen.ch_threads.borrow().is_empty() {
            seen.ch_threads.borrow_mut().extend(r.iter().map(|x| x.threads));
        }
        seen.after(ch.into(), &mem, size);
        e
    }));
    for &threads in counts {
        let name = if thp { "populate-thp" } else { "populate" };
        runners.push(Runner::new(name, move |_| {
            warm();
            let mem = map().expect("map guest memory");
            let opts = PopulateOptions {
                huge_pages: if thp { HugePageAdvice::Advise } else { HugePageAdvice::Leave },
                ..PopulateOptions::new(workers(threads))
            };
            let t = Instant::now();
            let r = populate_all(&mem, &opts).expect("populate");
            let e = t.elapsed();
            assert_eq!(r.populated, size, "populate stopped early");
            seen.after(format!("{name} on {threads} thread(s)"), &mem, size);
            e
        }));
    }
    runners
}

/// One populate report per thread count from `samples` (ch, populate at each count, ch-thp,
/// populate-thp at each count).
fn populate_reports(
    s: &GuestMemory,
    ctx: &Context<'_>,
    counts: &[usize],
    rounds: usize,
    samples: &[Samples],
    seen: Seen,
) -> Vec<ScenarioReport> {
    let (size, ranges) = (s.size, s.ranges());
    let ch_threads = seen.ch_threads.into_inner();
    let coverage: Vec<(String, f64)> =
        seen.coverage.into_inner().into_iter().map(|(n, v)| (n, crate::measure::median_f64(&v))).collect();
    let coverage_line =
        coverage.iter().map(|(n, f)| format!("{n} {:.0} %", f * 100.0)).collect::<Vec<_>>().join(", ");
    let n = counts.len();
    let at = |thp: bool, k: Option<usize>| -> Samples {
        let base = if thp { 1 + n } else { 0 };
        samples[k.map_or(base, |k| base + 1 + k)].clone()
    };
    let thp_mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    let mut out = Vec::new();
    for (k, &threads) in counts.iter().enumerate() {
        let spec = ScenarioSpec {
            name: POPULATE.into(),
            description: format!(
                "prefault {} of fresh guest memory (2 regions of {}), {rounds} rounds; populate on {}; Cloud Hypervisor's rule: {:?} thread(s) per region; THP {}",
                Size(size),
                Size(ranges[0].1 as u64),
                if threads > 1 { format!("{threads} threads") } else { "1 thread".into() },
                ch_threads,
                thp_mode.trim(),
            ),
            struct_pages: 0,
            bytes: size,
            threads,
            limit: LimitKind::FillZero,
            figure: Figure::Bandwidth,
        };
        let rows = [at(false, None), at(false, Some(k)), at(true, None), at(true, Some(k))];
        let mut sc = ScenarioReport::from_samples(spec, ctx.limits, &rows);
        sc.extra.insert("guest_bytes".into(), size.into());
        sc.extra
            .insert("ch_threads_per_region".into(), serde_json::to_value(&ch_threads).unwrap_or_default());
        sc.extra.insert(
            "thp_coverage_median".into(),
            coverage
                .iter()
                .map(|(n, f)| (n.clone(), serde_json::Value::from(*f)))
                .collect::<serde_json::Map<_, _>>()
                .into(),
        );
        sc.notes.push(format!(
            "  memory backed by transparent huge pages after populating (median of the rounds; the THP rows are comparable only where it is alike): {coverage_line}"
        ));
        sc.notes.push(
            "  ch-prefault rows: Cloud Hypervisor's own thread rule (the same runs in both reports); x limit: against the zero-fill limit of the limits phase (not paired: a limit run would fault the memory in)".into(),
        );
        out.push(sc);
    }
    out
}

/// The guest memory of `s`, advised `MADV_HUGEPAGE` and faulted in on `all` workers: the
/// memory, the bytes advised and the fault time in ms.
fn resident_guest_memory(s: &GuestMemory, all: usize) -> Result<(Mem, u64, f64), RunError> {
    let size = s.size;
    let mem = Mem::from_ranges(&s.ranges()).map_err(|e| {
        RunError::of(RESET, format!("map {} of guest memory", Size(size)))(std::io::Error::other(
            e.to_string(),
        ))
    })?;
    let advised = advise_huge_pages(&mem, GuestAddress(0), size as usize).unwrap_or(0);
    let t = Instant::now();
    let fault = populate_all(&mem, &PopulateOptions::new(workers(all))).map_err(|e| {
        RunError::of(RESET, "populate the guest memory")(std::io::Error::other(e.to_string()))
    })?;
    let fault_ms = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(fault.populated, size);
    Ok((mem, advised, fault_ms))
}

/// The time `f` takes.
fn timed(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

/// The reset strategies over `len` bytes of `mem` (its regions' host memory `host`), each
/// with the thread count whose limit run it follows (an index into `counts`): write-slice and
/// memset on one thread, then zero, reset-auto and discard-refault at each count.
fn reset_runners<'a>(
    mem: &'a Mem,
    host: &'a [(usize, usize)],
    zeros: &'a [u8],
    counts: &[usize],
    len: usize,
) -> (Vec<Runner<'a>>, Vec<Option<usize>>) {
    let mut runners: Vec<Runner<'a>> = Vec::new();
    let mut pair: Vec<Option<usize>> = Vec::new();
    runners.push(Runner::new("write-slice", move |_| {
        timed(|| {
            let mut off = 0;
            while off < len {
                let n = CHUNK.min(len - off);
                mem.write_slice(&zeros[..n], GuestAddress(off as u64)).expect("write_slice");
                off += n;
            }
        })
    }));
    pair.push(Some(0));
    runners.push(Runner::new("memset", move |_| {
        timed(|| {
            for &(p, n) in host {
                // SAFETY: `[p, p + n)` is a whole region's host mapping, alive for the whole
                // scenario; only the running strategy (or limit run) touches guest memory.
                unsafe { libc::memset(std::hint::black_box(p as *mut libc::c_void), 0, n) };
            }
        })
    }));
    pair.push(Some(0));
    for (k, &threads) in counts.iter().enumerate() {
        for (name, policy) in [
            ("zero", ResetPolicy::InPlace),
            ("reset-auto", ResetPolicy::Auto),
            ("discard-refault", ResetPolicy::Discard { repopulate: true }),
        ] {
            let w = workers(threads);
            runners.push(Runner::new(name, move |_| {
                timed(|| {
                    reset(mem, GuestAddress(0), len, policy, &w).expect("reset");
                })
            }));
            pair.push(Some(k));
        }
    }
    (runners, pair)
}

fn run_reset(s: &GuestMemory, ctx: &Context<'_>) -> Result<Vec<ScenarioReport>, RunError> {
    let support = stream_vm_memory::host_support();
    if !support.populate_write || !support.dontneed {
        return Err(unsupported(RESET, "MADV_DONTNEED or MADV_POPULATE_WRITE"));
    }
    let rounds = ctx.common.rounds(RESET_ROUNDS);
    let len = s.size as usize;
    let (all, counts) = (ctx.threads.count(), ctx.threads.counts());
    let phase = ctx.phase(RESET);
    phase.step(format!("{RESET}: map and fault in {}", Size(s.size)));
    let (mem, advised, fault_ms) = resident_guest_memory(s, all)?;
    // The regions' host memory, for memset and the limit runs.
    let host: Vec<(usize, usize)> = mem
        .iter()
        .map(|r| {
            (r.get_host_address(MemoryRegionAddress(0)).expect("host address") as usize, r.len() as usize)
        })
        .collect();
    let zeros = vec![0u8; CHUNK];
    let (mut runners, pair) = reset_runners(&mem, &host, &zeros, &counts, len);
    // The limit runs: the best zero-fill method at each count over both regions, right before
    // each strategy's round.
    let region_bytes = |i: usize| {
        let (p, n) = host[i];
        // SAFETY: a whole region's host mapping, alive for the whole scenario; the strategies
        // and the limit runs run one at a time, and none keeps the slice past its own run, so
        // it is the only access to these bytes while it lives.
        unsafe { std::slice::from_raw_parts_mut(p as *mut u8, n) }
    };
    let methods: Vec<Vec<String>> =
        counts.iter().map(|&t| calibrate(ctx.limits, FillKind::Zero, t, region_bytes(0))).collect();
    let mut companions: Vec<Runner<'_>> = counts
        .iter()
        .zip(&methods)
        .map(|(&threads, m)| {
            let (host, region_bytes) = (&host, &region_bytes);
            Runner::new("limit", move |round| {
                (0..host.len())
                    .map(|i| limit_run(m, FillKind::Zero, threads, round, region_bytes(i)))
                    .sum::<Duration>()
            })
        })
        .collect();
    phase.step(format!("{RESET}: {rounds} rounds"));
    let (samples, paired) = interleaved_paired(rounds, &mut runners, &mut companions, &pair, &phase);
    drop((runners, companions));
    phase.finish();
    let mut probe = [1u8; 4096];
    for at in [0, len / 2 - 4096, len - 4096] {
        mem.read_slice(&mut probe, GuestAddress(at as u64)).expect("read back");
        assert!(probe.iter().all(|&b| b == 0), "a reset strategy left non-zero bytes");
    }
    let auto = reset(&mem, GuestAddress(0), len, ResetPolicy::Auto, &workers(all)).expect("reset");
    let mut out = Vec::new();
    for (k, &threads) in counts.iter().enumerate() {
        // One thread: write-slice, memset, and the three of count 0; all cores: the three of
        // its count.
        let (from, to) = if k == 0 { (0, 5) } else { (2 + 3 * k, 5 + 3 * k) };
        let spec = ScenarioSpec {
            name: RESET.into(),
            description: format!(
                "reset {} of resident guest memory (2 regions, {} advised MADV_HUGEPAGE), {rounds} rounds, {}; faulting it in: {fault_ms:.1} ms (not in \"first\")",
                Size(s.size),
                Size(advised),
                if threads > 1 { format!("{threads} threads") } else { "1 thread".into() },
            ),
            struct_pages: 0,
            bytes: s.size,
            threads,
            limit: LimitKind::FillZero,
            figure: Figure::Bandwidth,
        };
        let mut sc = ScenarioReport::from_samples(spec, ctx.limits, &samples[from..to]);
        sc.set_paired_limit(&methods[k].join(" or "), s.size, &paired[from..to]);
        sc.extra.insert("guest_bytes".into(), s.size.into());
        sc.extra.insert("thp_advised_bytes".into(), advised.into());
        sc.extra.insert("fault_ms".into(), fault_ms.into());
        sc.extra.insert("auto_in_place_bytes".into(), auto.in_place.into());
        sc.extra.insert("auto_discarded_bytes".into(), auto.discarded.into());
        out.push(sc);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenarios::scenario::Common;
    use crate::threads::AllCore;

    #[test]
    fn both_halves_run_and_report_every_strategy() {
        let limits = crate::limits::measure(8 << 20, 2, &[2], &crate::progress::Phase::hidden()).unwrap();
        let common = Common {
            rounds: Some(2),
            progress: crate::progress::ProgressMode { enabled: false },
            quick: true,
        };
        let ctx = Context { common: &common, threads: AllCore::given(2), limits: &limits };
        for (part, name, strategies) in
            [(Part::Populate, POPULATE, POPULATE_STRATEGIES), (Part::Reset, RESET, RESET_STRATEGIES)]
        {
            let s = GuestMemory { part, size: 32 << 20, fixed: true };
            s.check().unwrap();
            assert_eq!(s.name(), name);
            let support = stream_vm_memory::host_support();
            if !support.populate_write || !support.dontneed {
                let e = s.run(&ctx).unwrap_err();
                assert_eq!(e.source.kind(), std::io::ErrorKind::Unsupported);
                println!("skipped: {e}");
                continue;
            }
            let reports = s.run(&ctx).unwrap();
            assert_eq!(reports.len(), 2, "one thread and all cores");
            assert_eq!((reports[0].threads, reports[1].threads), (1, 2));
            let got: Vec<&str> = reports[0].results.iter().map(|r| r.strategy.as_str()).collect();
            assert_eq!(got, strategies);
            for sc in &reports {
                assert_eq!(sc.bytes, 32 << 20);
                assert!(sc.results.iter().all(|r| r.median_ms > 0.0 && r.gbps > 0.0), "{}", sc.table(false));
                assert!(crate::scenarios::CATALOG.iter().any(|e| e.name == sc.name));
            }
        }
        assert!(GuestMemory { part: Part::Reset, size: 6 << 20, fixed: true }.check().is_err());
    }
}
