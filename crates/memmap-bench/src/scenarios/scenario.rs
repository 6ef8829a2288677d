//! What every scenario is and runs with: the [`Scenario`] trait, its catalog row
//! ([`CatalogEntry`]), what it is built from ([`Setup`]) and what it runs with ([`Context`]).

use std::fmt;

use memmap_core::{KernelConfig, Strategy};

use super::spec::{CommandSpec, Rounds, SizeSpec};
use crate::budget::Knob;
use crate::limits::Limits;
use crate::memory::{MemoryNeed, Overflow};
use crate::progress::{Phase, ProgressMode};
use crate::report::scenario::ScenarioReport;
use crate::threads::AllCore;

/// The library's strategies, baseline first: what the zone-device and hugetlb scenarios run.
pub const INIT_STRATEGIES: [Strategy; 3] = [Strategy::Slow, Strategy::Template, Strategy::Streaming];

/// Their names.
pub const INIT_STRATEGY_NAMES: [&str; 3] =
    [INIT_STRATEGIES[0].name(), INIT_STRATEGIES[1].name(), INIT_STRATEGIES[2].name()];

/// Settings shared by every scenario, as parsed.
#[derive(Debug, Clone)]
pub struct Common {
    /// Rounds per strategy (`None`: the scenario's default).
    pub rounds: Option<usize>,
    /// Progress bars.
    pub progress: ProgressMode,
    /// `--quick`: CI-sized.
    pub quick: bool,
}

impl Common {
    /// Rounds: `--rounds`, else the scenario's `default` (its quick one under `--quick`).
    #[must_use]
    pub fn rounds(&self, default: Rounds) -> usize {
        self.rounds.unwrap_or(if self.quick { default.quick } else { default.normal })
    }
}

/// What a scenario runs with: the shared settings, all-core count and this run's limits.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// Shared settings.
    pub common: &'a Common,
    /// The all-core count of the run ([`crate::threads::ThreadPolicy::resolve`]).
    pub threads: AllCore,
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
    /// The name its report carries (`zone-device-fsdax`, ...): a catalog name.
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

    /// Why the libraries cannot run this scenario on its configuration at all (a huge page size
    /// or HVO the configuration lacks, the node's 4 KiB page arena): the suite leaves it out and
    /// says why. `None` when it can.
    fn unsupported(&self) -> Option<String> {
        None
    }

    /// The parameter the suite may scale to fit the budget; `None`: it runs at its size or not.
    fn knob(&self) -> Option<Knob> {
        None
    }

    /// The same scenario with its knob at `value`; `None` if it has no knob.
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

/// What a scenario is built from: the size the user gave its command (`None`: the default,
/// which the suite may scale to the memory budget), `--quick`, the kernel config, and the
/// node layout the boot scenario boots instead of its synthetic zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    /// The size given (`--size`, `--count`, or the flag of `all`).
    pub size: Option<u64>,
    /// `--quick`: the CI-sized defaults.
    pub quick: bool,
    /// The kernel config modelled.
    pub config: KernelConfig,
    /// `--node-layout`: a real machine's node for the boot scenario.
    pub layout: Option<std::sync::Arc<crate::guest_layout::GuestLayout>>,
}

impl Setup {
    /// The size at its default.
    #[must_use]
    pub fn defaults(quick: bool, config: KernelConfig) -> Setup {
        Setup { size: None, quick, config, layout: None }
    }

    /// The size given, else `spec`'s default (or `--quick` one), and whether it was given.
    #[must_use]
    pub fn size(&self, spec: &SizeSpec) -> (u64, bool) {
        match self.size {
            Some(v) => (v, true),
            None => (if self.quick { spec.quick } else { spec.default }, false),
        }
    }
}

/// One row of the catalog: a scenario's static facts and how to build it.
#[derive(Debug, Clone, Copy)]
pub struct CatalogEntry {
    /// The name its report carries.
    pub name: &'static str,
    /// The subcommand that runs it (`all` runs every row).
    pub command: &'static CommandSpec,
    /// Under the command's pick flag: the value that picks it (`4K`), or for a switch its name
    /// when it runs with the switch (`None`: without it).
    pub pick: Option<&'static str>,
    /// Its strategies, baseline first (the schema's names).
    pub strategies: &'static [&'static str],
    /// Its rounds when `--rounds` is not given (the help lists them).
    pub rounds: Rounds,
    /// Builds the scenario.
    pub build: fn(&Setup) -> Box<dyn Scenario>,
}

impl CatalogEntry {
    /// The row of the scenario `name` that `command` runs, with its strategies and rounds,
    /// built by `build`.
    #[must_use]
    pub const fn new(
        name: &'static str,
        command: &'static CommandSpec,
        strategies: &'static [&'static str],
        rounds: Rounds,
        build: fn(&Setup) -> Box<dyn Scenario>,
    ) -> CatalogEntry {
        CatalogEntry { name, command, pick: None, strategies, rounds, build }
    }

    /// The same, run when the command's pick flag is `pick` (a switch: its name).
    #[must_use]
    pub const fn picked_by(self, pick: &'static str) -> CatalogEntry {
        CatalogEntry { pick: Some(pick), ..self }
    }
}
