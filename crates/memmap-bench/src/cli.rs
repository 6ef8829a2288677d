//! The command line: clap types, their validation into an [`Invocation`] (every size and every
//! memory need checked before any work), and running it.
//!
//! Each subcommand accepts only the flags it uses: the timing flags (`--json`, `--plot`,
//! `--quick`, `--threads`, `--rounds`, `--config`, `--no-progress`) belong to the timing
//! commands (`all`, which is also what runs without a subcommand, `zone-device`, `hugetlb`,
//! `clear`, `deferred`; `limits` takes `--quick` and `--json`), and go after the subcommand;
//! `dump` takes its own `--config` and `--force`; `diff` takes two directories.
//!
//! Values of domain enums (`--strategy`, `--memory-type`, `--hstate`, `--hvo`, `--config`) are
//! parsed by one adapter, [`named`], from the enums' own `ALL`/`name`/`from_name`.
//!
//! Exit status: 0 success (or identical dumps), 1 dumps differ or the machine failed (a
//! mapping refused after the checks), 2 bad input. A panic (101) on any input is a bug.

use std::ffi::OsString;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::{PossibleValue, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use hugetlb_init::{Hstate, HvoMode};
use memmap_core::{KernelConfig, MemoryType, Strategy};

use crate::diff::{DiffError, diff_dumps};
use crate::dump::{DumpError, HugetlbDump, OutputDir, ZoneDeviceDump, open_dump};
use crate::limits;
use crate::machine::Machine;
use crate::memory::{self, MemInfo};
use crate::report::{REPORT_FORMAT, Report};
use crate::scenarios::{self, CatalogEntry, Common, Context, Scenario, Setup, zone_device};
use crate::size::{PAGE_SIZE, SizeError, parse_pages};

/// A domain enum the command line names values of: every value, each one's name, and the
/// inverse. Implemented from the enums' own `ALL`, `name()` and `from_name()`.
pub trait Named: Sized + Clone + Send + Sync + 'static {
    /// Every value, in the order help lists them.
    fn all() -> &'static [Self];
    /// The value's command-line name.
    fn name(&self) -> &'static str;
    /// The value named `s`.
    fn from_name(s: &str) -> Option<Self>;
}

impl Named for Strategy {
    fn all() -> &'static [Self] {
        &Strategy::ALL
    }
    fn name(&self) -> &'static str {
        Strategy::name(*self)
    }
    fn from_name(s: &str) -> Option<Self> {
        Strategy::from_name(s)
    }
}

impl Named for MemoryType {
    fn all() -> &'static [Self] {
        &MemoryType::ALL
    }
    fn name(&self) -> &'static str {
        MemoryType::name(*self)
    }
    fn from_name(s: &str) -> Option<Self> {
        MemoryType::from_name(s)
    }
}

impl Named for Hstate {
    fn all() -> &'static [Self] {
        &Hstate::ALL
    }
    fn name(&self) -> &'static str {
        Hstate::name(*self)
    }
    fn from_name(s: &str) -> Option<Self> {
        Hstate::from_name(s)
    }
}

impl Named for HvoMode {
    fn all() -> &'static [Self] {
        &HvoMode::ALL
    }
    fn name(&self) -> &'static str {
        HvoMode::name(*self)
    }
    fn from_name(s: &str) -> Option<Self> {
        HvoMode::from_name(s)
    }
}

impl Named for KernelConfig {
    fn all() -> &'static [Self] {
        &KernelConfig::PRESETS
    }
    fn name(&self) -> &'static str {
        self.name
    }
    fn from_name(s: &str) -> Option<Self> {
        KernelConfig::preset(s)
    }
}

/// The clap value parser of a [`Named`] enum: accepts exactly the names, lists them in help
/// and in the error for anything else.
#[derive(Debug)]
pub struct NamedParser<T>(PhantomData<fn() -> T>);

impl<T> Clone for NamedParser<T> {
    fn clone(&self) -> Self {
        NamedParser(PhantomData)
    }
}

/// [`NamedParser`] for `T`.
#[must_use]
pub fn named<T: Named>() -> NamedParser<T> {
    NamedParser(PhantomData)
}

