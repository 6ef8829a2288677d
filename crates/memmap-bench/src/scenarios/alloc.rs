//! `clear --alloc`: init_on_alloc through the buddy allocator: a zone allocated completely in
//! order-9 blocks, each zeroed page by page (`per-page`) or with one `clear_pages` call (`batch`),
//! every round paired with the best zero fill on the zone's page arena.

use std::time::Instant;

use memmap_core::{
    BootOptions, ClearMode, Gfp, InitMode, InitPolicy, KernelConfig, Node, NodeLayout, NodeParts, OwnedArena,
    OwnedMemmap, Page64,
};

use super::clear;
use super::deferred::BASE;
use super::scenario::{CatalogEntry, Context, RunError, Scenario, Setup, past_the_pfns};
use super::spec::Rounds;
use crate::budget::Knob;
use crate::limits::{FillKind, best_on, run_fastest};
use crate::measure::{Runner, interleaved_paired};
use crate::memory::{MemoryNeed, Overflow, mul};
use crate::report::scenario::{Figure, LimitKind, ScenarioReport, ScenarioSpec};
use crate::size::Bytes;

/// The scenario's name.
pub const NAME: &str = "alloc-init-on-alloc";

/// 5 rounds (3 under `--quick`).
const ROUNDS: Rounds = Rounds::new(5, 3);

/// The catalog row of `alloc-init-on-alloc`: `clear --alloc`.
pub const ENTRY: CatalogEntry =
    CatalogEntry::new(NAME, &clear::COMMAND, &STRATEGIES, ROUNDS, |s| Box::new(Alloc::new(s)))
        .picked_by("alloc");

/// Its strategies, baseline first.
const STRATEGIES: [&str; 2] = [ClearMode::PerPage.name(), ClearMode::Batch.name()];

/// init_on_alloc through the buddy allocator over a zone of `size` bytes.
#[derive(Debug, Clone)]
pub struct Alloc {
    /// Zone size in bytes (whole 2 MiB blocks).
    pub size: u64,
    /// Whether the user gave the size (it is then never scaled).
    pub fixed: bool,
    /// Kernel config.
    pub config: KernelConfig,
}

impl Alloc {
    /// The scenario with `setup`'s clear size and config.
    #[must_use]
    pub fn new(setup: &Setup) -> Alloc {
        let (size, fixed) = setup.size(&clear::COMMAND.size);
        Alloc { size, fixed, config: setup.config }
    }
}

impl Scenario for Alloc {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> String {
        format!("{NAME}: allocate a {} zone in 2 MiB blocks", Bytes(self.size))
    }

    /// The arena and one memmap, both resident, and the node's block states.
    fn memory_needed(&self) -> Result<MemoryNeed, Overflow> {
        let memmap = mul(self.size / 4096, 64, "the alloc memmap")?;
        MemoryNeed::resident(self.size)
            .and(MemoryNeed::resident(memmap))?
            .and(MemoryNeed::resident(self.size / 4096 / 512))
    }

    fn unsupported(&self) -> Option<String> {
        let page = self.config.page_size();
        (page != stream_hal::PAGE_SIZE as u64).then(|| {
            format!(
                "--config {}: the node's page arena holds 4 KiB pages, this configuration's are {}",
                self.config.name,
                Bytes(page)
            )
        })
    }

    fn check(&self) -> Result<(), String> {
        if self.size == 0 || self.size % clear::SIZE_UNIT != 0 {
            return Err(format!(
                "clear --alloc size {} is not a whole number of 2 MiB pages",
                Bytes(self.size)
            ));
        }
        if BASE.checked_add(self.size / 4096).is_none_or(|e| e > self.config.max_pfn()) {
            return Err(past_the_pfns("zone", self.size, BASE, &self.config, clear::SIZE_UNIT));
        }
        Ok(())
    }

    fn knob(&self) -> Option<Knob> {
        Some(clear::knob(self.size, self.fixed))
    }

