//! `guest-memory`: what a VMM does with guest RAM, through `stream-vm-memory`, on a
//! `GuestMemoryMmap<AtomicBitmap>` of `--size` bytes in two anonymous regions (default 4 GiB).
//!
//! * `guest-memory-populate`: faulting fresh guest memory in before a guest boots, ours against
//!   the VMMs' algorithms (`crate::vmm_prefault`). Every round of every strategy maps
//!   new regions (not timed), faults them in (timed) and unmaps them (not timed):
//!   * `ch-prefault`: Cloud Hypervisor mainline (region after region, `min(CPUs, 16,
//!     size / 4 GiB)` threads each, one `MADV_POPULATE_WRITE` per thread), with its own thread
//!     rule;
//!   * `ch-numa-prefault`: Cloud Hypervisor's NUMA-aware prefault (pull request #8785): all
//!     regions at once, one worker group per host node holding the memory, pinned to its CPUs
//!     (on a one-node host: all regions at once over the count, unpinned), at each count;
//!   * `qemu-prealloc`: QEMU's `qemu_prealloc_mem` per region, `prealloc-threads` the count;
//!   * `madvise-once`: one `MADV_POPULATE_WRITE` per region on the calling thread (the same runs
//!     in both reports);
//!   * `populate`: `stream_vm_memory::populate_all` without huge-page advice, on one thread
//!     (the one-thread report) and on the all-core count (the all-core report);
//!   * the same with `-thp`: on memory advised `MADV_HUGEPAGE` (what Cloud Hypervisor's
//!     `thp=on`, its default, and QEMU do when they create a region; the advice is set before
//!     the clock starts for the baselines, and is part of `populate`'s own timed call for
//!     `populate-thp`).
//!
//!   Before each round, untimed, as much memory is faulted in with huge pages and unmapped, so
//!   that every round starts from the same free memory (without it, on a machine whose memory
//!   is mostly page cache, a THP round's time was mostly the kernel reclaiming and compacting
//!   for it: from 0.6 s to 31 s for the same strategy; and the first touch of guest-physical
//!   memory the hypervisor has not backed yet costs several times a later one).
//!
//!   Judged against the zero-fill limit of the limits phase at the report's thread count (the
//!   kernel zeroes every page it faults in; no paired limit runs, since they would fault the
//!   memory in), and against a populate limit measured in the same run: per page kind, the
//!   fastest of all implementations (ours included) given at most the report's threads (the
//!   `x pop. limit` column, the `populate_limit` field).
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
//! (shuffling the order would not change that). On a host that ignores
//! the `madvise` advice measured (qemu-user before 8.1) both scenarios stop with an error.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

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
use crate::report::scenario::{Column, Figure, LimitKind, ScenarioReport, ScenarioSpec, StrategyResult};
use crate::size::Bytes as Size;
use crate::vmm_prefault::{
    BaselineRegion, cloud_hypervisor_numa_prefault, cloud_hypervisor_prefault, qemu_prealloc,
    single_populate_write,
};

/// The populate scenario's name.
pub const POPULATE: &str = "guest-memory-populate";
/// The reset scenario's name.
pub const RESET: &str = "guest-memory-reset";

/// The populate scenario's strategies, baseline first.
pub const POPULATE_STRATEGIES: &[&str] = &[
    "ch-prefault",
    "ch-numa-prefault",
    "qemu-prealloc",
    "madvise-once",
    "populate",
    "ch-prefault-thp",
    "ch-numa-prefault-thp",
    "qemu-prealloc-thp",
    "madvise-once-thp",
    "populate-thp",
];
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
    "Guest memory for VMMs: populate (against Cloud Hypervisor's and QEMU's prefaults) and reset",
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

