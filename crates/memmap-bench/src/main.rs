//! `memmap-bench`: see the library documentation (`cargo doc -p memmap-bench --open`) and
//! `memmap-bench --help`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use memmap_bench::dump::{HugetlbDump, ZoneDeviceDump, dump_zone_device, read_dump};
use memmap_bench::limits::{self, Limits};
use memmap_bench::machine::{Machine, meminfo};
use memmap_bench::report::{Report, Scenario};
use memmap_bench::scenarios::{Common, alloc, clear, deferred, hugetlb, zone_device};
use memmap_bench::size::{Bytes, parse_size};
use memmap_core::{KernelConfig, MemoryType, Strategy};

/// Reproduces the linux-mm memmap-init experiments side by side against this machine's
/// measured fill limit. Without a subcommand, runs the whole suite (`all`).
#[derive(Debug, Parser)]
#[command(name = "memmap-bench", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Print the report as JSON on stdout (tables and progress go to stderr).
    #[arg(long, global = true)]
    json: bool,
    /// CI-sized run: the same suite at sizes that finish in under 30 seconds.
    #[arg(long, global = true)]
    quick: bool,
    /// Write an SVG bar chart of GB/s per strategy against the limit.
    #[arg(long, global = true, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Split each scenario's range across N threads (section-aligned chunks).
    #[arg(long, global = true, default_value_t = 1, value_name = "N")]
    threads: usize,
    /// Rounds per strategy (default: 30 for zone-device as in the seeds, 15 for deferred, 5 for the others).
    #[arg(long, global = true, value_name = "N")]
    rounds: Option<usize>,
    /// Kernel config preset modelled by the timing scenarios.
    #[arg(long, global = true, default_value = "x86_64", value_parser = parse_config)]
    config: KernelConfig,
    /// No progress bars.
    #[arg(long, global = true)]
    no_progress: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Every scenario, then one summary table (the default).
    All(SuiteArgs),
    /// memmap_init_zone_device: nd_pmem (fsdax, 4K) and dax_pmem (devdax, 2M compound pages).
    ZoneDevice(ZoneDeviceArgs),
    /// Boot-time 1 GiB pages: fallback tail init with HVO off (seed 002), and HVO on.
    Hugetlb(HugetlbArgs),
    /// init_on_alloc clearing of 2 MiB pages: page by page versus one clear_pages call.
    Clear(ClearArgs),
    /// Boot-time struct page init of a 64 GiB zone: eager, deferred, on-demand; allocator check cost.
    Deferred(DeferredArgs),
    /// The machine's fill limits (zero and non-zero data) and copy bandwidth.
    Limits,
    /// Write a memmap to DIR/memmap.bin and DIR/meta.json.
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

