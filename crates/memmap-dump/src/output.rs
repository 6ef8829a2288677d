//! One output file written safely (a plot, a report, a file of the oracle), and the temporary
//! file and placing by name that [`OutputDir`](crate::OutputDir) uses: refused before any work
//! ([`OutputFile::prepare`]), written under a temporary name, then linked (or, with `force`,
//! renamed) into place, never through a link.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::{AsFd as _, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// The longest temporary name: `.memmap-dump-PID-N.tmp`, 10-digit PID, 3-digit attempt.
pub const TEMP_NAME_MAX: usize = 32;

/// Linux's `PATH_MAX`, the terminating NUL included.
pub const PATH_MAX: usize = 4096;

/// Why an output file cannot be written.
#[derive(Debug)]
pub enum OutputError {
    /// The path names no file: empty, or ending in `/`, `.` or `..`.
    NoFileName {
        /// The path given.
        path: PathBuf,
    },
    /// The file's directory does not exist.
    NoDirectory {
        /// The path given.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
    },
    /// The file's directory is not a directory.
    NotADirectory {
        /// The path given.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
    },
    /// The path names a directory (or a link to one).
    IsADirectory {
        /// The path given.
        path: PathBuf,
        /// It is a symbolic link to the directory.
        link: bool,
    },
    /// The file name is longer than the file system allows.
    NameTooLong {
        /// The path given.
        path: PathBuf,
        /// The name's length in bytes.
        len: usize,
        /// The file system's `NAME_MAX`.
        max: u64,
    },
    /// The directory's path is too long to open.
    PathTooLong {
        /// The path given.
        path: PathBuf,
        /// The directory's path length in bytes.
        len: usize,
    },
    /// The file exists and may be replaced with `force`: a regular file, or a symbolic link
    /// (`target`: where it points) that does not point to anything but a regular file.
    Exists {
        /// The path given.
        path: PathBuf,
        /// Where the link points, for a link.
        target: Option<PathBuf>,
    },
    /// The file exists and is never replaced: a device, FIFO or socket, or a link to one.
    NotReplaceable {
        /// The path given.
        path: PathBuf,
        /// What it is (`a FIFO`, `a symbolic link to a character device`).
        is: String,
    },
    /// A system call failed.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
}

impl fmt::Display for OutputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutputError::NoFileName { path } => {
                write!(f, "{:?} names no file: give the name of a file", path.display().to_string())
            }
            OutputError::NoDirectory { path, dir } => write!(
                f,
                "{}: its directory {} does not exist (the directory is not created)",
                path.display(),
                dir.display()
            ),
            OutputError::NotADirectory { path, dir } => {
                write!(f, "{}: {} is not a directory", path.display(), dir.display())
            }
            OutputError::IsADirectory { path, link } => write!(
                f,
                "{}: is {}a directory: give the name of a file in it",
                path.display(),
                if *link { "a symbolic link to " } else { "" }
            ),
            OutputError::NameTooLong { path, len, max } => write!(
                f,
                "{}: the file name is {len} bytes, more than the {max} its file system allows (NAME_MAX)",
                path.display()
            ),
            OutputError::PathTooLong { path, len } => write!(
                f,
                "{}: the directory's path is {len} bytes, more than the {} a path may have (PATH_MAX); \
                 give a shorter path",
                path.display(),
                PATH_MAX - 1
            ),
            OutputError::Exists { path, target: None } => {
                write!(f, "{}: exists; add --force to replace it", path.display())
            }
            OutputError::Exists { path, target: Some(t) } => write!(
                f,
                "{}: exists, a symbolic link to {}; add --force to replace the link itself (what it \
                 points to is left as it is)",
                path.display(),
                t.display()
            ),
            OutputError::NotReplaceable { path, is } => write!(
                f,
                "{}: is {is}, which is never replaced (only a regular file or a link may be): give the \
                 name of a new or a regular file",
                path.display()
            ),
            OutputError::Io { path, op, source } => write!(f, "{}: {op}: {source}", path.display()),
        }
    }
}

