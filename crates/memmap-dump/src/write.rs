//! Where a dump goes: `DIR/memmap.bin` and `DIR/meta.json`, written so that no data is lost and
//! the pair stays consistent.
//!
//! * [`OutputDir::prepare`] runs before any work: `DIR` must be (or be creatable as) a
//!   writable directory, and an existing `memmap.bin` or `meta.json` (a file, or a link, even a
//!   dangling one) is refused unless `force`.
//! * [`OutputDir::commit`] creates `DIR` if needed, writes both files under temporary names in
//!   `DIR` (created with `O_CREAT | O_EXCL | O_NOFOLLOW`: never through a symbolic link, never
//!   onto an existing file), flushes them, and only then gives them their names. Without
//!   `force` a name is given by `link(2)`, which fails rather than replace a file that appeared
//!   meanwhile; with `force` the old `meta.json` is removed first, then `memmap.bin` and
//!   `meta.json` are renamed over (`rename(2)` replaces a link, it does not follow it). So a
//!   failure at any point leaves either the old pair, or a directory without `meta.json` (which
//!   the reader refuses as incomplete), or the new pair; never a new `memmap.bin` beside an old
//!   `meta.json`.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::error::DumpError;

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

    /// Writes `memmap` and `meta` (the text of `meta.json`) as described in the
    /// [module documentation](self).
    ///
    /// # Errors
    ///
    /// [`DumpError::Io`] naming the path, or [`DumpError::Exists`] when an output file appeared
    /// since [`OutputDir::prepare`] (without `force`). Temporary files are removed on error.
    pub fn commit(&self, memmap: &[u8], meta: &str) -> Result<(), DumpError> {
        fs::create_dir_all(&self.dir).map_err(DumpError::io(&self.dir, "create directory"))?;
        let tmp_memmap = Temp::write(&self.dir, MEMMAP_FILE, memmap)?;
        let tmp_meta = Temp::write(&self.dir, META_FILE, meta.as_bytes())?;
        let (memmap_path, meta_path) = (self.dir.join(MEMMAP_FILE), self.dir.join(META_FILE));
        if self.force {
            match fs::remove_file(&meta_path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(DumpError::io(meta_path, "remove the old file")(e)),
            }
            fs::rename(&tmp_memmap.path, &memmap_path)
                .map_err(DumpError::io(&memmap_path, "rename into place"))?;
            fs::rename(&tmp_meta.path, &meta_path).map_err(DumpError::io(&meta_path, "rename into place"))?;
        } else {
            link_new(&tmp_memmap.path, &memmap_path)?;
            if let Err(e) = link_new(&tmp_meta.path, &meta_path) {
                // The memmap.bin just linked is ours: take it back so no half pair stays.
                let _ = fs::remove_file(&memmap_path);
                return Err(e);
            }
        }
        Ok(())
    }
}

/// An output file other than a dump (a plot, a report), by the rules of [`OutputDir`]:
/// [`NewFile::prepare`] checks it before any work (its directory exists and is writable; the
/// file does not exist, or `force` and it is not a directory), and [`NewFile::commit`] writes
/// the data under a temporary name in the same directory (never through a symbolic link), then
/// gives it its name: with `link(2)` (which fails rather than replace a file that appeared
/// meanwhile), or with `force` by `rename(2)`, which replaces a link rather than following it.
#[derive(Debug, Clone)]
pub struct NewFile {
    path: PathBuf,
    dir: PathBuf,
    force: bool,
}

