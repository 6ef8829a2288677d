//! `hugetlb`: boot-time 1 GiB pages (seed 002: 64 × 1 GiB, HVO unavailable).
//!
//! * `hugetlb-1g-nohvo`: `hugetlb_free_vmemmap=off`, so every folio's tails 64..262143 go
//!   through the fallback `hugetlb_folio_init_tail_vmemmap`; the time reported is that fallback
//!   tail initialization, summed over nodes, as the seed's temporary printk measured it.
//! * `hugetlb-1g-hvo`: HVO on (the no_std remapping model, which handles any number of folios;
//!   the real memfd HVO is exercised by hugetlb-init's tests), for contrast: only the 63 tails
//!   of the head vmemmap page are written and the time reported is the whole gather.
//!
//! Each strategy has its own fresh mmap-backed memmap per node, so round 0 includes the page
//! faults of first touching it. Memmaps are compared with the slow path's afterwards.

use std::time::{Duration, Instant};

use hugetlb_init::{
    BootParams, BootRequest, Hstate, HugeBootmemPage, HvoMode, ModelRemap, Node, NodeSpec, boot,
};
use memmap_core::{InitHooks, InitOptions, KernelConfig, OwnedMemmap, Page64, Phase, Strategy};

use super::{Context, RunError, Scenario, Setup};
use crate::measure::{Runner, interleaved};
use crate::memory::{MemoryNeed, Overflow, mul};
use crate::progress::bar;
use crate::report::{LimitKind, ScenarioReport, ScenarioSpec};

/// One case: `count` 1 GiB pages, HVO on or off.
#[derive(Debug, Clone)]
pub struct Hugetlb {
    /// HVO on.
    pub hvo: bool,
    /// 1 GiB pages in all.
    pub count: u64,
    /// Kernel config.
    pub config: KernelConfig,
    /// `--threads N` spreads the pages over N nodes gathered in parallel (one worker per node,
    /// as the kernel's padata job).
    pub threads: usize,
}

impl Hugetlb {
    /// The case with `setup`'s count, config and threads.
    #[must_use]
    pub fn new(hvo: bool, setup: &Setup) -> Self {
        Hugetlb { hvo, count: setup.hugetlb_count, config: setup.config, threads: setup.threads }
    }

    /// Nodes the pages are spread over.
    #[must_use]
    pub fn nodes(&self) -> u64 {
        (self.threads.max(1) as u64).min(self.count).max(1)
    }
}

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

    /// Per strategy, a memmap mapping every folio's struct pages: all written without HVO, the
    /// two head vmemmap pages of each folio with it.
    fn memory_needed(&self) -> Result<MemoryNeed, Overflow> {
        let vmemmap = Hstate::H1G.vmemmap_size::<Page64>();
        let mapped = mul(self.count, vmemmap, "the hugetlb memmap")?;
        let per_node = mapped / self.nodes();
        let one = if self.hvo {
            MemoryNeed {
                resident: mul(self.count, 8192, "the hugetlb memmap")?,
                mapped,
                largest_mapping: per_node,
            }
        } else {
            MemoryNeed { resident: mapped, mapped, largest_mapping: per_node }
        };
        let records = mul(self.count, size_of::<HugeBootmemPage>() as u64, "the hugetlb records")?;
        one.times(3)?.and(MemoryNeed::resident(records))
    }

    fn check(&self) -> Result<(), String> {
        if self.count == 0 {
            return Err("--count must be at least 1".into());
        }
        let max_nodes = self.config.flags_layout().map_err(|e| e.to_string())?.nodes_mask() + 1;
        if self.nodes() > max_nodes {
            return Err(format!(
                "--threads {} spreads the pages over {} nodes; config {} has at most {max_nodes}",
                self.threads,
                self.nodes(),
                self.config.name
            ));
        }
        Ok(())
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Vec<ScenarioReport>, RunError> {
        run(self, ctx).map(|r| vec![r])
    }
}

