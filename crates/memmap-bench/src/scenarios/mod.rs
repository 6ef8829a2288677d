//! The timing scenarios, as data: each is a [`Scenario`] (name, what it needs from memory, the
//! one parameter the suite may scale to fit the memory budget, how it runs, the report it
//! returns), and [`CATALOG`] lists every one the program knows in run order. `all`, the memory
//! budget, `--json` and `--plot` iterate that one list; a subcommand runs the entries of its
//! [`CatalogEntry::command`].
//!
//! Adding a scenario: a module here implementing [`Scenario`], a [`CatalogEntry`] in
//! [`CATALOG`], its size in [`Setup`], and a subcommand in `cli::args` if it has its own.
//!
//! Each scenario builds its storage, runs its strategies interleaved with
//! [`crate::measure::interleaved`], and returns [`ScenarioReport`]s: the zone-device, hugetlb
//! (without HVO) and clear scenarios return two, the kernel-faithful one-thread run and the
//! all-core run ([`Common::threads`] workers, through the libraries' parallel runners), whose
//! strategies run interleaved in the same rounds. Those three (and alloc-init-on-alloc) also
//! pair every round of every strategy with a run of the limit method of its thread count on
//! the strategy's own storage, right before it ([`crate::measure::interleaved_paired`],
//! [`calibrate`], [`limit_run`], [`ScenarioReport::paired`]), so each round is judged against
//! what that memory allows at that moment.
//!
//! ## What "first" measures
//!
//! Round 0 ("first") of every strategy starts from the same memory state: each strategy's
//! storage is mapped and faulted in (`MADV_POPULATE_WRITE`) before any round runs, so no
//! strategy pays for page faults, THP compaction or reclaim that another did not. The first
//! round is then the first initialization of resident memory with cold caches (in the paired
//! scenarios the limit run has just filled it with a non-initialized pattern, with streaming
//! stores or a large `memset`, so at most a last-level cache's worth of it is cached); the
//! cost of faulting the storage in is measured separately (`fault_ms` in the scenario's JSON
//! and its description line), once per strategy's storage, outside the rounds.

pub mod alloc;
pub mod clear;
pub mod deferred;
pub mod guest_memory;
pub mod hotplug;
pub mod hugetlb;
pub mod zone_device;

use std::fmt;

use memmap_core::{ClearMode, KernelConfig, Strategy, Threads};

use crate::budget::Knob;
use crate::limits::Limits;
use crate::memory::{MemoryNeed, Overflow};
use crate::progress::{Phase, ProgressMode};
use crate::report::ScenarioReport;

/// Settings shared by every scenario, as parsed.
#[derive(Debug, Clone)]
pub struct Common {
    /// Rounds per strategy (`None`: the scenario's default).
    pub rounds: Option<usize>,
    /// Workers of the all-core rows: `--threads N`, or `auto` (the count where bandwidth stops
    /// growing, [`memmap_core::auto_threads`]), resolved once before the run
    /// ([`Context::threads`]).
    pub threads: Threads,
    /// Progress bars.
    pub progress: ProgressMode,
    /// `--quick`: CI-sized.
    pub quick: bool,
}

impl Common {
    /// Rounds: `--rounds`, else `default` (or `quick` under `--quick`).
    #[must_use]
    pub fn rounds(&self, default: usize, quick: usize) -> usize {
        self.rounds.unwrap_or(if self.quick { quick } else { default })
    }
}

/// What a scenario runs with: the shared settings, the all-core count and the limits measured
/// in this run.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// Shared settings.
    pub common: &'a Common,
    /// Workers of the all-core rows, [`Common::threads`] resolved (1: none).
    pub threads: usize,
    /// The limits the results are compared with.
    pub limits: &'a Limits,
}

impl Context<'_> {
    /// The progress line of a scenario named `name`.
    #[must_use]
    pub fn phase(&self, name: &str) -> Phase {
        Phase::new(name, self.common.progress)
    }
}

/// The refusal of `what` (`device`, `zone`, `range`) of `size` bytes from `start_pfn` when it
/// ends past `config`'s pfns, with the largest size in whole `unit`s that would fit.
#[must_use]
pub fn past_the_pfns(what: &str, size: u64, start_pfn: u64, config: &KernelConfig, unit: u64) -> String {
    let max = config.max_pfn();
    let room = max.saturating_sub(start_pfn).saturating_mul(4096) / unit.max(1) * unit.max(1);
    format!(
        "a {} {what} from pfn {start_pfn:#x} ends past config {}'s pfns (below {max:#x}): at most {}",
        crate::size::Bytes(size),
        config.name,
        crate::size::Bytes(room)
    )
}

/// A scenario could not run: the storage could not be mapped or prepared.
#[derive(Debug)]
pub struct RunError {
    /// The scenario.
    pub scenario: &'static str,
    /// What failed (`map the memmap (256 MiB)`, ...).
    pub what: String,
    /// The OS error.
    pub source: std::io::Error,
}

