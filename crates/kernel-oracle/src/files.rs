//! Every path the oracle writes, by one set of rules: nothing is written through a symbolic
//! link, nothing a user made is replaced unless they said so, and nothing is deleted that this
//! run did not create.
//!
//! * Output files ([`write_file`]) are written under a temporary name in their directory and
//!   then renamed into place (`rename(2)` replaces a link rather than following it).
//! * A run's output directory ([`prepare_run_dir`]) must be new or empty, or the user passed
//!   `--force`; the directories the oracle creates below a root it was given must not be
//!   symbolic links ([`create_dirs_below`]).
//! * QEMU's scratch files (serial log, QMP socket, guest memory dumps, a pmem backing file)
//!   live in a fresh directory of the cache made for one boot and removed with it
//!   ([`WorkDir`]).
//! * Paths passed inside QEMU's comma-separated options are escaped as QEMU requires
//!   ([`qemu_opt_path`]).

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};
use memmap_dump::NewFile;

/// Writes `data` to `path`, replacing a file there (never writing through a link).
///
/// # Errors
///
/// The directory is missing or not writable, `path` is a directory, or the write fails.
pub fn write_file(path: &Path, data: &[u8]) -> Result<()> {
    let out = NewFile::prepare(path, true)?;
    out.commit(data)?;
    Ok(())
}

/// Reads a binary file a user named (a kernel image, a module): a regular file (checked
/// before it is opened, so a FIFO or device is never opened) of at most `max` bytes, read
/// with that bound.
///
/// # Errors
///
/// Missing, not a regular file, too large, or a read error; each naming the path.
pub fn read_binary(path: &Path, max: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let m = fs::metadata(path).with_context(|| format!("{}: cannot be read", path.display()))?;
    if !m.is_file() {
        bail!("{}: not a regular file", path.display());
    }
    if m.len() > max {
        bail!("{}: {} bytes, more than the {max} this reads", path.display(), m.len());
    }
    let f = fs::File::open(path).with_context(|| format!("open {}", path.display()))?;
    let mut out = Vec::new();
    f.take(max + 1).read_to_end(&mut out).with_context(|| format!("read {}", path.display()))?;
    if out.len() as u64 > max {
        bail!("{}: grew past {max} bytes while read", path.display());
    }
    Ok(out)
}

/// Creates `root/rel` (every missing component), refusing a component below `root` that is a
/// symbolic link or not a directory. `root` itself is the user's choice and may be a link.
///
/// # Errors
///
/// A component is a link or a file, `rel` leaves `root` (`..` or absolute), or creation fails.
pub fn create_dirs_below(root: &Path, rel: &Path) -> Result<PathBuf> {
    fs::create_dir_all(root).with_context(|| format!("create {}", root.display()))?;
    let mut at = root.to_path_buf();
    for c in rel.components() {
        let Component::Normal(name) = c else {
            bail!("{}: the path must stay inside {}", rel.display(), root.display());
        };
        at.push(name);
        match fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                bail!("{}: is a symbolic link; refusing to write through it", at.display())
            }
            Ok(m) if !m.is_dir() => bail!("{}: exists and is not a directory", at.display()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => match fs::create_dir(&at) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    // Made meanwhile by someone else: check it again.
                    let m = fs::symlink_metadata(&at)?;
                    if !m.is_dir() {
                        bail!("{}: appeared as something other than a directory", at.display());
                    }
                }
                Err(e) => return Err(e).with_context(|| format!("create {}", at.display())),
            },
            Err(e) => return Err(e).with_context(|| format!("inspect {}", at.display())),
        }
    }
    Ok(at)
}

/// Makes `root/rel` the output directory of one configuration's run: created if missing;
/// if it holds files (an earlier run's), refused unless `force`, in which case the files this
/// run writes replace theirs and nothing else in it is touched.
///
/// # Errors
///
/// See [`create_dirs_below`]; and an existing non-empty directory without `force`.
pub fn prepare_run_dir(root: &Path, rel: &Path, force: bool) -> Result<PathBuf> {
    let dir = create_dirs_below(root, rel)?;
    if !force && fs::read_dir(&dir)?.next().is_some() {
        bail!("{}: holds files of an earlier run; refusing to replace them (use --force)", dir.display());
    }
    Ok(dir)
}

