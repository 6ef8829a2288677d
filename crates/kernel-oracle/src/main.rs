//! `kernel-oracle`: boots real kernels under QEMU, dumps their struct pages and compares them
//! with the model. See the crate documentation and `docs/kernel-oracle.md`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

use kernel_oracle::compare::{self, golden};
use kernel_oracle::guest::{run, scenario};
use kernel_oracle::{facts::Facts, kernel};

#[derive(Parser)]
#[command(name = "kernel-oracle", about = "Real Linux kernels under QEMU as the oracle for the memmap model")]
struct Cli {
    /// Download and build cache (default: $XDG_CACHE_HOME/memmap-oracle or ~/.cache/memmap-oracle).
    #[arg(long, global = true)]
    cache: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List the kernels and configurations.
    List,
    /// Fetch and unpack kernels (all known x86-64 kernels by default).
    Fetch {
        /// Kernel ids (`7.2-amd64`, `6.12-amd64`, `7.2-arm64`).
        #[arg(long = "kernel")]
        kernels: Vec<String>,
        /// Run `apt-get update` even if the private lists are fresh.
        #[arg(long)]
        refresh: bool,
    },
    /// Boot configurations, dump their struct pages, and compare them with the model.
    Run(RunArgs),
    /// Build (once, cached) a Rust-enabled 7.2 or 7.3 kernel from Debian's linux-source, patched
    /// with the ZONE_DEVICE memmap provider hook, and,
    /// against it, the memmap_stream module from the workspace's crates.
    Build(BuildArgs),
    /// Compare dumps (`OUT/<kernel>/<config>` directories) with the model.
    Compare {
        /// Dump directories.
        dirs: Vec<PathBuf>,
        /// Print every difference group, not only the first ten per region.
        #[arg(long)]
        verbose: bool,
    },
    /// Write golden extracts of dumps into a golden directory.
    Golden {
        /// Dump directories.
        dirs: Vec<PathBuf>,
        /// Golden directory.
        #[arg(long, default_value = "crates/kernel-oracle/golden")]
        to: PathBuf,
    },
    /// Check golden extracts: they parse, pass the class checks and equal the model.
    Check {
        /// Golden directory.
        #[arg(long, default_value = "crates/kernel-oracle/golden")]
        golden: PathBuf,
        /// Print the comparison report of every extract.
        #[arg(long)]
        verbose: bool,
    },
}

/// The arguments of `run`.
#[derive(clap::Args)]
struct RunArgs {
    /// Configuration names.
    configs: Vec<String>,
    /// Every configuration of the chosen kernels' architectures.
    #[arg(long)]
    all: bool,
    /// Kernel ids (default: 7.2-amd64 and 6.12-amd64).
    #[arg(long = "kernel")]
    kernels: Vec<String>,
    /// Boot this kernel image instead of a packaged kernel (a bzImage you built, or an
    /// arm64 Image): its release is read from the image. Needs --modules and --config.
    #[arg(long, value_name = "PATH", requires_all = ["modules", "config"], conflicts_with = "kernels")]
    kernel_image: Option<PathBuf>,
    /// With --kernel-image: the directory holding its modules (`make modules_install
    /// INSTALL_MOD_PATH=...`'s `lib/modules/RELEASE`, or the build tree), `.ko`, `.ko.xz`,
    /// `.ko.zst` or `.ko.gz`.
    #[arg(long, value_name = "DIR", requires = "kernel_image")]
    modules: Option<PathBuf>,
    /// With --kernel-image: its `.config`.
    #[arg(long, value_name = "FILE", requires = "kernel_image")]
    config: Option<PathBuf>,
    /// With --kernel-image: its `System.map` (else the guest's /proc/kallsyms names the
    /// few kernel symbols the comparison needs).
    #[arg(long, value_name = "FILE", requires = "kernel_image")]
    system_map: Option<PathBuf>,
    /// With --kernel-image: the id its output directories are named by (default
    /// `path-RELEASE`).
    #[arg(long, requires = "kernel_image")]
    id: Option<String>,
    /// Output directory (`OUT/<kernel>/<config>/`; each must be new or empty).
    #[arg(long, default_value = "target/kernel-oracle")]
    out: PathBuf,
    /// Replace the files of an earlier run in `OUT/<kernel>/<config>/`.
    #[arg(long)]
    force: bool,
    /// Seconds the guest may take to be ready.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Skip the model comparison.
    #[arg(long)]
    no_compare: bool,
    /// Also refresh the golden extracts under this directory (`crates/kernel-oracle/golden`).
    #[arg(long)]
    golden: Option<PathBuf>,
}