#[derive(Debug, Args, Default)]
struct SuiteArgs {
    /// zone-device device size (default 16G; 100G reproduces the seeds' namespace).
    #[arg(long, value_parser = parse_size_arg)]
    zone_device_size: Option<u64>,
    /// clear size (default 16G).
    #[arg(long, value_parser = parse_size_arg)]
    clear_size: Option<u64>,
    /// hugetlb: number of 1 GiB pages (default 64, as in seed 002).
    #[arg(long)]
    hugetlb_count: Option<u64>,
    /// deferred zone size (default 64G).
    #[arg(long, value_parser = parse_size_arg)]
    deferred_size: Option<u64>,
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
    #[arg(long)]
    count: Option<u64>,
    /// HVO off (the seed's case), on, or both.
    #[arg(long, default_value = "both")]
    hvo: HvoChoice,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Align {
    /// fsdax, one struct page per compound (nd_pmem).
    #[value(name = "4K")]
    A4k,
    /// devdax, 2 MiB compound pages (dax_pmem).
    #[value(name = "2M")]
    A2m,
}

#[derive(Debug, Args)]
struct ZoneDeviceArgs {
    /// Namespace size (default 16G; 100G reproduces the seeds).
    #[arg(long, value_parser = parse_size_arg)]
    size: Option<u64>,
    /// Only one case (default: both).
    #[arg(long)]
    align: Option<Align>,
}

#[derive(Debug, Args)]
struct ClearArgs {
    /// Memory to clear, in 2 MiB pages (default 16G).
    #[arg(long, value_parser = parse_size_arg)]
    size: Option<u64>,
    /// Allocate through the buddy allocator with init_on_alloc (batch versus per page) instead
    /// of clearing a flat arena.
    #[arg(long)]
    alloc: bool,
}

#[derive(Debug, Args)]
struct DeferredArgs {
    /// Zone size (default 64G: 1 GiB of struct pages).
    #[arg(long, value_parser = parse_size_arg)]
    size: Option<u64>,
}

#[derive(Debug, Subcommand)]
enum DumpKind {
    /// memmap_init_zone_device of one device range.
    ZoneDevice(DumpZoneDeviceArgs),
    /// Boot-time gigantic pages (real memfd-backed HVO on Linux).
    Hugetlb(DumpHugetlbArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum HstateArg {
    #[value(name = "2M")]
    H2m,
    #[value(name = "1G")]
    H1g,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum HvoArg {
    On,
    Off,
    Fail,
}

#[derive(Debug, Args)]
struct DumpHugetlbArgs {
    /// Huge page size.
    #[arg(long)]
    hstate: HstateArg,
    /// Pages per node.
    #[arg(long)]
    count: u64,
    /// Nodes.
    #[arg(long, default_value_t = 1)]
    nodes: u32,
    /// HVO: on, off (hugetlb_free_vmemmap=off) or fail (injected allocation failure).
    #[arg(long, default_value = "on")]
    hvo: HvoArg,
    /// struct page layout.
    #[arg(long, default_value = "64")]
    layout: Layout,
    /// Tail init strategy.
    #[arg(long, default_value = "auto", value_parser = parse_strategy)]
    strategy: Strategy,
    /// Enable CONFIG_DEBUG_PAGE_REF and the page_ref_set tracepoint.
    #[arg(long)]
    page_ref_trace: bool,
    /// Output directory.
    #[arg(long)]
    out: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum MemType {
    Private,
    Coherent,
    Fsdax,
    Generic,
    P2pdma,
}

impl From<MemType> for MemoryType {
    fn from(m: MemType) -> Self {
        match m {
            MemType::Private => MemoryType::Private,
            MemType::Coherent => MemoryType::Coherent,
            MemType::Fsdax => MemoryType::FsDax,
            MemType::Generic => MemoryType::Generic,
            MemType::P2pdma => MemoryType::PciP2pdma,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Layout {
    #[value(name = "64")]
    L64,
    #[value(name = "72")]
    L72,
}

#[derive(Debug, Args)]
struct DumpZoneDeviceArgs {
    /// pgmap->type.
    #[arg(long)]
    memory_type: MemType,
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
    /// struct page layout: 64 bytes, or 72 with WANT_PAGE_VIRTUAL.
    #[arg(long, default_value = "64")]
    layout: Layout,
    /// Strategy.
    #[arg(long, default_value = "auto", value_parser = parse_strategy)]
    strategy: Strategy,
    /// First pfn.
    #[arg(long, default_value_t = 0x10_0000)]
    start_pfn: u64,
    /// Node id.
    #[arg(long, default_value_t = 0)]
    nid: u32,
    /// Enable CONFIG_DEBUG_PAGE_REF and the page_ref_set tracepoint.
    #[arg(long)]
    page_ref_trace: bool,
    /// Output directory.
    #[arg(long)]
    out: PathBuf,
}

fn parse_size_arg(s: &str) -> Result<u64, String> {
    let v = parse_size(s)?;
    if v < 4096 { Err(format!("size {s:?} is smaller than one 4 KiB page")) } else { Ok(v) }
}

fn parse_config(s: &str) -> Result<KernelConfig, String> {
    KernelConfig::preset(s).ok_or_else(|| {
        let names: Vec<_> = KernelConfig::PRESETS.iter().map(|c| c.name).collect();
        format!("unknown config {s:?} (one of: {})", names.join(", "))
    })
}

fn parse_strategy(s: &str) -> Result<Strategy, String> {
    Strategy::from_name(s).ok_or_else(|| format!("unknown strategy {s:?} (slow, template, streaming, auto)"))
}

/// A usage error: message and exit status 2, before any work.
fn usage(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.rounds == Some(0) {
        return usage("--rounds must be at least 1");
    }
    if cli.threads == 0 {
        return usage("--threads must be at least 1");
    }
    match &cli.command {
        Some(Command::Dump { kind: DumpKind::ZoneDevice(a) }) => return dump(a, cli.config),
        Some(Command::Dump { kind: DumpKind::Hugetlb(a) }) => return dump_hugetlb(a, cli.config),
        Some(Command::Diff { a, b }) => return diff(a, b),
        _ => {}
    }
    run_suite(&cli)
}

fn dump(a: &DumpZoneDeviceArgs, config: KernelConfig) -> ExitCode {
    let altmap = (a.altmap_reserve.is_some() || a.altmap_free.is_some())
        .then(|| (a.altmap_reserve.unwrap_or(0), a.altmap_free.unwrap_or(0)));
    let opts = ZoneDeviceDump {
        config,
        layout72: a.layout == Layout::L72,
        memory_type: a.memory_type.into(),
        vmemmap_shift: a.vmemmap_shift,
        altmap,
        start_pfn: a.start_pfn,
        nr_pages: a.pages,
        nid: a.nid,
        strategy: a.strategy,
        page_ref_trace: a.page_ref_trace,
    };
    let out = &a.out;
    match dump_zone_device(&opts, out) {
        Ok(meta) => {
            println!(
                "wrote {} struct pages ({} bytes each) to {}: strategy {} ({})",
                meta.nr_pages,
                meta.struct_page_size,
                out.display(),
                meta.strategy,
                meta.strategy_reason
            );
            ExitCode::SUCCESS
        }
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => usage(e),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn dump_hugetlb(a: &DumpHugetlbArgs, config: KernelConfig) -> ExitCode {
    if a.count == 0 {
        return usage("--count must be at least 1");
    }
    let hstate = match a.hstate {
        HstateArg::H2m => hugetlb_init::Hstate::H2M,
        HstateArg::H1g => hugetlb_init::Hstate::H1G,
    };
    let opts = HugetlbDump {
        config,
        layout72: a.layout == Layout::L72,
        hstate,
        count: a.count,
        nodes: a.nodes,
        hvo: match a.hvo {
            HvoArg::On => hugetlb_init::HvoMode::On,
            HvoArg::Off => hugetlb_init::HvoMode::Off,
            HvoArg::Fail => hugetlb_init::HvoMode::Fail,
        },
        strategy: a.strategy,
        page_ref_trace: a.page_ref_trace,
    };
    let need =
        u64::from(a.nodes) * a.count * hstate.nr_pages() * if a.layout == Layout::L72 { 72 } else { 64 };
    if let Some(avail) = meminfo("MemAvailable") {
        if need > avail / 10 * 9 {
            return usage(format!(
                "the dump needs {} of memory but only {} is available",
                Bytes(need),
                Bytes(avail)
            ));
        }
    }
    match memmap_bench::dump::dump_hugetlb(&opts, &a.out) {
        Ok(meta) => {
            println!(
                "wrote {} struct pages ({} bytes each) of {} folio(s) to {}: strategy {} ({})",
                meta.nr_pages,
                meta.struct_page_size,
                meta.detail.get("folios").and_then(|f| f.as_array()).map_or(0, Vec::len),
                a.out.display(),
                meta.strategy,
                meta.strategy_reason
            );
            ExitCode::SUCCESS
        }
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => usage(e),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn diff(a: &std::path::Path, b: &std::path::Path) -> ExitCode {
    let (da, db) = match (read_dump(a), read_dump(b)) {
        (Ok(da), Ok(db)) => (da, db),
        (Err(e), _) | (_, Err(e)) => return usage(e),
    };
    let r = memmap_bench::diff::diff((&da.0, &da.1), (&db.0, &db.1));
    println!("{r}");
    ExitCode::from(r.exit_code() as u8)
}

/// Which scenarios run, with their sizes.
struct Plan {
    zone_device: Vec<zone_device::Case>,
    zone_device_size: u64,
    hugetlb: Vec<bool>,
    hugetlb_count: u64,
    clear: Option<u64>,
    alloc: Option<u64>,
    deferred: Option<u64>,
    limits_only: bool,
}

fn plan(cli: &Cli) -> Plan {
    let quick = cli.quick;
    let zd_default = if quick { 1 << 30 } else { 16 << 30 };
    let clear_default = if quick { 1 << 30 } else { 16 << 30 };
    let hugetlb_default = if quick { 4 } else { 64 };
    let deferred_default = if quick { 4 << 30 } else { 64 << 30 };
    let both = vec![zone_device::Case::Fsdax, zone_device::Case::Devdax2m];
    let none = Plan {
        zone_device: vec![],
        zone_device_size: 0,
        hugetlb: vec![],
        hugetlb_count: 0,
        clear: None,
        alloc: None,
        deferred: None,
        limits_only: false,
    };
    let everything = |a: &SuiteArgs| Plan {
        zone_device: both.clone(),
        zone_device_size: a.zone_device_size.unwrap_or(zd_default),
        hugetlb: vec![false, true],
        hugetlb_count: a.hugetlb_count.unwrap_or(hugetlb_default),
        clear: Some(a.clear_size.unwrap_or(clear_default)),
        alloc: Some(a.clear_size.unwrap_or(clear_default)),
        deferred: Some(a.deferred_size.unwrap_or(deferred_default)),
        limits_only: false,
    };
    match &cli.command {
        None => everything(&SuiteArgs::default()),
        Some(Command::All(a)) => everything(a),
        Some(Command::ZoneDevice(a)) => Plan {
            zone_device: match a.align {
                None => both,
                Some(Align::A4k) => vec![zone_device::Case::Fsdax],
                Some(Align::A2m) => vec![zone_device::Case::Devdax2m],
            },
            zone_device_size: a.size.unwrap_or(zd_default),
            ..none
        },
        Some(Command::Hugetlb(a)) => Plan {
            hugetlb: match a.hvo {
                HvoChoice::Off => vec![false],
                HvoChoice::On => vec![true],
                HvoChoice::Both => vec![false, true],
            },
            hugetlb_count: a.count.unwrap_or(hugetlb_default),
            ..none
        },
        Some(Command::Clear(a)) if a.alloc => Plan { alloc: Some(a.size.unwrap_or(clear_default)), ..none },
        Some(Command::Clear(a)) => Plan { clear: Some(a.size.unwrap_or(clear_default)), ..none },
        Some(Command::Deferred(a)) => Plan { deferred: Some(a.size.unwrap_or(deferred_default)), ..none },
        Some(Command::Limits) => Plan { limits_only: true, ..none },
        Some(Command::Dump { .. } | Command::Diff { .. }) => unreachable!("handled before"),
    }
}

fn run_suite(cli: &Cli) -> ExitCode {
    let plan = plan(cli);
    // Validate sizes against memory before any work.
    let limit_buf: u64 = if cli.quick { 256 << 20 } else { 1 << 30 };
    let needs = [
        ("limits", 2 * limit_buf),
        (
            "zone-device",
            if plan.zone_device.is_empty() { 0 } else { zone_device::memory_needed(plan.zone_device_size) },
        ),
        ("clear", plan.clear.map_or(0, clear::memory_needed)),
        (
            "hugetlb",
            plan.hugetlb.iter().map(|&h| hugetlb::memory_needed(plan.hugetlb_count, h)).max().unwrap_or(0),
        ),
    ];
    if !plan.hugetlb.is_empty() && plan.hugetlb_count == 0 {
        return usage("--count must be at least 1");
    }
    if let Some(avail) = meminfo("MemAvailable") {
        for (name, need) in needs {
            if need > avail / 10 * 9 {
                return usage(format!(
                    "{name} needs {} of memory but only {} is available; use a smaller --size",
                    Bytes(need),
                    Bytes(avail)
                ));
            }
        }
    }
    if plan.zone_device_size % (2 << 20) != 0 && !plan.zone_device.is_empty() {
        return usage("zone-device --size must be a multiple of 2M (the devdax alignment)");
    }

    let human = |s: &str| {
        if cli.json {
            eprint!("{s}");
        } else {
            print!("{s}");
        }
    };
    let common = Common {
        rounds: cli.rounds,
        threads: cli.threads,
        progress: !cli.no_progress && !cli.json,
        quick: cli.quick,
    };
    let machine = Machine::detect();
    let limits: Limits = limits::measure(limit_buf, if cli.quick { 3 } else { 7 });
    let mut report = Report {
        machine,
        limits,
        scenarios: Vec::new(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        quick: cli.quick,
    };
    human(&report.header());
    human("\n");
    if !plan.limits_only {
        let zp = zone_device::Params { size: plan.zone_device_size, config: cli.config };
        for case in &plan.zone_device {
            let sc = zone_device::run(*case, &zp, &common, &report.limits);
            push(&mut report, sc, &human);
        }
        let hp = hugetlb::Params { count: plan.hugetlb_count, config: cli.config };
        for &hvo in &plan.hugetlb {
            let sc = hugetlb::run(hvo, &hp, &common, &report.limits);
            push(&mut report, sc, &human);
        }
        if let Some(size) = plan.clear {
            let sc = clear::run(size, &common, &report.limits);
            push(&mut report, sc, &human);
        }
        if let Some(size) = plan.alloc {
            let sc = alloc::run(size, cli.config, &common, &report.limits);
            push(&mut report, sc, &human);
        }
        if let Some(size) = plan.deferred {
            let sc = deferred::run(&deferred::Params { size, config: cli.config }, &common, &report.limits);
            push(&mut report, sc, &human);
        }
        human(&report.summary());
    }
    if let Some(path) = &cli.plot {
        if let Err(e) = report.plot(path) {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
        human(&format!("plot written to {}\n", path.display()));
    }
    if cli.json {
        match serde_json::to_string_pretty(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

fn push(report: &mut Report, sc: Scenario, human: &impl Fn(&str)) {
    human(&sc.table());
    human("\n");
    report.scenarios.push(sc);
}
