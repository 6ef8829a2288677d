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

use super::Common;
use crate::limits::Limits;
use crate::measure::{Runner, interleaved};
use crate::progress::bar;
use crate::report::{LimitKind, Scenario, ScenarioSpec};

/// Parameters.
#[derive(Debug, Clone)]
pub struct Params {
    /// 1 GiB pages in all.
    pub count: u64,
    /// Kernel config.
    pub config: KernelConfig,
}

/// Scenario name.
#[must_use]
pub fn name(hvo: bool) -> &'static str {
    if hvo { "hugetlb-1g-hvo" } else { "hugetlb-1g-nohvo" }
}

/// Memory the scenario needs: per strategy, the struct pages of every folio (all written
/// without HVO).
#[must_use]
pub fn memory_needed(count: u64, hvo: bool) -> u64 {
    if hvo { 3 * count * 8192 } else { 3 * count * Hstate::H1G.vmemmap_size::<Page64>() }
}

/// Runs one case. `--threads N` spreads the pages over N nodes gathered in parallel (one
/// worker per node, as the kernel's padata job).
///
/// # Panics
///
/// If the memmaps cannot be mapped or the boot is rejected (the caller validates sizes).
pub fn run(hvo: bool, p: &Params, common: &Common, limits: &Limits) -> Scenario {
    let h = Hstate::H1G;
    let nodes = common.threads.max(1).min(p.count as usize) as u32;
    let per_node = p.count / u64::from(nodes);
    let specs: Vec<NodeSpec> = (0..nodes).map(|nid| NodeSpec::packed(nid, h, per_node)).collect();
    let count = per_node * u64::from(nodes);
    let rounds = common.rounds(5, 3);
    let strategies = [Strategy::Slow, Strategy::Template, Strategy::Streaming];
    let mut storage: Vec<Vec<OwnedMemmap<Page64>>> = strategies
        .iter()
        .map(|_| {
            specs.iter().map(|s| OwnedMemmap::new(p.config, s.start_pfn, s.nr_pages).expect("mmap")).collect()
        })
        .collect();
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
    let mut sc = Scenario::from_samples(spec, limits, &samples);
    sc.extra.insert("gigantic_pages".into(), count.into());
    sc.extra.insert("nodes".into(), nodes.into());
    sc.extra.insert("identical_to_slow".into(), identical.into());
    sc
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
