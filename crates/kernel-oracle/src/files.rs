//! Every path the oracle writes, by one set of rules: nothing is written through a symbolic
//! link, nothing a user made is replaced unless they said so, nothing is deleted that this run
//! did not create, and every name taken from data passes [`name`] before it is joined to a path.

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};
use memmap_dump::OutputFile;

/// Writes `data` to `path`, replacing a file there (never writing through a link).
///
/// # Errors
///
/// The directory is missing or not writable, `path` is a directory, or the write fails.
pub fn write_file(path: &Path, data: &[u8]) -> Result<()> {
    let out = OutputFile::prepare(path, true)?;
    out.commit(data)?;
    Ok(())
}

/// The longest name [`name`] accepts.
pub const MAX_NAME_BYTES: usize = 128;

/// What [`name`] accepts, for error messages.
pub const NAME_RULE: &str = "1 to 128 ASCII letters, digits and `. _ + ~ : -`, not starting with `.` or `-`";

/// Checks that `value` (`what` names it in the error) can be one file or directory name: 1 to
/// [`MAX_NAME_BYTES`] ASCII letters, digits and `. _ + ~ : -`, not starting with `.` or `-`.
///
/// # Errors
///
/// Any other value, quoted, with what would be accepted.
pub fn name<'a>(what: &str, value: &'a str) -> Result<&'a str> {
    let ok_byte = |b: u8| b.is_ascii_alphanumeric() || b"._+~:-".contains(&b);
    let ok = !value.is_empty()
        && value.len() <= MAX_NAME_BYTES
        && !value.starts_with(['.', '-'])
        && value.bytes().all(ok_byte);
    if !ok {
        bail!("{what} {value:?} cannot name a file or directory: it must be {NAME_RULE}");
    }
    Ok(value)
}

/// Creates `root/rel` (every missing component), refusing a component below `root` that is a
/// symbolic link or not a directory. `root` itself is the user's choice and may be a link.
///
/// # Errors
///
/// A component is a link or a file, `rel` leaves `root` (`..` or absolute), or creation fails.
pub fn create_dirs_below(root: &Path, rel: &Path) -> Result<PathBuf> {
    if fs::metadata(root).is_ok_and(|m| !m.is_dir()) {
        bail!("{}: not a directory", root.display());
    }
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

/// Makes `root/rel` the output directory of one configuration's run: one holding an earlier
/// run's files is refused unless `force`, and then only this run's files are replaced.
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

/// `path` inside a comma-separated QEMU option: every comma doubled.
///
/// # Errors
///
/// The path is not UTF-8 (QEMU options are text here).
pub fn qemu_opt_path(path: &Path) -> Result<String> {
    let s = path.to_str().with_context(|| format!("{}: not a UTF-8 path", path.display()))?;
    Ok(s.replace(',', ",,"))
}

/// A fresh directory for one boot's scratch files in `cache/work/`, removed on drop unless kept.
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
    fn names_from_data_are_one_plain_component() {
        for ok in ["7.2.13+deb14-amd64", "6.1.0-50-amd64", "path-7.3.0-rc1", "1:10.0.2+ds-2~bpo12+1", "a_b"] {
            assert_eq!(name("release", ok).unwrap(), ok);
        }
        let long = "x".repeat(MAX_NAME_BYTES + 1);
        for bad in ["", ".", "..", "../../x", "/abs", "a/b", ".hidden", "-rf", "a b", "a\0b", "é", &long] {
            let e = name("the release read from bzImage", bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("the release read from bzImage {bad:?} cannot name")), "{e}");
            assert!(e.ends_with(NAME_RULE), "{e}");
        }
    }

    /// A reader that checks a path's type and then opens it blocks on a FIFO put there in
    /// between (an open for reading waits for a writer); this one opens non-blocking and checks
    /// what it opened. A swapper thread keeps replacing the file with a FIFO and back while
    /// the reader reads; every read must end, with the file's bytes or "a FIFO".
    #[cfg(unix)]
    #[test]
    fn a_fifo_swapped_in_for_a_file_never_blocks_the_reader() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{Arc, mpsc};
        let dir = scratch("fifo-race");
        let path = dir.path().join("bzImage");
        std::fs::write(&path, b"image").unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        // FIFOs made ahead by one `mkfifo` call, so that the swapper only renames (fast enough
        // to land between a check and an open).
        let fifos: Vec<_> = (0..4000).map(|i| dir.path().join(format!("fifo{i}"))).collect();
        let made = std::process::Command::new("mkfifo").args(&fifos).status().is_ok_and(|s| s.success());
        if !made {
            eprintln!("skipped: mkfifo failed");
            return;
        }
        let swapper = {
            let (dir, path, stop) = (dir.path().to_path_buf(), path.clone(), stop.clone());
            std::thread::spawn(move || {
                for fifo in &fifos {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let file = dir.join("file.tmp");
                    std::fs::write(&file, b"image").unwrap();
                    std::fs::rename(&file, &path).unwrap();
                    std::fs::rename(fifo, &path).unwrap();
                }
                stop.store(true, Ordering::SeqCst);
            })
        };
        let (tx, rx) = mpsc::channel();
        let reader = {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut files, mut fifos) = (0u64, 0u64);
                while !stop.load(Ordering::SeqCst) {
                    match memmap_dump::read_user_bytes(&path, 1 << 20) {
                        Ok(b) => {
                            assert_eq!(b, b"image");
                            files += 1;
                        }
                        Err(e) if e.to_string().contains("a FIFO") => fifos += 1,
                        Err(e) => panic!("{e:#}"),
                    }
                }
                let _ = tx.send((files, fifos));
            })
        };
        let got = rx.recv_timeout(std::time::Duration::from_secs(60));
        stop.store(true, Ordering::SeqCst);
        let Ok((files, fifos)) = got else {
            // Unblock the reader (open the FIFO it waits on for writing) before failing.
            let _ = std::fs::OpenOptions::new().write(true).open(&path);
            panic!("a read blocked on a FIFO swapped in for {}", path.display());
        };
        reader.join().unwrap();
        swapper.join().unwrap();
        assert!(files > 0 && fifos > 0, "{files} files, {fifos} FIFOs read");
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
