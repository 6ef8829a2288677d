//! `hugetlb`: boot-time 1 GiB pages, the fallback tail init without HVO and the whole gather
//! with HVO. `crates/memmap-bench/METHODOLOGY.md` describes each strategy and how it is timed.

use std::time::{Duration, Instant};

use hugetlb_init::phase;
use hugetlb_init::{
    BootParams, BootRequest, Hstate, HugeBootmemPage, HugetlbNode, HvoMode, ModelRemap, NodeSpec, boot,
};
use memmap_core::{FillOptions, InitHooks, KernelConfig, OwnedMemmap, Page64};
use stream_par::Threads;

use super::paired::{self, Grid, Measured};
use super::scenario::{
    CatalogEntry, Context, INIT_STRATEGIES, INIT_STRATEGY_NAMES, RunError, Scenario, Setup,
};
use super::spec::{CommandSpec, PickSpec, Rounds, SizeSpec};
use crate::budget::{Knob, KnobUnit};
use crate::limits::FillKind;
use crate::memory::{MemoryNeed, Overflow, mul};
use crate::report::scenario::{Figure, LimitKind, ScenarioReport, ScenarioSpec};

/// The `hugetlb` subcommand.
pub const COMMAND: CommandSpec = CommandSpec::new(
    "hugetlb",
    "Boot-time 1 GiB pages: the fallback tail init with HVO off, and the gather with HVO on",
    SizeSpec::count(
        "hugetlb-count",
        "Number of 1 GiB pages; the default is the upstream measurement's",
        64,
        4,
    ),
)
.pick(PickSpec::value(
    "hvo",
    "HVO",
    Some("both"),
    "HVO off (the fallback the upstream series measured), on, or both",
));

/// 9 rounds (3 under `--quick`).
const ROUNDS: Rounds = Rounds::new(9, 3);

/// The catalog row of `hugetlb-1g-nohvo`.
pub const NO_HVO: CatalogEntry =
    CatalogEntry::new(name(false), &COMMAND, &INIT_STRATEGY_NAMES, ROUNDS, |s| {
        Box::new(Hugetlb::new(false, s))
    })
    .picked_by("off");

/// The catalog row of `hugetlb-1g-hvo`.
pub const HVO: CatalogEntry = CatalogEntry::new(name(true), &COMMAND, &INIT_STRATEGY_NAMES, ROUNDS, |s| {
    Box::new(Hugetlb::new(true, s))
})
.picked_by("on");

/// One case: `count` 1 GiB pages, HVO on or off.
#[derive(Debug, Clone)]
pub struct Hugetlb {
    /// HVO on.
    pub hvo: bool,
    /// 1 GiB pages in all.
    pub count: u64,
    /// Whether the user gave the count (it is then never scaled).
    pub fixed: bool,
    /// Kernel config.
    pub config: KernelConfig,
}

impl Hugetlb {
    /// The case with `setup`'s count and config.
    #[must_use]
    pub fn new(hvo: bool, setup: &Setup) -> Self {
        let (count, fixed) = setup.size(&COMMAND.size);
        Hugetlb { hvo, count, fixed, config: setup.config }
    }

    /// Nodes the pages are spread over: one.
    #[must_use]
    pub fn nodes(&self) -> u64 {
        1
    }

    /// The 1 GiB hstate of the configuration (the PUD size, or arm64's contiguous PMD with 16
    /// KiB pages).
    ///
    /// # Errors
    ///
    /// The configuration has no 1 GiB pages.
    pub fn hstate(&self) -> Result<Hstate, hugetlb_init::HugetlbError> {
        Hstate::new(&self.config, 1 << 30)
    }

    /// Memmap sets: one per strategy, and without HVO one more each for the all-core run.
    fn sets(&self) -> u64 {
        if self.hvo { 3 } else { 6 }
    }
}

/// What one folio's memmap makes resident with HVO: its 8 KiB of head vmemmap pages fault in a
/// whole 2 MiB transparent huge page.
pub const HVO_RESIDENT_PER_FOLIO: u64 = 2 << 20;

/// Scenario name.
#[must_use]
pub const fn name(hvo: bool) -> &'static str {
    if hvo { "hugetlb-1g-hvo" } else { "hugetlb-1g-nohvo" }
}

