//! `deferred`: boot-time struct page init of a zone eager, deferred and on demand, each in the
//! kernel's order and fused ([`BootOrder`]), and the on-demand check's cost in the allocator.
//! `crates/memmap-bench/METHODOLOGY.md` describes each strategy and how it is timed.

use std::time::{Duration, Instant};

use memmap_core::{
    BootOptions, BootOrder, Gfp, InitMode, KernelConfig, Memmap, NoHooks, Node, NodeLayout, NodeParts,
    OwnedMemmap, Page64, PfnRange, ZoneSpan,
};

use super::scenario::{CatalogEntry, Common, Context, RunError, Scenario, Setup, past_the_pfns};
use super::spec::{CommandSpec, Rounds, SizeSpec};
use crate::budget::Knob;
use crate::measure::{Runner, Samples, interleaved, median};
use crate::memory::{MemoryNeed, Overflow, mul};
use crate::progress::Phase;
use crate::report::scenario::{Column, Figure, LimitKind, ScenarioReport, ScenarioSpec};
use crate::size::Bytes;

/// First pfn of the booted zone (4 GiB physical).
pub(crate) const BASE: u64 = 1 << 20;

/// The booted node's one zone and memory range: `nr` pages of `ZONE_NORMAL` from [`BASE`].
#[must_use]
pub(crate) fn zone_layout(cfg: &KernelConfig, nr: u64) -> ([ZoneSpan; 1], [PfnRange; 1]) {
    ([ZoneSpan::new(cfg.zone_normal(), BASE, BASE + nr)], [PfnRange::new(BASE, BASE + nr)])
}

/// The parts of a boot of `memmap` over `layout` with `states`, without contents or hooks.
#[must_use]
pub(crate) fn parts<'a>(
    memmap: Memmap<'a, Page64>,
    layout: NodeLayout<'a>,
    states: &'a mut [u8],
) -> NodeParts<'a, Page64> {
    NodeParts { memmap, layout, states, arena: None, hooks: NoHooks }
}

/// The scenario's name.
pub const NAME: &str = "deferred";

/// The smallest zone the suite scales down to.
pub const MIN_SIZE: u64 = 1 << 30;

/// The `deferred` subcommand.
pub const COMMAND: CommandSpec = CommandSpec::new(
    "deferred",
    "Boot-time struct page init of a zone: eager, deferred, on demand; the allocator's check",
    SizeSpec::bytes(
        "deferred-size",
        4096,
        "Zone size, whole 4 KiB pages; 64 GiB is 1 GiB of struct pages",
        64 << 30,
        4 << 30,
    ),
);

/// 15: the on-demand boots are about 1 ms each, and single runs on a shared machine vary by a
/// factor of two; the eager boots set the time per round (about 0.6 s for all six).
const ROUNDS: Rounds = Rounds::new(15, 3);

/// The allocator check's rounds (at least 3).
const ALLOC_CHECK_ROUNDS: Rounds = Rounds::new(25, 5);

/// The catalog row of `deferred`.
pub const ENTRY: CatalogEntry =
    CatalogEntry::new(NAME, &COMMAND, &STRATEGY_NAMES, ROUNDS, |s| Box::new(Deferred::new(s)));

/// Boot-time init of a zone of `size` bytes.
#[derive(Debug, Clone)]
pub struct Deferred {
    /// Zone size in bytes of memory (whole 4 KiB pages).
    pub size: u64,
    /// Whether the user gave the size (it is then never scaled).
    pub fixed: bool,
    /// Kernel config.
    pub config: KernelConfig,
    /// A real machine's node instead of the synthetic zone (`--node-layout`; size: its span).
    pub layout: Option<std::sync::Arc<crate::guest_layout::GuestLayout>>,
}

impl Deferred {
    /// The scenario with `setup`'s size, config and layout.
    #[must_use]
    pub fn new(setup: &Setup) -> Deferred {
        let (size, fixed) = setup.size(&COMMAND.size);
        match &setup.layout {
            Some(l) => {
                let span = l.layout().span();
                Deferred {
                    size: span.len() << setup.config.page_shift,
                    fixed: true,
                    config: setup.config,
                    layout: Some(l.clone()),
                }
            }
            None => Deferred { size, fixed, config: setup.config, layout: None },
        }
    }
}

