//! stream-vm-memory on arbitrary guest memory layouts (up to four regions of odd sizes at odd
//! guest addresses, adjacent or with gaps, possibly at the top of the address space; each
//! private anonymous, a memfd, read-only, `PROT_NONE`, or a memfd truncated after mapping so
//! that its last pages lie past the end of the file) and sequences of operations on arbitrary
//! ranges (across regions and gaps, wrapping past 2^64, empty, at any alignment): zero, fill,
//! pattern fill, copy, their parallel forms, reset with every policy, populate.
//!
//! Every operation either returns the typed error a model predicts (`AddressOverflow`,
//! `OutOfRange` with the first address no region covers, `EmptyPattern`, `Unwritable` for the
//! first region of the range that is not writable or whose file ends before the range does)
//! and changes nothing, or leaves exactly the bytes and the dirty bits (page by page, per
//! region) the model says. A store into memory that cannot take it would kill the process: the
//! fuzzer reports it as a crash.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use stream_par::Threads;
use stream_vm_memory::{
    Error, HugePageAdvice, Placement, PopulateOptions, ResetPolicy, Unwritable, Workers, fill, fill_parallel,
    fill_pattern, fill_pattern_parallel, populate, reset, write, zero, zero_parallel,
};
use vm_memory::bitmap::{AtomicBitmap, Bitmap};
use vm_memory::{
    Bytes, FileOffset, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion, GuestRegionMmap,
    MmapRegion,
};

type Mem = GuestMemoryMmap<AtomicBitmap>;

const PAGE: u64 = 4096;

#[derive(Debug, Arbitrary)]
struct RegionSpec {
    /// Gap before the region, in bytes (0: adjacent to the previous one).
    gap: u16,
    /// Size: 1 byte to 96 KiB.
    len: u16,
    /// What backs it ([`Backing::of`]).
    kind: u8,
    /// For a truncated memfd: the bytes the file keeps (modulo the region's length).
    keep: u16,
}

/// A region's backing.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Backing {
    /// Private anonymous memory, read-write: what `GuestMemoryMmap::from_ranges` maps.
    Anon,
    /// A memfd, mapped shared, read-write.
    Memfd,
    /// Private anonymous memory mapped `PROT_READ`.
    ReadOnly,
    /// Private anonymous memory mapped `PROT_NONE`: nothing can read it either.
    ProtNone,
    /// A memfd truncated to `keep` bytes after mapping: its pages from the one after the file's
    /// last on cannot be read or written.
    Short { keep: usize },
}

impl Backing {
    /// Mostly anonymous memory, so that the writes have room to be checked.
    fn of(spec: &RegionSpec, len: usize) -> Backing {
        match spec.kind % 10 {
            0..=4 => Backing::Anon,
            5 | 6 => Backing::Memfd,
            7 => Backing::ReadOnly,
            8 => Backing::ProtNone,
            _ => Backing::Short { keep: usize::from(spec.keep) % len },
        }
    }

    /// The bytes from the region's start that can be read and written: all, none, or up to
    /// the end of the truncated file's last page.
    fn accessible(self, len: usize) -> usize {
        match self {
            Backing::Short { keep } => keep.next_multiple_of(PAGE as usize).min(len),
            Backing::ProtNone => 0,
            _ => len,
        }
    }

    fn writable(self) -> bool {
        !matches!(self, Backing::ReadOnly | Backing::ProtNone)
    }
}

