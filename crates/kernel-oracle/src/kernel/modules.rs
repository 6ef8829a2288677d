//! The kernel's modules the guest loads: found by name below a directory, read and
//! decompressed (gzip, xz, zstd) within a size limit.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Largest module read, compressed or decompressed (libnvdimm is about 400 KiB).
pub const MAX_MODULE_BYTES: u64 = 64 << 20;

/// Suffixes of module files, as `find_modules` looks for them.
pub const MODULE_SUFFIXES: [&str; 4] = [".ko", ".ko.xz", ".ko.zst", ".ko.gz"];

/// Finds the files of the modules `wanted` (paths like `nvdimm/libnvdimm`) below `dir`, as
/// `NAME.ko[.xz|.zst|.gz]` (`-` and `_` alike), preferring the wanted subdirectory and not
/// following symbolic links to directories.
///
/// # Errors
///
/// `dir` is not a directory, or some modules are not found (all of them are named).
pub fn find_modules(dir: &Path, wanted: &[&str]) -> Result<BTreeMap<String, PathBuf>> {
    match fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => bail!("--modules {}: not a directory (the directory holding the modules)", dir.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("--modules {}: does not exist", dir.display())
        }
        Err(e) => bail!("--modules {}: {e}", dir.display()),
    }
    let norm = |s: &str| s.replace('-', "_");
    let mut found: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    let mut stack = vec![(dir.to_path_buf(), 0u32)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            let path = e.path();
            if ft.is_dir() && depth < 12 {
                stack.push((path, depth + 1));
            } else if ft.is_file() || ft.is_symlink() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(base) = MODULE_SUFFIXES.iter().find_map(|s| name.strip_suffix(s)) {
                    found.entry(norm(base)).or_default().push(path);
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    let mut missing = Vec::new();
    for w in wanted {
        let base = w.rsplit('/').next().unwrap_or(w);
        let mut cands = found.get(&norm(base)).cloned().unwrap_or_default();
        cands.sort();
        let sub = Path::new(w).parent().unwrap_or(Path::new(""));
        let pick =
            cands.iter().find(|p| p.parent().is_some_and(|q| q.ends_with(sub))).or(cands.first()).cloned();
        match pick {
            Some(p) => {
                out.insert(base.to_string(), p);
            }
            None => missing.push(base.to_string()),
        }
    }
    if !missing.is_empty() {
        bail!(
            "--modules {}: no file for module(s) {} (looked for NAME{} below it)",
            dir.display(),
            missing.join(", "),
            MODULE_SUFFIXES.join(", NAME")
        );
    }
    Ok(out)
}

/// How a module file is compressed, by its suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// `.ko`.
    None,
    /// `.ko.gz`, decompressed in process.
    Gzip,
    /// `.ko.xz`, by `xz` (xz-utils).
    Xz,
    /// `.ko.zst`, by `zstd`.
    Zstd,
}

impl Compression {
    /// The compression of a module file named `name`.
    #[must_use]
    pub fn of(name: &str) -> Compression {
        if name.ends_with(".ko.xz") {
            Compression::Xz
        } else if name.ends_with(".ko.zst") {
            Compression::Zstd
        } else if name.ends_with(".ko.gz") {
            Compression::Gzip
        } else {
            Compression::None
        }
    }
}

/// `data` (the file `path`) decompressed, at most `max` bytes: gzip in process, `xz -dc` or
/// `zstd -dc` read up to `max + 1` bytes, killed there, with a 128 MiB decoder memory limit.
///
/// # Errors
///
/// More than `max` bytes decompressed (the error says `max`), corrupt data, or a missing
/// decompressor (named with its package).
pub fn decompress(path: &Path, data: &[u8], how: Compression, max: u64) -> Result<Vec<u8>> {
    let too_large = || {
        anyhow::anyhow!(
            "{}: more than {} once decompressed; a module is at most {}",
            path.display(),
            memmap_dump::Bytes(max),
            memmap_dump::Bytes(max)
        )
    };
    let via = |tool: &str, pkg: &str, args: &[&str]| -> Result<Vec<u8>> {
        match crate::cmd::filter(tool, args, data, max)
            .with_context(|| format!("{}: {tool} (install {pkg})", path.display()))?
        {
            crate::cmd::Filtered::Output(v) => Ok(v),
            crate::cmd::Filtered::TooLong => Err(too_large()),
        }
    };
    match how {
        Compression::None => {
            if data.len() as u64 > max {
                return Err(too_large());
            }
            Ok(data.to_vec())
        }
        Compression::Gzip => {
            memmap_dump::read_capped(flate2::read::MultiGzDecoder::new(data), max, data.len() as u64)
                .with_context(|| format!("{}: gzip data", path.display()))?
                .ok_or_else(too_large)
        }
        Compression::Xz => via("xz", "xz-utils", &["-dc", "--memlimit-decompress=128MiB"]),
        Compression::Zstd => via("zstd", "zstd", &["-dc", "--memory=128MB"]),
    }
}

