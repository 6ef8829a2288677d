//! The command line's clap types: what each subcommand accepts. The timing subcommands and
//! the sizes of `all` are not here: they are built from the scenario catalog
//! (`cli/timing.rs`); these are the flags they share and the other commands.

use std::path::PathBuf;

use clap::builder::TypedValueParser as _;
use clap::{Args, Parser, Subcommand};
use hugetlb_init::HvoMode;
use memmap_core::{KernelConfig, MemoryType, Strategy};

use super::named::named;
use super::values::{count, kernel_version, pfn, placed_folio, size_any};
use crate::threads::ThreadPolicy;

/// Reproduces the linux-mm memmap-init experiments (ZONE_DEVICE, boot-time gigantic pages,
/// init_on_alloc clearing, deferred init) side by side against this machine's fill limit
/// measured in the same run. Without a subcommand, runs the whole suite (`all`), sized to fit
/// the memory budget.
#[derive(Debug, Parser)]
#[command(name = "memmap-bench", version, about, long_about = None, term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub(super) command: Option<Command>,
    /// Without a subcommand: `all`'s options (its sizes are added from the catalog).
    #[command(flatten)]
    pub(super) timing: TimingArgs,
    #[command(flatten)]
    pub(super) global: GlobalArgs,
}

/// Flags accepted before or after the subcommand (by the timing commands and `limits`; `diff`
/// takes `--json`).
#[derive(Debug, Args, Clone, Copy, Default)]
#[command(next_help_heading = "Output options (timing commands and limits; diff takes --json)")]
pub(super) struct GlobalArgs {
    /// Print the report as JSON on stdout (tables and progress go to stderr).
    #[arg(long, global = true)]
    pub(super) json: bool,
    /// CI-sized run: the same suite at small sizes (tens of seconds).
    #[arg(long, global = true)]
    pub(super) quick: bool,
    /// No progress bars (they are drawn only when stderr is a terminal).
    #[arg(long, global = true)]
    pub(super) no_progress: bool,
    /// Also print every limit method, every round, and each scenario's notes.
    #[arg(long, short, global = true)]
    pub(super) verbose: bool,
}

impl GlobalArgs {
    /// The flags given, by name.
    pub(super) fn given(&self) -> Vec<&'static str> {
        [
            (self.json, "--json"),
            (self.quick, "--quick"),
            (self.no_progress, "--no-progress"),
            (self.verbose, "--verbose"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect()
    }
}

/// The subcommands besides the catalog's timing ones ([`super::timing`]).
#[derive(Debug, Subcommand)]
pub(super) enum Command {
    /// Every scenario, then a summary (the default).
    All(TimingArgs),
    /// Cost against size: ZONE_DEVICE init and the eager node boot from 64 KiB to 8 GiB of
    /// memmap, every strategy, cold and warm.
    Sweep(SweepArgs),
    /// The machine's fill limits (zero and non-zero data) and copy bandwidth.
    Limits(LimitsArgs),
    /// Write a memmap to DIR/memmap.bin and DIR/meta.json (refuses to overwrite without --force).
    Dump {
        #[command(subcommand)]
        kind: DumpKind,
    },
    /// Compare two dumps: differing struct pages by field and by role with examples, the
    /// pageblocks and the hook counts; exit status 1 if they differ.
    Diff {
        /// First dump directory.
        a: PathBuf,
        /// Second dump directory.
        b: PathBuf,
    },
}

impl Command {
    /// The subcommand's name.
    pub(super) fn name(&self) -> &'static str {
        match self {
            Command::All(_) => "all",
            Command::Sweep(_) => "sweep",
            Command::Limits(_) => "limits",
            Command::Dump { .. } => "dump",
            Command::Diff { .. } => "diff",
        }
    }
}

