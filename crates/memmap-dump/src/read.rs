//! Reading a dump back, checking everything before reading data.
//!
//! [`parse_meta`] and [`parse_dump`] are pure (what the fuzz target drives); [`open_dump`]
//! applies them to a directory. `meta.json` is held to [`META_LIMITS`] before it is parsed, and
//! `memmap.bin` must be a regular file of exactly `nr_pages * struct_page_size` bytes by `fstat`
//! before a byte is read. Every file is opened non-blocking and its type checked on the opened
//! descriptor ([`read_file`]), so a FIFO or device is refused, never waited on; every read is
//! bounded ([`read_capped`]).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::error::DumpError;
use crate::json::{JsonLimits, check_json};
use crate::meta::{DumpMeta, FORMAT_VERSION, KINDS};
use crate::write::{MEMMAP_FILE, META_FILE};

/// The largest `meta.json` accepted (a 100 GiB zone-device dump's is about 1 MiB).
pub const MAX_META_BYTES: u64 = 32 << 20;

/// The most JSON values a `meta.json` may hold, counted as [`check_json`] counts them: a 4 TiB
/// zone-device dump or about 80 Ki hugetlb folios.
pub const MAX_META_VALUES: u64 = 2 << 20;

/// The deepest nesting a `meta.json` may have (the format nests 4 deep).
pub const MAX_META_DEPTH: u32 = 32;

/// The limits [`parse_meta`] holds a `meta.json` to.
pub const META_LIMITS: JsonLimits =
    JsonLimits { max_bytes: MAX_META_BYTES, max_values: MAX_META_VALUES, max_depth: MAX_META_DEPTH };

/// The struct page sizes a dump may have: 64, or 72 with `WANT_PAGE_VIRTUAL`.
pub const STRUCT_PAGE_SIZES: [usize; 2] = [64, 72];

/// The byte orders a dump may be written in.
pub const ENDIANNESS: [&str; 2] = ["little", "big"];

/// Parses and validates `meta.json`; returns the metadata and the length `memmap.bin` must have.
///
/// # Errors
///
/// [`DumpError::TooLarge`], [`DumpError::JsonLimit`], [`DumpError::Json`] or
/// [`DumpError::Invalid`].
pub fn parse_meta(json: &[u8], path: &Path) -> Result<(DumpMeta, u64), DumpError> {
    check_json(json, &META_LIMITS, path)?;
    let meta: DumpMeta = serde_json::from_slice(json)
        .map_err(|source| DumpError::Json { path: path.to_path_buf(), source })?;
    let len = validate_meta(&meta, path)?;
    Ok((meta, len))
}

/// Checks the fields of `meta` this reader relies on; returns the length `memmap.bin` must have.
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
    let len = meta.nr_pages.checked_mul(meta.struct_page_size as u64).ok_or_else(|| {
        invalid(
            "nr_pages",
            format!("{} struct pages of {} bytes overflow", meta.nr_pages, meta.struct_page_size),
        )
    })?;
    validate_detail(meta).map_err(|(field, why)| invalid(field, why))?;
    Ok(len)
}

/// Checks the kind-specific fields the diff reads roles from, where present.
fn validate_detail(meta: &DumpMeta) -> Result<(), (&'static str, String)> {
    let d = &meta.detail;
    let order_ok = |v: &serde_json::Value| v.as_u64().is_some_and(|o| o < 64);
    if let Some(v) = d.get("vmemmap_shift").filter(|v| !order_ok(v)) {
        return Err(("vmemmap_shift", format!("{v} (expected an order from 0 to 63)")));
    }
    if let Some(v) = d.get("init_start_pfn").filter(|v| v.as_u64().is_none()) {
        return Err(("init_start_pfn", format!("{v} (expected a pfn)")));
    }
    if let Some(v) = d.get("compound_nr_pages").filter(|v| v.as_u64().is_none()) {
        return Err(("compound_nr_pages", format!("{v} (expected a count of struct pages)")));
    }
    let Some(folios) = d.get("folios") else { return Ok(()) };
    let list = folios.as_array().ok_or(("folios", "not an array".to_string()))?;
    for (i, f) in list.iter().enumerate() {
        let head = f.get("head_pfn").and_then(serde_json::Value::as_u64);
        if head.is_none() || !f.get("order").is_some_and(order_ok) {
            return Err((
                "folios",
                format!("folio {i}: {f} (expected a head_pfn and an order from 0 to 63)"),
            ));
        }
    }
    Ok(())
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

/// Whether a reader follows a symbolic link at the path it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Follow it: a path a user named (a kernel image, a `.config`) may be a link.
    Follow,
    /// Refuse it (`O_NOFOLLOW`): a file whose name came from data, inside a directory the user
    /// named, must be that directory's own file.
    Refuse,
}