/// The arguments of `build`.
#[derive(clap::Args)]
struct BuildArgs {
    /// The rustup toolchain that builds the kernel and the module (with `rust-src`).
    #[arg(long, default_value = "nightly")]
    toolchain: String,
    /// Parallel jobs of make (default: the CPUs available).
    #[arg(long)]
    jobs: Option<usize>,
    /// The repository (its `crates/` and `linux-module/`).
    #[arg(long, default_value = ".")]
    workspace: PathBuf,
    /// The kernel source: 7.2 (sid's linux-source-7.2) or 7.3 (experimental's linux-source-7.3).
    #[arg(long, default_value = "7.2",
          value_parser = clap::builder::PossibleValuesParser::new(kernel_oracle::kernel::ksource::SOURCES.map(|s| s.release)))]
    source: String,
    /// Never build the kernel: use the cached build or exit with status 3 saying there is none.
    #[arg(long)]
    cached_only: bool,
    /// Then boot the module configurations on it (`module-*`: checked in place; `provider-*`:
    /// the module writes the memmap, bind after bind).
    #[arg(long)]
    run: bool,
    /// Output directory of `--run`.
    #[arg(long, default_value = "target/kernel-oracle")]
    out: PathBuf,
    /// With `--run`: replace the files of an earlier run.
    #[arg(long)]
    force: bool,
}

fn cache_dir(c: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(c) = c {
        return Ok(c);
    }
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(x).join("memmap-oracle"));
    }
    let home = std::env::var_os("HOME").context("neither --cache, XDG_CACHE_HOME nor HOME is set")?;
    Ok(PathBuf::from(home).join(".cache/memmap-oracle"))
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("kernel-oracle: error: {e:#}");
        std::process::exit(2);
    }
}

fn real_main() -> Result<()> {
    let cli = Cli::parse();
    let cache = cache_dir(cli.cache)?;
    match cli.cmd {
        Cmd::List => list(),
        Cmd::Fetch { kernels, refresh } => fetch(&cache, &kernels, refresh)?,
        Cmd::Run(args) => run_configs(&cache, &args)?,
        Cmd::Build(args) => build(&cache, &args)?,
        Cmd::Compare { dirs, verbose } => compare_dirs(&dirs, verbose)?,
        Cmd::Golden { dirs, to } => {
            for d in dirs {
                let facts = Facts::load(&d)?;
                if facts.regions.iter().any(|r| r.kind == "boot") {
                    kernel_oracle::compare::boot_golden::write(&d, &facts, &to)?;
                } else {
                    golden::write(&d, &facts, &to)?;
                }
            }
        }
        Cmd::Check { golden: g, verbose } => {
            let n = golden::check_all(&g, |report| {
                if verbose {
                    print!("{report}");
                }
            })?;
            println!("{n} golden extracts parse, pass the class checks and equal the model");
        }
    }
    Ok(())
}

/// The kernel ids `--kernel` named, or the default pair.
fn kernel_ids(kernels: &[String]) -> Vec<String> {
    if kernels.is_empty() { vec!["7.2-amd64".into(), "6.12-amd64".into()] } else { kernels.to_vec() }
}

/// `list`: the known kernels and configurations.
fn list() {
    for k in kernel::KERNELS {
        println!("kernel {:<12} suite {:<20} {}", k.id, k.suite, k.image_pattern);
    }
    for s in scenario::SCENARIOS {
        println!("config {:<36} {:?} {} MiB append: {}", s.name, s.arch, s.mem_mb, s.append().join(" "));
    }
}