/// A region of `len` bytes at `guest` backed by `b`, and the memfd to truncate, if any.
fn region(
    b: Backing,
    guest: u64,
    len: usize,
) -> Option<(GuestRegionMmap<AtomicBitmap>, Option<std::fs::File>)> {
    let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    let (file, prot, flags) = match b {
        Backing::Anon => (None, rw, anon),
        Backing::ReadOnly => (None, libc::PROT_READ, anon),
        Backing::ProtNone => (None, libc::PROT_NONE, anon),
        Backing::Memfd | Backing::Short { .. } => {
            // SAFETY: `memfd_create` reads the NUL-terminated name and returns a new descriptor
            // (or -1), which is then owned by the `File` alone.
            let fd = unsafe { libc::memfd_create(c"fuzz-guest-memory".as_ptr(), libc::MFD_CLOEXEC) };
            if fd < 0 {
                return None;
            }
            // SAFETY: `fd` is a new descriptor nothing else owns.
            let f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
            f.set_len(len as u64).ok()?;
            (Some(f), rw, libc::MAP_SHARED)
        }
    };
    let keep = match (&file, b) {
        (Some(f), Backing::Short { .. }) => Some(f.try_clone().ok()?),
        _ => None,
    };
    let m = MmapRegion::<AtomicBitmap>::build(file.map(|f| FileOffset::new(f, 0)), len, prot, flags).ok()?;
    Some((GuestRegionMmap::new(m, GuestAddress(guest))?, keep))
}

#[derive(Debug, Arbitrary)]
enum Kind {
    Zero,
    Fill(u8),
    Pattern(Vec<u8>),
    Write(u8),
    ZeroParallel(u8),
    FillParallel(u8, u8),
    PatternParallel(Vec<u8>, u8),
    Reset(u8, u8),
    Populate(u8),
}

#[derive(Debug, Arbitrary)]
struct Op {
    kind: Kind,
    /// Start: an offset from the first region's start (wrapping), or raw when `raw`.
    at: u64,
    raw: bool,
    /// Length (bounded to a few regions' worth unless `huge`).
    len: u32,
    huge: bool,
}

#[derive(Debug, Arbitrary)]
struct Input {
    /// Guest address of the first region, in pages (or the top of the address space).
    base: u32,
    top: bool,
    regions: Vec<RegionSpec>,
    ops: Vec<Op>,
}

/// The model: each region's `(start, bytes, dirty pages)` and backing.
struct Model {
    regions: Vec<(u64, Vec<u8>, Vec<bool>)>,
    backings: Vec<Backing>,
}

impl Model {
    /// The predicted outcome of a write of `len` bytes at `addr`: `Ok` or the error. The range
    /// is walked in address order and the first problem is the answer: a hole, a region that is
    /// not writable, or pages past the end of a truncated file.
    fn check(&self, addr: u64, len: u64) -> Result<(), Expected> {
        if u128::from(addr) + u128::from(len) > 1 << 64 {
            return Err(Expected::Overflow);
        }
        let end = u128::from(addr) + u128::from(len);
        let mut cur = u128::from(addr);
        while cur < end {
            let Some(k) = self
                .regions
                .iter()
                .position(|r| u128::from(r.0) <= cur && cur < u128::from(r.0) + r.1.len() as u128)
            else {
                return Err(Expected::OutOfRange(cur as u64));
            };
            let (start, bytes, _) = &self.regions[k];
            let b = self.backings[k];
            let seg_end = (u128::from(*start) + bytes.len() as u128).min(end);
            if !b.writable() {
                return Err(Expected::Protection(cur as u64));
            }
            let inside = u128::from(*start) + b.accessible(bytes.len()) as u128;
            if seg_end > inside {
                return Err(Expected::PastEnd(inside.max(cur) as u64));
            }
            cur = seg_end;
        }
        Ok(())
    }

    /// Sets byte `addr + i` to `f(i)` for the range, marking the pages dirty.
    fn apply(&mut self, addr: u64, len: u64, dirty: bool, f: impl Fn(u64) -> u8) {
        for (start, bytes, pages) in &mut self.regions {
            let (s, e) = (*start, *start + bytes.len() as u64);
            let (a, b) = (addr.max(s), (u128::from(addr) + u128::from(len)).min(u128::from(e)) as u64);
            for g in a..b.max(a) {
                bytes[(g - s) as usize] = f(g - addr);
                if dirty {
                    pages[((g - s) / PAGE) as usize] = true;
                }
            }
        }
    }
}