impl<T: Named> TypedValueParser for NamedParser<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        let names = clap::builder::PossibleValuesParser::new(T::all().iter().map(Named::name));
        let s = names.parse_ref(cmd, arg, value)?;
        T::from_name(&s).ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(T::all().iter().map(|v| PossibleValue::new(v.name()))))
    }
}

fn size_2m(s: &str) -> Result<u64, SizeError> {
    parse_pages(s, 2 << 20)
}

fn size_4k(s: &str) -> Result<u64, SizeError> {
    parse_pages(s, PAGE_SIZE)
}

fn size_4m(s: &str) -> Result<u64, SizeError> {
    parse_pages(s, scenarios::guest_memory::SIZE_UNIT)
}

/// A PFN: decimal or `0x` hexadecimal.
fn kernel_version(s: &str) -> Result<memmap_core::KernelVersion, String> {
    memmap_core::KernelVersion::parse(s)
        .ok_or_else(|| format!("bad kernel release {s:?} (MAJOR.MINOR, e.g. 6.12 or 7.2)"))
}

fn pfn(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("bad number {s:?}: {e} (decimal, or hexadecimal with 0x)"))
}

/// Reproduces the linux-mm memmap-init experiments side by side against this machine's
/// measured fill limit. Without a subcommand, runs the whole suite (`all`).
#[derive(Debug, Parser)]
#[command(name = "memmap-bench", version, about, long_about = None, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Without a subcommand: `all`'s options.
    #[command(flatten)]
    all: AllArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Every scenario, then one summary table (the default).
    All(AllArgs),
    /// memmap_init_zone_device: nd_pmem (fsdax, 4K) and dax_pmem (devdax, 2M compound pages).
    ZoneDevice(ZoneDeviceArgs),
    /// Boot-time 1 GiB pages: fallback tail init with HVO off (seed 002), and HVO on.
    Hugetlb(HugetlbArgs),
    /// init_on_alloc clearing of 2 MiB pages: page by page versus one clear_pages call.
    Clear(ClearArgs),
    /// Boot-time struct page init of a 64 GiB zone: eager, deferred, on-demand; allocator check cost.
    Deferred(DeferredArgs),
    /// Guest memory for VMMs: populate (against Cloud Hypervisor's prefault) and reset.
    GuestMemory(GuestMemoryArgs),
    /// The machine's fill limits (zero and non-zero data) and copy bandwidth.
    Limits(LimitsArgs),
    /// Write a memmap to DIR/memmap.bin and DIR/meta.json (refuses to overwrite without --force).
    Dump {
        #[command(subcommand)]
        kind: DumpKind,
    },
    /// Compare two dumps: prints the first differing pfn and field; exit status 1 if they differ.
    Diff {
        /// First dump directory.
        a: PathBuf,
        /// Second dump directory.
        b: PathBuf,
    },
}

/// The timing commands' flags.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Timing options")]
struct TimingArgs {
    /// Print the report as JSON on stdout (tables and progress go to stderr).
    #[arg(long)]
    json: bool,
    /// CI-sized run: the same suite at sizes that finish in under 30 seconds.
    #[arg(long)]
    quick: bool,
    /// Write an SVG bar chart of GB/s per strategy against the limit.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Workers of the all-core rows (each scenario also runs the kernel-faithful one-thread
    /// row): N, or auto (the count where bandwidth stops growing on this machine, at most the
    /// CPUs available). 1 leaves the all-core rows out.
    #[arg(long, default_value = "auto", value_name = "N|auto", value_parser = threads_arg)]
    threads: memmap_core::Threads,
    /// Rounds per strategy (default: 30 for zone-device as in the seeds, 15 for deferred, 9 for hugetlb, 7 for clear, 5 for the others).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    rounds: Option<u32>,
    /// Kernel config preset modelled by the timing scenarios.
    #[arg(long, default_value = "x86_64", value_parser = named::<KernelConfig>())]
    config: KernelConfig,
    /// No progress bars.
    #[arg(long)]
    no_progress: bool,
}