/// `fetch`: downloads and unpacks the kernels, printing each one's release and packages.
fn fetch(cache: &Path, kernels: &[String], refresh: bool) -> Result<()> {
    for id in kernel_ids(kernels) {
        let k = kernel::fetch(kernel::spec(&id)?, cache, refresh)?;
        println!(
            "{id}: {} ({})",
            k.release,
            k.packages.iter().map(|p| format!("{} {}", p.name, p.version)).collect::<Vec<_>>().join(", ")
        );
    }
    Ok(())
}

/// `build`: the cached kernel and the module; with `--run`, the module configurations on it.
fn build(cache: &Path, args: &BuildArgs) -> Result<()> {
    let workspace = std::path::absolute(&args.workspace)?;
    let opts = kernel_oracle::kernel::kbuild::BuildOptions {
        cache: cache.to_path_buf(),
        workspace,
        toolchain: args.toolchain.clone(),
        jobs: args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)),
        cached_only: args.cached_only,
        source: kernel_oracle::kernel::ksource::Source::find(&args.source)
            .with_context(|| format!("no kernel source {}", args.source))?,
    };
    let id = format!("rust-{}", opts.source.release);
    let built = match kernel_oracle::kernel::kbuild::build(&opts) {
        Ok(b) => b,
        Err(e) if e.downcast_ref::<kernel_oracle::kernel::kbuild::NotCached>().is_some() => {
            println!("kernel-oracle: {e}");
            std::process::exit(3);
        }
        Err(e) => return Err(e),
    };
    let secs = &built.record["build_seconds"];
    println!(
        "kernel: {} ({}; {} s with make -j{} {})",
        built.image.display(),
        built.record["source"].as_str().unwrap_or("?"),
        secs,
        built.record["jobs"],
        if built.fresh { "now" } else { "when it was built, cached" }
    );
    println!(
        "  {}, {}, libclang {}",
        built.record["rustc"].as_str().unwrap_or("?"),
        built.record["bindgen"].as_str().unwrap_or("?"),
        built.record["libclang"].as_str().unwrap_or("?")
    );
    println!(
        "module: {} ({} movnti and {} sfence in its object code)",
        built.module.display(),
        built.movnti,
        built.sfence
    );
    let module_configs: Vec<&str> = scenario::SCENARIOS.iter().filter(|s| s.module).map(|s| s.name).collect();
    let run_line = format!(
        "kernel-oracle run --kernel-image {} --modules {} --config {} --id {id} {}",
        built.image.display(),
        built.dir.display(),
        built.config.display(),
        module_configs.join(" ")
    );
    if !args.run {
        println!("run: {run_line}");
        return Ok(());
    }
    let run = RunArgs {
        configs: module_configs.iter().map(|s| s.to_string()).collect(),
        all: false,
        kernels: Vec::new(),
        kernel_image: Some(built.image),
        modules: Some(built.dir),
        config: Some(built.config),
        system_map: None,
        id: Some(id),
        out: args.out.clone(),
        force: args.force,
        timeout: 600,
        no_compare: false,
        golden: None,
    };
    run_configs(cache, &run)
}

/// `compare`: compares each dump directory with the model; fails when any differs.
fn compare_dirs(dirs: &[PathBuf], verbose: bool) -> Result<()> {
    let mut differing = Vec::new();
    for d in dirs {
        let facts = Facts::load(d)?;
        if facts.regions.iter().any(|r| r.kind == "boot") {
            let nodes = kernel_oracle::compare::boot::compare(d, &facts)?;
            print!("{}", kernel_oracle::compare::boot::render(&nodes));
            if !kernel_oracle::compare::boot::equal(&nodes) {
                differing.push(d.display().to_string());
            }
            continue;
        }
        let res = compare::compare_dir(d, &facts)?;
        print!("{}", compare::render(&res, verbose));
        if compare::differs(&res) {
            differing.push(res.label.clone());
        }
    }
    if !differing.is_empty() {
        bail!("{} dump(s) differ from the model: {}", differing.len(), differing.join(", "));
    }
    Ok(())
}

