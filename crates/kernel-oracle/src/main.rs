//! `kernel-oracle`: boots real kernels under QEMU, dumps their struct pages and compares them
//! with the model. See the crate documentation and `docs/kernel-oracle.md`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

use kernel_oracle::{compare, facts::Facts, golden, kernel, run, scenario};

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
    Run {
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
    },
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
        Cmd::List => {
            for k in kernel::KERNELS {
                println!("kernel {:<12} suite {:<20} {}", k.id, k.suite, k.image_pattern);
            }
            for s in scenario::SCENARIOS {
                println!(
                    "config {:<36} {:?} {} MiB append: {}",
                    s.name,
                    s.arch,
                    s.mem_mb,
                    s.append().join(" ")
                );
            }
        }
        Cmd::Fetch { kernels, refresh } => {
            let ids =
                if kernels.is_empty() { vec!["7.2-amd64".into(), "6.12-amd64".into()] } else { kernels };
            for id in ids {
                let k = kernel::fetch(kernel::spec(&id)?, &cache, refresh)?;
                println!(
                    "{id}: {} ({})",
                    k.release,
                    k.packages
                        .iter()
                        .map(|p| format!("{} {}", p.name, p.version))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        Cmd::Run {
            configs,
            all,
            kernels,
            kernel_image,
            modules,
            config,
            system_map,
            id: path_id,
            out,
            force,
            timeout,
            no_compare,
            golden: golden_dir,
        } => {
            let mut chosen: Vec<kernel::Kernel> = Vec::new();
            if let Some(image) = &kernel_image {
                let (Some(modules), Some(config)) = (&modules, &config) else {
                    bail!("--kernel-image needs --modules DIR and --config FILE");
                };
                let k =
                    kernel::from_paths(image, modules, config, system_map.as_deref(), path_id.as_deref())?;
                eprintln!("kernel {} from {}: release {}, {:?}", k.id, image.display(), k.release, k.arch);
                chosen.push(k);
            } else {
                let ids =
                    if kernels.is_empty() { vec!["7.2-amd64".into(), "6.12-amd64".into()] } else { kernels };
                for id in &ids {
                    chosen.push(kernel::fetch(kernel::spec(id)?, &cache, false)?);
                }
            }
            let mut failures = Vec::new();
            let mut summary = Vec::new();
            for k in &chosen {
                let id = &k.id;
                let scs: Vec<scenario::Scenario> = if all {
                    scenario::SCENARIOS.iter().copied().filter(|s| s.arch == k.arch).collect()
                } else {
                    configs
                        .iter()
                        .map(|c| {
                            scenario::find(c)
                                .with_context(|| format!("unknown configuration {c:?} (see `list`)"))
                        })
                        .collect::<Result<_>>()?
                };
                for sc in scs.iter().filter(|s| s.arch == k.arch) {
                    let dir =
                        kernel_oracle::files::prepare_run_dir(&out, &Path::new(id).join(sc.name), force)?;
                    eprintln!("== {id} {}", sc.name);
                    let t = Instant::now();
                    let opts = run::RunOptions {
                        cache: cache.clone(),
                        out: dir.clone(),
                        timeout: Duration::from_secs(timeout),
                    };
                    match run::run(k, sc, &opts) {
                        Ok(facts) => {
                            let mut line =
                                format!("{id:<11} {:<36} {:>5.1} s", sc.name, t.elapsed().as_secs_f64());
                            if !no_compare {
                                let res = compare::compare_dir(&dir, &facts)?;
                                print!("{}", compare::render(&res, false));
                                line.push_str(&format!("  {}", compare::verdict(&res)));
                                if compare::differs(&res) {
                                    failures.push(format!("{id} {} (differs from the model)", sc.name));
                                }
                                if let Some(c) = res.checks.iter().find(|c| c.failure.is_some()) {
                                    failures.push(format!(
                                        "{id} {} (class check {}: {:?})",
                                        sc.name, c.name, c.failure
                                    ));
                                }
                            }
                            if let Some(g) = &golden_dir {
                                golden::write(&dir, &facts, g)?;
                            }
                            summary.push(line);
                        }
                        Err(e) => {
                            eprintln!("  FAILED: {e:#}");
                            summary.push(format!("{id:<11} {:<36} FAILED", sc.name));
                            failures.push(format!("{id} {}", sc.name));
                        }
                    }
                }
            }
            println!("== summary");
            for l in &summary {
                println!("{l}");
            }
            if !failures.is_empty() {
                bail!("{} configuration(s) failed: {}", failures.len(), failures.join(", "));
            }
        }
        Cmd::Compare { dirs, verbose } => {
            let mut differing = Vec::new();
            for d in dirs {
                let facts = Facts::load(&d)?;
                let res = compare::compare_dir(&d, &facts)?;
                print!("{}", compare::render(&res, verbose));
                if compare::differs(&res) {
                    differing.push(res.label.clone());
                }
            }
            if !differing.is_empty() {
                bail!("{} dump(s) differ from the model: {}", differing.len(), differing.join(", "));
            }
        }
        Cmd::Golden { dirs, to } => {
            for d in dirs {
                let facts = Facts::load(&d)?;
                golden::write(&d, &facts, &to)?;
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
