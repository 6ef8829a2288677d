//! `kernel-oracle build`: a small Rust-enabled x86-64 kernel from Debian's `linux-source-7.2` (or
//! `-7.3`, [`SOURCES`](crate::kernel::ksource::SOURCES)),
//! built once and cached, and the `memmap_stream` module (`linux-module/`) built against it
//! on every call. The cache key names every input (source version, config fragment, rustc,
//! bindgen, libclang, gcc); a build without `build.json` is started again from clean.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::cmd;
use crate::kernel::apt::PrivateApt;
use crate::kernel::ksource::{PATCH, Source, fnv1a, kbuild_dir, remove_own_dir, source_tree};

/// The configuration fragment: `make allnoconfig` with these options.
pub const CONFIG_FRAGMENT: &str = include_str!("../../kbuild/rust-module.config");

/// The guest's device-dax test program (`guest/dax-rw.c`), built static beside the module.
pub const DAX_RW: &str = "dax-rw";
const DAX_RW_SOURCE: &str = include_str!("../../guest/dax-rw.c");

/// The bindgen the kernel is built with: Debian's 7.2 kernels record bindgen 0.72.1.
pub const BINDGEN_VERSION: &str = "0.72.1";

/// The oldest libclang the kernel's `scripts/min-tool-version.sh llvm` accepts (17.0.1).
pub const MIN_LIBCLANG_MAJOR: u32 = 17;

/// Limit for the kernel build (about 20 minutes on two cores; a loaded machine is slower).
const KERNEL_BUILD_TIMEOUT: Duration = Duration::from_secs(4 * 3600);

/// Limit for the module build and for installing bindgen.
const TOOL_TIMEOUT: Duration = Duration::from_secs(1800);

/// What `build` needs to know.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// The oracle's cache directory.
    pub cache: PathBuf,
    /// The workspace (its `crates/` and `linux-module/`).
    pub workspace: PathBuf,
    /// The rustup toolchain that builds the kernel and the module (one rustc for both).
    pub toolchain: String,
    /// `make -j`.
    pub jobs: usize,
    /// Only use a cached kernel build: fail with [`NotCached`] instead of building one.
    pub cached_only: bool,
    /// The kernel source to build.
    pub source: Source,
}

/// The error of [`build`] with `cached_only` when no finished kernel build is in the cache.
#[derive(Debug)]
pub struct NotCached {
    /// Why: where the build would be, or the tool that is missing to name it.
    pub why: String,
}

impl std::fmt::Display for NotCached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no cached Rust-enabled kernel build: {} (`kernel-oracle build` makes one)", self.why)
    }
}

impl std::error::Error for NotCached {}

/// A kernel build and the module built against it.
#[derive(Debug, Clone)]
pub struct Built {
    /// The build directory (`O=`): `.config`, `arch/x86/boot/bzImage`, the in-tree modules.
    pub dir: PathBuf,
    /// `arch/x86/boot/bzImage`.
    pub image: PathBuf,
    /// `.config`.
    pub config: PathBuf,
    /// `memmap_stream/memmap_stream.ko` below `dir`.
    pub module: PathBuf,
    /// The build record (`build.json`).
    pub record: serde_json::Value,
    /// Whether the kernel was built by this call (else it came from the cache).
    pub fresh: bool,
    /// `movnti` instructions in the module's object code.
    pub movnti: usize,
    /// `sfence` instructions (stream-hal's `drain`) in it.
    pub sfence: usize,
}

/// The tools, found or installed.
#[derive(Debug, Clone)]
struct Tools {
    rustc: PathBuf,
    rustfmt: PathBuf,
    rustc_version: String,
    bindgen: PathBuf,
    bindgen_version: String,
    libclang_dir: PathBuf,
    libclang_major: u32,
    gcc_version: String,
}