#[derive(Debug, PartialEq)]
enum Expected {
    Overflow,
    OutOfRange(u64),
    EmptyPattern,
    /// `Unwritable::Protection` from this guest address.
    Protection(u64),
    /// `Unwritable::PastEndOfFile` from this guest address.
    PastEnd(u64),
}

fn outcome<T>(r: Result<T, Error>) -> Result<(), Expected> {
    match r {
        Ok(_) => Ok(()),
        Err(Error::AddressOverflow { .. }) => Err(Expected::Overflow),
        Err(Error::OutOfRange { first_invalid, .. }) => Err(Expected::OutOfRange(first_invalid.0)),
        Err(Error::EmptyPattern) => Err(Expected::EmptyPattern),
        Err(Error::Unwritable { addr, why: Unwritable::Protection { .. }, .. }) => {
            Err(Expected::Protection(addr.0))
        }
        Err(Error::Unwritable { addr, why: Unwritable::PastEndOfFile { .. }, .. }) => {
            Err(Expected::PastEnd(addr.0))
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
}

fn workers(t: u8) -> Workers {
    Workers::new(Threads::Fixed(usize::from(t % 3) + 1)).with_placement(Placement::Unpinned)
}

/// The guest memory of `input`, filled, its model, the truncated memfds (kept open), the first
/// region's address and the bytes of the layout; `None` for an empty or impossible layout.
fn build(input: &Input) -> Option<(Mem, Model, Vec<Option<std::fs::File>>, u64, u64)> {
    // The layout.
    let mut specs = Vec::new();
    let total: u64 =
        input.regions.iter().take(4).map(|r| u64::from(r.gap) + (u64::from(r.len) % 0x1_8000) + 1).sum();
    let mut at = if input.top {
        u64::MAX - total - 1
    } else {
        u64::from(input.base) * PAGE + u64::from(input.base % 7)
    };
    for r in input.regions.iter().take(4) {
        at += u64::from(r.gap);
        let len = (u64::from(r.len) % 0x1_8000) + 1;
        specs.push((GuestAddress(at), len as usize, Backing::of(r, len as usize)));
        at += len;
    }
    if specs.is_empty() {
        return None;
    }
    let mut regions = Vec::new();
    let mut files = Vec::new();
    for &(g, n, b) in &specs {
        let (r, f) = region(b, g.0, n)?;
        regions.push(r);
        files.push(f);
    }
    let mem = Mem::from_regions(regions).ok()?;
    let mut model = Model { regions: Vec::new(), backings: Vec::new() };
    for ((r, &(_, _, b)), f) in mem.iter().zip(&specs).zip(&files) {
        let n = r.len() as usize;
        let mut fill: Vec<u8> = (0..n).map(|i| (i as u8).wrapping_mul(31) ^ 0x5a).collect();
        if b.writable() {
            mem.write_slice(&fill, r.start_addr()).unwrap();
        } else {
            fill.fill(0);
        }
        if let (Some(f), Backing::Short { keep }) = (f, b) {
            // Truncated after mapping: the tail of the last page reads as zero, the pages after
            // it are gone.
            f.set_len(keep as u64).unwrap();
            fill[keep..b.accessible(n)].fill(0);
        }
        vm_memory::MmapRegion::bitmap(r).reset();
        model.regions.push((r.start_addr().0, fill, vec![false; n.div_ceil(PAGE as usize)]));
        model.backings.push(b);
    }
    let first = specs[0].0.0;
    Some((mem, model, files, first, total))
}

/// Every byte that can be read and every dirty bit of `mem` against `model`, after `op`.
fn check_all(mem: &Mem, model: &Model, op: &Op) {
    for ((r, (start, bytes, pages)), b) in mem.iter().zip(&model.regions).zip(&model.backings) {
        let n = b.accessible(bytes.len());
        let mut back = vec![0u8; n];
        mem.read_slice(&mut back, GuestAddress(*start)).unwrap();
        assert!(back == bytes[..n], "bytes of the region at {start:#x} differ from the model after {op:?}");
        for (k, &d) in pages.iter().enumerate() {
            assert_eq!(r.bitmap().dirty_at(k * PAGE as usize), d, "dirty bit {k} of {start:#x} after {op:?}");
        }
    }
}

fuzz_target!(|input: Input| {
    let Some((mem, mut model, _files, first, total)) = build(&input) else { return };
    for op in input.ops.iter().take(8) {
        let addr =
            if op.raw { op.at } else { first.wrapping_add(op.at % (2 * total + 2)).wrapping_sub(total / 2) };
        let len = if op.huge { u64::from(op.len) << 16 } else { u64::from(op.len) % (total + 64) };
        let len_us = len as usize;
        let g = GuestAddress(addr);
        // What the call returns, and what it writes if it succeeds (None: nothing).
        type Writer = Box<dyn Fn(u64) -> u8>;
        let (got, write_model, dirty): (Result<(), Expected>, Option<Writer>, bool) = match &op.kind {
            Kind::Zero => (outcome(zero(&mem, g, len_us)), Some(Box::new(|_| 0)), true),
            Kind::Fill(v) => {
                let v = *v;
                (outcome(fill(&mem, g, len_us, v)), Some(Box::new(move |_| v)), true)
            }
            Kind::Pattern(p) => {
                let p2 = p.clone();
                (
                    outcome(fill_pattern(&mem, g, len_us, p)),
                    Some(Box::new(move |i| p2[(i % p2.len().max(1) as u64) as usize % p2.len().max(1)])),
                    true,
                )
            }
            Kind::Write(seed) => {
                if len > 1 << 20 {
                    continue;
                }
                let seed = *seed;
                let buf: Vec<u8> = (0..len).map(|i| (i as u8) ^ seed).collect();
                (outcome(write(&mem, g, &buf)), Some(Box::new(move |i| (i as u8) ^ seed)), true)
            }
            Kind::ZeroParallel(t) => {
                (outcome(zero_parallel(&mem, g, len_us, &workers(*t))), Some(Box::new(|_| 0)), true)
            }
            Kind::FillParallel(v, t) => {
                let v = *v;
                (outcome(fill_parallel(&mem, g, len_us, v, &workers(*t))), Some(Box::new(move |_| v)), true)
            }
            Kind::PatternParallel(p, t) => {
                let p2 = p.clone();
                (
                    outcome(fill_pattern_parallel(&mem, g, len_us, p, &workers(*t))),
                    Some(Box::new(move |i| p2[(i % p2.len().max(1) as u64) as usize % p2.len().max(1)])),
                    true,
                )
            }
            Kind::Reset(policy, t) => {
                let policy = match policy % 4 {
                    0 => ResetPolicy::Auto,
                    1 => ResetPolicy::InPlace,
                    2 => ResetPolicy::Discard { repopulate: false },
                    _ => ResetPolicy::Discard { repopulate: true },
                };
                (outcome(reset(&mem, g, len_us, policy, &workers(*t))), Some(Box::new(|_| 0)), true)
            }
            Kind::Populate(t) => {
                let o = PopulateOptions {
                    huge_pages: HugePageAdvice::Leave,
                    ..PopulateOptions::new(workers(*t))
                };
                (outcome(populate(&mem, g, len_us, &o)), None, false)
            }
        };
        // The prediction: empty ranges are no-ops anywhere; an empty pattern is refused next;
        // then the range.
        let empty_pattern =
            matches!(&op.kind, Kind::Pattern(p) | Kind::PatternParallel(p, _) if p.is_empty());
        let expected = if len == 0 {
            Ok(())
        } else if empty_pattern {
            Err(Expected::EmptyPattern)
        } else {
            model.check(addr, len)
        };
        assert_eq!(got, expected, "{op:?} at {addr:#x} + {len:#x}");
        if got.is_ok() && len > 0 {
            if let Some(f) = write_model {
                model.apply(addr, len, dirty, f);
            }
        }
        check_all(&mem, &model, op);
    }
});
