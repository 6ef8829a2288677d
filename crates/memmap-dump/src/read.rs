//! Reading a dump back, checking everything before reading data.
//!
//! [`parse_meta`] and [`parse_dump`] are pure (bytes in, typed result out: what the fuzz target
//! drives); [`open_dump`] applies them to a directory: `meta.json` must be a regular file of at
//! most [`MAX_META_BYTES`], parse, and carry a known `format`, `kind`, `endianness` and
//! `struct_page_size`; `memmap.bin` must be a regular file (not `/dev/zero`, a FIFO or a
//! directory) whose length, from `fstat` before any byte is read, is exactly `nr_pages *
//! struct_page_size` (computed with checked arithmetic). Only then is data read, by
//! [`read_dump`] into memory or by [`crate::diff::diff_dumps`] a chunk at a time.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::error::{DumpError, file_kind};
use crate::meta::{DumpMeta, FORMAT_VERSION, KINDS};
use crate::write::{MEMMAP_FILE, META_FILE};

/// The largest `meta.json` accepted (a 100 GiB zone-device dump's is about 1 MiB).
pub const MAX_META_BYTES: u64 = 64 << 20;

/// The struct page sizes a dump may have: 64, or 72 with `WANT_PAGE_VIRTUAL`.
pub const STRUCT_PAGE_SIZES: [usize; 2] = [64, 72];

/// The byte orders a dump may be written in.
pub const ENDIANNESS: [&str; 2] = ["little", "big"];

/// Parses and validates `meta.json` (`path` names it in errors); returns the metadata and the
/// length `memmap.bin` must have.
///
/// # Errors
///
/// [`DumpError::TooLarge`], [`DumpError::Json`] or [`DumpError::Invalid`].
pub fn parse_meta(json: &[u8], path: &Path) -> Result<(DumpMeta, u64), DumpError> {
    if json.len() as u64 > MAX_META_BYTES {
        return Err(DumpError::TooLarge {
            path: path.to_path_buf(),
            len: json.len() as u64,
            max: MAX_META_BYTES,
        });
    }
    let meta: DumpMeta = serde_json::from_slice(json)
        .map_err(|source| DumpError::Json { path: path.to_path_buf(), source })?;
    let len = validate_meta(&meta, path)?;
    Ok((meta, len))
}

/// Checks the fields of `meta` this reader relies on (`path` names it in errors); returns the
/// length `memmap.bin` must have.
///
/// # Errors
///
/// [`DumpError::Invalid`] naming the field.
pub fn validate_meta(meta: &DumpMeta, path: &Path) -> Result<u64, DumpError> {
    let invalid = |field, why: String| DumpError::Invalid { path: path.to_path_buf(), field, why };
    if meta.format != FORMAT_VERSION {
        return Err(invalid(
            "format",
            format!("version {} (this program reads version {FORMAT_VERSION})", meta.format),
        ));
    }
    if !KINDS.contains(&meta.kind.as_str()) {
        return Err(invalid("kind", format!("{:?} (expected one of {})", meta.kind, KINDS.join(", "))));
    }
    if !ENDIANNESS.contains(&meta.endianness.as_str()) {
        return Err(invalid("endianness", format!("{:?} (expected \"little\" or \"big\")", meta.endianness)));
    }
    if !STRUCT_PAGE_SIZES.contains(&meta.struct_page_size) {
        return Err(invalid("struct_page_size", format!("{} (expected 64 or 72)", meta.struct_page_size)));
    }
    if meta.start_pfn.checked_add(meta.nr_pages).is_none() {
        return Err(invalid(
            "nr_pages",
            format!("start_pfn {:#x} + nr_pages {} overflows", meta.start_pfn, meta.nr_pages),
        ));
    }
    meta.nr_pages.checked_mul(meta.struct_page_size as u64).ok_or_else(|| {
        invalid(
            "nr_pages",
            format!("{} struct pages of {} bytes overflow", meta.nr_pages, meta.struct_page_size),
        )
    })
}