/// Builds (or takes from the cache) the kernel, then builds the module against it.
///
/// # Errors
///
/// A tool or package is missing, a build fails (its log is named), or `cached_only` and no
/// build is cached ([`NotCached`]).
pub fn build(opts: &BuildOptions) -> Result<Built> {
    let tools = match tools(opts) {
        Ok(t) => t,
        Err(e) if opts.cached_only => return Err(NotCached { why: format!("{e:#}") }.into()),
        Err(e) => return Err(e),
    };
    // With `cached_only` nothing is fetched: the build is found by its key among the cache's
    // builds (no apt: offline works without package lists), cargo runs offline. The module and
    // the boots write into the cache, so a read-only one is a build not found.
    if opts.cached_only {
        let dir = cached_build(&opts.cache, &tools, opts.source)
            .and_then(|d| if writable(&d) { Ok(d) } else { bail!("{} is read-only", d.display()) })
            .map_err(|e| NotCached { why: format!("{e:#}") })?;
        return finish(dir, &tools, opts, false);
    }
    let located = (|| {
        let apt = PrivateApt::new(&opts.cache, opts.source.suite, "amd64")?;
        apt.update(false).or_else(|e| if opts.cached_only { Ok(()) } else { Err(e) })?;
        let version = apt.version(opts.source.package)?;
        crate::files::name(&format!("the version apt reports for {}", opts.source.package), &version)?;
        anyhow::Ok((apt, version, kbuild_dir(&opts.cache)?))
    })();
    let (apt, version, kbuild) = located?;
    let key = cache_key(&version, &tools);
    let dir = kbuild.join(format!("rust-{}-{version}-{key:016x}", opts.source.release));
    let fresh = !dir.join("build.json").is_file();
    if fresh {
        let src = source_tree(&opts.cache, &apt, opts.source, &version)?;
        build_kernel(&src, &dir, &tools, opts.source, &version, opts.jobs)?;
    }
    finish(dir, &tools, opts, fresh)
}

/// The cached build whose name carries the key of these tools and its source version
/// (`kbuild/rust-RELEASE-VERSION-KEY` with a `build.json`; the newest version when several), found
/// without apt and without writing anything.
fn cached_build(cache: &Path, tools: &Tools, source: Source) -> Result<PathBuf> {
    let prefix = format!("rust-{}-", source.release);
    let kbuild = cache.join("kbuild");
    match fs::symlink_metadata(&kbuild) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => bail!("{} is not a directory (a link?)", kbuild.display()),
        Err(e) => return Err(e).with_context(|| format!("{} has no builds", cache.display())),
    }
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    for entry in fs::read_dir(&kbuild).with_context(|| format!("read {}", kbuild.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((version, key)) = name.strip_prefix(&prefix).and_then(|r| r.rsplit_once('-')) else {
            continue;
        };
        let dir = entry.path();
        let real_dir = fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir());
        if real_dir
            && key == format!("{:016x}", cache_key(version, tools))
            && dir.join("build.json").is_file()
        {
            found.push((version.to_string(), dir));
        }
    }
    // Newest by the numbers in the version (7.2.13-1 after 7.2.9-1).
    found.sort_by_key(|(v, _)| {
        v.split(|c: char| !c.is_ascii_digit()).filter_map(|n| n.parse::<u64>().ok()).collect::<Vec<_>>()
    });
    found.pop().map(|(_, d)| d).with_context(|| {
        format!("{} has no finished build for these tools (rustc, bindgen, libclang, gcc)", kbuild.display())
    })
}

/// The module against the kernel build in `dir`, and what `build` returns.
fn finish(dir: PathBuf, tools: &Tools, opts: &BuildOptions, fresh: bool) -> Result<Built> {
    let record_path = dir.join("build.json");
    let record: serde_json::Value =
        serde_json::from_slice(&memmap_dump::read_user_bytes(&record_path, 1 << 20)?)
            .with_context(|| format!("{} is not JSON", record_path.display()))?;
    let module = build_module(&dir, tools, &opts.workspace, opts.jobs, opts.cached_only)?;
    build_dax_rw(module.parent().context("the module's directory")?)?;
    let movnti = count_instructions(&module, "movnti")?;
    let sfence = count_instructions(&module, "sfence")?;
    if movnti == 0 {
        bail!("{} has no movnti: stream-hal did not select its movnti backend", module.display());
    }
    Ok(Built {
        image: dir.join("arch/x86/boot/bzImage"),
        config: dir.join(".config"),
        dir,
        module,
        record,
        fresh,
        movnti,
        sfence,
    })
}