/// The timing commands' flags.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Timing options")]
pub(super) struct TimingArgs {
    /// Write an SVG bar chart of GB/s per strategy against the limit (refuses to replace an
    /// existing FILE without --force; checked before anything is measured).
    #[arg(long, value_name = "FILE")]
    pub(super) plot: Option<PathBuf>,
    /// Replace an existing --plot FILE.
    #[arg(long, requires = "plot")]
    pub(super) force: bool,
    /// Workers of the all-core rows (each scenario also runs the kernel-faithful one-thread
    /// row): N, or auto (the count where bandwidth stops growing on this machine, at most the
    /// CPUs available, measured before the run). 1 leaves the all-core rows out.
    #[arg(long, default_value = "auto", value_name = "N|auto", value_parser = ThreadPolicy::parse)]
    pub(super) threads: ThreadPolicy,
    /// Rounds per strategy (the help of each command lists its defaults).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(super) rounds: Option<u32>,
    /// The most memory a scenario may use at once (default: two thirds of MemAvailable, or of
    /// what the memory cgroup's limit leaves where that is less, leaving the rest to other
    /// programs; at most 90% of it). Scenarios
    /// whose size is not given are scaled down to fit it; one that cannot be is skipped.
    #[arg(long, value_name = "SIZE", value_parser = size_any)]
    pub(super) memory_budget: Option<u64>,
    /// Kernel config preset modelled by the timing scenarios.
    #[arg(long, default_value = "x86_64", value_parser = named::<KernelConfig>())]
    pub(super) config: KernelConfig,
    /// The boot scenario (deferred) boots the first node of this layout.json (what
    /// `kernel-oracle run` writes beside a boot configuration's dump: a real guest's zones,
    /// memory and reserved ranges) instead of its synthetic zone; its size is the node's span.
    #[arg(long, value_name = "FILE")]
    pub(super) node_layout: Option<PathBuf>,
}

impl Default for TimingArgs {
    fn default() -> Self {
        TimingArgs {
            plot: None,
            force: false,
            threads: ThreadPolicy::Auto,
            rounds: None,
            memory_budget: None,
            config: KernelConfig::X86_64,
            node_layout: None,
        }
    }
}

/// `limits`' flags.
#[derive(Debug, Args)]
pub(super) struct LimitsArgs {
    /// The most memory the limit probe may use (default: two thirds of MemAvailable, or of what
    /// the memory cgroup's limit leaves where that is less; at most 90% of it). Its two buffers
    /// (1 GiB each, 256 MiB with --quick) are halved to fit it, down to 32 MiB.
    #[arg(long, value_name = "SIZE", value_parser = size_any)]
    pub(super) memory_budget: Option<u64>,
}

/// `sweep`'s flags (its own: it is not a catalog scenario).
#[derive(Debug, Args)]
pub(super) struct SweepArgs {
    /// Smallest memmap (struct page bytes), a multiple of 64 KiB.
    #[arg(long, value_name = "SIZE", default_value = "64K", value_parser = size_any)]
    pub(super) min_size: u64,
    /// Largest memmap (struct page bytes); sizes that do not fit the memory budget are skipped
    /// with the reason.
    #[arg(long, value_name = "SIZE", default_value = "8G", value_parser = size_any)]
    pub(super) max_size: u64,
    /// Factor between sizes.
    #[arg(long, default_value_t = 2, value_parser = clap::builder::PossibleValuesParser::new(["2", "4"]).map(|s| s.parse::<u64>().unwrap_or(2)))]
    pub(super) step: u64,
    /// Rounds per strategy at each size (default: 15 up to 64 MiB of memmap, 7 up to 1 GiB,
    /// 3 above).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(super) rounds: Option<u32>,
    /// The most memory a size may use at once (default: two thirds of MemAvailable, or of what
    /// the memory cgroup's limit leaves where that is less).
    #[arg(long, value_name = "SIZE", value_parser = size_any)]
    pub(super) memory_budget: Option<u64>,
    /// Write a log-log SVG of ns per struct page against memmap bytes (refuses to replace an
    /// existing FILE without --force; checked before anything is measured).
    #[arg(long, value_name = "FILE")]
    pub(super) plot: Option<PathBuf>,
    /// Replace an existing --plot FILE.
    #[arg(long, requires = "plot")]
    pub(super) force: bool,
    /// Kernel config preset.
    #[arg(long, default_value = "x86_64", value_parser = named::<KernelConfig>())]
    pub(super) config: KernelConfig,
}