impl RunError {
    /// A closure that wraps an `io::Error` of `what` in `scenario`.
    pub fn of(scenario: &'static str, what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RunError {
        let what = what.into();
        move |source| RunError { scenario, what, source }
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.scenario, self.what, self.source)
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// One timing scenario with its parameters.
pub trait Scenario {
    /// The name its report carries (`zone-device-fsdax`, ...): a [`CATALOG`] name.
    fn name(&self) -> &'static str;

    /// One line: what this instance runs (sizes included).
    fn description(&self) -> String;

    /// The memory it needs while it runs, computed with checked arithmetic.
    ///
    /// # Errors
    ///
    /// [`Overflow`] when the parameters ask for more than a 64-bit byte count.
    fn memory_needed(&self) -> Result<MemoryNeed, Overflow>;

    /// Checks the parameters beyond memory (alignment, PFN space, node count) before any work.
    ///
    /// # Errors
    ///
    /// A message naming the parameter.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }

    /// The parameter the suite may scale to fit the memory budget ([`crate::budget::fit`]);
    /// `None`: it runs at its size or not at all.
    fn knob(&self) -> Option<Knob> {
        None
    }

    /// The same scenario with its knob at `value` (a multiple of the knob's step); `None` if it
    /// has no knob.
    fn resized(&self, value: u64) -> Option<Box<dyn Scenario>> {
        let _ = value;
        None
    }

    /// Runs the scenario.
    ///
    /// # Errors
    ///
    /// When its storage cannot be mapped or prepared.
    fn run(&self, ctx: &Context<'_>) -> Result<Vec<ScenarioReport>, RunError>;
}

/// Everything a scenario can be built from: the sizes the user gave (`None`: the scenario's
/// default, which the suite may scale to the memory budget), `--quick`, the kernel config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    /// zone-device: device size in bytes (whole 2 MiB pages).
    pub zone_device_size: Option<u64>,
    /// hugetlb: number of 1 GiB pages.
    pub hugetlb_count: Option<u64>,
    /// clear and `clear --alloc`: bytes (whole 2 MiB pages).
    pub clear_size: Option<u64>,
    /// deferred: zone size in bytes (whole 4 KiB pages).
    pub deferred_size: Option<u64>,
    /// guest-memory: guest memory in bytes (two regions, a multiple of 4 MiB).
    pub guest_memory_size: Option<u64>,
    /// hotplug: hot-added memory in bytes (whole memory blocks, sections).
    pub hotplug_size: Option<u64>,
    /// `--quick`: the CI-sized defaults.
    pub quick: bool,
    /// The kernel config modelled.
    pub config: KernelConfig,
}

impl Setup {
    /// Every size at its default.
    #[must_use]
    pub fn defaults(quick: bool, config: KernelConfig) -> Setup {
        Setup {
            zone_device_size: None,
            hugetlb_count: None,
            clear_size: None,
            deferred_size: None,
            guest_memory_size: None,
            hotplug_size: None,
            quick,
            config,
        }
    }

    /// `given`, else `normal` (or `quick` under `--quick`), and whether it was given.
    #[must_use]
    pub fn pick(&self, given: Option<u64>, normal: u64, quick: u64) -> (u64, bool) {
        match given {
            Some(v) => (v, true),
            None => (if self.quick { quick } else { normal }, false),
        }
    }
}

/// One entry of the registry: a scenario's static facts and how to build it.
#[derive(Debug, Clone, Copy)]
pub struct CatalogEntry {
    /// The name its report carries.
    pub name: &'static str,
    /// The subcommand that runs it (`all` runs every entry).
    pub command: &'static str,
    /// Its strategies, baseline first (the schema's names).
    pub strategies: &'static [&'static str],
    /// Builds the scenario.
    pub build: fn(&Setup) -> Box<dyn Scenario>,
}

const INIT_STRATEGIES: &[&str] =
    &[Strategy::Slow.name(), Strategy::Template.name(), Strategy::Streaming.name()];