/// FNV-1a of every input of the kernel build.
fn cache_key(version: &str, t: &Tools) -> u64 {
    fnv1a(&[
        version,
        CONFIG_FRAGMENT,
        PATCH,
        &t.rustc_version,
        &t.bindgen_version,
        &t.libclang_major.to_string(),
        &t.gcc_version,
    ])
}

/// Finds rustc (with `rust-src`), libclang, gcc, and bindgen (installed into the cache from
/// crates.io when missing).
fn tools(opts: &BuildOptions) -> Result<Tools> {
    let which = cmd::run(
        "rustup",
        &["which".into(), "--toolchain".into(), opts.toolchain.clone(), "rustc".into()],
        None,
        Duration::from_secs(60),
    )
    .with_context(|| format!("rustup has no toolchain {:?}", opts.toolchain))?;
    let rustc = PathBuf::from(which.stdout.trim());
    let rustfmt = rustc.with_file_name("rustfmt");
    let rustc_version = first_line(&rustc, "--version")?;
    let sysroot = cmd::run(
        &rustc.display().to_string(),
        &["--print".into(), "sysroot".into()],
        None,
        Duration::from_secs(60),
    )?;
    let core = Path::new(sysroot.stdout.trim()).join("lib/rustlib/src/rust/library/core/src/lib.rs");
    if !core.is_file() {
        bail!(
            "the kernel builds `core` from rustc's sources, and {} is missing: `rustup component add rust-src --toolchain {}`",
            core.display(),
            opts.toolchain
        );
    }
    let (libclang_dir, libclang_major) = libclang()?;
    let gcc_version = first_line(Path::new("gcc"), "--version")?;
    let bindgen = bindgen(&opts.cache, !opts.cached_only)?;
    let bindgen_version = first_line(&bindgen, "--version")?;
    Ok(Tools {
        rustc,
        rustfmt,
        rustc_version,
        bindgen,
        bindgen_version,
        libclang_dir,
        libclang_major,
        gcc_version,
    })
}

/// The first line a program prints for `arg`.
fn first_line(program: &Path, arg: &str) -> Result<String> {
    let out = cmd::run(&program.display().to_string(), &[arg.into()], None, Duration::from_secs(60))?;
    Ok(out.stdout.lines().next().unwrap_or_default().trim().to_string())
}

/// The newest `/usr/lib/llvm-N/lib` with `libclang.so`, N at least [`MIN_LIBCLANG_MAJOR`].
fn libclang() -> Result<(PathBuf, u32)> {
    let mut found: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib")
        .map(|d| {
            d.filter_map(|e| {
                let e = e.ok()?;
                let n: u32 = e.file_name().to_str()?.strip_prefix("llvm-")?.parse().ok()?;
                let lib = e.path().join("lib");
                lib.join("libclang.so").exists().then_some((n, lib))
            })
            .collect()
        })
        .unwrap_or_default();
    found.sort();
    match found.pop() {
        Some((n, lib)) if n >= MIN_LIBCLANG_MAJOR => Ok((lib, n)),
        other => bail!(
            "bindgen needs libclang {MIN_LIBCLANG_MAJOR} or newer for this kernel (found {}): \
             `apt-get install libclang-19-dev` (Debian 12 has 19)",
            other.map_or("none".to_string(), |(n, _)| format!("llvm-{n}"))
        ),
    }
}