/// Cloud Hypervisor mainline's populate row (each row's name gets `-thp` in the THP group).
const CH: &str = "ch-prefault";
/// Cloud Hypervisor's NUMA-aware prefault (pull request #8785).
const CH_NUMA: &str = "ch-numa-prefault";
/// QEMU's `qemu_prealloc_mem`.
const QEMU: &str = "qemu-prealloc";
/// One `MADV_POPULATE_WRITE` per region.
const ONCE: &str = "madvise-once";
/// Ours.
const OURS: &str = "populate";

/// Rows per page kind in a populate report: ch, ch-numa, qemu, once, populate.
const KIND_ROWS: usize = 5;

/// What the populate rounds saw besides their times.
#[derive(Debug, Default)]
struct Seen {
    /// The threads each baseline used per region in its first round (row label, threads).
    threads: RefCell<Vec<(String, Vec<usize>)>>,
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

    /// The threads per region of the row `label`, from its first round.
    fn threads_of(&self, label: &str, regions: &[BaselineRegion]) {
        let mut t = self.threads.borrow_mut();
        if !t.iter().any(|(n, _)| n == label) {
            t.push((label.to_string(), regions.iter().map(|r| r.threads).collect()));
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
    // 4 KiB one would pay the kernel's compaction, shuffling the order would not change that.)
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

/// How every populate round gets its memory: before it, untimed, as much memory faulted in
/// (with huge pages, on the all-core count) and freed, so that every implementation finds the
/// same free memory (2 MiB blocks the kernel need not reclaim or compact first,
/// guest-physical pages the hypervisor has backed already); then the same two regions
/// mapped fresh, not faulted in.
#[derive(Debug, Clone, Copy)]
struct Fresh {
    ranges: [(GuestAddress, usize); 2],
    size: u64,
    /// The all-core count of the warm-up.
    all: usize,
    /// Whether these are the THP rows.
    thp: bool,
}

impl Fresh {
    /// The round's fresh memory, after the warm-up; for a baseline's THP row (`advise`)
    /// advised `MADV_HUGEPAGE` before the clock starts, as the VMMs advise a region when they
    /// create it.
    fn memory(&self, advise: bool) -> Mem {
        if let Ok(m) = Mem::from_ranges(&self.ranges) {
            let _ = populate_all(&m, &PopulateOptions::new(workers(self.all)));
        }
        let mem = Mem::from_ranges(&self.ranges).expect("map guest memory");
        if advise && self.thp {
            let _ = advise_huge_pages(&mem, GuestAddress(0), self.size as usize);
        }
        mem
    }
}

/// A round of the baseline `f` in the row `name` (`label` says its thread count): fresh
/// memory, the timed call, its check.
fn baseline_runner<'a>(
    name: String,
    label: String,
    fresh: Fresh,
    seen: &'a Seen,
    f: impl Fn(&Mem) -> std::io::Result<Vec<BaselineRegion>> + 'a,
) -> Runner<'a> {
    Runner::new(name, move |_| {
        let mem = fresh.memory(true);
        let t = Instant::now();
        let r = f(&mem).unwrap_or_else(|e| panic!("{label}: {e}"));
        let e = t.elapsed();
        assert_eq!(r.iter().map(|x| x.bytes).sum::<u64>(), fresh.size, "{label} left memory out");
        seen.threads_of(&label, &r);
        seen.after(label.clone(), &mem, fresh.size);
        e
    })
}

/// A round of ours on `threads` workers: fresh memory (the THP rows' advice is part of the
/// timed call), the timed `populate_all`, its check.
fn populate_runner(fresh: Fresh, seen: &Seen, threads: usize) -> Runner<'_> {
    let name = if fresh.thp { "populate-thp" } else { OURS };
    Runner::new(name, move |_| {
        let mem = fresh.memory(false);
        let opts = PopulateOptions {
            huge_pages: if fresh.thp { HugePageAdvice::Advise } else { HugePageAdvice::Leave },
            ..PopulateOptions::new(workers(threads))
        };
        let t = Instant::now();
        let r = populate_all(&mem, &opts).expect("populate");
        let e = t.elapsed();
        assert_eq!(r.populated, fresh.size, "populate stopped early");
        seen.after(format!("{name} on {threads} thread(s)"), &mem, fresh.size);
        e
    })
}