/// Opens `path` if it is a regular file of at most `max` bytes: non-blocking and `O_NOCTTY`, so
/// a FIFO or device never blocks, and checked with `fstat` on the opened descriptor.
fn open_regular(path: &Path, max: u64, links: Links) -> Result<(File, u64), DumpError> {
    let mut o = OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let nofollow = if links == Links::Refuse { libc::O_NOFOLLOW } else { 0 };
        o.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | nofollow);
    }
    let file = o.open(path).map_err(|e| open_error(path, e, links))?;
    let m = file.metadata().map_err(DumpError::io(path, "stat"))?;
    if !m.is_file() {
        return Err(DumpError::NotRegular {
            path: path.to_path_buf(),
            is: crate::output::kind(file_type(&m)),
        });
    }
    if m.len() > max {
        return Err(DumpError::TooLarge { path: path.to_path_buf(), len: m.len(), max });
    }
    Ok((file, m.len()))
}

/// The type of the file `m` describes.
fn file_type(m: &fs::Metadata) -> rustix::fs::FileType {
    rustix::fs::FileType::from_raw_mode(std::os::unix::fs::MetadataExt::mode(m))
}

/// The error of a failed open: a missing file, a refused link, or the OS error.
fn open_error(path: &Path, e: io::Error, links: Links) -> DumpError {
    let is_link = fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    match e.kind() {
        // ELOOP: O_NOFOLLOW met a link.
        _ if links == Links::Refuse && is_link => {
            DumpError::NotRegular { path: path.to_path_buf(), is: "a symbolic link" }
        }
        io::ErrorKind::NotFound if is_link => DumpError::DanglingLink { path: path.to_path_buf() },
        io::ErrorKind::NotFound => DumpError::Missing { path: path.to_path_buf() },
        _ => DumpError::io(path, "open")(e),
    }
}

/// Reads all of `r`, at most `max` bytes: `Ok(None)` when there is more. The buffer starts at
/// `hint + 1` bytes and doubles up to `max + 1`, whatever the source claims or holds.
///
/// # Errors
///
/// The read fails, or the buffer cannot be allocated.
pub fn read_capped(mut r: impl Read, max: u64, hint: u64) -> io::Result<Option<Vec<u8>>> {
    let limit = usize::try_from(max.saturating_add(1)).unwrap_or(usize::MAX);
    let mut buf = Vec::new();
    let mut want = usize::try_from(hint.saturating_add(1)).unwrap_or(usize::MAX).clamp(1, limit);
    loop {
        buf.try_reserve_exact(want - buf.len()).map_err(io::Error::other)?;
        let room = (want - buf.len()) as u64;
        // Reads until EOF or the buffer is full; a full buffer is not grown by `read_to_end`
        // when the `take` is used up.
        let n = r.by_ref().take(room).read_to_end(&mut buf)?;
        if (n as u64) < room {
            return Ok(Some(buf));
        }
        if want == limit {
            return Ok(None);
        }
        want = want.saturating_mul(2).min(limit);
    }
}