fn run(p: &Hugetlb, ctx: &Context<'_>) -> Result<ScenarioReport, RunError> {
    let (hvo, common, limits) = (p.hvo, ctx.common, ctx.limits);
    let h = Hstate::H1G;
    let nodes = p.nodes() as u32;
    let per_node = p.count / u64::from(nodes);
    let specs: Vec<NodeSpec> = (0..nodes).map(|nid| NodeSpec::packed(nid, h, per_node)).collect();
    let count = per_node * u64::from(nodes);
    let rounds = common.rounds(5, 3);
    let strategies = [Strategy::Slow, Strategy::Template, Strategy::Streaming];
    let mut storage: Vec<Vec<OwnedMemmap<Page64>>> = strategies
        .iter()
        .map(|_| specs.iter().map(|s| OwnedMemmap::new(p.config, s.start_pfn, s.nr_pages)).collect())
        .collect::<Result<_, _>>()
        .map_err(RunError::of(name(hvo), "map the memmaps"))?;
    let mode = if hvo { HvoMode::On } else { HvoMode::Off };
    let request = BootRequest::per_node(h, per_node);
    let pb = bar(rounds as u64 * strategies.len() as u64, name(hvo), common.progress);
    let written = std::cell::Cell::new(0u64);
    let mut runners: Vec<Runner<'_>> = strategies
        .iter()
        .zip(storage.iter_mut())
        .map(|(&strategy, owned)| {
            let specs = &specs;
            let pb = pb.clone();
            let written = &written;
            Runner::new(strategy.name(), move |_| {
                let mut nodes: Vec<Node<'_, Page64, ModelRemap, PhaseTimer>> = owned
                    .iter_mut()
                    .zip(specs)
                    .map(|(o, s)| Node::new(*s, o.memmap(), ModelRemap::default(), PhaseTimer::default()))
                    .collect();
                let mut records = vec![HugeBootmemPage::EMPTY; count as usize];
                let params = BootParams {
                    tail: InitOptions::new(strategy),
                    hvo: mode.params(),
                    parallel: nodes.len() > 1,
                };
                let report = boot(&mut nodes, &request, &params, &mut records).expect("valid boot");
                pb.inc(1);
                // With HVO only the head vmemmap page's struct pages are written.
                written.set(count * hugetlb_init::hugetlb_vmemmap_reserve_pages::<Page64>());
                let _ = report;
                // The nodes run in parallel with several nodes: report the slowest node's share
                // as the seed's per-boot figure (the whole gather with HVO, the fallback tail
                // init without).
                let phase = if hvo { Phase::HugetlbGatherNode } else { Phase::HugetlbFallbackTails };
                nodes.iter().map(|n| n.hooks.total(phase)).max().unwrap_or_default()
            })
        })
        .collect();
    let samples = interleaved(rounds, &mut runners);
    drop(runners);
    pb.finish_and_clear();
    let identical =
        storage[1..].iter().all(|s| s.iter().zip(&storage[0]).all(|(a, b)| a.as_bytes() == b.as_bytes()));
    assert!(identical, "{}: template/streaming memmaps differ from the slow path", name(hvo));
    let struct_pages = written.get();
    let reserve = hugetlb_init::hugetlb_vmemmap_reserve_pages::<Page64>();
    let description = if hvo {
        format!(
            "{count} x 1 GiB boot-time pages on {nodes} node(s), HVO on: whole gather, {} struct pages written, {rounds} rounds",
            struct_pages
        )
    } else {
        format!(
            "{count} x 1 GiB boot-time pages on {nodes} node(s), HVO off: fallback tail init of {} struct pages ({} MiB), {rounds} rounds",
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
        threads: nodes as usize,
        limit: LimitKind::FillNonzero,
    };
    let mut sc = ScenarioReport::from_samples(spec, limits, &samples);
    sc.extra.insert("gigantic_pages".into(), count.into());
    sc.extra.insert("nodes".into(), nodes.into());
    sc.extra.insert("identical_to_slow".into(), identical.into());
    Ok(sc)
}

/// Hooks that time [`Phase`]s: the sum of each phase's begin-to-end intervals on this node.
#[derive(Debug, Default)]
pub struct PhaseTimer {
    open: Vec<(Phase, Instant)>,
    totals: Vec<(Phase, Duration)>,
}

impl PhaseTimer {
    /// The time spent in `phase`.
    #[must_use]
    pub fn total(&self, phase: Phase) -> Duration {
        self.totals.iter().filter(|(p, _)| *p == phase).map(|(_, d)| *d).sum()
    }
}

impl InitHooks for PhaseTimer {
    fn phase(&mut self, phase: Phase, begin: bool) {
        if begin {
            self.open.push((phase, Instant::now()));
        } else if let Some(i) = self.open.iter().rposition(|(p, _)| *p == phase) {
            let (_, t) = self.open.swap_remove(i);
            self.totals.push((phase, t.elapsed()));
        }
    }
}