impl NewFile {
    /// Checks `path` before any work.
    ///
    /// # Errors
    ///
    /// [`DumpError::NotADirectory`] when its directory is missing or not a directory,
    /// [`DumpError::Io`] when that is not writable, [`DumpError::Exists`] when the file exists
    /// and `force` is false (or is a directory, even with `force`).
    pub fn prepare(path: &Path, force: bool) -> Result<NewFile, DumpError> {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if path.file_name().is_none() {
            return Err(DumpError::NotRegular { path: path.to_path_buf(), is: "a directory" });
        }
        match fs::metadata(&dir) {
            Ok(m) if m.is_dir() => writable(&dir)?,
            Ok(_) => return Err(DumpError::NotADirectory { path: dir }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(DumpError::NotADirectory { path: dir });
            }
            Err(e) => return Err(DumpError::io(dir, "inspect")(e)),
        }
        match fs::symlink_metadata(path) {
            Ok(m) if !force || m.is_dir() => return Err(DumpError::Exists { path: path.to_path_buf() }),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(DumpError::io(path, "inspect")(e)),
        }
        Ok(NewFile { path: path.to_path_buf(), dir, force })
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `data` and gives it the file's name (see [`NewFile`]).
    ///
    /// # Errors
    ///
    /// [`DumpError::Io`] naming the path, or [`DumpError::Exists`] when the file appeared since
    /// [`NewFile::prepare`] (without `force`). The temporary file is removed on error.
    pub fn commit(&self, data: &[u8]) -> Result<(), DumpError> {
        let name = self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = Temp::write(&self.dir, &name, data)?;
        if self.force {
            fs::rename(&tmp.path, &self.path).map_err(DumpError::io(&self.path, "rename into place"))
        } else {
            link_new(&tmp.path, &self.path)
        }
    }
}

/// Gives `tmp` the name `dst` unless `dst` exists (as anything, a dangling link included).
fn link_new(tmp: &Path, dst: &Path) -> Result<(), DumpError> {
    match fs::hard_link(tmp, dst) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            Err(DumpError::Exists { path: dst.to_path_buf() })
        }
        // A file system without hard links: check, then rename (a file created between the
        // two is replaced; nothing better is possible there).
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EOPNOTSUPP | libc::EXDEV)) => {
            if fs::symlink_metadata(dst).is_ok() {
                return Err(DumpError::Exists { path: dst.to_path_buf() });
            }
            fs::rename(tmp, dst).map_err(DumpError::io(dst, "rename into place"))
        }
        Err(e) => Err(DumpError::io(dst, "link into place")(e)),
    }
}

fn writable(dir: &Path) -> Result<(), DumpError> {
    rustix::fs::access(dir, rustix::fs::Access::WRITE_OK)
        .map_err(|e| DumpError::io(dir, "check write access")(io::Error::from(e)))
}

/// A temporary file in the output directory, removed when dropped (after a rename or link
/// its name is gone or a second name, and removing it is harmless).
struct Temp {
    path: PathBuf,
}

impl Temp {
    /// Creates `.NAME.PID.N.tmp` in `dir` (exclusively, not through a link) and writes `data`.
    fn write(dir: &Path, name: &str, data: &[u8]) -> Result<Temp, DumpError> {
        let mut attempt = 0u32;
        let (temp, mut file) = loop {
            let path = dir.join(format!(".{name}.{}.{attempt}.tmp", std::process::id()));
            match create_exclusive(&path) {
                Ok(f) => break (Temp { path }, f),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => attempt += 1,
                Err(e) => return Err(DumpError::io(path, "create")(e)),
            }
        };
        file.write_all(data).map_err(DumpError::io(&temp.path, "write"))?;
        file.sync_all().map_err(DumpError::io(&temp.path, "flush"))?;
        Ok(temp)
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// `open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644)`.
fn create_exclusive(path: &Path) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NOFOLLOW).mode(0o644);
    }
    o.open(path)
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

    #[cfg(unix)]
    #[test]
    fn a_new_file_never_replaces_without_force_nor_follows_a_link() {
        let d = tmpdir("newfile");
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        let victim = d.join("victim");
        fs::write(&victim, "7 bytes").unwrap();
        let link = d.join("plot.svg");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(matches!(NewFile::prepare(&link, false), Err(DumpError::Exists { .. })));
        NewFile::prepare(&link, true).unwrap().commit(b"<svg/>").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "7 bytes");
        assert_eq!(fs::read_to_string(&link).unwrap(), "<svg/>");
        let fresh = NewFile::prepare(&d.join("new.svg"), false).unwrap();
        fs::write(d.join("new.svg"), "appeared meanwhile").unwrap();
        assert!(matches!(fresh.commit(b"x"), Err(DumpError::Exists { .. })));
        assert_eq!(fs::read_to_string(d.join("new.svg")).unwrap(), "appeared meanwhile");
        assert!(matches!(NewFile::prepare(&d, true), Err(DumpError::Exists { .. })));
        assert!(matches!(
            NewFile::prepare(&d.join("no/dir/x.svg"), true),
            Err(DumpError::NotADirectory { .. })
        ));
        let leftovers: Vec<_> = fs::read_dir(&d)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
        let _ = fs::remove_dir_all(&d);
    }
}