/// Reads the file `path` whole if it is a regular file of at most `max` bytes, whatever size it
/// reports (procfs files report 0); `links` says whether a symbolic link is followed.
///
/// # Errors
///
/// [`DumpError::Missing`], [`DumpError::NotRegular`], [`DumpError::TooLarge`] or
/// [`DumpError::Io`], each naming `path`.
pub fn read_file(path: &Path, max: u64, links: Links) -> Result<Vec<u8>, DumpError> {
    let (file, len) = open_regular(path, max, links)?;
    match read_capped(file, max, len).map_err(DumpError::io(path, "read"))? {
        Some(bytes) => Ok(bytes),
        None => Err(DumpError::Exceeds { path: path.to_path_buf(), max, decompressed: false }),
    }
}

/// The largest file [`read_user_file`] reads whole, before and after gunzip.
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

/// Reads the text file `path` a user named (a kernel `.config`), plain or gzip, at most `max`
/// bytes before and after gunzip.
///
/// # Errors
///
/// [`DumpError::Missing`], [`DumpError::NotRegular`], [`DumpError::TooLarge`],
/// [`DumpError::Exceeds`], [`DumpError::Gzip`], [`DumpError::NotText`] or [`DumpError::Io`],
/// each naming `path`.
pub fn read_user_file(path: &Path, max: u64) -> Result<UserFile, DumpError> {
    let mut raw = read_user_bytes(path, max)?;
    let gzip = raw.starts_with(&[0x1f, 0x8b]);
    if gzip {
        let text = read_capped(flate2::read::MultiGzDecoder::new(&raw[..]), max, raw.len() as u64)
            .map_err(|source| DumpError::Gzip { path: path.to_path_buf(), source })?;
        raw = text.ok_or_else(|| DumpError::Exceeds { path: path.to_path_buf(), max, decompressed: true })?;
    }
    let text = String::from_utf8(raw).map_err(|_| DumpError::NotText { path: path.to_path_buf() })?;
    Ok(UserFile { path: path.to_path_buf(), text, gzip })
}

/// Reads the file `path` a user named whole: [`read_file`] following a symbolic link.
///
/// # Errors
///
/// As [`read_file`].
pub fn read_user_bytes(path: &Path, max: u64) -> Result<Vec<u8>, DumpError> {
    read_file(path, max, Links::Follow)
}