/// One group of the populate strategies (`thp`: the ones on memory advised `MADV_HUGEPAGE`):
/// Cloud Hypervisor mainline and one `MADV_POPULATE_WRITE` per region (their own thread
/// rules), then at each of `counts` Cloud Hypervisor's NUMA prefault, QEMU's prealloc and
/// ours; `all` is the all-core count the untimed warm-up uses.
fn populate_runners<'a>(
    s: &GuestMemory,
    counts: &[usize],
    all: usize,
    thp: bool,
    seen: &'a Seen,
) -> Vec<Runner<'a>> {
    let fresh = Fresh { ranges: s.ranges(), size: s.size, all, thp };
    let cpus = memmap_core::available_cpus();
    let row = |base: &str| if thp { format!("{base}-thp") } else { base.to_string() };
    let mut runners = vec![
        baseline_runner(row(CH), row(CH), fresh, seen, move |m| cloud_hypervisor_prefault(m, cpus)),
        baseline_runner(row(ONCE), row(ONCE), fresh, seen, single_populate_write),
    ];
    for &threads in counts {
        let on = |base: &str| format!("{} on {threads} thread(s)", row(base));
        runners.push(baseline_runner(row(CH_NUMA), on(CH_NUMA), fresh, seen, move |m| {
            cloud_hypervisor_numa_prefault(m, threads)
        }));
        runners.push(baseline_runner(row(QEMU), on(QEMU), fresh, seen, move |m| {
            qemu_prealloc(m, threads, cpus)
        }));
        runners.push(populate_runner(fresh, seen, threads));
    }
    runners
}

/// The rows of the report at count index `k` of `n` counts, from `samples` (each group: ch,
/// once, then ch-numa, qemu and populate at each count): ch, ch-numa, qemu, once and populate
/// of the 4 KiB group, then the same of the THP group.
fn populate_rows(samples: &[Samples], n: usize, k: usize) -> Vec<Samples> {
    let group = 2 + 3 * n;
    [0, group]
        .into_iter()
        .flat_map(|b| [b, b + 2 + 3 * k, b + 3 + 3 * k, b + 1, b + 4 + 3 * k])
        .map(|i| samples[i].clone())
        .collect()
}

/// The populate limit of one page kind at one thread count: the fastest of its rows given at
/// most that many threads (ours included).
#[derive(Debug, Clone, PartialEq)]
struct PopulateLimit {
    /// GB/s.
    gbps: f64,
    /// The row that set it.
    strategy: String,
    /// Ours against the fastest baseline row (GB/s over GB/s) and that row.
    ours_vs_best: (f64, String),
}

/// The limit of the rows `results` (one page kind: ch, ch-numa, qemu, once, populate), where
/// Cloud Hypervisor mainline counts only if it used no more than the report's threads
/// (`ch_counts`).
fn populate_limit(results: &[StrategyResult], ch_counts: bool) -> PopulateLimit {
    let eligible: Vec<&StrategyResult> =
        results.iter().enumerate().filter(|&(i, _)| i != 0 || ch_counts).map(|(_, r)| r).collect();
    let fastest = |rs: &[&StrategyResult]| {
        rs.iter()
            .copied()
            .min_by(|a, b| a.median_ms.total_cmp(&b.median_ms))
            .expect("populate is a row")
            .clone()
    };
    let best = fastest(&eligible);
    let baselines: Vec<&StrategyResult> =
        eligible.iter().copied().filter(|r| r.strategy != results[4].strategy).collect();
    let best_baseline = fastest(&baselines);
    PopulateLimit {
        gbps: best.gbps,
        strategy: best.strategy,
        ours_vs_best: (results[4].gbps / best_baseline.gbps, best_baseline.strategy),
    }
}

