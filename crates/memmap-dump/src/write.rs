//! Where a dump goes: `DIR/memmap.bin` and `DIR/meta.json`, written so that no data is lost and
//! the pair stays consistent.
//!
//! Both files are written under temporary names (`O_EXCL | O_NOFOLLOW`), flushed, and only then
//! named: by `link(2)` without `force`, by `rename(2)` with `force` after removing the old
//! `meta.json`. So a failure leaves the old pair, a directory without `meta.json` (which the
//! reader refuses), or the new pair; never a new `memmap.bin` beside an old `meta.json`.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::fd::{AsFd as _, BorrowedFd};
use std::path::{Path, PathBuf};

use rustix::fs::AtFlags;

use crate::error::DumpError;
use crate::output::{Temp, fill, open_dir_fd};

/// The data file's name.
pub const MEMMAP_FILE: &str = "memmap.bin";
/// The metadata file's name.
pub const META_FILE: &str = "meta.json";

/// A checked output directory (see the [module documentation](self)).
#[derive(Debug, Clone)]
pub struct OutputDir {
    dir: PathBuf,
    force: bool,
}

impl OutputDir {
    /// Checks `dir` before any work.
    ///
    /// # Errors
    ///
    /// [`DumpError::NotADirectory`] when `dir` or its nearest existing ancestor is not a
    /// directory, [`DumpError::Io`] when it is not writable, [`DumpError::Exists`] when an
    /// output file exists and `force` is false (or is a directory, even with `force`).
    pub fn prepare(dir: &Path, force: bool) -> Result<OutputDir, DumpError> {
        match fs::metadata(dir) {
            Ok(m) if !m.is_dir() => return Err(DumpError::NotADirectory { path: dir.to_path_buf() }),
            Ok(_) => {
                writable(dir)?;
                for name in [MEMMAP_FILE, META_FILE] {
                    let path = dir.join(name);
                    match fs::symlink_metadata(&path) {
                        Ok(m) if !force || m.is_dir() => return Err(DumpError::Exists { path }),
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => return Err(DumpError::io(path, "inspect")(e)),
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // `create_dir_all` will create it: the nearest existing ancestor must be a
                // writable directory.
                let mut up = dir.parent();
                while let Some(p) = up {
                    let p = if p.as_os_str().is_empty() { Path::new(".") } else { p };
                    match fs::metadata(p) {
                        Ok(m) if m.is_dir() => {
                            writable(p)?;
                            break;
                        }
                        Ok(_) => return Err(DumpError::NotADirectory { path: p.to_path_buf() }),
                        Err(e) if e.kind() == io::ErrorKind::NotFound => up = p.parent(),
                        Err(e) => return Err(DumpError::io(p, "inspect")(e)),
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => {
                return Err(DumpError::NotADirectory { path: dir.to_path_buf() });
            }
            Err(e) => return Err(DumpError::io(dir, "inspect")(e)),
        }
        Ok(OutputDir { dir: dir.to_path_buf(), force })
    }

    /// The directory.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Writes `memmap` and `meta` (the text of `meta.json`) as the [module documentation](self)
    /// says.
    ///
    /// # Errors
    ///
    /// [`DumpError::Io`] naming the path, or [`DumpError::Exists`] when an output file appeared
    /// since [`OutputDir::prepare`] (without `force`). Temporary files are removed on error.
    pub fn commit(&self, memmap: &[u8], meta: &str) -> Result<(), DumpError> {
        fs::create_dir_all(&self.dir).map_err(DumpError::io(&self.dir, "create directory"))?;
        let dir =
            open_dir_fd(&self.dir).map_err(|e| DumpError::io(&self.dir, "open the directory")(e.into()))?;
        let dir = dir.as_fd();
        let tmp_memmap = self.temp(dir, MEMMAP_FILE, memmap)?;
        let tmp_meta = self.temp(dir, META_FILE, meta.as_bytes())?;
        let place = |temp: &Temp<'_>, name: &str| {
            let path = self.dir.join(name);
            match temp.place(OsStr::new(name), self.force) {
                Ok(true) => Ok(()),
                Ok(false) => Err(DumpError::Exists { path }),
                Err((op, e)) => Err(DumpError::io(path, op)(e.into())),
            }
        };
        if self.force {
            match rustix::fs::unlinkat(dir, META_FILE, AtFlags::empty()) {
                Ok(()) | Err(rustix::io::Errno::NOENT) => {}
                Err(e) => {
                    return Err(DumpError::io(self.dir.join(META_FILE), "remove the old file")(e.into()));
                }
            }
            place(&tmp_memmap, MEMMAP_FILE)?;
            place(&tmp_meta, META_FILE)
        } else {
            place(&tmp_memmap, MEMMAP_FILE)?;
            place(&tmp_meta, META_FILE).inspect_err(|_| {
                // The memmap.bin just linked is ours: take it back so no half pair stays.
                let _ = rustix::fs::unlinkat(dir, MEMMAP_FILE, AtFlags::empty());
            })
        }
    }

    /// A temporary file in `dir` holding `data`, for the output file `name`; an error names it.
    fn temp<'d>(&self, dir: BorrowedFd<'d>, name: &str, data: &[u8]) -> Result<Temp<'d>, DumpError> {
        let path = self.dir.join(name);
        let (temp, file) =
            Temp::create(dir).map_err(|e| DumpError::io(&path, "create a temporary file")(e.into()))?;
        fill(file, data).map_err(|(op, e)| DumpError::io(path, op)(e))?;
        Ok(temp)
    }
}

fn writable(dir: &Path) -> Result<(), DumpError> {
    rustix::fs::access(dir, rustix::fs::Access::WRITE_OK)
        .map_err(|e| DumpError::io(dir, "check write access")(io::Error::from(e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("memmap-bench-output-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn writes_a_pair_and_refuses_to_overwrite_without_force() {
        let d = tmpdir("pair");
        let out = OutputDir::prepare(&d, false).unwrap();
        assert!(!d.exists(), "prepare creates nothing");
        out.commit(b"abc", "{}\n").unwrap();
        assert_eq!(fs::read(d.join(MEMMAP_FILE)).unwrap(), b"abc");
        assert_eq!(fs::read_to_string(d.join(META_FILE)).unwrap(), "{}\n");
        assert!(matches!(OutputDir::prepare(&d, false), Err(DumpError::Exists { .. })));
        // A file appearing between prepare and commit is not replaced either.
        fs::remove_file(d.join(META_FILE)).unwrap();
        let out = OutputDir::prepare(&d, true).unwrap();
        let late = OutputDir { force: false, ..out };
        fs::write(d.join(META_FILE), "mine").unwrap();
        assert!(matches!(late.commit(b"x", "y"), Err(DumpError::Exists { .. })));
        assert_eq!(fs::read_to_string(d.join(META_FILE)).unwrap(), "mine");
        // --force replaces both.
        OutputDir::prepare(&d, true).unwrap().commit(b"new", "{\"n\":1}").unwrap();
        assert_eq!(fs::read(d.join(MEMMAP_FILE)).unwrap(), b"new");
        let leftovers: Vec<_> = fs::read_dir(&d)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "temporary files removed");
        let _ = fs::remove_dir_all(&d);
    }

    #[cfg(unix)]
    #[test]
    fn never_writes_through_a_symlink() {
        let d = tmpdir("symlink");
        fs::create_dir_all(&d).unwrap();
        let victim = d.join("victim");
        fs::write(&victim, "7 bytes").unwrap();
        std::os::unix::fs::symlink(&victim, d.join(MEMMAP_FILE)).unwrap();
        assert!(matches!(OutputDir::prepare(&d, false), Err(DumpError::Exists { .. })));
        // With --force the link itself is replaced; the victim keeps its bytes.
        OutputDir::prepare(&d, true).unwrap().commit(&[0u8; 512], "{}").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "7 bytes");
        assert!(!fs::symlink_metadata(d.join(MEMMAP_FILE)).unwrap().file_type().is_symlink());
        // A dangling link counts as existing.
        fs::remove_file(d.join(META_FILE)).unwrap();
        std::os::unix::fs::symlink(d.join("nowhere"), d.join(META_FILE)).unwrap();
        assert!(matches!(OutputDir::prepare(&d, false), Err(DumpError::Exists { .. })));
        assert!(!d.join("nowhere").exists());
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn a_file_is_not_an_output_directory() {
        let d = tmpdir("file");
        fs::write(&d, "x").unwrap();
        assert!(matches!(OutputDir::prepare(&d, false), Err(DumpError::NotADirectory { .. })));
        assert!(matches!(OutputDir::prepare(&d.join("sub"), false), Err(DumpError::NotADirectory { .. })));
        let _ = fs::remove_file(&d);
    }
}