#[derive(Debug, Args, Clone)]
struct AllArgs {
    /// zone-device device size, whole 2 MiB pages (default 16G; 100G reproduces the seeds' namespace).
    #[arg(long, value_name = "SIZE", value_parser = size_2m)]
    zone_device_size: Option<u64>,
    /// clear size, whole 2 MiB pages (default 16G).
    #[arg(long, value_name = "SIZE", value_parser = size_2m)]
    clear_size: Option<u64>,
    /// hugetlb: number of 1 GiB pages (default 64, as in seed 002).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    hugetlb_count: Option<u64>,
    /// deferred zone size, whole 4 KiB pages (default 64G).
    #[arg(long, value_name = "SIZE", value_parser = size_4k)]
    deferred_size: Option<u64>,
    /// guest-memory size, a multiple of 4 MiB (default 4G).
    #[arg(long, value_name = "SIZE", value_parser = size_4m)]
    guest_memory_size: Option<u64>,
    #[command(flatten)]
    timing: TimingArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum HvoChoice {
    On,
    Off,
    Both,
}

#[derive(Debug, Args)]
struct HugetlbArgs {
    /// Number of 1 GiB pages (default 64, as in seed 002).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// HVO off (the seed's case), on, or both.
    #[arg(long, default_value = "both")]
    hvo: HvoChoice,
    #[command(flatten)]
    timing: TimingArgs,
}

#[derive(Debug, Args)]
struct ZoneDeviceArgs {
    /// Namespace size, whole 2 MiB pages (default 16G; 100G reproduces the seeds).
    #[arg(long, value_name = "SIZE", value_parser = size_2m)]
    size: Option<u64>,
    /// Only one case (default: both): 4K (fsdax, nd_pmem) or 2M (devdax, dax_pmem).
    #[arg(long, value_parser = named::<zone_device::Case>())]
    align: Option<zone_device::Case>,
    #[command(flatten)]
    timing: TimingArgs,
}

#[derive(Debug, Args)]
struct ClearArgs {
    /// Memory to clear, whole 2 MiB pages (default 16G).
    #[arg(long, value_name = "SIZE", value_parser = size_2m)]
    size: Option<u64>,
    /// Allocate through the buddy allocator with init_on_alloc (batch versus per page) instead
    /// of clearing a flat arena.
    #[arg(long)]
    alloc: bool,
    #[command(flatten)]
    timing: TimingArgs,
}

#[derive(Debug, Args)]
struct DeferredArgs {
    /// Zone size, whole 4 KiB pages (default 64G: 1 GiB of struct pages).
    #[arg(long, value_name = "SIZE", value_parser = size_4k)]
    size: Option<u64>,
    #[command(flatten)]
    timing: TimingArgs,
}

#[derive(Debug, Args)]
struct GuestMemoryArgs {
    /// Guest memory, in two regions, a multiple of 4 MiB (default 4G).
    #[arg(long, value_name = "SIZE", value_parser = size_4m)]
    size: Option<u64>,
    #[command(flatten)]
    timing: TimingArgs,
}

#[derive(Debug, Args)]
struct LimitsArgs {
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// A 256 MiB buffer and 3 rounds instead of 1 GiB and 7.
    #[arg(long)]
    quick: bool,
}

#[derive(Debug, Subcommand)]
enum DumpKind {
    /// memmap_init_zone_device of one device range.
    ZoneDevice(DumpZoneDeviceArgs),
    /// Boot-time gigantic pages (real memfd-backed HVO on Linux).
    Hugetlb(DumpHugetlbArgs),
}

/// Options every dump takes.
#[derive(Debug, Args)]
struct DumpCommon {
    /// struct page layout: 64 bytes, or 72 with WANT_PAGE_VIRTUAL.
    #[arg(long, default_value = "64", value_parser = clap::builder::PossibleValuesParser::new(["64", "72"]).map(|s| if s == "72" { 72u32 } else { 64u32 }))]
    layout: u32,
    /// Strategy.
    #[arg(long, default_value = "auto", value_parser = named::<Strategy>())]
    strategy: Strategy,
    /// Enable CONFIG_DEBUG_PAGE_REF and the page_ref_set tracepoint.
    #[arg(long)]
    page_ref_trace: bool,
    /// Kernel config preset: the architecture, and the release and options unless --kernel
    /// or --kconfig say otherwise.
    #[arg(long, default_value = "x86_64", value_parser = named::<KernelConfig>())]
    config: KernelConfig,
    /// Model this kernel release (MAJOR.MINOR, e.g. 6.12 or 7.2) instead of the preset's.
    #[arg(long, value_name = "RELEASE", value_parser = kernel_version)]
    kernel: Option<memmap_core::KernelVersion>,
    /// Apply a kernel's .config (the options that shape struct page) to the preset.
    #[arg(long, value_name = "FILE")]
    kconfig: Option<PathBuf>,
    /// Output directory (created if absent).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Replace an existing dump in DIR.
    #[arg(long)]
    force: bool,
}

#[derive(Debug, Args)]
struct DumpHugetlbArgs {
    /// Huge page size.
    #[arg(long, value_parser = named::<Hstate>())]
    hstate: Hstate,
    /// Pages per node.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    count: u64,
    /// Nodes.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    nodes: u32,
    /// HVO: on, off (hugetlb_free_vmemmap=off) or fail (injected allocation failure).
    #[arg(long, default_value = "on", value_parser = named::<HvoMode>())]
    hvo: HvoMode,
    /// Zone index of the memory the pages come from (default ZONE_NORMAL: 2 with DMA and
    /// DMA32; a 2 MiB page below 4 GiB on x86-64 is in DMA32, 1, and on arm64 in DMA, 0).
    #[arg(long)]
    zone: Option<u32>,
    /// The pages were allocated at run time (nr_hugepages), not at boot: from Linux 7.1 the
    /// shared tail page of HVO is then a fresh zeroed page.
    #[arg(long)]
    runtime: bool,
    #[command(flatten)]
    common: DumpCommon,
}

#[derive(Debug, Args)]
struct DumpZoneDeviceArgs {
    /// pgmap->type.
    #[arg(long, value_parser = named::<MemoryType>())]
    memory_type: MemoryType,
    /// Number of pages (pfns) in the range.
    #[arg(long)]
    pages: u64,
    /// Compound pages of 1 << S base pages.
    #[arg(long, default_value_t = 0)]
    vmemmap_shift: u32,
    /// altmap reserve (pfns); an altmap is used when either altmap option is given.
    #[arg(long)]
    altmap_reserve: Option<u64>,
    /// altmap free (pfns).
    #[arg(long)]
    altmap_free: Option<u64>,
    /// First pfn (decimal, or hexadecimal with 0x).
    #[arg(long, default_value = "0x100000", value_parser = pfn)]
    start_pfn: u64,
    /// Node id.
    #[arg(long, default_value_t = 0)]
    nid: u32,
    /// End of boot memory (pfn): the sections below it are early sections whose memmap is
    /// not deduplicated (device memory sharing a section with boot RAM).
    #[arg(long, default_value = "0", value_parser = pfn)]
    boot_memory_end: u64,
    #[command(flatten)]
    common: DumpCommon,
}

/// The configuration a dump models: the preset, with the `.config` and the release applied.
fn dump_config(c: &DumpCommon) -> Result<KernelConfig, CliError> {
    let mut cfg = c.config;
    if let Some(path) = &c.kconfig {
        let text = std::fs::read_to_string(path)
            .map_err(|e| CliError::Usage(format!("--kconfig {}: {e}", path.display())))?;
        cfg = cfg
            .with_kconfig(&memmap_core::model::kconfig::Kconfig::new(&text))
            .map_err(|e| CliError::Usage(format!("--kconfig {}: {e}", path.display())))?;
    }
    if let Some(v) = c.kernel {
        cfg = cfg.with_version(v);
    }
    Ok(cfg)
}

/// A timing run: which scenarios, with what.
pub struct Suite {
    /// The scenarios, in run order (empty for `limits`).
    pub scenarios: Vec<Box<dyn Scenario>>,
    /// Shared settings.
    pub common: Common,
    /// Bytes of each of the limit probe's two buffers.
    pub limit_buffer: u64,
    /// Rounds of the limit probe.
    pub limit_rounds: usize,
    /// `--json`.
    pub json: bool,
    /// `--plot FILE`.
    pub plot: Option<PathBuf>,
    /// `limits`: measure the limits only.
    pub limits_only: bool,
}

impl std::fmt::Debug for Suite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> = self.scenarios.iter().map(|s| s.name()).collect();
        f.debug_struct("Suite")
            .field("scenarios", &names)
            .field("common", &self.common)
            .finish_non_exhaustive()
    }
}

