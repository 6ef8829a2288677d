//! `guest-memory-populate`: ours against the VMMs' prefaults (see [`super::guest_memory`]).

use std::cell::{Cell, RefCell};
use std::time::Instant;

use stream_vm_memory::{HugePageAdvice, PopulateOptions, advise_huge_pages, populate_all};
use vm_memory::{GuestAddress, GuestMemoryBackend, GuestMemoryRegion, MemoryRegionAddress};

use super::guest_host::{GuestMemory, Mem, unsupported, workers};
use super::scenario::{Context, RunError};
use super::spec::Rounds;
use crate::measure::{Runner, Samples, interleaved};
use crate::report::scenario::{Column, Figure, LimitKind, ScenarioReport, ScenarioSpec, StrategyResult};
use crate::size::Bytes as Size;
use crate::vmm_prefault::{
    BaselineRegion, cloud_hypervisor_numa_prefault, cloud_hypervisor_prefault, qemu_prealloc,
    single_populate_write,
};

/// The populate scenario's name.
pub const POPULATE: &str = "guest-memory-populate";

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

/// The populate rounds: 5 (3 under `--quick`).
pub const POPULATE_ROUNDS: Rounds = Rounds::new(5, 3);

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

/// Bytes of the regions' mappings backed by transparent huge pages, 0 if unreadable.
fn thp_bytes(mem: &Mem) -> u64 {
    let ranges: Vec<(u64, u64)> = mem
        .iter()
        .filter_map(|r| r.get_host_address(MemoryRegionAddress(0)).ok().map(|h| (h as u64, r.len())))
        .collect();
    let Ok(maps) = procfs::process::Process::myself().and_then(|p| p.smaps()) else { return 0 };
    maps.iter()
        .filter(|m| ranges.iter().any(|&(h, n)| m.address.0 >= h && m.address.0 < h + n))
        .filter_map(|m| m.extension.map.get("AnonHugePages"))
        .sum()
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
pub const OURS: &str = "populate";

/// Rows per page kind in a populate report: ch, ch-numa, qemu, once, populate.
pub const KIND_ROWS: usize = 5;

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
    /// After a round of `name` that populated `mem`: is every page resident, how much is THP.
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

/// The populate scenario: one report per thread count.
pub(crate) fn run_populate(s: &GuestMemory, ctx: &Context<'_>) -> Result<Vec<ScenarioReport>, RunError> {
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

/// How every populate round gets its memory: untimed, as much memory faulted in and freed, so
/// every implementation finds the same free memory; then the same two regions mapped fresh.
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
    /// The round's fresh memory after the warm-up, advised `MADV_HUGEPAGE` for a baseline's THP row
    /// (`advise`), as the VMMs advise a region.
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

/// A round of the baseline `f` in the row `name`: fresh memory, the timed call, its check.
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

/// A round of ours on `threads` workers; the THP rows' advice is part of the timed call.
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

/// One group of the populate strategies (`thp`: on memory advised `MADV_HUGEPAGE`): ch and once,
/// then at each of `counts` ch-numa, qemu and ours; `all` is the warm-up's thread count.
fn populate_runners<'a>(
    s: &GuestMemory,
    counts: &[usize],
    all: usize,
    thp: bool,
    seen: &'a Seen,
) -> Vec<Runner<'a>> {
    let fresh = Fresh { ranges: s.ranges(), size: s.size, all, thp };
    let cpus = stream_par::available_cpus();
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

/// The rows of the report at count index `k` of `n` from the groups' `samples`: ch, ch-numa,
/// qemu, once and populate of the 4 KiB group, then of the THP group.
fn populate_rows(samples: &[Samples], n: usize, k: usize) -> Vec<Samples> {
    let group = 2 + 3 * n;
    [0, group]
        .into_iter()
        .flat_map(|b| [b, b + 2 + 3 * k, b + 3 + 3 * k, b + 1, b + 4 + 3 * k])
        .map(|i| samples[i].clone())
        .collect()
}

/// The populate limit of one page kind and thread count: its fastest row within that many threads.
#[derive(Debug, Clone, PartialEq)]
struct PopulateLimit {
    /// GB/s.
    gbps: f64,
    /// The row that set it.
    strategy: String,
    /// Ours against the fastest baseline row (GB/s over GB/s) and that row.
    ours_vs_best: (f64, String),
}

/// The limit of the rows `results` of one page kind; Cloud Hypervisor mainline counts only if
/// it used no more than the report's threads (`ch_counts`).
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

/// The populate limits, threads per region and THP coverage of one report.
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
