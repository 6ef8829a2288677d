//! [`DumpError`]: everything that can go wrong writing or reading a dump, each naming the path.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::Bytes;

/// Why a dump could not be written or read. Every variant that concerns a file names it.
#[derive(Debug)]
pub enum DumpError {
    /// An I/O operation on `path` failed.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done (`create`, `write`, `read`, ...).
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// The output file exists and `--force` was not given.
    Exists {
        /// The existing file (or link).
        path: PathBuf,
    },
    /// A file or directory that must exist does not.
    Missing {
        /// The path the error concerns.
        path: PathBuf,
    },
    /// A symbolic link whose target does not exist.
    DanglingLink {
        /// The link.
        path: PathBuf,
    },
    /// A path that must be a directory is not one.
    NotADirectory {
        /// The file the error concerns.
        path: PathBuf,
    },
    /// An input that must be a regular file is a device, FIFO, socket or directory.
    NotRegular {
        /// The file the error concerns.
        path: PathBuf,
        /// What it is.
        is: &'static str,
    },
    /// An input is larger than the reader accepts.
    TooLarge {
        /// The file the error concerns.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// The maximum.
        max: u64,
    },
    /// A JSON file holds more values or deeper nesting than its reader accepts.
    JsonLimit {
        /// The file the error concerns.
        path: PathBuf,
        /// What is over the limit (`JSON values`, `levels of nesting`).
        what: &'static str,
        /// The limit.
        max: u64,
    },
    /// A file (or its decompressed content) holds more than its reader's maximum, found while
    /// reading it (the size it reported was within the maximum, or it reports none).
    Exceeds {
        /// The file the error concerns.
        path: PathBuf,
        /// The maximum.
        max: u64,
        /// The decompressed content is what is too large.
        decompressed: bool,
    },
    /// `meta.json` is not valid JSON of the dump's shape.
    Json {
        /// The file the error concerns.
        path: PathBuf,
        /// The parser's message.
        source: serde_json::Error,
    },
    /// `meta.json` parses but a field has a value this reader does not accept.
    Invalid {
        /// The file the error concerns.
        path: PathBuf,
        /// The field.
        field: &'static str,
        /// Why the value is refused.
        why: String,
    },
    /// `memmap.bin`'s length is not what `meta.json` describes.
    SizeMismatch {
        /// The path of `memmap.bin`.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// `nr_pages` from `meta.json`.
        nr_pages: u64,
        /// `struct_page_size` from `meta.json`.
        struct_page_size: u64,
    },
    /// A text file a user named is not UTF-8 (after gunzip, for a gzip file).
    NotText {
        /// The file the error concerns.
        path: PathBuf,
    },
    /// A gzip file a user named does not decompress.
    Gzip {
        /// The file the error concerns.
        path: PathBuf,
        /// The decoder's error.
        source: io::Error,
    },
    /// A file changed while it was being read.
    Changed {
        /// The file the error concerns.
        path: PathBuf,
    },
    /// The initializer refused the dump's parameters (memmap-core's or hugetlb-init's typed error).
    Input(String),
    /// The storage could not be mapped.
    Map {
        /// What was being mapped.
        what: String,
        /// The OS error.
        source: io::Error,
    },
}

impl DumpError {
    /// `Io` with `path` and `op`.
    pub(crate) fn io(path: impl Into<PathBuf>, op: &'static str) -> impl FnOnce(io::Error) -> DumpError {
        let path = path.into();
        move |source| DumpError::Io { path, op, source }
    }

    /// The exit status the command line gives this error: 2 for bad input (arguments, existing
    /// outputs, malformed or unreadable dumps), 1 for a failure of the machine while writing.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            DumpError::Map { .. } => 1,
            _ => 2,
        }
    }
}

impl fmt::Display for DumpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DumpError::Io { path, op, source } => write!(f, "{}: {op}: {source}", path.display()),
            DumpError::Exists { path } => {
                write!(f, "{}: exists; refusing to replace it (use --force to replace it)", path.display())
            }
            DumpError::Missing { path } => write!(f, "{}: does not exist", path.display()),
            DumpError::DanglingLink { path } => {
                write!(f, "{}: a symbolic link to a file that does not exist", path.display())
            }
            DumpError::NotADirectory { path } => write!(f, "{}: not a directory", path.display()),
            DumpError::NotRegular { path, is } => {
                write!(f, "{}: is {is}, not a regular file", path.display())
            }
            DumpError::TooLarge { path, len, max } => {
                let (len, max) = Bytes::distinct(*len, *max);
                write!(f, "{}: {len} is larger than the {max} this reader accepts", path.display())
            }
            DumpError::Exceeds { path, max, decompressed } => write!(
                f,
                "{}: more than {}{}, the most this reader accepts",
                path.display(),
                Bytes(*max),
                if *decompressed { " once decompressed" } else { "" }
            ),
            DumpError::JsonLimit { path, what, max } => {
                write!(f, "{}: holds more than {max} {what}, the most this reader accepts", path.display())
            }
            DumpError::Json { path, source } => write!(f, "{}: {source}", path.display()),
            DumpError::Invalid { path, field, why } => write!(f, "{}: field {field}: {why}", path.display()),
            DumpError::SizeMismatch { path, len, nr_pages, struct_page_size } => write!(
                f,
                "{}: {len} bytes, but meta.json says {nr_pages} struct pages of {struct_page_size} bytes",
                path.display()
            ),
            DumpError::NotText { path } => write!(f, "{}: not a text file (not UTF-8)", path.display()),
            DumpError::Gzip { path, source } => write!(f, "{}: gzip data: {source}", path.display()),
            DumpError::Changed { path } => write!(f, "{}: changed while being read", path.display()),
            DumpError::Input(why) => f.write_str(why),
            DumpError::Map { what, source } => write!(f, "{what}: {source}"),
        }
    }
}

/// The message of every variant already holds its cause's text (what a command line prints),
/// so no cause is chained as a `source` as well: a report that walks the chain (anyhow's
/// `{:#}`) would print the OS error twice.
impl std::error::Error for DumpError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file a few bytes over the limit used to read "16.00 MiB is larger than the 16.00 MiB":
    /// the two sizes of a message never read alike.
    #[test]
    fn a_size_over_the_limit_never_reads_as_the_limit() {
        let too_large = |len: u64, max: u64| DumpError::TooLarge { path: "f".into(), len, max }.to_string();
        assert_eq!(
            too_large((16 << 20) + 1, 16 << 20),
            "f: 16 MiB + 1 B is larger than the 16 MiB this reader accepts"
        );
        assert_eq!(
            too_large((1 << 30) + (12 << 20), (1 << 30) + (11 << 20)),
            "f: 1086324736 B is larger than the 1085276160 B this reader accepts"
        );
        assert_eq!(too_large(3 << 30, 2 << 30), "f: 3 GiB is larger than the 2 GiB this reader accepts");
    }
}
