//! A private apt configuration under the oracle's cache, from the machine's Debian mirror with
//! the suite changed; the machine's packages and apt state are never touched (`-o Dir::...`
//! options, dpkg status `/dev/null`).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, bail};

use crate::cmd;

/// How long fetched package lists are reused before `apt-get update` runs again.
const LISTS_MAX_AGE: Duration = Duration::from_secs(24 * 3600);
/// Limit for one `apt-get update` or `apt-get download`.
const APT_TIMEOUT: Duration = Duration::from_secs(900);

/// One private apt setup: a suite of the machine's Debian mirror, for one architecture.
#[derive(Debug, Clone)]
pub struct PrivateApt {
    root: PathBuf,
    mirror: String,
    suite: String,
    arch: String,
}

/// Finds the Debian mirror URI the machine is configured with (the first `deb` source whose
/// path ends in `/debian`), or `MEMMAP_ORACLE_MIRROR` when set.
///
/// # Errors
///
/// No Debian mirror is configured.
pub fn system_mirror() -> Result<String> {
    if let Ok(m) = std::env::var("MEMMAP_ORACLE_MIRROR") {
        return Ok(m);
    }
    let mut texts = Vec::new();
    if let Ok(t) = fs::read_to_string("/etc/apt/sources.list") {
        texts.push(t);
    }
    if let Ok(dir) = fs::read_dir("/etc/apt/sources.list.d") {
        let mut paths: Vec<PathBuf> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths {
            let name = p.to_string_lossy();
            if name.ends_with(".sources") || name.ends_with(".list") {
                if let Ok(t) = fs::read_to_string(&p) {
                    texts.push(t);
                }
            }
        }
    }
    for text in &texts {
        for line in text.lines() {
            let line = line.trim();
            let uri = if let Some(rest) = line.strip_prefix("URIs:") {
                rest.split_whitespace().next()
            } else if let Some(rest) = line.strip_prefix("deb ") {
                rest.split_whitespace().find(|w| w.contains("://"))
            } else {
                None
            };
            if let Some(uri) = uri {
                if uri.trim_end_matches('/').ends_with("/debian") {
                    return Ok(uri.trim_end_matches('/').to_string());
                }
            }
        }
    }
    bail!(
        "no Debian mirror found in /etc/apt/sources.list or /etc/apt/sources.list.d; \
         set MEMMAP_ORACLE_MIRROR to the mirror's URI"
    )
}

impl PrivateApt {
    /// A private apt tree for `suite`/`arch` under `cache/apt/<suite>-<arch>`.
    ///
    /// # Errors
    ///
    /// The mirror cannot be found or the directories cannot be created.
    pub fn new(cache: &Path, suite: &str, arch: &str) -> Result<Self> {
        let mirror = system_mirror()?;
        let root = cache.join("apt").join(format!("{suite}-{arch}"));
        for d in
            ["lists/partial", "archives/partial", "etc/sources.list.d", "etc/preferences.d", "etc/apt.conf.d"]
        {
            crate::files::create_dirs_below(
                cache,
                &Path::new("apt").join(format!("{suite}-{arch}")).join(d),
            )?;
        }
        let keyring = "/usr/share/keyrings/debian-archive-keyring.gpg";
        let list = format!("deb [signed-by={keyring}] {mirror} {suite} main\n");
        crate::files::write_file(&root.join("etc/sources.list"), list.as_bytes())?;
        Ok(PrivateApt { root, mirror, suite: suite.into(), arch: arch.into() })
    }

    /// The suite.
    #[must_use]
    pub fn suite(&self) -> &str {
        &self.suite
    }

    /// The `-o` options that point apt at this private tree.
    #[must_use]
    pub fn options(&self) -> Vec<String> {
        let r = self.root.display();
        let opts = [
            format!("Dir::Etc::SourceList={r}/etc/sources.list"),
            format!("Dir::Etc::SourceParts={r}/etc/sources.list.d"),
            format!("Dir::Etc::Parts={r}/etc/apt.conf.d"),
            format!("Dir::Etc::Preferences={r}/etc/preferences"),
            format!("Dir::Etc::PreferencesParts={r}/etc/preferences.d"),
            format!("Dir::State::Lists={r}/lists"),
            format!("Dir::Cache={r}"),
            format!("Dir::Cache::Archives={r}/archives"),
            "Dir::State::status=/dev/null".to_string(),
            format!("APT::Architecture={}", self.arch),
            format!("APT::Architectures={}", self.arch),
            "APT::Sandbox::User=root".to_string(),
            "Acquire::Retries=2".to_string(),
            "Acquire::http::Timeout=30".to_string(),
            "Acquire::Languages=none".to_string(),
            "Debug::NoLocking=1".to_string(),
        ];
        opts.iter().flat_map(|o| ["-o".to_string(), o.clone()]).collect()
    }