impl std::error::Error for OutputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OutputError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// A checked output file (see the [module documentation](self)).
#[derive(Debug)]
pub struct OutputFile {
    path: PathBuf,
    dir: OwnedFd,
    name: OsString,
    force: bool,
}

/// `path` split into its directory and its last component, or `None` when that component names
/// no file (empty, `.` or `..`, or the path ends in `/`).
fn split(path: &Path) -> Option<(PathBuf, OsString)> {
    let bytes = path.as_os_str().as_bytes();
    let (dir, name) = match bytes.iter().rposition(|&b| b == b'/') {
        Some(0) => (&b"/"[..], &bytes[1..]),
        Some(i) => (&bytes[..i], &bytes[i + 1..]),
        None => (&b"."[..], bytes),
    };
    if name.is_empty() || name == b"." || name == b".." {
        return None;
    }
    Some((PathBuf::from(OsStr::from_bytes(dir)), OsStr::from_bytes(name).to_os_string()))
}

/// What a file type is, for messages.
pub(crate) fn kind(t: FileType) -> &'static str {
    match t {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "a file of unknown type",
    }
}

impl OutputFile {
    /// Checks `path` before any work.
    ///
    /// # Errors
    ///
    /// [`OutputError`]: the path names no file, its directory is missing, not a directory, not
    /// writable or too long a path, the name is too long, or the file exists and `force` is
    /// false or it is not a regular file or a link.
    pub fn prepare(path: &Path, force: bool) -> Result<OutputFile, OutputError> {
        let (dir_path, name) = split(path).ok_or_else(|| OutputError::NoFileName { path: path.into() })?;
        let dir = open_dir(path, &dir_path)?;
        let io =
            |op| move |e: rustix::io::Errno| OutputError::Io { path: dir_path.clone(), op, source: e.into() };
        rustix::fs::accessat(&dir, ".", rustix::fs::Access::WRITE_OK, AtFlags::empty())
            .map_err(io("create files in the directory"))?;
        let max = rustix::fs::fstatvfs(&dir).map_or(255, |v| v.f_namemax);
        if name.len() as u64 > max {
            return Err(OutputError::NameTooLong { path: path.into(), len: name.len(), max });
        }
        let file = OutputFile { path: path.into(), dir, name, force };
        file.check_existing(!force)?;
        Ok(file)
    }

    /// The file's path, as given.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Refuses what is at the file's name now: anything if `refuse_any`, else the irreplaceable.
    fn check_existing(&self, refuse_any: bool) -> Result<(), OutputError> {
        let path = || self.path.clone();
        let stat = match rustix::fs::statat(&self.dir, &self.name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(rustix::io::Errno::NOENT) => return Ok(()),
            Err(rustix::io::Errno::NAMETOOLONG) => {
                return Err(OutputError::NameTooLong { path: path(), len: self.name.len(), max: 255 });
            }
            Err(e) => return Err(OutputError::Io { path: path(), op: "inspect", source: e.into() }),
        };
        let target = match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => None,
            FileType::Directory => return Err(OutputError::IsADirectory { path: path(), link: false }),
            FileType::Symlink => {
                // Where it points: anything but a regular file (or nothing) is never replaced.
                if let Ok(st) = rustix::fs::statat(&self.dir, &self.name, AtFlags::empty()) {
                    match FileType::from_raw_mode(st.st_mode) {
                        FileType::RegularFile => {}
                        FileType::Directory => {
                            return Err(OutputError::IsADirectory { path: path(), link: true });
                        }
                        t => {
                            let is = format!("a symbolic link to {}", kind(t));
                            return Err(OutputError::NotReplaceable { path: path(), is });
                        }
                    }
                }
                let t = rustix::fs::readlinkat(&self.dir, &self.name, Vec::new()).ok();
                Some(t.map_or_else(|| PathBuf::from("?"), |t| PathBuf::from(OsStr::from_bytes(t.as_bytes()))))
            }
            t => return Err(OutputError::NotReplaceable { path: path(), is: kind(t).to_string() }),
        };
        if refuse_any { Err(OutputError::Exists { path: path(), target }) } else { Ok(()) }
    }

    /// Creates and removes the temporary file, so a directory nothing can be created in is refused
    /// before a run.
    ///
    /// # Errors
    ///
    /// [`OutputError::Io`] naming the directory.
    pub fn probe(&self) -> Result<(), OutputError> {
        self.temp().map(drop)
    }

    /// A temporary file in the file's directory; an error names the directory.
    fn temp(&self) -> Result<(Temp<'_>, File), OutputError> {
        Temp::create(self.dir.as_fd()).map_err(|e| {
            let dir = split(&self.path).map_or_else(|| self.path.clone(), |(d, _)| d);
            OutputError::Io { path: dir, op: "create a file in the directory", source: e.into() }
        })
    }

    /// Writes `data` and gives it the file's name (see the [module documentation](self)).
    ///
    /// # Errors
    ///
    /// [`OutputError::Io`] naming the path, [`OutputError::Exists`] when the file appeared since
    /// [`OutputFile::prepare`] (without `force`), or what [`prepare`](Self::prepare) refuses
    /// when that appeared (with `force`). The temporary file is removed on error.
    pub fn commit(&self, data: &[u8]) -> Result<(), OutputError> {
        let (temp, file) = self.temp()?;
        fill(file, data).map_err(|(op, source)| OutputError::Io { path: self.path.clone(), op, source })?;
        if self.force {
            self.check_existing(false)?;
        }
        match temp.place(&self.name, self.force) {
            Ok(true) => Ok(()),
            // Something took the name meanwhile: what prepare would say of it.
            Ok(false) => Err(self
                .check_existing(true)
                .err()
                .unwrap_or_else(|| OutputError::Exists { path: self.path.clone(), target: None })),
            Err((op, e)) => Err(OutputError::Io { path: self.path.clone(), op, source: e.into() }),
        }
    }
}