/// `path` as QEMU's option parser reads it inside a comma-separated option (`path=`,
/// `mem-path=`, `unix:`): every comma doubled.
///
/// # Errors
///
/// The path is not UTF-8 (QEMU options are text here).
pub fn qemu_opt_path(path: &Path) -> Result<String> {
    let s = path.to_str().with_context(|| format!("{}: not a UTF-8 path", path.display()))?;
    Ok(s.replace(',', ",,"))
}

/// A fresh directory for one boot's scratch files, in `cache/work/`, removed when dropped
/// (unless [`WorkDir::keep`] was called, for a failure to look at).
#[derive(Debug)]
pub struct WorkDir {
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
}

impl WorkDir {
    /// Creates `cache/work/PREFIX-XXXXXX` (mode 0700).
    ///
    /// # Errors
    ///
    /// The cache's `work` directory cannot be created or is a link.
    pub fn new(cache: &Path, prefix: &str) -> Result<WorkDir> {
        let parent = create_dirs_below(cache, Path::new("work"))?;
        let dir = tempfile::Builder::new()
            .prefix(&format!("{prefix}-"))
            .tempdir_in(&parent)
            .with_context(|| format!("create a work directory in {}", parent.display()))?;
        let path = dir.path().to_path_buf();
        Ok(WorkDir { dir: Some(dir), path })
    }

    /// The directory.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Keeps the directory after this value is dropped; returns its path.
    pub fn keep(&mut self) -> PathBuf {
        if let Some(d) = self.dir.take() {
            let _ = d.keep();
        }
        self.path.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new().prefix(&format!("oracle-files-{name}-")).tempdir().unwrap()
    }

    #[test]
    fn commas_are_doubled_for_qemu() {
        assert_eq!(qemu_opt_path(Path::new("/a,b/c d,,e")).unwrap(), "/a,,b/c d,,,,e");
    }

    #[cfg(unix)]
    #[test]
    fn nothing_is_written_through_a_link_below_the_root() {
        let root = scratch("link");
        let victim = scratch("victim");
        std::fs::write(victim.path().join("precious"), "mine").unwrap();
        std::os::unix::fs::symlink(victim.path(), root.path().join("7.2-amd64")).unwrap();
        let e = prepare_run_dir(root.path(), Path::new("7.2-amd64/fsdax"), true).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(!victim.path().join("fsdax").exists());
        assert_eq!(std::fs::read_to_string(victim.path().join("precious")).unwrap(), "mine");
    }

    #[test]
    fn an_earlier_run_is_replaced_only_with_force() {
        let root = scratch("force");
        let dir = prepare_run_dir(root.path(), Path::new("k/c"), false).unwrap();
        write_file(&dir.join("facts.json"), b"{}").unwrap();
        let e = prepare_run_dir(root.path(), Path::new("k/c"), false).unwrap_err();
        assert!(e.to_string().contains("--force"), "{e}");
        assert_eq!(prepare_run_dir(root.path(), Path::new("k/c"), true).unwrap(), dir);
        assert!(prepare_run_dir(root.path(), Path::new("../c"), true).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn a_file_write_replaces_a_link_instead_of_following_it() {
        let root = scratch("replace");
        let victim = root.path().join("victim");
        std::fs::write(&victim, "mine").unwrap();
        let link = root.path().join("console.log");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        write_file(&link, b"guest").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine");
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "guest");
        assert!(!std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    }

    #[test]
    fn a_work_dir_is_fresh_and_removed() {
        let cache = scratch("work");
        let p = {
            let w = WorkDir::new(cache.path(), "7.2-amd64-fsdax").unwrap();
            assert!(w.path().is_dir());
            assert!(w.path().starts_with(cache.path().join("work")));
            w.path().to_path_buf()
        };
        assert!(!p.exists());
        let mut w = WorkDir::new(cache.path(), "x").unwrap();
        let kept = w.keep();
        drop(w);
        assert!(kept.is_dir());
    }
}