#[derive(Debug, Subcommand)]
pub(super) enum DumpKind {
    /// memmap_init_zone_device of one device range.
    ZoneDevice(DumpZoneDeviceArgs),
    /// Boot-time gigantic pages (real memfd-backed HVO on Linux).
    Hugetlb(DumpHugetlbArgs),
    /// A hot-added range onlined memory block by memory block (online_pages).
    Hotplug(DumpHotplugArgs),
    /// The boot memmap of one node laid out as a real machine's (kernel-oracle's layout.json).
    Node(DumpNodeArgs),
}

#[derive(Debug, Args)]
pub(super) struct DumpNodeArgs {
    /// The layout: a layout.json that `kernel-oracle run` writes beside a boot configuration's
    /// dump (zones, memory, reserved ranges, pages allocated after boot, vmemmap frames).
    #[arg(long, value_name = "FILE")]
    pub(super) node_layout: PathBuf,
    /// Node id.
    #[arg(long, default_value_t = 0)]
    pub(super) nid: u32,
    /// Init mode (deferred and on-demand init run to completion before the dump).
    #[arg(long, default_value = "deferred", value_parser = clap::builder::PossibleValuesParser::new(["eager", "deferred", "on-demand"]))]
    pub(super) mode: String,
    /// Boot order: the kernel's passes, or fused windows.
    #[arg(long, default_value = "kernel", value_parser = clap::builder::PossibleValuesParser::new(["kernel", "fused"]))]
    pub(super) order: String,
    #[command(flatten)]
    pub(super) common: DumpCommon,
}

#[derive(Debug, Args)]
pub(super) struct DumpHotplugArgs {
    /// First pfn of the hot-added range (decimal, or hexadecimal with 0x; pageblock-aligned).
    #[arg(long, default_value = "0x100000", value_parser = pfn)]
    pub(super) start_pfn: u64,
    /// Pages of the range (its end must be section-aligned).
    #[arg(long)]
    pub(super) pages: u64,
    /// The zone it is onlined into: normal (online_kernel) or movable (online_movable).
    #[arg(long, default_value = "normal", value_parser = clap::builder::PossibleValuesParser::new(["normal", "movable"]))]
    pub(super) zone: String,
    /// Node id.
    #[arg(long, default_value_t = 0)]
    pub(super) nid: u32,
    /// Pages per memory block, each onlined with its own online_pages() in ascending order
    /// (default: a section, x86-64's 128 MiB; 0 onlines the range at once).
    #[arg(long)]
    pub(super) memory_block_pages: Option<u64>,
    /// Take the free block at this pfn off the free list after onlining, as an allocation
    /// does (repeatable): what a guest allocated from before it was read.
    #[arg(long, value_parser = pfn)]
    pub(super) taken: Vec<u64>,
    #[command(flatten)]
    pub(super) common: DumpCommon,
}

/// Options every dump takes.
#[derive(Debug, Args)]
pub(super) struct DumpCommon {
    /// struct page layout: 64 bytes, or 72 with WANT_PAGE_VIRTUAL.
    #[arg(long, default_value = "64", value_parser = clap::builder::PossibleValuesParser::new(["64", "72"]).map(|s| if s == "72" { 72u32 } else { 64u32 }))]
    pub(super) layout: u32,
    /// Strategy.
    #[arg(long, default_value = "auto", value_parser = named::<Strategy>())]
    pub(super) strategy: Strategy,
    /// Enable CONFIG_DEBUG_PAGE_REF and the page_ref_set tracepoint.
    #[arg(long)]
    pub(super) page_ref_trace: bool,
    /// Kernel config preset: the architecture, and the release and options unless --kernel
    /// or --kconfig say otherwise.
    #[arg(long, default_value = "x86_64", value_parser = named::<KernelConfig>())]
    pub(super) config: KernelConfig,
    /// Model this kernel release (MAJOR.MINOR, e.g. 6.12 or 7.2) instead of the preset's.
    #[arg(long, value_name = "RELEASE", value_parser = kernel_version)]
    pub(super) kernel: Option<memmap_core::KernelVersion>,
    /// Apply a kernel's .config (the options that shape struct page) to the preset.
    #[arg(long, value_name = "FILE")]
    pub(super) kconfig: Option<PathBuf>,
    /// Output directory (created if absent).
    #[arg(long, value_name = "DIR")]
    pub(super) out: PathBuf,
    /// Replace an existing dump in DIR.
    #[arg(long)]
    pub(super) force: bool,
}