/// A validated command line: nothing in it can fail for lack of memory or a bad size.
#[derive(Debug)]
pub enum Invocation {
    /// A timing command.
    Suite(Suite),
    /// `dump zone-device`.
    DumpZoneDevice(ZoneDeviceDump, PathBuf, bool),
    /// `dump hugetlb`.
    DumpHugetlb(HugetlbDump, PathBuf, bool),
    /// `diff A B`.
    Diff(PathBuf, PathBuf),
}

/// Why a command line was refused.
#[derive(Debug)]
pub enum CliError {
    /// clap's own error (also `--help` and `--version`, which it prints with status 0).
    Clap(clap::Error),
    /// A check after parsing failed (exit status 2).
    Usage(String),
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Clap(e) => write!(f, "{e}"),
            CliError::Usage(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for CliError {}

/// Parses and validates `args` (the program name first) against the machine `info`: every
/// size and memory need is checked here, before any work.
///
/// # Errors
///
/// [`CliError`].
pub fn parse<I, T>(args: I, info: &MemInfo) -> Result<Invocation, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = Cli::try_parse_from(args).map_err(CliError::Clap)?;
    let usage = CliError::Usage;
    match cli.command {
        None => suite(&cli.all, |_| true, info),
        Some(Command::All(a)) => suite(&a, |_| true, info),
        Some(Command::ZoneDevice(a)) => {
            let all = AllArgs { zone_device_size: a.size, ..AllArgs::none(a.timing) };
            suite(&all, |e| e.command == "zone-device" && a.align.is_none_or(|c| e.name == c.name()), info)
        }
        Some(Command::Hugetlb(a)) => {
            let all = AllArgs { hugetlb_count: a.count, ..AllArgs::none(a.timing) };
            let want = |name: &str| match a.hvo {
                HvoChoice::Off => name == scenarios::hugetlb::name(false),
                HvoChoice::On => name == scenarios::hugetlb::name(true),
                HvoChoice::Both => true,
            };
            suite(&all, |e| e.command == "hugetlb" && want(e.name), info)
        }
        Some(Command::Clear(a)) => {
            let all = AllArgs { clear_size: a.size, ..AllArgs::none(a.timing) };
            let name = if a.alloc { scenarios::alloc::NAME } else { scenarios::clear::NAME };
            suite(&all, |e| e.name == name, info)
        }
        Some(Command::Deferred(a)) => {
            let all = AllArgs { deferred_size: a.size, ..AllArgs::none(a.timing) };
            suite(&all, |e| e.command == "deferred", info)
        }
        Some(Command::GuestMemory(a)) => {
            let all = AllArgs { guest_memory_size: a.size, ..AllArgs::none(a.timing) };
            suite(&all, |e| e.command == "guest-memory", info)
        }
        Some(Command::Limits(a)) => {
            let timing = TimingArgs { json: a.json, quick: a.quick, ..TimingArgs::default() };
            let mut s = suite(&AllArgs::none(timing), |_| false, info)?;
            if let Invocation::Suite(s) = &mut s {
                s.limits_only = true;
            }
            Ok(s)
        }
        Some(Command::Dump { kind: DumpKind::ZoneDevice(a) }) => {
            let c = &a.common;
            let altmap = (a.altmap_reserve.is_some() || a.altmap_free.is_some())
                .then(|| (a.altmap_reserve.unwrap_or(0), a.altmap_free.unwrap_or(0)));
            let opts = ZoneDeviceDump {
                config: dump_config(c)?,
                layout72: c.layout == 72,
                memory_type: a.memory_type,
                vmemmap_shift: a.vmemmap_shift,
                altmap,
                start_pfn: a.start_pfn,
                nr_pages: a.pages,
                nid: a.nid,
                strategy: c.strategy,
                page_ref_trace: c.page_ref_trace,
                boot_memory_end_pfn: a.boot_memory_end,
            };
            let need = opts.memory_needed().map_err(|e| usage(memory::MemoryError::from(e).to_string()))?;
            memory::check("the dump", &need, info).map_err(|e| usage(e.to_string()))?;
            Ok(Invocation::DumpZoneDevice(opts, c.out.clone(), c.force))
        }
        Some(Command::Dump { kind: DumpKind::Hugetlb(a) }) => {
            let c = &a.common;
            let config = dump_config(c)?;
            let opts = HugetlbDump {
                runtime: a.runtime,
                zone: a.zone.unwrap_or(config.zone_device().saturating_sub(2)),
                config,
                layout72: c.layout == 72,
                hstate: a.hstate,
                count: a.count,
                nodes: a.nodes,
                hvo: a.hvo,
                strategy: c.strategy,
                page_ref_trace: c.page_ref_trace,
            };
            let need = opts.memory_needed().map_err(|e| usage(memory::MemoryError::from(e).to_string()))?;
            memory::check("the dump", &need, info).map_err(|e| usage(e.to_string()))?;
            Ok(Invocation::DumpHugetlb(opts, c.out.clone(), c.force))
        }
        Some(Command::Diff { a, b }) => Ok(Invocation::Diff(a, b)),
    }
}

impl Default for TimingArgs {
    fn default() -> Self {
        TimingArgs {
            json: false,
            quick: false,
            plot: None,
            threads: memmap_core::Threads::Auto,
            rounds: None,
            config: KernelConfig::X86_64,
            no_progress: false,
        }
    }
}

impl AllArgs {
    fn none(timing: TimingArgs) -> Self {
        AllArgs {
            zone_device_size: None,
            clear_size: None,
            hugetlb_count: None,
            deferred_size: None,
            guest_memory_size: None,
            timing,
        }
    }
}

/// Builds and checks the suite of the registry's entries that `select` picks.
fn suite(
    a: &AllArgs,
    select: impl Fn(&CatalogEntry) -> bool,
    info: &MemInfo,
) -> Result<Invocation, CliError> {
    let t = &a.timing;
    let d = Setup::defaults(t.quick, t.config);
    let setup = Setup {
        zone_device_size: a.zone_device_size.unwrap_or(d.zone_device_size),
        hugetlb_count: a.hugetlb_count.unwrap_or(d.hugetlb_count),
        clear_size: a.clear_size.unwrap_or(d.clear_size),
        deferred_size: a.deferred_size.unwrap_or(d.deferred_size),
        guest_memory_size: a.guest_memory_size.unwrap_or(d.guest_memory_size),
        ..d
    };
    let scenarios = scenarios::registry(&setup, select);
    let limit_buffer: u64 = if t.quick { 256 << 20 } else { 1 << 30 };
    // The limit probe runs first and frees its buffers; then the scenarios run one after the
    // other, each freeing its storage before the next: each need is checked on its own.
    memory::check("the limit probe", &limits::memory_needed(limit_buffer), info)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    for s in &scenarios {
        s.check().map_err(|e| CliError::Usage(format!("{}: {e}", s.name())))?;
        let need = s
            .memory_needed()
            .map_err(|e| CliError::Usage(format!("{}: {e}: use a smaller size", s.name())))?;
        memory::check(s.name(), &need, info).map_err(|e| CliError::Usage(e.to_string()))?;
    }
    Ok(Invocation::Suite(Suite {
        scenarios,
        common: Common {
            rounds: t.rounds.map(|r| r as usize),
            threads: match t.threads {
                memmap_core::Threads::One => 1,
                memmap_core::Threads::Fixed(n) => n,
                // Measured when the suite runs (`run_suite`), not while parsing.
                memmap_core::Threads::Auto => 0,
            },
            progress: !t.no_progress && !t.json,
            quick: t.quick,
        },
        limit_buffer,
        limit_rounds: if t.quick { 3 } else { 5 },
        json: t.json,
        plot: t.plot.clone(),
        limits_only: false,
    }))
}

/// `--threads`: `auto` or a count from 1 to 1024.
fn threads_arg(s: &str) -> Result<memmap_core::Threads, String> {
    match memmap_core::Threads::from_name(s) {
        Some(memmap_core::Threads::Fixed(n)) if n > 1024 => Err(format!("{n} is not in 1..=1024")),
        Some(t) => Ok(t),
        None => Err(format!("`{s}` is neither `auto` nor a thread count in 1..=1024")),
    }
}

/// The program: parses `args`, checks them against this machine, runs.
#[must_use]
pub fn main<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    match parse(args, &MemInfo::read()) {
        Ok(inv) => execute(inv),
        Err(CliError::Clap(e)) => e.exit(),
        Err(CliError::Usage(m)) => {
            eprintln!("error: {m}");
            ExitCode::from(2)
        }
    }
}