/// Validates a dump held in memory: `meta_json` as [`parse_meta`], then `memmap`'s length.
///
/// # Errors
///
/// As [`parse_meta`], and [`DumpError::SizeMismatch`].
pub fn parse_dump(meta_json: &[u8], memmap: &[u8]) -> Result<DumpMeta, DumpError> {
    let (meta, len) = parse_meta(meta_json, Path::new(META_FILE))?;
    check_len(&meta, len, memmap.len() as u64, Path::new(MEMMAP_FILE))?;
    Ok(meta)
}

fn check_len(meta: &DumpMeta, expect: u64, len: u64, path: &Path) -> Result<(), DumpError> {
    if len == expect {
        Ok(())
    } else {
        Err(DumpError::SizeMismatch {
            path: path.to_path_buf(),
            len,
            nr_pages: meta.nr_pages,
            struct_page_size: meta.struct_page_size as u64,
        })
    }
}

/// A validated dump whose `memmap.bin` is open and not yet read.
#[derive(Debug)]
pub struct OpenDump {
    /// The metadata.
    pub meta: DumpMeta,
    /// The directory.
    pub dir: PathBuf,
    /// `memmap.bin`'s path.
    pub memmap_path: PathBuf,
    /// `memmap.bin`, positioned at its start.
    pub memmap: File,
    /// Its length in bytes.
    pub len: u64,
}

/// Opens `path` for reading if it is a regular file of at most `max` bytes: checked on the
/// path before opening (so a FIFO is never opened) and on the open file.
fn open_regular(path: &Path, max: u64) -> Result<(File, u64), DumpError> {
    let check = |m: &fs::Metadata| -> Result<u64, DumpError> {
        if !m.is_file() {
            return Err(DumpError::NotRegular { path: path.to_path_buf(), is: file_kind(m.file_type()) });
        }
        if m.len() > max {
            return Err(DumpError::TooLarge { path: path.to_path_buf(), len: m.len(), max });
        }
        Ok(m.len())
    };
    let before = check(&fs::metadata(path).map_err(DumpError::io(path, "open"))?)?;
    let mut o = OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Non-blocking: a FIFO swapped in after the check must not hang the open.
        o.custom_flags(libc::O_NONBLOCK);
    }
    let file = o.open(path).map_err(DumpError::io(path, "open"))?;
    let len = check(&file.metadata().map_err(DumpError::io(path, "stat"))?)?;
    if len != before {
        return Err(DumpError::Changed { path: path.to_path_buf() });
    }
    Ok((file, len))
}

/// The largest file other than a dump that [`read_user_file`] reads whole, before and after
/// gunzip: 16 MiB (a distribution kernel's `.config` is about 300 KiB).
pub const MAX_USER_FILE_BYTES: u64 = 16 << 20;

/// A text file a user named, read whole by [`read_user_file`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserFile {
    /// The path read.
    pub path: PathBuf,
    /// Its text (decompressed when it was gzip data).
    pub text: String,
    /// It was gzip data (`/proc/config.gz`, `config.gz`).
    pub gzip: bool,
}

impl UserFile {
    /// What was read, for a log line: `PATH (N lines, gzip)`.
    #[must_use]
    pub fn describe(&self) -> String {
        let lines = self.text.lines().count();
        let gz = if self.gzip { ", gzip" } else { "" };
        format!("{} ({lines} lines{gz})", self.path.display())
    }
}