#[derive(Debug, Args)]
pub(super) struct DumpHugetlbArgs {
    /// Huge page size, as hugepagesz= takes it: 2M or 1G; 64K, 32M, 512M or 16G where the
    /// configuration's architecture and page size have them.
    #[arg(long, value_name = "SIZE")]
    pub(super) hstate: String,
    /// Pages per node (not with --place).
    #[arg(long, value_parser = count::<u64>, required_unless_present = "place", conflicts_with = "place")]
    pub(super) count: Option<u64>,
    /// Nodes.
    #[arg(long, default_value_t = 1, value_parser = count::<u32>)]
    pub(super) nodes: u32,
    /// HVO: on, off (hugetlb_free_vmemmap=off) or fail (injected allocation failure).
    #[arg(long, default_value = "on", value_parser = named::<HvoMode>())]
    pub(super) hvo: HvoMode,
    /// Zone index of the memory the pages come from (default ZONE_NORMAL: 2 with DMA and
    /// DMA32; a 2 MiB page below 4 GiB on x86-64 is in DMA32, 1, and on arm64 in DMA, 0).
    #[arg(long)]
    pub(super) zone: Option<u32>,
    /// The pages were allocated at run time (nr_hugepages), not at boot: from Linux 7.1 the
    /// shared tail page of HVO is then a fresh zeroed page.
    #[arg(long)]
    pub(super) runtime: bool,
    /// Put a folio's head at PFN (on node NID, default 0): `PFN[@NID]`, repeatable, grouped
    /// by node, each node's in free-list order (the first is first on the list). Replaces
    /// --count and --nodes' packed layout.
    #[arg(long, value_name = "PFN[@NID]", value_parser = placed_folio)]
    pub(super) place: Vec<(u64, u32)>,
    #[command(flatten)]
    pub(super) common: DumpCommon,
}

#[derive(Debug, Args)]
pub(super) struct DumpZoneDeviceArgs {
    /// pgmap->type.
    #[arg(long, value_parser = named::<MemoryType>())]
    pub(super) memory_type: MemoryType,
    /// Number of pages (pfns) in the range.
    #[arg(long)]
    pub(super) pages: u64,
    /// Compound pages of 1 << S base pages.
    #[arg(long, default_value_t = 0)]
    pub(super) vmemmap_shift: u32,
    /// altmap reserve (pfns); an altmap is used when either altmap option is given.
    #[arg(long)]
    pub(super) altmap_reserve: Option<u64>,
    /// altmap free (pfns).
    #[arg(long)]
    pub(super) altmap_free: Option<u64>,
    /// First pfn (decimal, or hexadecimal with 0x).
    #[arg(long, default_value = "0x100000", value_parser = pfn)]
    pub(super) start_pfn: u64,
    /// Node id.
    #[arg(long, default_value_t = 0)]
    pub(super) nid: u32,
    /// End of boot memory (pfn): the sections below it are early sections whose memmap is
    /// not deduplicated (device memory sharing a section with boot RAM).
    #[arg(long, default_value = "0", value_parser = pfn)]
    pub(super) boot_memory_end: u64,
    /// Start of boot memory above the range (pfn): the sections from it up are early sections
    /// (device memory carved out of RAM below more RAM, ending inside a section of it).
    #[arg(long, value_parser = pfn)]
    pub(super) boot_memory_above: Option<u64>,
    #[command(flatten)]
    pub(super) common: DumpCommon,
}