impl Scenario for Hugetlb {
    fn name(&self) -> &'static str {
        name(self.hvo)
    }

    fn description(&self) -> String {
        format!("{}: {} x 1 GiB pages on {} node(s)", name(self.hvo), self.count, self.nodes())
    }

    /// Per strategy, a memmap of every folio's struct pages: all written without HVO,
    /// [`HVO_RESIDENT_PER_FOLIO`] per folio with it.
    fn memory_needed(&self) -> Result<MemoryNeed, Overflow> {
        // A configuration without 1 GiB pages is left out (`unsupported`); its need is zero.
        let vmemmap = self.hstate().map_or(0, Hstate::vmemmap_size::<Page64>);
        let mapped = mul(self.count, vmemmap, "the hugetlb memmap")?;
        let per_node = mapped / self.nodes();
        let one = if self.hvo {
            MemoryNeed {
                resident: mul(self.count, HVO_RESIDENT_PER_FOLIO, "the hugetlb memmap")?,
                mapped,
                largest_mapping: per_node,
            }
        } else {
            MemoryNeed { resident: mapped, mapped, largest_mapping: per_node }
        };
        let records = mul(self.count, size_of::<HugeBootmemPage>() as u64, "the hugetlb records")?;
        one.times(self.sets())?.and(MemoryNeed::resident(records))
    }

    fn check(&self) -> Result<(), String> {
        if self.count == 0 {
            return Err("--count must be at least 1".into());
        }
        self.config.flags_layout().map_err(|e| e.to_string())?;
        Ok(())
    }

    /// A configuration without 1 GiB pages, and for HVO one whose kernel lacks
    /// `CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP` (the fallback the other case measures would run).
    fn unsupported(&self) -> Option<String> {
        let h = match self.hstate() {
            Ok(h) => h,
            Err(e) => return Some(format!("--config {}: {e}", self.config.name)),
        };
        if self.hvo {
            let on = HvoMode::On.params();
            if let Err(why) = hugetlb_init::hvo_availability::<Page64>(&self.config, &on, h) {
                return Some(format!("--config {}: no HVO ({why})", self.config.name));
            }
        }
        None
    }

    fn knob(&self) -> Option<Knob> {
        Some(Knob {
            value: self.count,
            step: 1,
            min: 1,
            fixed: self.fixed,
            unit: KnobUnit::Count("x 1 GiB pages"),
        })
    }

    fn resized(&self, value: u64) -> Option<Box<dyn Scenario>> {
        Some(Box::new(Hugetlb { count: value, ..self.clone() }))
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Vec<ScenarioReport>, RunError> {
        run(self, ctx)
    }
}

fn run(p: &Hugetlb, ctx: &Context<'_>) -> Result<Vec<ScenarioReport>, RunError> {
    let hvo = p.hvo;
    let h = p
        .hstate()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
        .map_err(RunError::of(name(hvo), "choose the hstate"))?;
    let nodes = p.nodes() as u32;
    let per_node = p.count / u64::from(nodes);
    let zone = p.config.zone_normal();
    let specs: Vec<NodeSpec> =
        (0..nodes).map(|nid| NodeSpec { zone, ..NodeSpec::packed(nid, h, per_node) }).collect();
    let count = per_node * u64::from(nodes);
    let rounds = ctx.common.rounds(ROUNDS);
    // With HVO only 63 tails per folio are written: there is nothing to spread.
    let counts = if hvo { vec![1] } else { ctx.threads.counts() };
    let phase = ctx.phase(name(hvo));
    phase.step(format!("{}: map {} memmap sets", name(hvo), counts.len() * 3));
    // Paired limit runs without HVO, where the memmap is written in full.
    let grid = Grid::new(&counts, &INIT_STRATEGY_NAMES, FillKind::StructPage, rounds).paired(!hvo);
    let (storage, fault_ms) = map_storage(p, &specs, grid.runs.len())?;
    let memmap_bytes: u64 = storage[0].iter().map(|m| m.bytes() as u64).sum();
    let mode = if hvo { HvoMode::On } else { HvoMode::Off };
    let request = BootRequest::per_node(h, per_node);
    phase.step(format!("{}: {rounds} rounds", name(hvo)));
    let m = paired::measure(&grid, storage, ctx.limits, &phase, |i, owned| {
        let (threads, strategy) = (grid.runs[i].0, INIT_STRATEGIES[i % INIT_STRATEGIES.len()]);
        let mut nodes: Vec<HugetlbNode<'_, Page64, ModelRemap, PhaseTimer>> = owned
            .iter_mut()
            .zip(&specs)
            .map(|(o, s)| HugetlbNode::new(*s, o.memmap(), ModelRemap::default(), PhaseTimer::default()))
            .collect();
        let mut records = vec![HugeBootmemPage::EMPTY; count as usize];
        let params = BootParams {
            tail: FillOptions::new(strategy),
            hvo: mode.params(),
            gather: if nodes.len() > 1 { Threads::Each } else { Threads::One },
            tail_threads: crate::threads::policy(threads),
        };
        boot(&mut nodes, &request, &params, &mut records).expect("valid boot");
        // The upstream per-boot figure: the whole gather with HVO, the fallback tail init
        // without (the slowest node's, were there several).
        let phase = if hvo { phase::GATHER_NODE } else { phase::FALLBACK_TAILS };
        nodes.iter().map(|n| n.hooks.total(phase)).max().unwrap_or_default()
    });
    phase.finish();
    assert!(m.identical(), "{}: a memmap differs from the one-thread slow path", name(hvo));
    let fault = crate::measure::median_f64(&fault_ms);
    Ok(reports(p, ctx, &counts, &m, memmap_bytes, fault))
}