/// `bindgen` [`BINDGEN_VERSION`] under the cache, `cargo install`ed if missing (and `install`).
fn bindgen(cache: &Path, install: bool) -> Result<PathBuf> {
    let root = cache.join("tools").join(format!("bindgen-cli-{BINDGEN_VERSION}"));
    let bin = root.join("bin/bindgen");
    if bin.is_file() {
        return Ok(bin);
    }
    if !install {
        bail!("bindgen-cli {BINDGEN_VERSION} is not installed in {}", root.display());
    }
    eprintln!("build: installing bindgen-cli {BINDGEN_VERSION} from crates.io into {}", root.display());
    cmd::run(
        "cargo",
        &[
            "install".into(),
            "bindgen-cli".into(),
            "--version".into(),
            BINDGEN_VERSION.into(),
            "--locked".into(),
            "--root".into(),
            root.display().to_string(),
        ],
        None,
        TOOL_TIMEOUT,
    )
    .context("cargo install bindgen-cli failed")?;
    Ok(bin)
}

/// `make` in `src` with the toolchain's variables, output appended to `log`.
fn make(src: &Path, args: &[String], t: &Tools, log: &Path, timeout: Duration) -> Result<()> {
    let out = fs::OpenOptions::new().create(true).append(true).open(log)?;
    let mut c = Command::new("make");
    c.current_dir(src)
        .args(args)
        .arg(format!("RUSTC={}", t.rustc.display()))
        .arg(format!("RUSTFMT={}", t.rustfmt.display()))
        .arg(format!("BINDGEN={}", t.bindgen.display()))
        .env("LIBCLANG_PATH", &t.libclang_dir)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    let mut child = c.spawn().context("cannot start make")?;
    let Some(status) = cmd::wait(&mut child, timeout, Duration::from_millis(500))? else {
        bail!("make {} ran past {} s (log: {})", args.join(" "), timeout.as_secs(), log.display());
    };
    if !status.success() {
        bail!("make {} failed ({status}); the end of {}:\n{}", args.join(" "), log.display(), tail(log, 40));
    }
    Ok(())
}