/// Runs a validated invocation.
#[must_use]
pub fn execute(inv: Invocation) -> ExitCode {
    match inv {
        Invocation::Suite(s) => run_suite(&s),
        Invocation::DumpZoneDevice(opts, dir, force) => {
            let r =
                OutputDir::prepare(&dir, force).and_then(|out| crate::dump::dump_zone_device(&opts, &out));
            dumped(r, &dir, None)
        }
        Invocation::DumpHugetlb(opts, dir, force) => {
            let r = OutputDir::prepare(&dir, force).and_then(|out| crate::dump::dump_hugetlb(&opts, &out));
            let folios = r
                .as_ref()
                .ok()
                .map(|m| m.detail.get("folios").and_then(|f| f.as_array()).map_or(0, Vec::len));
            dumped(r, &dir, folios)
        }
        Invocation::Diff(a, b) => {
            let opened = open_dump(&a).and_then(|da| open_dump(&b).map(|db| (da, db)));
            let (mut da, mut db) = match opened {
                Ok(p) => p,
                Err(e) => return fail(&e, e.exit_code()),
            };
            match diff_dumps(&mut da, &mut db) {
                Ok(r) => {
                    println!("{r}");
                    ExitCode::from(r.exit_code())
                }
                Err(e @ (DiffError::Incomparable(_) | DiffError::Read(_))) => fail(&e, 2),
            }
        }
    }
}