/// One populate report per thread count from `samples` (see [`populate_rows`]).
fn populate_reports(
    s: &GuestMemory,
    ctx: &Context<'_>,
    counts: &[usize],
    rounds: usize,
    samples: &[Samples],
    seen: Seen,
) -> Vec<ScenarioReport> {
    let threads_seen = seen.threads.into_inner();
    let ch_threads = threads_seen.iter().find(|(n, _)| n == CH).map(|(_, t)| t.clone()).unwrap_or_default();
    let coverage: Vec<(String, f64)> =
        seen.coverage.into_inner().into_iter().map(|(n, v)| (n, crate::measure::median_f64(&v))).collect();
    let thp_mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    let mut out = Vec::new();
    for (k, &threads) in counts.iter().enumerate() {
        let spec = ScenarioSpec {
            name: POPULATE.into(),
            description: format!(
                "prefault {} of fresh guest memory (2 regions of {}), {rounds} rounds, on {}: populate (ours) against Cloud Hypervisor mainline (its own rule: {:?} thread(s) per region), Cloud Hypervisor's NUMA prefault (#8785), QEMU's prealloc and one MADV_POPULATE_WRITE per region; THP {}",
                Size(s.size),
                Size(s.ranges()[0].1 as u64),
                if threads > 1 { format!("{threads} threads") } else { "1 thread".into() },
                ch_threads,
                thp_mode.trim(),
            ),
            struct_pages: 0,
            bytes: s.size,
            threads,
            limit: LimitKind::FillZero,
            figure: Figure::Bandwidth,
        };
        let rows = populate_rows(samples, counts.len(), k);
        let mut sc = ScenarioReport::from_samples(spec, ctx.limits, &rows);
        let ch_counts = ch_threads.iter().all(|&t| t <= threads);
        let limits = [
            populate_limit(&sc.results[..KIND_ROWS], ch_counts),
            populate_limit(&sc.results[KIND_ROWS..], ch_counts),
        ];
        add_populate_figures(&mut sc, s.size, threads, &limits, &threads_seen, &coverage);
        out.push(sc);
    }
    out
}

/// A JSON object of `entries`.
fn json_map(entries: impl IntoIterator<Item = (String, serde_json::Value)>) -> serde_json::Value {
    entries.into_iter().collect::<serde_json::Map<_, _>>().into()
}

/// The populate limits (4 KiB, THP), the threads per region and the THP coverage of one
/// report: a table column, JSON fields and notes.
fn add_populate_figures(
    sc: &mut ScenarioReport,
    size: u64,
    threads: usize,
    limits: &[PopulateLimit; 2],
    threads_seen: &[(String, Vec<usize>)],
    coverage: &[(String, f64)],
) {
    let x: Vec<f64> =
        sc.results.iter().enumerate().map(|(i, r)| r.gbps / limits[i / KIND_ROWS].gbps).collect();
    sc.columns.push(Column { header: "x pop. limit".into(), values: x.clone() });
    let per_region = |n: &str| threads_seen.iter().find(|(m, _)| m == n).map(|(_, t)| t.clone());
    let extra = [
        ("guest_bytes", size.into()),
        ("ch_threads_per_region", per_region(CH).into()),
        ("threads_per_region", json_map(threads_seen.iter().map(|(n, t)| (n.clone(), t.clone().into())))),
        (
            "populate_limit",
            json_map(["4k", "thp"].into_iter().zip(limits).map(|(k, l)| {
                let v = serde_json::json!({
                    "gbps": l.gbps,
                    "strategy": l.strategy,
                    "populate_vs_best_baseline": l.ours_vs_best.0,
                    "best_baseline": l.ours_vs_best.1,
                });
                (k.to_string(), v)
            })),
        ),
        (
            "x_populate_limit",
            json_map(sc.results.iter().zip(&x).map(|(r, &v)| (r.strategy.clone(), v.into()))),
        ),
        ("thp_coverage_median", json_map(coverage.iter().map(|(n, f)| (n.clone(), (*f).into())))),
    ];
    for (k, v) in extra {
        sc.extra.insert(k.into(), v);
    }
    populate_notes(sc, threads, limits, threads_seen, coverage);
}