/// Opens and validates the dump in `dir`; reads only `meta.json`.
///
/// # Errors
///
/// Any [`DumpError`] of the checks, naming the file.
pub fn open_dump(dir: &Path) -> Result<OpenDump, DumpError> {
    match fs::metadata(dir) {
        Ok(m) if !m.is_dir() => return Err(DumpError::NotADirectory { path: dir.to_path_buf() }),
        Ok(_) => {}
        Err(e) => return Err(open_error(dir, e, Links::Follow)),
    }
    let meta_path = dir.join(META_FILE);
    let json = read_file(&meta_path, MAX_META_BYTES, Links::Follow)?;
    let (meta, expect) = parse_meta(&json, &meta_path)?;
    drop(json);
    let memmap_path = dir.join(MEMMAP_FILE);
    let (memmap, len) = open_regular(&memmap_path, u64::MAX, Links::Follow)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "memmap-dump-read-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_capped_read_never_holds_more_than_the_maximum() {
        // A source of 1 MiB read with a 1000-byte maximum: refused, after a buffer of 1001.
        let big = vec![7u8; 1 << 20];
        assert_eq!(read_capped(&big[..], 1000, 0).unwrap(), None);
        assert_eq!(read_capped(&big[..], 1 << 20, 0).unwrap().map(|v| v.len()), Some(1 << 20));
        // A hint larger than the maximum does not allocate it.
        let v = read_capped(&big[..10], 1000, u64::MAX).unwrap().unwrap();
        assert_eq!((v.len(), v.capacity() <= 1001), (10, true));
        // The buffer grows by doubling and stops at the maximum + 1.
        let v = read_capped(&big[..5000], 5000, 0).unwrap().unwrap();
        assert!(v.len() == 5000 && v.capacity() <= 5001, "{}", v.capacity());
    }

    #[test]
    fn a_gzip_bomb_stops_at_the_maximum() {
        use std::io::Write;
        let d = scratch();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&vec![b'a'; 64 << 20]).unwrap();
        let bomb = gz.finish().unwrap();
        assert!(bomb.len() < 128 << 10);
        fs::write(d.join("config.gz"), &bomb).unwrap();
        let e = read_user_file(&d.join("config.gz"), 1 << 20).unwrap_err();
        assert!(matches!(e, DumpError::Exceeds { decompressed: true, max, .. } if max == 1 << 20), "{e}");
        assert!(e.to_string().ends_with("more than 1 MiB once decompressed, the most this reader accepts"));
        fs::remove_dir_all(&d).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn fifos_devices_links_and_missing_files_are_refused_by_what_was_opened() {
        let d = scratch();
        let fifo = d.join("fifo");
        let ok = std::process::Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success());
        if ok {
            // Opened non-blocking, refused by its fstat: no writer, no wait.
            let e = read_file(&fifo, 100, Links::Follow).unwrap_err();
            assert!(matches!(e, DumpError::NotRegular { is: "a FIFO", .. }), "{e}");
        }
        let e = read_file(Path::new("/dev/zero"), 100, Links::Follow).unwrap_err();
        assert!(matches!(e, DumpError::NotRegular { is: "a character device", .. }), "{e}");
        fs::write(d.join("real"), b"data").unwrap();
        std::os::unix::fs::symlink(d.join("real"), d.join("link")).unwrap();
        assert_eq!(read_file(&d.join("link"), 100, Links::Follow).unwrap(), b"data");
        let e = read_file(&d.join("link"), 100, Links::Refuse).unwrap_err();
        assert!(matches!(e, DumpError::NotRegular { is: "a symbolic link", .. }), "{e}");
        let e = read_file(&d.join("nope"), 100, Links::Follow).unwrap_err();
        assert_eq!(e.to_string(), format!("{}: does not exist", d.join("nope").display()));
        std::os::unix::fs::symlink(d.join("nope"), d.join("dangling")).unwrap();
        let e = read_file(&d.join("dangling"), 100, Links::Follow).unwrap_err();
        assert!(e.to_string().ends_with("dangling: a symbolic link to a file that does not exist"), "{e}");
        let e = read_file(&d.join("real"), 3, Links::Follow).unwrap_err();
        assert!(matches!(e, DumpError::TooLarge { len: 4, max: 3, .. }), "{e}");
        let e = open_dump(&d.join("nope")).unwrap_err();
        assert_eq!(e.to_string(), format!("{}: does not exist", d.join("nope").display()));
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn metadata_round_trips_and_names_a_missing_or_repeated_field() {
        let dump = crate::ZoneDeviceDump {
            config: memmap_core::KernelConfig::X86_64,
            layout72: false,
            memory_type: memmap_core::MemoryType::Generic,
            vmemmap_shift: 9,
            altmap: None,
            start_pfn: 0x100000,
            nr_pages: 1024,
            nid: 0,
            strategy: memmap_core::Strategy::Auto,
            page_ref_trace: false,
            boot_memory_end_pfn: 0,
            boot_memory_above_pfn: u64::MAX,
        }
        .run()
        .unwrap();
        let text = serde_json::to_string(&dump.meta).unwrap();
        let (back, len) = parse_meta(text.as_bytes(), Path::new("meta.json")).unwrap();
        assert_eq!((back, len), (dump.meta.clone(), 1024 * 64));
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v.as_object_mut().unwrap().remove("nr_pages");
        let e = parse_meta(v.to_string().as_bytes(), Path::new("meta.json")).unwrap_err();
        assert!(e.to_string().contains("missing field `nr_pages`"), "{e}");
        let twice = text.replacen("{", "{\"kind\":\"hugetlb\",", 1);
        let e = parse_meta(twice.as_bytes(), Path::new("meta.json")).unwrap_err();
        assert!(e.to_string().contains("duplicate field `kind`"), "{e}");
    }
}