    fn resized(&self, value: u64) -> Option<Box<dyn Scenario>> {
        Some(Box::new(Alloc { size: value, ..self.clone() }))
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Vec<ScenarioReport>, RunError> {
        run(self.size, self.config, ctx).map(|r| vec![r])
    }
}

/// Runs the scenario over a zone of `size` bytes (whole 2 MiB blocks).
fn run(size: u64, cfg: KernelConfig, ctx: &Context<'_>) -> Result<ScenarioReport, RunError> {
    let limits = ctx.limits;
    let nr = (size / (2 << 20)).max(1) * 512;
    let zone = cfg.zone_normal();
    let (zones, memory) = super::deferred::zone_layout(&cfg, nr);
    let layout = NodeLayout { nid: 0, zones: &zones, memory: &memory, reserved: &[] };
    let rounds = ctx.common.rounds(ROUNDS);
    let phase = ctx.phase(NAME);
    phase.step(format!("{NAME}: map and fault in {}", Bytes(size)));
    let mut arena =
        OwnedArena::new(BASE, nr).map_err(RunError::of(NAME, format!("map a {} arena", Bytes(size))))?;
    arena.populate().map_err(RunError::of(NAME, "populate the arena"))?;
    // One memmap and one arena, used by the two strategies in turn.
    let memmap = OwnedMemmap::<Page64>::new(cfg, BASE, nr)
        .map_err(RunError::of(NAME, format!("map a memmap of {}", Bytes(nr * 64))))?;
    let storage = std::cell::RefCell::new((memmap, arena));
    let nstates = Node::<Page64>::states_needed(&cfg, layout.span());
    let blocks = nr / 512;
    let runner = |clear: ClearMode| {
        let storage = &storage;
        let mut states = vec![0u8; nstates];
        Runner::new(clear.name(), move |_| {
            let mut guard = storage.borrow_mut();
            let (owned, arena) = &mut *guard;
            let parts = NodeParts {
                arena: Some(arena.arena()),
                ..super::deferred::parts(owned.memmap(), layout, &mut states)
            };
            let policy = InitPolicy { init_on_alloc: true, clear, ..InitPolicy::default() };
            let opts = BootOptions { policy, check_pages: false, ..BootOptions::new(InitMode::Eager) };
            let (node, _) = Node::boot(parts, &opts).expect("boot");
            let mut held = Vec::with_capacity(blocks as usize);
            let t = Instant::now();
            while let Ok(b) = node.alloc_pages(zone, 9, Gfp::NONE) {
                held.push(b);
            }
            let e = t.elapsed();
            assert_eq!(held.len() as u64, blocks, "every 2 MiB block allocated");
            e
        })
    };
    let mut runners = vec![runner(ClearMode::PerPage), runner(ClearMode::Batch)];
    // The limit run next to each round: the best zero fill on one thread, on the arena itself
    // (borrowed again for every run, as the strategies do).
    let limit_methods = best_on(limits, FillKind::Zero, 1, storage.borrow_mut().1.arena().bytes_mut());
    let mut companions = vec![Runner::new("limit", |round| {
        let mut guard = storage.borrow_mut();
        let mut arena = guard.1.arena();
        run_fastest(&limit_methods, FillKind::Zero, 1, round, arena.bytes_mut())
    })];
    phase.step(format!("{NAME}: {rounds} rounds"));
    let (samples, paired) =
        interleaved_paired(rounds, &mut runners, &mut companions, &[Some(0), Some(0)], &phase);
    drop((runners, companions));
    phase.finish();
    let zeroed = storage.borrow_mut().1.arena().bytes().iter().step_by(4093).all(|&b| b == 0);
    assert!(zeroed, "init_on_alloc left non-zero bytes");
    let spec = ScenarioSpec {
        name: NAME.into(),
        description: format!(
            "init_on_alloc through the buddy allocator: {} allocations of order 9 ({}), {} rounds",
            blocks,
            Bytes(nr * 4096),
            rounds
        ),
        struct_pages: 0,
        bytes: nr * 4096,
        threads: 1,
        limit: LimitKind::FillZero,
        figure: Figure::Bandwidth,
    };
    let mut sc = ScenarioReport::from_samples(spec, limits, &samples);
    sc.set_paired_limit(&limit_methods.join(" or "), nr * 4096, &paired);
    sc.extra.insert("allocations".into(), blocks.into());
    Ok(sc)
}