/// `run`: boots every chosen configuration on every chosen kernel, then prints the summary;
/// fails when a run failed, differs from the model or fails a class check.
fn run_configs(cache: &Path, args: &RunArgs) -> Result<()> {
    // Configuration names are checked before any kernel is fetched.
    for c in &args.configs {
        scenario::find(c).with_context(|| format!("unknown configuration {c:?} (see `list`)"))?;
    }
    if !args.all && args.configs.is_empty() {
        bail!("run needs configuration names or --all (see `list`)");
    }
    let chosen = chosen_kernels(cache, args)?;
    let mut runs = Runs::default();
    for k in &chosen {
        let hstates = hugetlb_init::Hstates::of(&k.model_config()?);
        for sc in scenarios(args, k)?.iter().filter(|s| s.arch == k.arch) {
            // A hugetlb size the kernel's page size does not have (64 KiB pages on 16 KiB ones).
            if let Some(h) = sc.hugetlb.filter(|h| hstates.find(h.size_kb << 10).is_none()) {
                eprintln!(
                    "== {} {}: skipped, {} is not a huge page size of it ({hstates})",
                    k.id,
                    sc.name,
                    h.size_name()
                );
                continue;
            }
            runs.run(cache, args, k, sc)?;
        }
    }
    println!("== summary");
    for l in &runs.summary {
        println!("{l}");
    }
    if !runs.failures.is_empty() {
        bail!("{} configuration(s) failed: {}", runs.failures.len(), runs.failures.join(", "));
    }
    Ok(())
}

/// The kernels `run` boots: the `--kernel-image` build, or the packaged kernels (fetched).
fn chosen_kernels(cache: &Path, args: &RunArgs) -> Result<Vec<kernel::Kernel>> {
    let Some(image) = &args.kernel_image else {
        return kernel_ids(&args.kernels)
            .iter()
            .map(|id| kernel::fetch(kernel::spec(id)?, cache, false))
            .collect();
    };
    let (Some(modules), Some(config)) = (&args.modules, &args.config) else {
        bail!("--kernel-image needs --modules DIR and --config FILE");
    };
    let k = kernel::from_paths(image, modules, config, args.system_map.as_deref(), args.id.as_deref())?;
    eprintln!("kernel {} from {}: release {}, {:?}", k.id, image.display(), k.release, k.arch);
    Ok(vec![k])
}

/// The configurations `run` boots on `k`: all of its architecture with `--all`, else those named.
fn scenarios(args: &RunArgs, k: &kernel::Kernel) -> Result<Vec<scenario::Scenario>> {
    let has_module = k.modules.contains_key(scenario::MODULE_NAME);
    if args.all {
        if !has_module {
            eprintln!(
                "kernel {}: no {}.ko, so the module configurations are left out (`kernel-oracle build` builds a kernel with it)",
                k.id,
                scenario::MODULE_NAME
            );
        }
        return Ok(scenario::SCENARIOS
            .iter()
            .copied()
            .filter(|s| s.arch == k.arch && (has_module || !s.module))
            .collect());
    }
    let chosen: Vec<scenario::Scenario> = args
        .configs
        .iter()
        .map(|c| scenario::find(c).with_context(|| format!("unknown configuration {c:?} (see `list`)")))
        .collect::<Result<_>>()?;
    if let Some(s) = chosen.iter().find(|s| s.module && !has_module) {
        bail!(
            "configuration {} loads {}.ko, which kernel {} does not have (`kernel-oracle build` builds a kernel with it)",
            s.name,
            scenario::MODULE_NAME,
            k.id
        );
    }
    Ok(chosen)
}