/// Every scenario, in run order.
pub const CATALOG: [CatalogEntry; 10] = [
    CatalogEntry {
        name: zone_device::Case::Fsdax.name(),
        command: "zone-device",
        strategies: INIT_STRATEGIES,
        build: |s| Box::new(zone_device::ZoneDevice::new(zone_device::Case::Fsdax, s)),
    },
    CatalogEntry {
        name: zone_device::Case::Devdax2m.name(),
        command: "zone-device",
        strategies: INIT_STRATEGIES,
        build: |s| Box::new(zone_device::ZoneDevice::new(zone_device::Case::Devdax2m, s)),
    },
    CatalogEntry {
        name: hugetlb::name(false),
        command: "hugetlb",
        strategies: INIT_STRATEGIES,
        build: |s| Box::new(hugetlb::Hugetlb::new(false, s)),
    },
    CatalogEntry {
        name: hugetlb::name(true),
        command: "hugetlb",
        strategies: INIT_STRATEGIES,
        build: |s| Box::new(hugetlb::Hugetlb::new(true, s)),
    },
    CatalogEntry {
        name: clear::NAME,
        command: "clear",
        strategies: clear::STRATEGIES,
        build: |s| Box::new(clear::Clear::new(s)),
    },
    CatalogEntry {
        name: alloc::NAME,
        command: "clear",
        strategies: &[ClearMode::PerPage.name(), ClearMode::Batch.name()],
        build: |s| Box::new(alloc::Alloc::new(s)),
    },
    CatalogEntry {
        name: deferred::NAME,
        command: "deferred",
        strategies: &deferred::STRATEGY_NAMES,
        build: |s| Box::new(deferred::Deferred::new(s)),
    },
    CatalogEntry {
        name: hotplug::NAME,
        command: "hotplug",
        strategies: &hotplug::STRATEGY_NAMES,
        build: |s| Box::new(hotplug::Hotplug::new(s)),
    },
    CatalogEntry {
        name: guest_memory::POPULATE,
        command: "guest-memory",
        strategies: guest_memory::POPULATE_STRATEGIES,
        build: |s| Box::new(guest_memory::GuestMemory::new(s, guest_memory::Part::Populate)),
    },
    CatalogEntry {
        name: guest_memory::RESET,
        command: "guest-memory",
        strategies: guest_memory::RESET_STRATEGIES,
        build: |s| Box::new(guest_memory::GuestMemory::new(s, guest_memory::Part::Reset)),
    },
];

/// The report's JSON Schema with the catalog's scenario and strategy names
/// ([`crate::report::schema::json_schema`]): the content of
/// `crates/memmap-bench/schema/report.schema.json`.
#[must_use]
pub fn report_schema() -> serde_json::Value {
    let names: Vec<&str> = CATALOG.iter().map(|e| e.name).collect();
    let mut strategies: Vec<&str> = Vec::new();
    for s in CATALOG.iter().flat_map(|e| e.strategies) {
        if !strategies.contains(s) {
            strategies.push(s);
        }
    }
    crate::report::schema::json_schema(&names, &strategies)
}

/// [`report_schema`] as the checked-in text.
#[must_use]
pub fn report_schema_text() -> String {
    crate::report::schema::schema_text(&report_schema())
}

/// The registry: every scenario of [`CATALOG`] for which `select` is true, built from `setup`,
/// in run order.
#[must_use]
pub fn registry(setup: &Setup, select: impl Fn(&CatalogEntry) -> bool) -> Vec<Box<dyn Scenario>> {
    CATALOG.iter().filter(|e| select(e)).map(|e| (e.build)(setup)).collect()
}

/// Faults `o`'s storage in and returns the time it took (the fault cost "first" no longer
/// includes).
///
/// # Errors
///
/// The `madvise` error.
pub fn prefault<P: memmap_core::StructPage>(o: &mut memmap_core::OwnedMemmap<P>) -> std::io::Result<f64> {
    let t = std::time::Instant::now();
    o.populate()?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

/// The limit methods for a scenario's paired limit runs ([`ScenarioReport::paired`]): the two
/// best methods of `kind` at `threads` on `bytes` (a scenario's own storage;
/// [`crate::limits::best_on`]). Empty for storage that is
/// not whole, page-aligned pages (no limit run can use it).
pub fn calibrate(
    limits: &Limits,
    kind: crate::limits::FillKind,
    threads: usize,
    bytes: &mut [u8],
) -> Vec<String> {
    if !whole_pages(bytes) {
        return Vec::new();
    }
    // SAFETY: `bytes` is exclusively borrowed for the call, page-aligned whole pages (checked).
    unsafe { crate::limits::best_on(limits, kind, threads, bytes.as_mut_ptr(), bytes.len()) }
}

/// One paired limit run over `bytes` (the storage of the strategy that runs next): each of
/// `methods` ([`calibrate`]) once, starting with the one `round` selects; the fastest counts.
/// Zero for storage that is not whole, page-aligned pages.
pub fn limit_run(
    methods: &[String],
    kind: crate::limits::FillKind,
    threads: usize,
    round: usize,
    bytes: &mut [u8],
) -> std::time::Duration {
    if !whole_pages(bytes) {
        return std::time::Duration::ZERO;
    }
    // SAFETY: as in `calibrate`.
    unsafe { crate::limits::run_fastest(methods, kind, threads, round, bytes.as_mut_ptr(), bytes.len()) }
}

/// Whether `bytes` is whole 4 KiB pages at a page-aligned address (what the limit methods need).
fn whole_pages(bytes: &[u8]) -> bool {
    bytes.as_ptr().addr() % 4096 == 0 && bytes.len() % 4096 == 0 && !bytes.is_empty()
}

/// The thread counts a scenario runs: 1, and `threads` when it is more.
#[must_use]
pub fn thread_counts(threads: usize) -> Vec<usize> {
    if threads > 1 { vec![1, threads] } else { vec![1] }
}