/// Reads the text file `path` a user named (a kernel `.config`), plain or gzip: only a regular
/// file (a FIFO or device is refused before it is opened, and opened non-blocking in case one
/// is swapped in), at most `max` bytes as stored and `max` bytes of text after gunzip. Files
/// that report a size of 0 (procfs) are read up to the cap.
///
/// # Errors
///
/// [`DumpError::NotRegular`], [`DumpError::TooLarge`], [`DumpError::Gzip`],
/// [`DumpError::NotText`] or [`DumpError::Io`], each naming `path`.
pub fn read_user_file(path: &Path, max: u64) -> Result<UserFile, DumpError> {
    let mut raw = read_user_bytes(path, max)?;
    let too_large = |len: u64| DumpError::TooLarge { path: path.to_path_buf(), len, max };
    let gzip = raw.starts_with(&[0x1f, 0x8b]);
    if gzip {
        let mut text = Vec::new();
        flate2::read::MultiGzDecoder::new(&raw[..])
            .take(max.saturating_add(1))
            .read_to_end(&mut text)
            .map_err(|source| DumpError::Gzip { path: path.to_path_buf(), source })?;
        if text.len() as u64 > max {
            return Err(too_large(text.len() as u64));
        }
        raw = text;
    }
    let text = String::from_utf8(raw).map_err(|_| DumpError::NotText { path: path.to_path_buf() })?;
    Ok(UserFile { path: path.to_path_buf(), text, gzip })
}

/// Reads the file `path` a user named (a dump's data file, a facts file) whole: only a regular
/// file (a FIFO or device is refused before it is opened), at most `max` bytes, whatever size
/// it reports (procfs files report 0).
///
/// # Errors
///
/// [`DumpError::NotRegular`], [`DumpError::TooLarge`] or [`DumpError::Io`], each naming `path`.
pub fn read_user_bytes(path: &Path, max: u64) -> Result<Vec<u8>, DumpError> {
    let (file, _) = open_regular(path, max)?;
    let mut raw = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut raw).map_err(DumpError::io(path, "read"))?;
    if raw.len() as u64 > max {
        return Err(DumpError::TooLarge { path: path.to_path_buf(), len: raw.len() as u64, max });
    }
    Ok(raw)
}

/// Opens and validates the dump in `dir` (see the [module documentation](self)); reads only
/// `meta.json`.
///
/// # Errors
///
/// Any [`DumpError`] of the checks, naming the file.
pub fn open_dump(dir: &Path) -> Result<OpenDump, DumpError> {
    match fs::metadata(dir) {
        Ok(m) if !m.is_dir() => return Err(DumpError::NotADirectory { path: dir.to_path_buf() }),
        Ok(_) => {}
        Err(e) => return Err(DumpError::io(dir, "open")(e)),
    }
    let meta_path = dir.join(META_FILE);
    let (file, len) = open_regular(&meta_path, MAX_META_BYTES)?;
    let mut json = Vec::with_capacity(len as usize);
    file.take(MAX_META_BYTES + 1).read_to_end(&mut json).map_err(DumpError::io(&meta_path, "read"))?;
    if json.len() as u64 != len {
        return Err(DumpError::Changed { path: meta_path });
    }
    let (meta, expect) = parse_meta(&json, &meta_path)?;
    let memmap_path = dir.join(MEMMAP_FILE);
    let (memmap, len) = open_regular(&memmap_path, u64::MAX)?;
    check_len(&meta, expect, len, &memmap_path)?;
    Ok(OpenDump { meta, dir: dir.to_path_buf(), memmap_path, memmap, len })
}

/// Reads the dump in `dir` into memory after [`open_dump`]'s checks.
///
/// # Errors
///
/// As [`open_dump`]; [`DumpError::Io`] when the memory cannot be allocated or the file
/// shrinks while being read.
pub fn read_dump(dir: &Path) -> Result<(DumpMeta, Vec<u8>), DumpError> {
    let mut d = open_dump(dir)?;
    let len =
        usize::try_from(d.len).map_err(|e| DumpError::io(&d.memmap_path, "read")(io::Error::other(e)))?;
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(len)
        .map_err(|e| DumpError::io(&d.memmap_path, "allocate memory to read")(io::Error::other(e)))?;
    (&mut d.memmap).take(d.len).read_to_end(&mut bytes).map_err(DumpError::io(&d.memmap_path, "read"))?;
    if bytes.len() != len {
        return Err(DumpError::Changed { path: d.memmap_path });
    }
    Ok((d.meta, bytes))
}