    fn lists_fresh(&self) -> bool {
        let Ok(dir) = fs::read_dir(self.root.join("lists")) else { return false };
        dir.filter_map(|e| e.ok()).any(|e| {
            e.file_name().to_string_lossy().contains("_Packages")
                && e.metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| SystemTime::now().duration_since(t).unwrap_or_default() < LISTS_MAX_AGE)
        })
    }

    /// Runs `apt-get update` on the private tree unless its lists are younger than a day (or
    /// `force`).
    ///
    /// # Errors
    ///
    /// The mirror is unreachable or apt fails.
    pub fn update(&self, force: bool) -> Result<()> {
        if !force && self.lists_fresh() {
            return Ok(());
        }
        eprintln!(
            "apt: updating the private package lists of {} ({}) from the machine's mirror",
            self.suite, self.arch
        );
        let mut args = self.options();
        args.push("update".into());
        let out = cmd::run("apt-get", &args, None, APT_TIMEOUT).with_context(|| {
            format!("apt-get update of suite {} failed: is {} reachable?", self.suite, self.mirror)
        })?;
        // apt-get update exits 0 even when a source could not be fetched.
        if out.stdout.contains("Err:") || out.stderr.contains("Failed to fetch") || !self.lists_fresh() {
            bail!(
                "apt-get update could not fetch suite {} from {}:\n{}{}",
                self.suite,
                self.mirror,
                out.stdout,
                out.stderr
            );
        }
        Ok(())
    }

    /// Package names matching the regular expression `re` (`apt-cache search --names-only`).
    ///
    /// # Errors
    ///
    /// apt fails.
    pub fn search(&self, re: &str) -> Result<Vec<String>> {
        let mut args = self.options();
        args.extend(["search".into(), "--names-only".into(), re.into()]);
        let out = cmd::run("apt-cache", &args, None, Duration::from_secs(120))?;
        Ok(out.stdout.lines().filter_map(|l| l.split(" - ").next()).map(str::to_string).collect())
    }

    /// The candidate version of `package`.
    ///
    /// # Errors
    ///
    /// apt fails or does not know the package.
    pub fn version(&self, package: &str) -> Result<String> {
        self.field(package, "Version")
    }

    /// Field `name` of the candidate version's record (`apt-cache show`).
    fn field(&self, package: &str, name: &str) -> Result<String> {
        let mut args = self.options();
        args.extend(["show".into(), "--no-all-versions".into(), package.into()]);
        let out = cmd::run("apt-cache", &args, None, Duration::from_secs(120))?;
        let prefix = format!("{name}: ");
        out.stdout
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .map(str::to_string)
            .with_context(|| format!("apt-cache show {package}: no {name}"))
    }

    /// Downloads `package` (the candidate version) into `dir` unless a copy whose SHA-256 is
    /// the index's is there already (a damaged copy, say truncated, is replaced), and returns
    /// the `.deb`'s path.
    ///
    /// # Errors
    ///
    /// apt fails, the file is not where apt puts it, or its SHA-256 is not the index's.
    pub fn download(&self, package: &str, dir: &Path) -> Result<PathBuf> {
        let version = self.version(package)?;
        deb_name(package, &version, &self.arch)?;
        let want = self.field(package, "SHA256")?;
        // apt names files NAME_VERSION_ARCH.deb with the epoch's ':' escaped as %3a.
        let file = |arch: &str| dir.join(format!("{package}_{}_{arch}.deb", version.replace(':', "%3a")));
        for arch in [self.arch.as_str(), "all"] {
            let f = file(arch);
            if f.is_file() {
                if sha256(&f)? == want {
                    return Ok(f);
                }
                eprintln!("apt: {} does not match the index's SHA-256; fetching it again", f.display());
                fs::remove_file(&f).with_context(|| format!("remove the damaged {}", f.display()))?;
            }
        }
        fs::create_dir_all(dir)?;
        eprintln!("apt: downloading {package} {version} ({}, {})", self.suite, self.arch);
        let mut args = self.options();
        args.extend(["download".into(), format!("{package}={version}")]);
        cmd::run("apt-get", &args, Some(dir), APT_TIMEOUT)
            .with_context(|| format!("apt-get download {package} failed: is {} reachable?", self.mirror))?;
        for arch in [self.arch.as_str(), "all"] {
            let f = file(arch);
            if f.is_file() {
                if sha256(&f)? != want {
                    bail!("{}: its SHA-256 is not the index's {want}", f.display());
                }
                return Ok(f);
            }
        }
        bail!("apt-get download {package} left no {} in {}", file(&self.arch).display(), dir.display())
    }
}

/// The SHA-256 of `path`'s bytes, lowercase hex (`sha256sum`).
///
/// # Errors
///
/// `sha256sum` fails.
pub fn sha256(path: &Path) -> Result<String> {
    let out =
        cmd::run("sha256sum", &["--".into(), path.display().to_string()], None, Duration::from_secs(600))?;
    out.stdout
        .split_whitespace()
        .next()
        .filter(|h| h.len() == 64)
        .map(str::to_string)
        .with_context(|| format!("sha256sum {}: no hash", path.display()))
}

/// The file name apt gives a downloaded package, `NAME_VERSION_ARCH.deb` (the epoch's `:` as
/// `%3a`), once the name and version are checked to be plain names ([`crate::files::name`]).
///
/// # Errors
///
/// The package name or version cannot name a file.
pub fn deb_name(package: &str, version: &str, arch: &str) -> Result<String> {
    crate::files::name("a package name", package)?;
    crate::files::name(&format!("the version apt reports for {package}"), version)?;
    Ok(format!("{package}_{}_{arch}.deb", version.replace(':', "%3a")))
}

/// Unpacks a `.deb` into `dest` with `dpkg-deb -x` (no installation).
///
/// # Errors
///
/// dpkg-deb fails.
pub fn extract(deb: &Path, dest: &Path) -> Result<()> {
    fs::create_dir_all(dest)?;
    cmd::run(
        "dpkg-deb",
        &["-x".into(), deb.display().to_string(), dest.display().to_string()],
        None,
        Duration::from_secs(600),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_downloaded_package_is_one_file_of_the_cache() {
        assert_eq!(
            deb_name("qemu-system-x86", "1:10.0.2+ds-2", "amd64").unwrap(),
            "qemu-system-x86_1%3a10.0.2+ds-2_amd64.deb"
        );
        for (p, v) in [("busybox-static", "1.36/../../x"), ("../x", "1.0"), ("a", ""), ("a", ".1")] {
            let e = deb_name(p, v, "amd64").unwrap_err().to_string();
            assert!(e.contains("cannot name a file or directory"), "{p} {v}: {e}");
        }
    }
}