/// Opens `dir` (the directory of `path`) for the `*at` calls.
fn open_dir(path: &Path, dir: &Path) -> Result<OwnedFd, OutputError> {
    if dir.as_os_str().len() >= PATH_MAX {
        return Err(OutputError::PathTooLong { path: path.into(), len: dir.as_os_str().len() });
    }
    open_dir_fd(dir).map_err(|e| match e {
        rustix::io::Errno::NOENT => OutputError::NoDirectory { path: path.into(), dir: dir.into() },
        rustix::io::Errno::NOTDIR => OutputError::NotADirectory { path: path.into(), dir: dir.into() },
        rustix::io::Errno::NAMETOOLONG => {
            OutputError::PathTooLong { path: path.into(), len: dir.as_os_str().len() }
        }
        e => OutputError::Io { path: dir.into(), op: "open the directory", source: e.into() },
    })
}

/// `dir` opened as a descriptor for the `*at` calls only (`O_PATH`: no read or write access).
pub(crate) fn open_dir_fd(dir: &Path) -> rustix::io::Result<OwnedFd> {
    rustix::fs::open(dir, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
}

/// Writes `data` to `file` and flushes it to the disk; an error says which of the two failed.
pub(crate) fn fill(mut file: File, data: &[u8]) -> Result<(), (&'static str, io::Error)> {
    file.write_all(data).map_err(|e| ("write the temporary file", e))?;
    file.sync_all().map_err(|e| ("flush the temporary file", e))
}

/// A temporary file in a directory (held by its descriptor), removed when dropped: after a
/// rename its name is gone, after a link it is a second name, and removing it is harmless.
pub(crate) struct Temp<'d> {
    dir: BorrowedFd<'d>,
    name: String,
}