/// The bytes of a module file, decompressed by its suffix, at most [`MAX_MODULE_BYTES`] before
/// and after.
///
/// # Errors
///
/// Not a regular file, too large before or after decompression (the error says the limit),
/// or the decompressor fails (named).
pub fn module_bytes(path: &Path) -> Result<Vec<u8>> {
    let raw = memmap_dump::read_user_bytes(path, MAX_MODULE_BYTES)?;
    match Compression::of(&path.to_string_lossy()) {
        Compression::None => Ok(raw),
        how => decompress(path, &raw, how, MAX_MODULE_BYTES),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` copies of one compressed frame of 1 MiB of zeros: concatenated frames (gzip members,
    /// xz streams, zstd frames) decompress one after the other, so `n` MiB from a few KiB.
    fn bomb(how: Compression, n: usize) -> Option<Vec<u8>> {
        let zeros = vec![0u8; 1 << 20];
        let frame = match how {
            Compression::Gzip => {
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
                std::io::Write::write_all(&mut gz, &zeros).unwrap();
                gz.finish().unwrap()
            }
            Compression::Xz | Compression::Zstd => {
                let tool = if how == Compression::Xz { "xz" } else { "zstd" };
                match crate::cmd::filter(tool, &["-c", "-9"], &zeros, 1 << 20) {
                    Ok(crate::cmd::Filtered::Output(v)) => v,
                    _ => return None,
                }
            }
            Compression::None => zeros,
        };
        Some(frame.repeat(n))
    }

    #[test]
    fn a_module_bomb_stops_at_the_module_limit() {
        let dir = tempfile::Builder::new().prefix("oracle-module-bomb-").tempdir().unwrap();
        for (how, suffix) in [(Compression::Gzip, "gz"), (Compression::Xz, "xz"), (Compression::Zstd, "zst")]
        {
            // 96 MiB of zeros from well under 100 KiB.
            let Some(b) = bomb(how, 96) else {
                eprintln!("skipped .ko.{suffix}: its compressor is not installed");
                continue;
            };
            assert!(b.len() < 100 << 10, "{suffix}: {} bytes", b.len());
            let path = dir.path().join(format!("libnvdimm.ko.{suffix}"));
            std::fs::write(&path, &b).unwrap();
            let e = format!("{:#}", module_bytes(&path).unwrap_err());
            assert!(
                e.contains("more than 64 MiB once decompressed; a module is at most 64 MiB"),
                "{suffix}: {e}"
            );
            assert!(e.contains(&path.display().to_string()), "{e}");
            // Under the limit, the same frames decompress to what was compressed.
            let small = bomb(how, 3).unwrap();
            std::fs::write(&path, &small).unwrap();
            let out = module_bytes(&path).unwrap();
            assert!(out.len() == 3 << 20 && out.iter().all(|&b| b == 0), "{suffix}");
            // Corrupt data is an error naming the file, not a panic.
            std::fs::write(&path, &small[..small.len() / 2]).unwrap();
            let e = format!("{:#}", module_bytes(&path).unwrap_err());
            assert!(e.contains(&path.display().to_string()), "{suffix}: {e}");
        }
    }

    #[test]
    fn a_missing_modules_directory_is_not_called_a_file() {
        let e = find_modules(Path::new("/nonexistent"), &["nvdimm/libnvdimm"]).unwrap_err().to_string();
        assert_eq!(e, "--modules /nonexistent: does not exist");
        let f = tempfile::NamedTempFile::new().unwrap();
        let e = find_modules(f.path(), &["nvdimm/libnvdimm"]).unwrap_err().to_string();
        assert!(e.ends_with(": not a directory (the directory holding the modules)"), "{e}");
    }
}
