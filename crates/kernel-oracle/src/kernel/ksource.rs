//! The kernel sources `kernel-oracle build` compiles: Debian's `linux-source-7.2` and `-7.3`,
//! unpacked once per version and patch below the cache's `kbuild/`, with the memmap provider
//! hook applied.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::cmd;
use crate::kernel::apt::{self, PrivateApt};

/// A kernel source package `kernel-oracle build` compiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source {
    /// The release it is named by (`build --source`, the `rust-RELEASE` builds and kernel ids).
    pub release: &'static str,
    /// The Debian package.
    pub package: &'static str,
    /// The suite that carries it (where the oracle's kernels of that release come from too).
    pub suite: &'static str,
}

/// Every source: the first is the default.
pub const SOURCES: [Source; 2] = [
    Source { release: "7.2", package: "linux-source-7.2", suite: "sid" },
    Source { release: "7.3", package: "linux-source-7.3", suite: "experimental" },
];

impl Source {
    /// The source of `release`.
    #[must_use]
    pub fn find(release: &str) -> Option<Source> {
        SOURCES.into_iter().find(|s| s.release == release)
    }
}

/// The kernel change applied to the source before it is built (`patch -p1`): the ZONE_DEVICE
/// memmap provider hook of `memmap_init_zone_device()` (docs/linux-module.md explains it).
pub const PATCH: &str = include_str!("../../kbuild/zone-device-memmap-provider.patch");

/// Limit for unpacking and patching.
const TOOL_TIMEOUT: Duration = Duration::from_secs(1800);

/// The unpacked source tree of `source` at `version` with [`PATCH`] applied (downloaded,
/// unpacked and patched once per version and patch: a build of another patch keeps its tree).
pub(super) fn source_tree(cache: &Path, apt: &PrivateApt, source: Source, version: &str) -> Result<PathBuf> {
    let package = source.package;
    let root = kbuild_dir(cache)?.join(format!("src-{version}-{:016x}", fnv1a(&[PATCH])));
    let tree = root.join(package);
    let stamp = root.join(".unpacked");
    if stamp.is_file() {
        return Ok(tree);
    }
    remove_own_dir(&root, "the partial source tree")?;
    let deb = apt.download(package, &cache.join("debs"))?;
    let pkg = root.join("pkg");
    apt::extract(&deb, &pkg)?;
    let tarball = pkg.join(format!("usr/src/{package}.tar.xz"));
    let size = unpacked_size(&tarball)?;
    if size > MAX_SOURCE_BYTES {
        bail!(
            "{} unpacks to {size} bytes (more than {MAX_SOURCE_BYTES}): not a kernel source",
            tarball.display()
        );
    }
    eprintln!("build: unpacking {}", tarball.display());
    cmd::run(
        "tar",
        &["-C".into(), root.display().to_string(), "-xf".into(), tarball.display().to_string()],
        None,
        TOOL_TIMEOUT,
    )?;
    fs::remove_dir_all(&pkg)?;
    if !tree.join("Makefile").is_file() {
        bail!("{} has no {package}/Makefile", tarball.display());
    }
    let patch = root.join("kernel.patch");
    crate::files::write_file(&patch, PATCH.as_bytes())?;
    cmd::run(
        "patch",
        &[
            "-p1",
            "--forward",
            "--batch",
            "-d",
            &tree.display().to_string(),
            "-i",
            &patch.display().to_string(),
        ]
        .map(String::from),
        None,
        TOOL_TIMEOUT,
    )
    .context("the kernel patch does not apply to this source")?;
    crate::files::write_file(&stamp, b"")?;
    Ok(tree)
}

/// The most a kernel source tarball may unpack to (a Linux tree is about 1.5 GB).
const MAX_SOURCE_BYTES: u64 = 8 << 30;

/// `cache/kbuild`, made if missing; refused when it (or the cache's part of the path) is a
/// symbolic link, since builds below it are deleted when unfinished.
pub(super) fn kbuild_dir(cache: &Path) -> Result<PathBuf> {
    crate::files::create_dirs_below(cache, Path::new("kbuild"))
}

/// Deletes `dir`, a directory this tool made in its cache, if it exists; refuses a symbolic
/// link or a file in its place (someone else's, not to be followed or removed).
pub(super) fn remove_own_dir(dir: &Path, what: &str) -> Result<()> {
    match fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => {
            fs::remove_dir_all(dir).with_context(|| format!("remove {what} {}", dir.display()))
        }
        Ok(_) => bail!("{}: {what} is not a directory (a link?); refusing to remove it", dir.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("inspect {}", dir.display())),
    }
}

/// The bytes an `.xz` file unpacks to, as its index records them (`xz --robot --list`),
/// read before anything is unpacked.
fn unpacked_size(xz: &Path) -> Result<u64> {
    let out =
        cmd::run("xz", &["--robot".into(), "--list".into(), xz.display().to_string()], None, TOOL_TIMEOUT)?;
    out.stdout
        .lines()
        .find_map(|l| l.strip_prefix("totals\t"))
        .and_then(|t| t.split('\t').nth(3))
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("xz --list {}: no uncompressed size", xz.display()))
}

/// FNV-1a of strings, each ended by a zero byte.
pub(super) fn fnv1a(inputs: &[&str]) -> u64 {
    let mut key: u64 = 0xcbf2_9ce4_8422_2325;
    for b in inputs.iter().flat_map(|s| s.bytes().chain([0])) {
        key = (key ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size a tarball unpacks to is read from the `.xz` index before unpacking (a small
    /// `.tar.xz` can hold a gigabyte of zeros).
    #[test]
    fn the_unpacked_size_is_known_before_unpacking() {
        // `build` needs xz (as `tar -xf` of the source does); a host without it says so there.
        if cmd::run("xz", &["--version".into()], None, TOOL_TIMEOUT).is_err() {
            println!("skipped: no xz on this host");
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let raw = t.path().join("zeros");
        fs::write(&raw, vec![0u8; 3 << 20]).unwrap();
        cmd::run("xz", &["-0".into(), raw.display().to_string()], None, TOOL_TIMEOUT).unwrap();
        let xz = t.path().join("zeros.xz");
        assert!(fs::metadata(&xz).unwrap().len() < 64 << 10);
        assert_eq!(unpacked_size(&xz).unwrap(), 3 << 20);
        fs::write(t.path().join("bad.xz"), b"not xz").unwrap();
        assert!(unpacked_size(&t.path().join("bad.xz")).is_err());
    }
}