/// The last `n` lines of a log.
fn tail(log: &Path, n: usize) -> String {
    let text = memmap_dump::read_user_bytes(log, 256 << 20).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Configures and builds the kernel into `dir` (from scratch) and writes `build.json`.
fn build_kernel(src: &Path, dir: &Path, t: &Tools, source: Source, version: &str, jobs: usize) -> Result<()> {
    if dir.exists() {
        remove_own_dir(dir, "the unfinished build")?;
    }
    fs::create_dir_all(dir)?;
    let fragment = dir.join("rust-module.config");
    crate::files::write_file(&fragment, CONFIG_FRAGMENT.as_bytes())?;
    let log = dir.join("build.log");
    let o = format!("O={}", dir.display());
    eprintln!(
        "build: configuring {} {version} in {} (log: {})",
        source.package,
        dir.display(),
        log.display()
    );
    make(
        src,
        &[o.clone(), format!("KCONFIG_ALLCONFIG={}", fragment.display()), "allnoconfig".into()],
        t,
        &log,
        TOOL_TIMEOUT,
    )?;
    let config =
        String::from_utf8_lossy(&memmap_dump::read_user_bytes(&dir.join(".config"), 16 << 20)?).into_owned();
    let missing = fragment_mismatches(CONFIG_FRAGMENT, &config);
    if !missing.is_empty() {
        bail!(
            "the kernel's configuration lost options of the fragment (a dependency is off): {}",
            missing.join(", ")
        );
    }
    eprintln!("build: building bzImage and modules with make -j{jobs} (log: {})", log.display());
    let load_before = loadavg();
    let start = Instant::now();
    make(src, &[o, format!("-j{jobs}"), "bzImage".into(), "modules".into()], t, &log, KERNEL_BUILD_TIMEOUT)?;
    let seconds = start.elapsed().as_secs_f64();
    let record = serde_json::json!({
        "source": format!("{} {version} ({})", source.package, source.suite),
        "patch": format!("kbuild/zone-device-memmap-provider.patch applied in {}", src.display()),
        "rustc": t.rustc_version,
        "bindgen": t.bindgen_version,
        "libclang": format!("{} ({})", t.libclang_major, t.libclang_dir.display()),
        "gcc": t.gcc_version,
        "jobs": jobs,
        "cpus": std::thread::available_parallelism().map_or(0, usize::from),
        "build_seconds": (seconds * 10.0).round() / 10.0,
        "loadavg_before": load_before,
        "loadavg_after": loadavg(),
        "command": format!("make O={} -j{jobs} bzImage modules", dir.display()),
    });
    crate::files::write_file(
        &dir.join("build.json"),
        (serde_json::to_string_pretty(&record)? + "\n").as_bytes(),
    )?;
    Ok(())
}

/// `/proc/loadavg`'s first three fields.
fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The fragment's lines that the final `.config` does not hold as written.
#[must_use]
pub fn fragment_mismatches(fragment: &str, config: &str) -> Vec<String> {
    let kconfig = memmap_core::Kconfig::new(config);
    let mut out = Vec::new();
    for line in fragment.lines().map(str::trim) {
        let (symbol, want) =
            if let Some(rest) = line.strip_prefix("# ").and_then(|r| r.strip_suffix(" is not set")) {
                (rest, "n")
            } else if line.starts_with("CONFIG_") {
                match line.split_once('=') {
                    Some((s, v)) => (s, v),
                    None => continue,
                }
            } else {
                continue;
            };
        let got = kconfig.get(symbol).unwrap_or("n");
        if got != want {
            out.push(format!("{symbol} (wanted {want}, got {got})"));
        }
    }
    out
}

/// The directory of the `cfg-if` package (stream-hal's dependency) the lockfile resolves.
fn cfg_if_dir(workspace: &Path, offline: bool) -> Result<PathBuf> {
    let mut args: Vec<String> =
        ["metadata", "--format-version", "1", "--locked", "--manifest-path"].map(String::from).into();
    args.push(workspace.join("Cargo.toml").display().to_string());
    if offline {
        args.push("--offline".into());
    }
    let out = cmd::run("cargo", &args, None, Duration::from_secs(600))?;
    let meta: serde_json::Value = serde_json::from_str(&out.stdout).context("cargo metadata's output")?;
    let manifest = meta["packages"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == "cfg-if"))
        .and_then(|p| p["manifest_path"].as_str())
        .context("cargo metadata lists no cfg-if package")?;
    Ok(Path::new(manifest).parent().context("cfg-if's manifest path")?.to_path_buf())
}

/// Builds `linux-module/` against the kernel in `dir` and returns the `.ko`.
fn build_module(dir: &Path, t: &Tools, workspace: &Path, jobs: usize, offline: bool) -> Result<PathBuf> {
    let src = workspace.join("linux-module");
    if !src.join("Kbuild").is_file() {
        bail!("{} has no Kbuild (is --workspace the repository?)", src.display());
    }
    let out = dir.join("memmap_stream");
    fs::create_dir_all(&out)?;
    let log = out.join("build.log");
    let _ = fs::remove_file(&log);
    let cfg_if = cfg_if_dir(workspace, offline)?;
    eprintln!("build: memmap_stream.ko from {} (log: {})", src.display(), log.display());
    make(
        dir,
        &[
            format!("M={}", src.display()),
            format!("MO={}", out.display()),
            format!("CFG_IF={}", cfg_if.display()),
            format!("MEMMAP_CRATES={}", workspace.join("crates").display()),
            format!("-j{jobs}"),
            "modules".into(),
        ],
        t,
        &log,
        TOOL_TIMEOUT,
    )?;
    let ko = out.join("memmap_stream.ko");
    if !ko.is_file() {
        bail!("the module build left no {}", ko.display());
    }
    Ok(ko)
}