/// One set of memmaps (one per node) for each of `sets` runs, and the time to fault each in
/// (0 with HVO, which writes only the head vmemmap pages).
fn map_storage(
    p: &Hugetlb,
    specs: &[NodeSpec],
    sets: usize,
) -> Result<(Vec<NodeMemmaps>, Vec<f64>), RunError> {
    let name = name(p.hvo);
    let mut storage: Vec<Vec<OwnedMemmap<Page64>>> = (0..sets)
        .map(|_| specs.iter().map(|s| OwnedMemmap::new(p.config, s.start_pfn, s.nr_pages)).collect())
        .collect::<Result<_, _>>()
        .map_err(RunError::of(name, "map the memmaps"))?;
    let mut fault_ms = Vec::new();
    for set in &mut storage {
        let mut t = 0.0;
        if !p.hvo {
            for m in set.iter_mut() {
                t += paired::prefault(m).map_err(RunError::of(name, "fault the memmap in"))?;
            }
        }
        fault_ms.push(t);
    }
    Ok((storage, fault_ms))
}

/// One memmap per node: a strategy's storage.
type NodeMemmaps = Vec<OwnedMemmap<Page64>>;

/// One report per thread count.
fn reports(
    p: &Hugetlb,
    ctx: &Context<'_>,
    counts: &[usize],
    m: &Measured<NodeMemmaps>,
    memmap_bytes: u64,
    fault: f64,
) -> Vec<ScenarioReport> {
    let (hvo, nodes) = (p.hvo, p.nodes());
    // `run` refused a configuration without 1 GiB pages before measuring.
    let Ok(h) = p.hstate() else { return Vec::new() };
    let count = p.count / nodes * nodes;
    let rounds = ctx.common.rounds(ROUNDS);
    let reserve = h.vmemmap_reserve_pages::<Page64>();
    let struct_pages = count * reserve;
    let mut out = Vec::new();
    let n = INIT_STRATEGIES.len();
    for (k, &threads) in counts.iter().enumerate() {
        let how = if threads > 1 {
            format!("tails on {threads} threads within the node")
        } else {
            "one worker per node, as the kernel".to_string()
        };
        let description = if hvo {
            format!(
                "{count} x 1 GiB boot-time pages on {nodes} node(s), HVO on: whole gather, {struct_pages} struct pages written, {rounds} rounds"
            )
        } else {
            format!(
                "{count} x 1 GiB boot-time pages on {nodes} node(s), HVO off: fallback tail init of {} struct pages ({} MiB), {how}, {rounds} rounds; faulting the memmap in: {fault:.1} ms (not in \"first\")",
                count * (h.nr_pages() - reserve),
                (count * (h.nr_pages() - reserve) * 64) >> 20,
            )
        };
        let tail_pages = if hvo { struct_pages } else { count * (h.nr_pages() - reserve) };
        let spec = ScenarioSpec {
            name: name(hvo).into(),
            description,
            struct_pages: tail_pages,
            bytes: tail_pages * 64,
            threads,
            limit: LimitKind::FillStructPage,
            // With HVO a boot writes 64 struct pages per folio: its time is not a bandwidth.
            figure: if hvo { Figure::Time } else { Figure::Bandwidth },
        };
        let mut sc = m.report(spec, ctx.limits, k * n..(k + 1) * n, memmap_bytes);
        sc.extra.insert("gigantic_pages".into(), count.into());
        sc.extra.insert("nodes".into(), nodes.into());
        sc.extra.insert("identical_to_slow".into(), true.into());
        sc.extra.insert("fault_ms".into(), fault.into());
        out.push(sc);
    }
    out
}

/// Hooks that time `hugetlb-init`'s [`phase`]s: the sum of each phase's begin-to-end intervals on this node.
#[derive(Debug, Default)]
pub struct PhaseTimer {
    open: Vec<(&'static str, Instant)>,
    totals: Vec<(&'static str, Duration)>,
}

impl PhaseTimer {
    /// The time spent in `phase`.
    #[must_use]
    pub fn total(&self, phase: &str) -> Duration {
        self.totals.iter().filter(|(p, _)| *p == phase).map(|(_, d)| *d).sum()
    }
}

impl InitHooks for PhaseTimer {
    fn phase(&mut self, phase: &'static str, begin: bool) {
        if begin {
            self.open.push((phase, Instant::now()));
        } else if let Some(i) = self.open.iter().rposition(|(p, _)| *p == phase) {
            let (_, t) = self.open.swap_remove(i);
            self.totals.push((phase, t.elapsed()));
        }
    }
}