fn fail(e: &dyn std::fmt::Display, code: u8) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(code)
}

fn dumped(
    r: Result<crate::dump::DumpMeta, DumpError>,
    dir: &std::path::Path,
    folios: Option<usize>,
) -> ExitCode {
    match r {
        Ok(meta) => {
            let of = folios.map_or(String::new(), |n| format!(" of {n} folio(s)"));
            println!(
                "wrote {} struct pages ({} bytes each){of} to {}: strategy {} ({})",
                meta.nr_pages,
                meta.struct_page_size,
                dir.display(),
                meta.strategy,
                meta.strategy_reason
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e, e.exit_code()),
    }
}

fn run_suite(s: &Suite) -> ExitCode {
    let human = |text: &str| {
        if s.json {
            eprint!("{text}");
        } else {
            print!("{text}");
        }
    };
    // `--threads auto`: the count is measured now, once (memmap-core caches it).
    let mut common = s.common.clone();
    if common.threads == 0 {
        common.threads = memmap_core::auto_threads();
    }
    let limits = match limits::measure(s.limit_buffer, s.limit_rounds, &[common.threads]) {
        Ok(l) => l,
        Err(e) => return fail(&format!("map the limit probe's buffers: {e}"), 1),
    };
    let auto = memmap_core::parallel::auto_probe_if_measured();
    let mut report = Report {
        format: REPORT_FORMAT,
        machine: Machine::detect(),
        all_core_threads: common.threads,
        auto_threads: auto.map(|p| crate::report::AutoThreads {
            steps: p.steps.iter().map(|&(threads, gbps)| crate::report::AutoStep { threads, gbps }).collect(),
            threads: p.threads,
        }),
        limits,
        scenarios: Vec::new(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        quick: s.common.quick,
    };
    human(&report.header());
    human("\n");
    if !s.limits_only {
        let limits = report.limits.clone();
        let ctx = Context { common: &common, limits: &limits };
        for sc in &s.scenarios {
            match sc.run(&ctx) {
                Ok(rows) => {
                    for mut r in rows {
                        r.refresh_measurement_errors();
                        human(&r.table());
                        human("\n");
                        report.scenarios.push(r);
                    }
                }
                Err(e) => return fail(&e, 1),
            }
        }
        human(&report.summary());
    }
    if let Some(path) = &s.plot {
        if let Err(e) = report.plot(path) {
            return fail(&e, 1);
        }
        human(&format!("plot written to {}\n", path.display()));
    }
    if s.json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => return fail(&e, 1),
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> MemInfo {
        MemInfo {
            available: Some(20 << 30),
            total: Some(24 << 30),
            swap_total: Some(0),
            commit_limit: Some(12 << 30),
            committed: Some(1 << 30),
            overcommit: Some(0),
            rlimit_as: None,
        }
    }

    fn names(args: &[&str]) -> Vec<&'static str> {
        match parse(std::iter::once("memmap-bench").chain(args.iter().copied()), &machine()) {
            Ok(Invocation::Suite(s)) => s.scenarios.iter().map(|s| s.name()).collect(),
            other => panic!("{args:?}: {other:?}"),
        }
    }

    fn refused(args: &[&str]) -> String {
        match parse(std::iter::once("memmap-bench").chain(args.iter().copied()), &machine()) {
            Err(e) => e.to_string(),
            Ok(i) => panic!("{args:?} accepted: {i:?}"),
        }
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn subcommands_select_from_the_registry() {
        assert_eq!(names(&["--quick"]), scenarios::CATALOG.map(|e| e.name));
        assert_eq!(names(&["all", "--quick"]).len(), 9);
        assert_eq!(names(&["zone-device", "--size", "64M"]), ["zone-device-fsdax", "zone-device-devdax-2m"]);
        assert_eq!(names(&["zone-device", "--align", "2M"]), ["zone-device-devdax-2m"]);
        assert_eq!(names(&["hugetlb", "--hvo", "off", "--count", "2"]), ["hugetlb-1g-nohvo"]);
        assert_eq!(names(&["clear", "--alloc", "--quick"]), ["alloc-init-on-alloc"]);
        assert_eq!(names(&["clear", "--quick"]), ["clear-2m"]);
        assert_eq!(names(&["deferred", "--quick"]), ["deferred-64g"]);
        assert_eq!(
            names(&["guest-memory", "--size", "64M"]),
            ["guest-memory-populate", "guest-memory-reset"]
        );
        assert!(names(&["limits"]).is_empty());
    }

    #[test]
    fn flags_belong_to_their_commands() {
        for args in [
            &["--json", "diff", "a", "b"][..],
            &["diff", "a", "b", "--json"],
            &[
                "dump",
                "zone-device",
                "--memory-type",
                "fsdax",
                "--pages",
                "8",
                "--out",
                "x",
                "--plot",
                "p.svg",
            ],
            &["limits", "--threads", "2"],
            &["--quick", "zone-device"],
        ] {
            assert!(matches!(
                parse(std::iter::once("memmap-bench").chain(args.iter().copied()), &machine()),
                Err(CliError::Clap(_))
            ));
        }
    }

    #[test]
    fn every_scenario_is_checked_against_memory() {
        let e = refused(&["clear", "--alloc", "--size", "100G"]);
        assert!(e.contains("alloc-init-on-alloc") && e.contains("use a smaller size"), "{e}");
        let e = refused(&["clear", "--alloc", "--size", "22G"]);
        assert!(e.contains("alloc-init-on-alloc needs"), "{e}");
        assert!(refused(&["deferred", "--size", "100T"]).contains("deferred-64g"));
        let e = refused(&["hugetlb", "--hvo", "off", "--count", "1099511627776"]);
        assert!(e.contains("overflows"), "{e}");
        assert!(refused(&["all", "--deferred-size", "2T"]).contains("deferred-64g"));
        let e = refused(&[
            "dump",
            "zone-device",
            "--memory-type",
            "fsdax",
            "--pages",
            "1099511627776",
            "--out",
            "x",
        ]);
        assert!(e.starts_with("the dump maps 64 TiB"), "{e}");
        let e =
            refused(&["dump", "zone-device", "--memory-type", "fsdax", "--pages", "320000000", "--out", "x"]);
        assert!(e.starts_with("the dump needs 19.07 GiB"), "{e}");
        let e = refused(&["dump", "hugetlb", "--hstate", "1G", "--count", "1099511627776", "--out", "x"]);
        assert!(e.contains("overflows"), "{e}");
    }

    #[test]
    fn sizes_are_whole_pages() {
        let e = refused(&["clear", "--size", "3M"]);
        assert!(e.contains("not a whole number of 2 MiB pages"), "{e}");
        assert_eq!(names(&["zone-device", "--size", "1.5G"]).len(), 2);
        assert_eq!(names(&["zone-device", "--size", "64MiB"]).len(), 2);
        assert!(refused(&["deferred", "--size", "4097"]).contains("4 KiB pages"));
    }
}
