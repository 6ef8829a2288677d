//! `hotplug`: onlining a hot-added range into `ZONE_NORMAL` block by block
//! ([`memmap_core::online_pages`]), each round paired with the struct page fill limit.
//! `crates/memmap-bench/METHODOLOGY.md` describes each strategy and how it is timed.

use std::time::Instant;

use memmap_core::{HotplugTarget, HotplugZone, KernelConfig, Memmap, OnlineOptions, Page64, Strategy};

use super::paired::{self, Grid};
use super::scenario::{CatalogEntry, Context, RunError, Scenario, Setup, past_the_pfns};
use super::spec::{CommandSpec, Rounds, SizeSpec};
use crate::budget::Knob;
use crate::limits::FillKind;
use crate::memory::{MemoryNeed, Overflow, mul};
use crate::progress::ProgressHooks;
use crate::report::scenario::{Figure, LimitKind, ScenarioReport, ScenarioSpec};
use crate::size::Bytes;

/// The scenario's name.
pub const NAME: &str = "hotplug";

/// Its strategies, baseline first.
pub const STRATEGIES: [Strategy; 4] =
    [Strategy::Slow, Strategy::Template, Strategy::Streaming, Strategy::Auto];

/// The strategies' names.
pub const STRATEGY_NAMES: [&str; 4] =
    [STRATEGIES[0].name(), STRATEGIES[1].name(), STRATEGIES[2].name(), STRATEGIES[3].name()];

/// First pfn of the hot-added range: 64 GiB physical, above the boot memory, section-aligned.
pub const START_PFN: u64 = 1 << 24;

/// The smallest range the suite scales down to.
pub const MIN_SIZE: u64 = 256 << 20;

/// The `hotplug` subcommand.
pub const COMMAND: CommandSpec = CommandSpec::new(
    "hotplug",
    "Memory hotplug: onlining a hot-added range into ZONE_NORMAL (online_pages)",
    SizeSpec::bytes(
        "hotplug-size",
        4096,
        "Hot-added memory, whole memory blocks: the config's sections, 128 MiB on x86-64",
        4 << 30,
        1 << 30,
    ),
);

/// 10: a round of the four onlinings and their limit runs is about 0.1 s at 4 GiB.
const ROUNDS: Rounds = Rounds::new(10, 5);

/// The catalog row of `hotplug`.
pub const ENTRY: CatalogEntry =
    CatalogEntry::new(NAME, &COMMAND, &STRATEGY_NAMES, ROUNDS, |s| Box::new(Hotplug::new(s)));

/// Onlining a hot-added range of `size` bytes.
#[derive(Debug, Clone)]
pub struct Hotplug {
    /// Bytes of hot-added memory (whole sections).
    pub size: u64,
    /// Whether the user gave the size (it is then never scaled).
    pub fixed: bool,
    /// Kernel config.
    pub config: KernelConfig,
}

impl Hotplug {
    /// The scenario with `setup`'s size and config.
    #[must_use]
    pub fn new(setup: &Setup) -> Hotplug {
        let (size, fixed) = setup.size(&COMMAND.size);
        Hotplug { size, fixed, config: setup.config }
    }

    /// Bytes of a memory block (a section of the config).
    fn block_bytes(&self) -> u64 {
        self.config.pages_per_section() * self.config.page_size()
    }
}

impl Scenario for Hotplug {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> String {
        format!("{NAME}: online a {} hot-added range", Bytes(self.size))
    }

    /// One memmap per strategy, all written.
    fn memory_needed(&self) -> Result<MemoryNeed, Overflow> {
        let memmap = mul(self.size >> self.config.page_shift, 64, "the hotplug memmap")?;
        MemoryNeed::resident(memmap).times(STRATEGIES.len() as u64)
    }

    fn check(&self) -> Result<(), String> {
        let block = self.block_bytes();
        if self.size == 0 || self.size % block != 0 {
            let down = self.size / block * block;
            let up = down.checked_add(block).map(|u| Bytes(u).to_string());
            let nearest: Vec<String> =
                [(down > 0).then(|| Bytes(down).to_string()), up].into_iter().flatten().collect();
            return Err(format!(
                "size {} is not a whole number of {} memory blocks (config {}'s sections; nearest: {})",
                Bytes(self.size),
                Bytes(block),
                self.config.name,
                nearest.join(" or ")
            ));
        }
        if START_PFN
            .checked_add(self.size >> self.config.page_shift)
            .is_none_or(|e| e > self.config.max_pfn())
        {
            return Err(past_the_pfns("range", self.size, START_PFN, &self.config, block));
        }
        Ok(())
    }

    fn knob(&self) -> Option<Knob> {
        Some(Knob::bytes(self.size, self.block_bytes(), MIN_SIZE.max(self.block_bytes()), self.fixed))
    }