impl<'d> Temp<'d> {
    /// Creates `.memmap-dump-PID-N.tmp` in `dir` with `O_CREAT | O_EXCL | O_NOFOLLOW`.
    pub(crate) fn create(dir: BorrowedFd<'d>) -> rustix::io::Result<(Temp<'d>, File)> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut attempt = 0u32;
        loop {
            let name = format!(".memmap-dump-{}-{attempt}.tmp", std::process::id());
            match rustix::fs::openat(dir, &name, flags, Mode::from_raw_mode(0o644)) {
                Ok(fd) => return Ok((Temp { dir, name }, File::from(fd))),
                Err(rustix::io::Errno::EXIST) if attempt < 100 => attempt += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// Gives this file the name `name`: by `rename(2)` when `replace`, else by `link(2)`, which
    /// fails rather than replace what took the name meanwhile (`Ok(false)`). Without hard links the
    /// name is checked, then renamed to.
    pub(crate) fn place(
        &self,
        name: &OsStr,
        replace: bool,
    ) -> Result<bool, (&'static str, rustix::io::Errno)> {
        let rename = || {
            rustix::fs::renameat(self.dir, &self.name, self.dir, name)
                .map(|()| true)
                .map_err(|e| ("rename into place", e))
        };
        if replace {
            return rename();
        }
        match rustix::fs::linkat(self.dir, &self.name, self.dir, name, AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::EXIST) => Ok(false),
            Err(rustix::io::Errno::PERM | rustix::io::Errno::OPNOTSUPP) => {
                match rustix::fs::statat(self.dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(_) => Ok(false),
                    Err(rustix::io::Errno::NOENT) => rename(),
                    Err(e) => Err(("inspect", e)),
                }
            }
            Err(e) => Err(("link into place", e)),
        }
    }
}

impl Drop for Temp<'_> {
    fn drop(&mut self) {
        let _ = rustix::fs::unlinkat(self.dir, &self.name, AtFlags::empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_name_no_file_are_refused() {
        for p in ["", "dir/", "dir/.", "..", ".", "/", "a/.."] {
            assert!(split(Path::new(p)).is_none(), "{p:?}");
        }
        assert_eq!(split(Path::new("x.svg")), Some((PathBuf::from("."), OsString::from("x.svg"))));
        assert_eq!(split(Path::new("/x.svg")), Some((PathBuf::from("/"), OsString::from("x.svg"))));
        assert_eq!(split(Path::new("a/b/x.svg")), Some((PathBuf::from("a/b"), OsString::from("x.svg"))));
        let e = OutputFile::prepare(Path::new("/tmp/"), true).unwrap_err();
        assert_eq!(e.to_string(), "\"/tmp/\" names no file: give the name of a file");
    }

    #[test]
    fn the_temporary_name_fits_its_bound() {
        let name = format!(".memmap-dump-{}-{}.tmp", u32::MAX, 100);
        assert!(name.len() <= TEMP_NAME_MAX, "{name}");
    }

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("memmap-dump-output-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_new_file_never_replaces_without_force_nor_follows_a_link() {
        use std::fs;
        let d = tmpdir("newfile");
        let victim = d.join("victim");
        fs::write(&victim, "7 bytes").unwrap();
        let link = d.join("plot.svg");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(matches!(
            OutputFile::prepare(&link, false),
            Err(OutputError::Exists { target: Some(_), .. })
        ));
        OutputFile::prepare(&link, true).unwrap().commit(b"<svg/>").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "7 bytes");
        assert_eq!(fs::read_to_string(&link).unwrap(), "<svg/>");
        assert!(!fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        let fresh = OutputFile::prepare(&d.join("new.svg"), false).unwrap();
        fs::write(d.join("new.svg"), "appeared meanwhile").unwrap();
        assert!(matches!(fresh.commit(b"x"), Err(OutputError::Exists { target: None, .. })));
        assert_eq!(fs::read_to_string(d.join("new.svg")).unwrap(), "appeared meanwhile");
        assert!(matches!(OutputFile::prepare(&d, true), Err(OutputError::IsADirectory { link: false, .. })));
        assert!(matches!(
            OutputFile::prepare(&d.join("no/dir/x.svg"), true),
            Err(OutputError::NoDirectory { .. })
        ));
        // A FIFO that took the name after prepare is not replaced, even with force.
        let late = OutputFile::prepare(&d.join("late"), true).unwrap();
        assert!(std::process::Command::new("mkfifo").arg(d.join("late")).status().unwrap().success());
        assert!(matches!(late.commit(b"x"), Err(OutputError::NotReplaceable { .. })));
        let leftovers: Vec<_> = fs::read_dir(&d)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
        let _ = fs::remove_dir_all(&d);
    }
}