/// The notes of one populate report (see [`add_populate_figures`]).
fn populate_notes(
    sc: &mut ScenarioReport,
    threads: usize,
    limits: &[PopulateLimit; 2],
    threads_seen: &[(String, Vec<usize>)],
    coverage: &[(String, f64)],
) {
    let on = if threads > 1 { format!("{threads} threads") } else { "1 thread".into() };
    let limit = |l: &PopulateLimit| format!("{:.2} GB/s ({})", l.gbps, l.strategy);
    let vs = |l: &PopulateLimit| format!("{:.2}x {}", l.ours_vs_best.0, l.ours_vs_best.1);
    sc.notes.push(format!(
        "  populate limit on {on}, measured in this run: the best of all implementations (ours included) given at most {on}: 4 KiB {}, THP {}; x pop. limit is each row's GB/s over its page kind's limit; populate against the best baseline: 4 KiB {}, THP {}",
        limit(&limits[0]),
        limit(&limits[1]),
        vs(&limits[0]),
        vs(&limits[1]),
    ));
    // This report's rows: those of its count and those with a rule of their own.
    let here = |label: &str| !label.contains(" on ") || label.ends_with(&format!(" on {threads} thread(s)"));
    let per_region: Vec<String> =
        threads_seen.iter().filter(|(n, _)| here(n)).map(|(n, t)| format!("{n} {t:?}")).collect();
    sc.notes.push(format!("  threads per region (first round): {}", per_region.join(", ")));
    let cov: Vec<String> =
        coverage.iter().filter(|(n, _)| here(n)).map(|(n, f)| format!("{n} {:.0} %", f * 100.0)).collect();
    sc.notes.push(format!(
        "  memory backed by transparent huge pages after populating (median of the rounds; the THP rows are comparable only where it is alike): {}",
        cov.join(", ")
    ));
    sc.notes.push(
        "  ch-prefault and madvise-once rows: their own thread rules (the same runs in both reports; ch-prefault counts for the populate limit only where its rule used no more threads than the report's); x limit: against the zero-fill limit of the limits phase (not paired: a limit run would fault the memory in)".into(),
    );
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
                if part == Part::Populate {
                    check_populate_limit(sc);
                }
            }
        }
        assert!(GuestMemory { part: Part::Reset, size: 6 << 20, fixed: true }.check().is_err());
    }

    /// The populate limit of each page kind is its fastest eligible row: every row but an
    /// ineligible `ch-prefault` is at most 1.0 of it, and one row is exactly at it.
    fn check_populate_limit(sc: &ScenarioReport) {
        let x = &sc.columns[0];
        assert_eq!((x.header.as_str(), x.values.len()), ("x pop. limit", 2 * KIND_ROWS));
        for kind in x.values.chunks(KIND_ROWS) {
            assert!(kind[1..].iter().all(|&v| v <= 1.0 + 1e-9), "{}", sc.table(true));
            assert!(kind.iter().any(|&v| (v - 1.0).abs() < 1e-9), "{}", sc.table(true));
        }
        let limit = &sc.extra["populate_limit"];
        for kind in ["4k", "thp"] {
            assert!(limit[kind]["gbps"].as_f64().unwrap() > 0.0);
            assert!(POPULATE_STRATEGIES.contains(&limit[kind]["strategy"].as_str().unwrap()));
            assert!(limit[kind]["best_baseline"].as_str().unwrap() != OURS);
        }
        assert_eq!(sc.extra["x_populate_limit"].as_object().unwrap().len(), 2 * KIND_ROWS);
        println!("{}", sc.table(true));
    }
}