/// Compares a boot configuration's zones with the model booted on the guest's layout, and
/// writes that layout beside the dump (`layout.json`); returns whether they are equal.
fn compare_boot(dir: &Path, facts: &Facts) -> Result<bool> {
    let (cfg, inputs) = kernel_oracle::compare::boot::inputs(dir, facts)?;
    let layout = kernel_oracle::compare::boot::layout_file(facts, &inputs);
    kernel_oracle::files::write_file(
        &dir.join("layout.json"),
        (serde_json::to_string(&layout)? + "\n").as_bytes(),
    )?;
    let mode = kernel_oracle::compare::boot::kernel_mode(&facts.cmdline);
    let nodes = kernel_oracle::compare::boot::compare_nodes(&cfg, facts.vmemmap_size, mode, &inputs)?;
    print!("{}", kernel_oracle::compare::boot::render(&nodes));
    eprintln!(
        "  model: memmap-bench dump node --node-layout {} --kernel {} --kconfig KCONFIG --mode {} --strategy slow --out DIR",
        dir.join("layout.json").display(),
        cfg.version,
        format!("{mode:?}").to_lowercase()
    );
    Ok(kernel_oracle::compare::boot::equal(&nodes))
}

/// What the runs of one `run` came to: a summary line per run and what failed.
#[derive(Default)]
struct Runs {
    summary: Vec<String>,
    failures: Vec<String>,
}

impl Runs {
    /// Boots `sc` on `k`, compares the dump with the model (unless `--no-compare`) and refreshes
    /// the golden extracts (with `--golden`). A failed boot is recorded and the next run goes on.
    fn run(
        &mut self,
        cache: &Path,
        args: &RunArgs,
        k: &kernel::Kernel,
        sc: &scenario::Scenario,
    ) -> Result<()> {
        let id = &k.id;
        let dir = kernel_oracle::files::prepare_run_dir(&args.out, &Path::new(id).join(sc.name), args.force)?;
        eprintln!("== {id} {}", sc.name);
        let t = Instant::now();
        let opts = run::RunOptions {
            cache: cache.to_path_buf(),
            out: dir.clone(),
            timeout: Duration::from_secs(args.timeout),
        };
        match run::run(k, sc, &opts) {
            Ok(facts) => {
                let mut line = format!("{id:<11} {:<36} {:>5.1} s", sc.name, t.elapsed().as_secs_f64());
                if !args.no_compare {
                    self.compare(&dir, &facts, k, sc, &mut line)?;
                }
                if sc.provider {
                    line.push_str(&format!(
                        "; memmap_stream.ko the memmap provider: {} binds equal in the module and in the dump, the memory used, after rmmod the kernel's loop equal",
                        scenario::REBINDS
                    ));
                } else if sc.module {
                    line.push_str("; memmap_stream.ko: every check passed in place");
                }
                match (&args.golden, sc.boot.is_some()) {
                    (Some(g), false) => golden::write(&dir, &facts, g)?,
                    (Some(g), true) => kernel_oracle::compare::boot_golden::write(&dir, &facts, g)?,
                    (None, _) => {}
                }
                self.summary.push(line);
            }
            Err(e) => {
                eprintln!("  FAILED: {e:#}");
                self.summary.push(format!("{id:<11} {:<36} FAILED", sc.name));
                self.failures.push(format!("{id} {}", sc.name));
            }
        }
        Ok(())
    }

    /// Compares one run's dump with the model: prints the report, appends the verdict to its
    /// summary `line`, and records a difference or a failed class check.
    fn compare(
        &mut self,
        dir: &Path,
        facts: &Facts,
        k: &kernel::Kernel,
        sc: &scenario::Scenario,
        line: &mut String,
    ) -> Result<()> {
        let id = &k.id;
        if sc.boot.is_some() {
            let equal = compare_boot(dir, facts)?;
            line.push_str(if equal { "  equal" } else { "  DIFFERS" });
            if !equal {
                self.failures.push(format!("{id} {} (differs from the model)", sc.name));
            }
            return Ok(());
        }
        let res = compare::compare_dir(dir, facts)?;
        print!("{}", compare::render(&res, false));
        line.push_str(&format!("  {}", compare::verdict(&res)));
        if compare::differs(&res) {
            self.failures.push(format!("{id} {} (differs from the model)", sc.name));
        }
        if let Some(c) = res.checks.iter().find(|c| c.failure.is_some()) {
            self.failures.push(format!("{id} {} (class check {}: {:?})", sc.name, c.name, c.failure));
        }
        Ok(())
    }
}