/// Builds [`DAX_RW`] static into `dir` unless the binary there was built from this source.
fn build_dax_rw(dir: &Path) -> Result<()> {
    let (src, bin) = (dir.join("dax-rw.c"), dir.join(DAX_RW));
    let same = memmap_dump::read_user_bytes(&src, 1 << 20).is_ok_and(|b| b == DAX_RW_SOURCE.as_bytes());
    if same && bin.is_file() {
        return Ok(());
    }
    crate::files::write_file(&src, DAX_RW_SOURCE.as_bytes())?;
    cmd::run(
        "gcc",
        &["-static", "-O2", "-Wall", "-o", &bin.display().to_string(), &src.display().to_string()]
            .map(String::from),
        None,
        TOOL_TIMEOUT,
    )
    .context("gcc -static dax-rw.c (Debian: libc6-dev)")?;
    Ok(())
}

/// Whether a file can be made in `dir` (a read-only mount says no even to root).
fn writable(dir: &Path) -> bool {
    let probe = dir.join(format!(".write-probe-{}", std::process::id()));
    let ok = fs::File::create(&probe).is_ok();
    let _ = fs::remove_file(&probe);
    ok
}

/// How many instructions named `mnemonic` `objdump -d` shows in `object`.
fn count_instructions(object: &Path, mnemonic: &str) -> Result<usize> {
    let out =
        cmd::run("objdump", &["-d".into(), object.display().to_string()], None, Duration::from_secs(120))?;
    Ok(out
        .stdout
        .lines()
        .filter(|l| l.split('\t').nth(2).is_some_and(|i| i.split_whitespace().next() == Some(mnemonic)))
        .count())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::ksource::SOURCES;

    /// `--cached-only` finds a finished build by the tools' key alone (no apt): the newest
    /// version with this key and a `build.json`, never another key's, a partial one, or one
    /// through a linked `kbuild`.
    #[test]
    fn a_cached_build_is_found_by_its_key_without_apt() {
        let tools = Tools {
            rustc: "rustc".into(),
            rustfmt: "rustfmt".into(),
            rustc_version: "rustc 1.97.0-nightly".into(),
            bindgen: "bindgen".into(),
            bindgen_version: BINDGEN_VERSION.into(),
            libclang_dir: "/usr/lib/llvm-19/lib".into(),
            libclang_major: 19,
            gcc_version: "gcc 12.2.0".into(),
        };
        let t = tempfile::tempdir().unwrap();
        let kbuild = t.path().join("kbuild");
        let make = |version: &str, key: u64, finished: bool| {
            let release = if version.starts_with("7.3") { "7.3" } else { "7.2" };
            let d = kbuild.join(format!("rust-{release}-{version}-{key:016x}"));
            fs::create_dir_all(&d).unwrap();
            if finished {
                fs::write(d.join("build.json"), "{}").unwrap();
            }
            d
        };
        assert!(cached_build(t.path(), &tools, SOURCES[0]).is_err(), "no kbuild directory");
        make("7.2.14-1", cache_key("7.2.14-1", &tools) ^ 1, true);
        make("7.2.15-1", cache_key("7.2.15-1", &tools), false);
        assert!(cached_build(t.path(), &tools, SOURCES[0]).is_err(), "another key, a partial build");
        make("7.2.9-1", cache_key("7.2.9-1", &tools), true);
        let newest = make("7.2.13-1", cache_key("7.2.13-1", &tools), true);
        assert_eq!(cached_build(t.path(), &tools, SOURCES[0]).unwrap(), newest);
        // Each release finds its own builds only.
        assert!(cached_build(t.path(), &tools, SOURCES[1]).is_err(), "no 7.3 build yet");
        let rc = make("7.3~rc7-1~exp1", cache_key("7.3~rc7-1~exp1", &tools), true);
        assert_eq!(cached_build(t.path(), &tools, SOURCES[1]).unwrap(), rc);
        assert_eq!(cached_build(t.path(), &tools, SOURCES[0]).unwrap(), newest);
        let other = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(&kbuild, other.path().join("kbuild")).unwrap();
        assert!(cached_build(other.path(), &tools, SOURCES[0]).is_err(), "a linked kbuild");
    }

    /// A cache whose `kbuild` is a link, or whose partial build is one, is refused and the
    /// link's target keeps what it had (issue 45: `build` once deleted a `src-<version>` in it).
    #[test]
    fn links_in_the_cache_are_refused_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let (cache, elsewhere) = (t.path().join("cache"), t.path().join("elsewhere"));
        fs::create_dir_all(elsewhere.join("src-7.2.13-1/keep")).unwrap();
        fs::create_dir_all(&cache).unwrap();
        std::os::unix::fs::symlink(&elsewhere, cache.join("kbuild")).unwrap();
        let e = kbuild_dir(&cache).unwrap_err();
        assert!(format!("{e:#}").contains("symbolic link"), "{e:#}");
        let e = remove_own_dir(&cache.join("kbuild"), "the partial source tree").unwrap_err();
        assert!(format!("{e:#}").contains("refusing"), "{e:#}");
        assert!(elsewhere.join("src-7.2.13-1/keep").is_dir());
        // A directory of its own is removed; a missing one is nothing to do.
        fs::create_dir_all(t.path().join("own/a/b")).unwrap();
        remove_own_dir(&t.path().join("own"), "x").unwrap();
        assert!(!t.path().join("own").exists());
        remove_own_dir(&t.path().join("own"), "x").unwrap();
    }

    /// A cached `.deb` is compared with the index's SHA-256 (a truncated one once failed every
    /// run with an lzma error and no hint).
    #[test]
    fn a_file_hash_is_its_sha256() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("abc");
        fs::write(&f, b"abc").unwrap();
        assert_eq!(
            crate::kernel::apt::sha256(&f).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(crate::kernel::apt::sha256(&t.path().join("missing")).is_err());
    }

    #[test]
    fn the_fragment_check_names_what_the_config_lost() {
        let fragment = "# a comment\nCONFIG_RUST=y\nCONFIG_NR_CPUS=8192\n# CONFIG_MODVERSIONS is not set\n";
        let config = "CONFIG_RUST=y\nCONFIG_NR_CPUS=512\nCONFIG_MODVERSIONS=y\n";
        assert_eq!(
            fragment_mismatches(fragment, config),
            ["CONFIG_NR_CPUS (wanted 8192, got 512)", "CONFIG_MODVERSIONS (wanted n, got y)"]
        );
        assert!(fragment_mismatches(fragment, "CONFIG_RUST=y\nCONFIG_NR_CPUS=8192\n").is_empty());
    }

    #[test]
    fn the_fragment_keeps_what_rust_and_the_namespace_need() {
        for line in
            ["CONFIG_RUST=y", "CONFIG_ZONE_DEVICE=y", "CONFIG_X86_PMEM_LEGACY=m", "CONFIG_NODES_SHIFT=10"]
        {
            assert!(CONFIG_FRAGMENT.lines().any(|l| l == line), "{line}");
        }
    }

    #[test]
    fn the_cache_key_follows_every_input() {
        let t = Tools {
            rustc: "rustc".into(),
            rustfmt: "rustfmt".into(),
            rustc_version: "rustc 1.97.0-nightly".into(),
            bindgen: "bindgen".into(),
            bindgen_version: "bindgen 0.72.1".into(),
            libclang_dir: "/usr/lib/llvm-19/lib".into(),
            libclang_major: 19,
            gcc_version: "gcc 12.2.0".into(),
        };
        let k = cache_key("7.2.13-1", &t);
        assert_ne!(k, cache_key("7.2.14-1", &t));
        assert_ne!(k, cache_key("7.2.13-1", &Tools { rustc_version: "rustc 1.97.1".into(), ..t.clone() }));
        assert_ne!(k, cache_key("7.2.13-1", &Tools { libclang_major: 20, ..t.clone() }));
        assert_eq!(k, cache_key("7.2.13-1", &t));
    }
}