/// The strategies: name, init mode, boot order.
const STRATEGIES: [(&str, InitMode, BootOrder); 6] = [
    ("eager", InitMode::Eager, BootOrder::Kernel),
    ("eager-fused", InitMode::Eager, BootOrder::Fused),
    ("deferred-kernel-order", InitMode::Deferred, BootOrder::Kernel),
    ("deferred", InitMode::Deferred, BootOrder::Fused),
    ("on-demand-kernel-order", InitMode::OnDemand, BootOrder::Kernel),
    ("on-demand", InitMode::OnDemand, BootOrder::Fused),
];

/// The strategies' names, baseline first.
pub const STRATEGY_NAMES: [&str; 6] =
    [STRATEGIES[0].0, STRATEGIES[1].0, STRATEGIES[2].0, STRATEGIES[3].0, STRATEGIES[4].0, STRATEGIES[5].0];

/// Zone sizes of the allocator check (order 0 and order 9), in pages: `(normal, quick)`.
const ALLOC_CHECK_PAGES: [(u64, u64); 2] = [(1 << 18, 1 << 16), (1 << 22, 1 << 18)];

impl Scenario for Deferred {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> String {
        match &self.layout {
            Some(l) => format!("{NAME}: boot the node of {}", l.source),
            None => format!("{NAME}: boot a {} zone", Bytes(self.size)),
        }
    }

    /// One memmap per strategy, all written by the end of each round, and, while they are
    /// still mapped, the allocator check's two populated memmaps of its larger zone.
    fn memory_needed(&self) -> Result<MemoryNeed, Overflow> {
        let pages = self.size >> self.config.page_shift;
        let memmap = mul(pages, 64, "the deferred memmap")?;
        let states = pages >> self.config.pageblock_order;
        let check = ALLOC_CHECK_PAGES.iter().map(|&(n, _)| n * 64).max().unwrap_or(0);
        MemoryNeed::resident(memmap)
            .and(MemoryNeed::resident(states))?
            .times(STRATEGIES.len() as u64)?
            .and(MemoryNeed::resident(check).times(2)?)
    }

    fn check(&self) -> Result<(), String> {
        let page = self.config.page_size();
        if self.size == 0 || self.size % page != 0 {
            return Err(format!(
                "deferred size {} is not a whole number of {} pages",
                Bytes(self.size),
                Bytes(page)
            ));
        }
        if let Some(l) = &self.layout {
            let span = l.layout().span();
            return if span.end > self.config.max_pfn() {
                Err(past_the_pfns("node", span.len() * page, span.start, &self.config, page))
            } else {
                l.layout().validate(self.config.zone_device()).map_err(|e| format!("{}: {e:?}", l.source))
            };
        }
        if BASE.checked_add(self.size / page).is_none_or(|e| e > self.config.max_pfn()) {
            return Err(past_the_pfns("zone", self.size, BASE, &self.config, page));
        }
        Ok(())
    }

    fn knob(&self) -> Option<Knob> {
        // Whole 2 MiB blocks when scaled (any 4 KiB multiple when given).
        Some(Knob::bytes(self.size, 2 << 20, MIN_SIZE, self.fixed))
    }