    fn resized(&self, value: u64) -> Option<Box<dyn Scenario>> {
        Some(Box::new(Hotplug { size: value, ..self.clone() }))
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Vec<ScenarioReport>, RunError> {
        run(self, ctx).map(|r| vec![r])
    }
}

/// Onlines `[START_PFN, START_PFN + nr)` into a fresh `ZONE_NORMAL` one memory block of `block`
/// pages at a time; returns the first block's strategy and the `online_pages()` calls.
fn online(
    memmap: &mut Memmap<'_, Page64>,
    nr: u64,
    block: u64,
    strategy: Strategy,
    pb: &indicatif::ProgressBar,
) -> (Strategy, u64) {
    let cfg = *memmap.config();
    let mut zone = HotplugZone::for_target(&cfg, 0, HotplugTarget::Normal).expect("a valid zone");
    let opts = OnlineOptions::new(strategy);
    let mut hooks = ProgressHooks::new(pb.clone(), START_PFN);
    let (mut pfn, end) = (START_PFN, START_PFN + nr);
    let (mut used, mut calls) = (strategy, 0);
    while pfn < end {
        let n = block.min(end - pfn);
        let r =
            memmap_core::online_pages(memmap, &mut zone, pfn, n, &opts, &mut hooks).expect("a checked range");
        if calls == 0 {
            used = r.used;
        }
        calls += 1;
        pfn += n;
    }
    (used, calls)
}

fn run(p: &Hotplug, ctx: &Context<'_>) -> Result<ScenarioReport, RunError> {
    let cfg = p.config;
    let nr = p.size >> cfg.page_shift;
    let block = cfg.pages_per_section();
    let rounds = ctx.common.rounds(ROUNDS);
    let phase = ctx.phase(NAME);
    phase.step(format!("{NAME}: map and fault in {} memmaps", STRATEGIES.len()));
    let grid = Grid::new(&[1], &STRATEGY_NAMES, FillKind::StructPage, rounds).weights(nr, nr / 4);
    let (memmaps, fault_ms) = paired::memmaps(NAME, STRATEGIES.len(), cfg, START_PFN, nr)?;
    let used: Vec<std::cell::Cell<(Strategy, u64)>> =
        STRATEGIES.iter().map(|&s| std::cell::Cell::new((s, 0))).collect();
    let pb = phase.bar().clone();
    phase.step(format!("{NAME}: {rounds} rounds"));
    let m = paired::measure(&grid, memmaps, ctx.limits, &phase, |i, owned| {
        let mut memmap = owned.memmap();
        let t = Instant::now();
        let u = online(&mut memmap, nr, block, STRATEGIES[i], &pb);
        let elapsed = t.elapsed();
        used[i].set(u);
        elapsed
    });
    phase.finish();
    assert!(m.identical(), "{NAME}: a memmap differs from the slow path's");
    let fault = crate::measure::median_f64(&fault_ms);
    let (auto_used, calls) = used[3].get();
    let description = format!(
        "online a {} hot-added range into ZONE_NORMAL ({nr} struct pages, {} of memmap), {calls} memory blocks of {} (one online_pages() each), free lists included, {rounds} rounds, 1 thread; auto chose {}; faulting one memmap in: {fault:.1} ms (not in \"first\")",
        Bytes(p.size),
        Bytes(nr * 64),
        Bytes(block * cfg.page_size()),
        auto_used.name(),
    );
    let spec = ScenarioSpec {
        name: NAME.into(),
        description,
        struct_pages: nr,
        bytes: nr * 64,
        threads: 1,
        limit: LimitKind::FillStructPage,
        figure: Figure::Bandwidth,
    };
    let mut sc = m.report(spec, ctx.limits, 0..STRATEGIES.len(), nr * 64);
    sc.extra.insert("hotplug_bytes".into(), p.size.into());
    sc.extra.insert("memory_block_bytes".into(), (block * cfg.page_size()).into());
    sc.extra.insert("online_pages_calls".into(), calls.into());
    sc.extra.insert("auto_used".into(), auto_used.name().into());
    sc.extra.insert("identical_to_slow".into(), true.into());
    sc.extra.insert("config".into(), cfg.name.into());
    sc.extra.insert("fault_ms".into(), fault.into());
    Ok(sc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenarios::scenario::Common;
    use crate::threads::AllCore;

    #[test]
    fn a_tiny_range_runs_every_strategy_against_the_limit() {
        let limits = crate::limits::measure(8 << 20, 2, &[1], &crate::progress::Phase::hidden()).unwrap();
        let common = Common {
            rounds: Some(2),
            progress: crate::progress::ProgressMode { enabled: false },
            quick: true,
        };
        let ctx = Context { common: &common, threads: AllCore::given(1), limits: &limits };
        let s = Hotplug { size: 256 << 20, fixed: true, config: KernelConfig::X86_64 };
        s.check().unwrap();
        let reports = s.run(&ctx).unwrap();
        assert_eq!(reports.len(), 1);
        let sc = &reports[0];
        let got: Vec<&str> = sc.results.iter().map(|r| r.strategy.as_str()).collect();
        assert_eq!(got, STRATEGY_NAMES);
        assert!(sc.paired && sc.limit == LimitKind::FillStructPage && sc.figure == Figure::Bandwidth);
        assert_eq!(sc.bytes, (256 << 20) / 4096 * 64);
        assert_eq!(sc.extra["online_pages_calls"], 2);
        assert!(sc.results.iter().all(|r| r.median_ms > 0.0 && r.x_limit > 0.0), "{}", sc.table(false));
        assert!(crate::scenarios::CATALOG.iter().any(|e| e.name == sc.name));
        assert!(Hotplug { size: 64 << 20, ..s.clone() }.check().is_err(), "half a section");
        assert!(Hotplug { size: 0, ..s }.check().is_err());
    }
}