    fn resized(&self, value: u64) -> Option<Box<dyn Scenario>> {
        Some(Box::new(Deferred { size: value, ..self.clone() }))
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Vec<ScenarioReport>, RunError> {
        run(self, ctx).map(|r| vec![r])
    }
}

fn run(p: &Deferred, ctx: &Context<'_>) -> Result<ScenarioReport, RunError> {
    let (common, limits) = (ctx.common, ctx.limits);
    let cfg = p.config;
    let (zones, memory) = zone_layout(&cfg, p.size >> cfg.page_shift);
    let layout = match &p.layout {
        Some(l) => l.layout(),
        None => NodeLayout { nid: 0, zones: &zones, memory: &memory, reserved: &[] },
    };
    let (base, nr) = (layout.span().start, layout.span().len());
    // The struct pages a boot writes: those of the sections that hold memory (a section
    // without any has no memmap).
    let written = present_section_pages(&layout, cfg.pages_per_section());
    let rounds = common.rounds(ROUNDS);
    // deferred_init_memmap's workers: the all-core count (1 with --threads 1).
    let threads = ctx.threads.count();
    let phase = ctx.phase(NAME);
    phase.step(format!("{NAME}: map {} memmaps", STRATEGIES.len()));
    let mut storage: Vec<OwnedMemmap<Page64>> = STRATEGIES
        .iter()
        .map(|_| OwnedMemmap::new(cfg, base, nr))
        .collect::<Result<_, _>>()
        .map_err(RunError::of(NAME, format!("map a memmap of {}", Bytes(nr * 64))))?;
    let nstates = Node::<Page64>::states_needed(&cfg, layout.span());
    let full: Vec<std::cell::RefCell<Vec<Duration>>> =
        STRATEGIES.iter().map(|_| std::cell::RefCell::default()).collect();
    let boot_pages: Vec<std::cell::Cell<u64>> = STRATEGIES.iter().map(|_| std::cell::Cell::new(0)).collect();
    let samples: Vec<Samples> = {
        let mut runners: Vec<Runner<'_>> = STRATEGIES
            .iter()
            .enumerate()
            .zip(storage.iter_mut())
            .map(|((i, &(name, mode, order)), owned)| {
                let (full, boot_pages) = (&full[i], &boot_pages[i]);
                let mut states = vec![0u8; nstates];
                Runner::new(name, move |_| {
                    let parts = parts(owned.memmap(), layout, &mut states);
                    let opts = BootOptions { order, ..BootOptions::new(mode) };
                    let t = Instant::now();
                    let (node, report) = Node::boot(parts, &opts).expect("boot");
                    let boot = t.elapsed();
                    match mode {
                        InitMode::Deferred => {
                            node.deferred_init_memmap(crate::threads::policy(threads));
                        }
                        InitMode::OnDemand => {
                            let _expanded = node.expand_all();
                        }
                        _ => {}
                    }
                    full.borrow_mut().push(t.elapsed());
                    boot_pages.set(report.pages_initialized);
                    boot
                })
            })
            .collect();
        phase.step(format!("{NAME}: {rounds} rounds"));
        interleaved(rounds, &mut runners, &phase)
    };
    let (alloc, alloc_table) = alloc_check(cfg, common, &phase)?;
    phase.finish();
    let what = match &p.layout {
        Some(l) => format!("the node of {}", l.source),
        None => format!("a {} zone", Bytes(p.size)),
    };
    let description = format!(
        "boot init of {what} ({} struct pages, {} of memmap): boot time, then time to full availability; {} rounds, deferred init on {}",
        written,
        Bytes(written * 64),
        rounds,
        if threads == 1 { "1 thread".to_string() } else { format!("{threads} threads") }
    );
    let spec = ScenarioSpec {
        name: NAME.into(),
        description,
        struct_pages: written,
        bytes: written * 64,
        threads,
        limit: LimitKind::FillStructPage,
        // Boot times: the strategies write different amounts at boot, so not a bandwidth.
        figure: Figure::Time,
    };
    let mut sc = ScenarioReport::from_samples(spec, limits, &samples);
    let full_ms: Vec<f64> = full
        .iter()
        .map(|f| {
            let v = f.borrow();
            median(if v.len() > 1 { &v[1..] } else { &v[..] }) * 1e3
        })
        .collect();
    let boot: Vec<u64> = boot_pages.iter().map(std::cell::Cell::get).collect();
    annotate(&mut sc, &full_ms, &boot, written / cfg.pageblock_nr_pages(), limits.scattered_line_ns);
    availability(&mut sc, &full_ms, written * 64, limits, threads);
    sc.extra.insert("alloc_check".into(), alloc);
    sc.notes.extend(alloc_table.lines().map(str::to_string));
    sc.refresh();
    Ok(sc)
}

/// The pages of `layout`'s span that lie in sections holding memory.
fn present_section_pages(layout: &NodeLayout<'_>, pps: u64) -> u64 {
    let span = layout.span();
    let mut n = 0;
    let mut a = span.start;
    while a < span.end {
        let (lo, hi) = (a / pps * pps, a / pps * pps + pps);
        let b = hi.min(span.end);
        if layout.memory.iter().any(|r| r.start < hi && lo < r.end) {
            n += b - a;
        }
        a = b;
    }
    n
}

/// The boot GB/s, the full-availability column and figures, and the on-demand reference: `full_ms` and
/// `boot_pages` per strategy, `blocks` 2 MiB blocks, `line_ns` per scattered line.
fn annotate(sc: &mut ScenarioReport, full_ms: &[f64], boot_pages: &[u64], blocks: u64, line_ns: f64) {
    // GB/s per strategy (in the JSON): the struct pages each one writes at boot.
    let limit = sc.limit_gbps;
    for (r, &pages) in sc.results.iter_mut().zip(boot_pages) {
        r.gbps = crate::measure::gbps(pages * 64, r.median_ms / 1e3);
        r.x_limit = r.gbps / limit;
    }
    sc.columns.push(Column { header: "full ms".into(), values: full_ms.to_vec() });
    let named =
        |v: &mut dyn Iterator<Item = serde_json::Value>| -> serde_json::Map<String, serde_json::Value> {
            STRATEGIES.iter().map(|m| m.0.to_string()).zip(v).collect()
        };
    sc.extra
        .insert("full_availability_median_ms".into(), named(&mut full_ms.iter().map(|&v| v.into())).into());
    sc.extra.insert("boot_struct_pages".into(), named(&mut boot_pages.iter().map(|&v| v.into())).into());
    let full_line: Vec<String> =
        STRATEGIES.iter().zip(full_ms).map(|(m, f)| format!("{} {f:.1} ms", m.0)).collect();
    sc.notes
        .push(format!("time to full availability (median; the full ms column): {}", full_line.join(", ")));
    // What on-demand boot costs in memory traffic here: the first struct page of every 2 MiB
    // block is one scattered line, at the probe's cost per line. The fused boot writes each
    // once; the kernel's order writes it (memmap init) and reads it back (the free pass) after
    // it has left the cache: twice.
    let line_ms = blocks as f64 * line_ns / 1e6;
    let ms_of = |name: &str| sc.result(name).map_or(f64::NAN, |r| r.median_ms);
    let eager_ms = ms_of("eager");
    let reference = format!(
        "on-demand reference: {blocks} scattered lines x {line_ns:.1} ns (limits probe) = {line_ms:.2} ms = eager / {:.0} (kernel order: twice that)",
        eager_ms / line_ms
    );
    let ratios = format!(
        "on-demand vs eager-fused: {:.1}x; on-demand-kernel-order vs eager: {:.1}x",
        ms_of("eager-fused") / ms_of("on-demand"),
        eager_ms / ms_of("on-demand-kernel-order")
    );
    sc.notes.extend([reference, ratios]);
    sc.extra.insert("on_demand_scattered_lines_ms".into(), line_ms.into());
}

/// Time to full availability as a bandwidth against this run's struct page fill limit: the eager
/// fused boot on one thread, deferred init on its `threads` workers.
fn availability(
    sc: &mut ScenarioReport,
    full_ms: &[f64],
    bytes: u64,
    limits: &crate::limits::Limits,
    threads: usize,
) {
    let mut parts = Vec::new();
    let mut json = serde_json::Map::new();
    for (name, t) in [("eager-fused", 1), ("deferred", threads)] {
        let Some(i) = STRATEGIES.iter().position(|m| m.0 == name) else { continue };
        let gbps = crate::measure::gbps(bytes, full_ms[i] / 1e3);
        let limit = LimitKind::FillStructPage.of(limits.at(t));
        let x = gbps / limit;
        let on = if t == 1 { "1 thread".to_string() } else { format!("{t} threads") };
        parts.push(format!("{name} {gbps:.1} GB/s = {x:.2}x ({on}, limit {limit:.1} GB/s)"));
        json.insert(name.into(), serde_json::json!({ "threads": t, "gbps": gbps, "x_limit": x }));
    }
    sc.notes
        .push(format!("full availability against this run's struct page fill limit: {}", parts.join("; ")));
    sc.extra.insert("full_availability_x_limit".into(), json.into());
}

/// Order-0 and order-9 allocate-all-then-free throughput, fully initialized against on demand.
fn alloc_check(
    cfg: KernelConfig,
    common: &Common,
    phase: &Phase,
) -> Result<(serde_json::Value, String), RunError> {
    let rounds = common.rounds(ALLOC_CHECK_ROUNDS).max(3);
    let mut out = serde_json::Map::new();
    let mut table = String::from("allocation throughput (allocate the whole zone, then free it):\n");
    for order in [0u32, 9] {
        let (value, line) = alloc_check_order(cfg, order, rounds, common.quick, phase)?;
        out.insert(format!("order_{order}"), value);
        table.push_str(&line);
    }
    Ok((out.into(), table))
}

/// One order of [`alloc_check`]: its JSON figures and its line.
fn alloc_check_order(
    cfg: KernelConfig,
    order: u32,
    rounds: usize,
    quick: bool,
    phase: &Phase,
) -> Result<(serde_json::Value, String), RunError> {
    // 262,144 order-0 allocations (1 GiB zone); 8,192 order-9 ones (16 GiB zone).
    let (normal, quick_pages) = ALLOC_CHECK_PAGES[usize::from(order != 0)];
    let nr: u64 = if quick { quick_pages } else { normal };
    let (zones, memory) = zone_layout(&cfg, nr);
    let layout = NodeLayout { nid: 0, zones: &zones, memory: &memory, reserved: &[] };
    // Two memmaps, and the two modes swap them every round: a difference between the two
    // pieces of memory (placement, huge page coverage) cannot pass for the check's cost.
    let storage: Vec<std::cell::RefCell<OwnedMemmap<Page64>>> = (0..2)
        .map(|_| {
            let mut m = OwnedMemmap::<Page64>::new(cfg, BASE, nr)
                .map_err(RunError::of(NAME, "map the allocator check's memmap"))?;
            // Resident before measuring, so both start from the same kind of memory.
            m.populate().map_err(RunError::of(NAME, "populate the allocator check's memmap"))?;
            Ok(std::cell::RefCell::new(m))
        })
        .collect::<Result<_, RunError>>()?;
    let states: Vec<std::cell::RefCell<Vec<u8>>> = (0..2)
        .map(|_| std::cell::RefCell::new(vec![0u8; Node::<Page64>::states_needed(&cfg, layout.span())]))
        .collect();
    let opts = |mode| BootOptions { check_pages: false, ..BootOptions::new(mode) };
    let cycle = |node: &Node<'_, Page64>| {
        let t = Instant::now();
        let mut held = Vec::with_capacity((nr >> order) as usize);
        while let Ok(b) = node.alloc_pages(cfg.zone_normal(), order, Gfp::NONE) {
            held.push(b);
        }
        let n = held.len() as u64;
        for b in held {
            node.free_pages(b).expect("free");
        }
        (t.elapsed(), n)
    };
    let reps: u32 = if order == 0 { 1 } else { 64 };
    let first_od = std::cell::Cell::new(None::<Duration>);
    // Each round boots the mode on its memmap of the round (not timed), runs one untimed
    // cycle (on demand: the pass that expands every block; it is reported once), then the
    // timed cycle.
    let run_mode = |mode: InitMode, round: usize| {
        let i = (round + usize::from(mode == InitMode::OnDemand)) % 2;
        let mut owned = storage[i].borrow_mut();
        let mut states = states[i].borrow_mut();
        let parts = parts(owned.memmap(), layout, &mut states);
        let (node, _) = Node::boot(parts, &opts(mode)).expect("boot");
        let (warm, _) = cycle(&node);
        if mode == InitMode::OnDemand && first_od.get().is_none() {
            first_od.set(Some(warm));
        }
        // Order-9 cycles are short (about 1 ms): time several, so the sample is well above
        // the timer's and the scheduler's noise.
        (0..reps).map(|_| cycle(&node).0).sum::<Duration>()
    };
    let mut runners = vec![
        Runner::new("fully-initialized", |r| run_mode(InitMode::Eager, r)),
        Runner::new("on-demand-check", |r| run_mode(InitMode::OnDemand, r)),
    ];
    phase.step(format!("{NAME}: allocator check, order {order}"));
    let s = interleaved(rounds, &mut runners, phase);
    drop(runners);
    let first_od = first_od.get().unwrap_or_default();
    let eager_ms = s[0].median_ms() / f64::from(reps);
    let od_ms = s[1].median_ms() / f64::from(reps);
    // The two runs of a round are adjacent in time: the median of the per-round ratios is
    // robust to the machine's drift between rounds.
    let ratios: Vec<Duration> = s[0]
        .rebinds()
        .iter()
        .zip(s[1].rebinds())
        .map(|(e, o)| Duration::from_secs_f64(o.as_secs_f64() / e.as_secs_f64()))
        .collect();
    let overhead = (median(&ratios) - 1.0) * 100.0;
    let allocs = nr >> order;
    let value = serde_json::json!({
            "allocations": allocs,
            "fully_initialized_ms": eager_ms,
            "on_demand_ms": od_ms,
            "on_demand_first_pass_ms": first_od.as_secs_f64() * 1e3,
            "overhead_pct": overhead,
            "fully_initialized_mallocs_per_s": allocs as f64 / (eager_ms / 1e3),
    });
    let line = format!(
        "order {order}: {allocs} allocs, fully initialized {eager_ms:.2} ms, on-demand {od_ms:.2} ms ({overhead:+.1}%), first on-demand pass (expands) {:.2} ms\n",
        first_od.as_secs_f64() * 1e3
    );
    Ok((value, line))
}
