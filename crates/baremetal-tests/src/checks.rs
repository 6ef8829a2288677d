//! The checks, the same on every architecture. Each one takes its buffers from the guest RAM
//! arena, surrounds every destination with guard bytes, drains before reading anything back,
//! and reports the first wrong byte it finds.

use core::fmt;
use core::mem::MaybeUninit;

use crate::arena::{Arena, OutOfRam};
use crate::hal::{self, Clear, PAGE_SIZE};
use crate::report::Report;

/// Value of every guard byte (and of a destination before it is written).
const GUARD_BYTE: u8 = 0xA5;
/// Guard bytes on each side of a copy destination.
const COPY_GUARD: usize = 64;
/// Guard bytes on each side of a cleared range: a whole page, so that a clear that runs one
/// page too far is caught.
const CLEAR_GUARD: usize = PAGE_SIZE;

/// Source offsets of the small-copy check (every destination offset 0..64 runs with each).
const SMALL_SRC_OFFSETS: [usize; 13] = [0, 1, 3, 4, 7, 8, 9, 15, 16, 31, 32, 33, 63];
/// Longest small copy.
const SMALL_MAX_LEN: usize = 256;
/// Lengths of the large-copy check: around a page, past 64 KiB, and past 1 MiB (where a
/// destination spans many pages of the guest's RAM).
const LARGE_LENS: [usize; 6] = [4095, 4096, 4097, 65549, (1 << 20) + 7, (4 << 20) + 13];
/// Destination offsets of the large copies shorter than 1 MiB (each with every source offset
/// of [`LARGE_SRC_OFFSETS`]).
const LARGE_DST_OFFSETS: [usize; 9] = [0, 1, 4, 8, 9, 15, 16, 33, 63];
/// Source offsets of the large copies shorter than 1 MiB.
const LARGE_SRC_OFFSETS: [usize; 3] = [0, 9, 63];
/// `(destination, source)` offsets of the copies of 1 MiB and more.
const HUGE_OFFSETS: [(usize, usize); 5] = [(0, 0), (1, 9), (8, 0), (9, 63), (63, 1)];

/// Page counts of the clear checks: single pages, just below, at and above 1 MiB (the x86-64
/// streaming threshold), 2 MiB and 16 MiB.
const CLEAR_PAGES: [usize; 8] = [1, 2, 3, 255, 256, 257, 512, 4096];
/// Offsets of the cleared range from a page boundary: aligned, 8-, 64-byte and byte-misaligned
/// (`clear_pages` accepts any address and clears misaligned edges with normal stores).
const CLEAR_OFFSETS: [usize; 4] = [0, 8, 64, 1];

/// Records of the 64-byte template fill (4 MiB).
const FILL64_RECORDS: usize = 65536;
/// Records of the 56-byte, 8-aligned fill.
const FILL56_RECORDS: usize = 10007;

/// Parameters that differ between the architectures.
pub(crate) struct Plan {
    /// An extra `clear_pages` of this many pages (x86-64: 512 MiB, where `clear_pages` goes back
    /// to `rep stosb` on AMD CPUs without `CLZERO`).
    pub(crate) big_clear_pages: Option<usize>,
}

/// Runs every check on `arena`, recording the results in `report`.
pub(crate) fn run_all(arena: &mut Arena, report: &mut Report, plan: &Plan) {
    report.run(format_args!("memcpy_nontemporal vs generic, small"), || memcpy_small(arena));
    report.run(format_args!("memcpy_nontemporal vs generic, large"), || memcpy_large(arena));
    report.run(format_args!("store_words"), || store_words(arena));
    for clear in Clear::ALL {
        for npages in CLEAR_PAGES {
            let len = npages * PAGE_SIZE;
            report.run(format_args!("{} {} pages [{}]", clear.name(), npages, clear.method(len)), || {
                clear_check(arena, clear, npages, &CLEAR_OFFSETS)
            });
        }
    }
    if let Some(npages) = plan.big_clear_pages {
        let clear = Clear::BySize;
        let len = npages * PAGE_SIZE;
        report.run(format_args!("{} {} pages [{}]", clear.name(), npages, clear.method(len)), || {
            clear_check(arena, clear, npages, &[0])
        });
    }
    report.run(format_args!("fill_with 64-byte records patched per index"), || fill64(arena));
    report.run(format_args!("fill_with 56-byte records at 8 mod 16"), || fill56(arena));
    report.run(format_args!("scope push/fill_n/fill_with"), || scope_mixed(arena));
}

/// What a passing check did.
pub(crate) struct Done {
    /// Cases run (copies, clears, fills).
    cases: u64,
    /// Bytes written by the code under test.
    bytes: u64,
}

impl fmt::Display for Done {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} cases, {} bytes", self.cases, self.bytes)
    }
}

/// Why a check failed.
pub(crate) enum Failure {
    /// The arena was too small.
    OutOfRam(OutOfRam),
    /// A byte differs from what it should be.
    Byte {
        /// What was being checked (`guard before`, `data`, `native vs reference`, ...).
        what: &'static str,
        /// The case: named parameters.
        case: [(&'static str, usize); 3],
        /// Offset of the byte from the start of the checked region.
        at: usize,
        /// The byte found.
        found: u8,
        /// The byte expected.
        expected: u8,
    },
    /// A record differs from what was written.
    Record {
        /// Index of the first wrong record.
        index: usize,
        /// Index of its first wrong 64-bit word.
        word: usize,
        /// The word found.
        found: u64,
        /// The word expected.
        expected: u64,
    },
    /// The streaming writer did not behave as documented.
    Writer(&'static str),
}

impl From<OutOfRam> for Failure {
    fn from(e: OutOfRam) -> Self {
        Failure::OutOfRam(e)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::OutOfRam(e) => write!(f, "{e}"),
            Failure::Byte { what, case, at, found, expected } => {
                write!(f, "{what}:")?;
                for (name, value) in case.iter().filter(|(name, _)| !name.is_empty()) {
                    write!(f, " {name}={value}")?;
                }
                write!(f, ": byte {at} of the checked region is {found:#04x}, expected {expected:#04x}")
            }
            Failure::Record { index, word, found, expected } => {
                write!(f, "record {index}, word {word}: found {found:#018x}, expected {expected:#018x}")
            }
            Failure::Writer(what) => f.write_str(what),
        }
    }
}

/// A position-dependent, non-periodic byte pattern that never produces the guard byte or zero.
fn pattern(i: usize, seed: u64) -> u8 {
    let x = (i as u64 ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    match (x >> 56) as u8 {
        0 | GUARD_BYTE => 0x5A,
        b => b,
    }
}

/// Checks that every byte of `bytes` is `value`.
fn all_equal(
    bytes: &[u8],
    value: u8,
    what: &'static str,
    case: [(&'static str, usize); 3],
) -> Result<(), Failure> {
    let word = u64::from_ne_bytes([value; 8]);
    let chunks = bytes.chunks_exact(8);
    let tail = chunks.remainder();
    for (k, chunk) in chunks.enumerate() {
        if u64::from_ne_bytes([
            chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], chunk[5], chunk[6], chunk[7],
        ]) != word
        {
            let j = chunk.iter().position(|&b| b != value).unwrap_or(0);
            return Err(Failure::Byte { what, case, at: 8 * k + j, found: chunk[j], expected: value });
        }
    }
    match tail.iter().position(|&b| b != value) {
        Some(j) => {
            let at = bytes.len() - tail.len() + j;
            Err(Failure::Byte { what, case, at, found: bytes[at], expected: value })
        }
        None => Ok(()),
    }
}

/// Checks that `actual == expected`.
fn same(
    actual: &[u8],
    expected: &[u8],
    what: &'static str,
    case: [(&'static str, usize); 3],
) -> Result<(), Failure> {
    if actual == expected {
        return Ok(());
    }
    let at = actual.iter().zip(expected).position(|(a, b)| a != b).unwrap_or(0);
    Err(Failure::Byte { what, case, at, found: actual[at], expected: expected[at] })
}

/// Copies `src[src_off..][..len]` to offset `COPY_GUARD + dst_off` of `native` with the copy
/// under test and of `reference` with the generic reference, drains, and compares: the two
/// windows byte for byte (guards included), then the native one against the source and the
/// guard byte.
fn copy_case(
    native: &mut [u8],
    reference: &mut [u8],
    src: &[u8],
    dst_off: usize,
    src_off: usize,
    len: usize,
) -> Result<(), Failure> {
    let case = [("dst_off", dst_off), ("src_off", src_off), ("len", len)];
    let start = COPY_GUARD + dst_off;
    let end = start + len;
    let window = end + COPY_GUARD;
    native[..window].fill(GUARD_BYTE);
    reference[..window].fill(GUARD_BYTE);
    let s = &src[src_off..src_off + len];
    // SAFETY: `start + len <= window <= native.len()`, so the destination is inside `native`,
    // which is exclusively borrowed and distinct from `src`; `s` is `len` readable bytes.
    // Nothing reads `native` before the drain below.
    unsafe { hal::copy_native(native.as_mut_ptr().add(start), s.as_ptr(), len) };
    hal::drain();
    // SAFETY: as above, for `reference`.
    unsafe { hal::copy_reference(reference.as_mut_ptr().add(start), s.as_ptr(), len) };
    same(
        &native[..window],
        &reference[..window],
        "native vs reference (64 guard bytes, destination, 64 guard bytes)",
        case,
    )?;
    all_equal(&native[..start], GUARD_BYTE, "guard before", case)?;
    same(&native[start..end], s, "data", case)?;
    all_equal(&native[end..window], GUARD_BYTE, "guard after", case)
}

/// (a) every destination offset 0..64, 13 source offsets, every length 0..=256.
fn memcpy_small(arena: &mut Arena) -> Result<Done, Failure> {
    let bump = arena.bump();
    let src = bump.bytes(64 + SMALL_MAX_LEN, 64, 0)?;
    for (i, b) in src.iter_mut().enumerate() {
        *b = pattern(i, 1);
    }
    let size = COPY_GUARD + 64 + SMALL_MAX_LEN + COPY_GUARD;
    let native = bump.bytes(size, 64, GUARD_BYTE)?;
    let reference = bump.bytes(size, 64, GUARD_BYTE)?;
    let mut done = Done { cases: 0, bytes: 0 };
    for dst_off in 0..64 {
        for src_off in SMALL_SRC_OFFSETS {
            for len in 0..=SMALL_MAX_LEN {
                copy_case(native, reference, src, dst_off, src_off, len)?;
                done.cases += 1;
                done.bytes += len as u64;
            }
        }
    }
    Ok(done)
}

/// (a) page-sized to 4 MiB copies at chosen offsets.
fn memcpy_large(arena: &mut Arena) -> Result<Done, Failure> {
    let max = LARGE_LENS[LARGE_LENS.len() - 1];
    let bump = arena.bump();
    let src = bump.bytes(64 + max, 64, 0)?;
    for (i, b) in src.iter_mut().enumerate() {
        *b = pattern(i, 2);
    }
    let size = COPY_GUARD + 64 + max + COPY_GUARD;
    let native = bump.bytes(size, PAGE_SIZE, GUARD_BYTE)?;
    let reference = bump.bytes(size, PAGE_SIZE, GUARD_BYTE)?;
    let mut done = Done { cases: 0, bytes: 0 };
    for len in LARGE_LENS {
        let mut one = |dst_off, src_off| {
            done.cases += 1;
            done.bytes += len as u64;
            copy_case(native, reference, src, dst_off, src_off, len)
        };
        if len < 1 << 20 {
            for dst_off in LARGE_DST_OFFSETS {
                for src_off in LARGE_SRC_OFFSETS {
                    one(dst_off, src_off)?;
                }
            }
        } else {
            for (dst_off, src_off) in HUGE_OFFSETS {
                one(dst_off, src_off)?;
            }
        }
    }
    Ok(done)
}

/// `store_words` of records of `N` words at every 8-byte-aligned offset within a 64-byte line.
fn store_words_n<const N: usize>(buf: &mut [u8], done: &mut Done) -> Result<(), Failure> {
    for off in (0..64).step_by(8) {
        let case = [("words", N), ("offset", off), ("", 0)];
        let words: [u64; N] =
            core::array::from_fn(|i| 0x0101_0101_0101_0101u64.wrapping_mul(i as u64 + 3) | 1);
        let start = COPY_GUARD + off;
        let end = start + 8 * N;
        let window = &mut buf[..end + COPY_GUARD];
        window.fill(GUARD_BYTE);
        // SAFETY: `buf` is 64-byte aligned, so `start` (a multiple of 8) is 8-byte aligned, and
        // `end <= window.len()`: the record lies inside the exclusively borrowed buffer. Nothing
        // reads it before the drain.
        unsafe { hal::store_words(window.as_mut_ptr().add(start).cast::<[u64; N]>(), words) };
        hal::drain();
        all_equal(&window[..start], GUARD_BYTE, "guard before", case)?;
        for (i, w) in words.iter().enumerate() {
            same(&window[start + 8 * i..start + 8 * i + 8], &w.to_ne_bytes(), "word", case)?;
        }
        all_equal(&window[end..], GUARD_BYTE, "guard after", case)?;
        done.cases += 1;
        done.bytes += 8 * N as u64;
    }
    Ok(())
}

/// `store_words` of 1 to 16 words, every 8-byte offset, guarded.
fn store_words(arena: &mut Arena) -> Result<Done, Failure> {
    let bump = arena.bump();
    let buf = bump.bytes(COPY_GUARD + 64 + 8 * 16 + COPY_GUARD, 64, GUARD_BYTE)?;
    let mut done = Done { cases: 0, bytes: 0 };
    store_words_n::<1>(buf, &mut done)?;
    store_words_n::<2>(buf, &mut done)?;
    store_words_n::<3>(buf, &mut done)?;
    store_words_n::<5>(buf, &mut done)?;
    store_words_n::<7>(buf, &mut done)?;
    store_words_n::<8>(buf, &mut done)?;
    store_words_n::<9>(buf, &mut done)?;
    store_words_n::<16>(buf, &mut done)?;
    Ok(done)
}

/// (b) `clear` of `npages` pages at each offset from a page boundary, a page of guard bytes on
/// each side.
fn clear_check(arena: &mut Arena, clear: Clear, npages: usize, offsets: &[usize]) -> Result<Done, Failure> {
    let len = npages * PAGE_SIZE;
    let max_off = offsets.iter().copied().max().unwrap_or(0);
    let bump = arena.bump();
    let buf = bump.bytes(CLEAR_GUARD + max_off + len + CLEAR_GUARD, PAGE_SIZE, GUARD_BYTE)?;
    let mut done = Done { cases: 0, bytes: 0 };
    for &off in offsets {
        let case = [("pages", npages), ("offset", off), ("", 0)];
        let start = CLEAR_GUARD + off;
        let end = start + len;
        let window = &mut buf[..end + CLEAR_GUARD];
        window.fill(GUARD_BYTE);
        // SAFETY: `start + npages * PAGE_SIZE = end <= window.len()`: the range is inside the
        // exclusively borrowed buffer (and the product did not overflow: the buffer exists).
        // Nothing reads it before the drain.
        unsafe { clear.run(window.as_mut_ptr().add(start), npages) };
        hal::drain();
        all_equal(&window[..start], GUARD_BYTE, "guard before", case)?;
        all_equal(&window[start..end], 0, "cleared range", case)?;
        all_equal(&window[end..], GUARD_BYTE, "guard after", case)?;
        done.cases += 1;
        done.bytes += len as u64;
    }
    Ok(done)
}

/// A 64-byte, 64-aligned record (a `struct page` with one cache line to itself).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
struct Page64 {
    words: [u64; 8],
}

// SAFETY: eight `u64`s fill the 64 bytes: no padding.
unsafe impl crate::hal::Record for Page64 {}

/// A 56-byte, 8-aligned record (a `struct page` without the memcg word), so consecutive
/// records start at every 8-byte offset within a 64-byte line.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C)]
struct Page56 {
    words: [u64; 7],
}

// SAFETY: seven `u64`s fill the 56 bytes: no padding.
unsafe impl crate::hal::Record for Page56 {}

/// The template: flags, a list head, mapping, index, private, refcount/mapcount, memcg.
const TEMPLATE: [u64; 8] = [
    0x0000_0000_0000_1000,
    0xdead_0000_0000_0100,
    0xdead_0000_0000_0122,
    0,
    0,
    0,
    0x0000_0001_ffff_ffff,
    0x0000_0000_0000_0000,
];

/// The template with the fields that depend on the index patched: the section/node bits of
/// the flags word, and the list head pointing at the record itself (as `INIT_LIST_HEAD` does).
fn patched(i: usize) -> [u64; 8] {
    let mut w = TEMPLATE;
    w[0] |= ((i as u64) >> 15) << 48;
    w[1] = 0xffff_ea00_0000_0000 + 64 * i as u64 + 8;
    w[2] = w[1];
    w[3] = i as u64;
    w
}

/// Checks the guard bytes around a filled slot array.
fn guards(before: &[u8], after: &[u8], n: usize) -> Result<(), Failure> {
    all_equal(before, GUARD_BYTE, "guard before", [("records", n), ("", 0), ("", 0)])?;
    all_equal(after, GUARD_BYTE, "guard after", [("records", n), ("", 0), ("", 0)])
}

/// A record made of 64-bit words.
trait Words {
    fn words(&self) -> &[u64];
}

impl Words for Page64 {
    fn words(&self) -> &[u64] {
        &self.words
    }
}

impl Words for Page56 {
    fn words(&self) -> &[u64] {
        &self.words
    }
}

/// Reports the first record that differs from `expected`.
fn first_wrong<T: Words>(records: &[T], expected: impl Fn(usize) -> T) -> Result<(), Failure> {
    for (index, record) in records.iter().enumerate() {
        let want = expected(index);
        let (have, want) = (record.words(), want.words());
        if let Some(word) = have.iter().zip(want).position(|(a, b)| a != b) {
            return Err(Failure::Record { index, word, found: have[word], expected: want[word] });
        }
    }
    Ok(())
}

/// (c) the template fill: 64-byte records patched per index through the safe writer.
fn fill64(arena: &mut Arena) -> Result<Done, Failure> {
    let bump = arena.bump();
    let before = bump.bytes(64, 64, GUARD_BYTE)?;
    let slots = bump.slots::<Page64>(FILL64_RECORDS)?;
    let after = bump.bytes(64, 64, GUARD_BYTE)?;
    let records = hal::fill_with(slots, |i| Page64 { words: patched(i) });
    if records.len() != FILL64_RECORDS {
        return Err(Failure::Writer("fill_with returned the wrong number of records"));
    }
    first_wrong(records, |i| Page64 { words: patched(i) })?;
    guards(before, after, FILL64_RECORDS)?;
    Ok(Done { cases: FILL64_RECORDS as u64, bytes: (FILL64_RECORDS * size_of::<Page64>()) as u64 })
}

/// The 56-byte record for index `i`.
fn page56(i: usize) -> Page56 {
    let w = patched(i);
    Page56 { words: [w[0], w[1], w[2], w[3], w[4], w[5], w[6]] }
}

/// (c) 56-byte records starting 8 bytes past a 16-byte boundary.
fn fill56(arena: &mut Arena) -> Result<Done, Failure> {
    let bump = arena.bump();
    bump.skip_to(64, 8)?;
    let before = bump.bytes(64, 8, GUARD_BYTE)?;
    let slots = bump.slots::<Page56>(FILL56_RECORDS)?;
    if slots.as_ptr().addr() % 16 != 8 {
        return Err(Failure::Writer("56-byte records not placed at 8 mod 16"));
    }
    let after = bump.bytes(64, 8, GUARD_BYTE)?;
    let records = hal::fill_with(slots, page56);
    first_wrong(records, page56)?;
    guards(before, after, FILL56_RECORDS)?;
    Ok(Done { cases: FILL56_RECORDS as u64, bytes: (FILL56_RECORDS * size_of::<Page56>()) as u64 })
}

/// (c) the writer's other entry points in one scope: `push`, `fill_n`, a refused `fill_n`, and
/// `fill_with` of the rest.
fn scope_mixed(arena: &mut Arena) -> Result<Done, Failure> {
    const N: usize = 4099;
    const FILLED: usize = 1000;
    let bump = arena.bump();
    let before = bump.bytes(64, 64, GUARD_BYTE)?;
    let slots: &mut [MaybeUninit<Page64>] = bump.slots(N)?;
    let after = bump.bytes(64, 64, GUARD_BYTE)?;
    let first = Page64 { words: [u64::MAX; 8] };
    let template = Page64 { words: TEMPLATE };
    let (records, calls_ok) =
        hal::scope_mixed(slots, first, &template, FILLED, |i| Page64 { words: patched(i) });
    if !calls_ok {
        return Err(Failure::Writer("push/fill_n failed, or an oversized fill_n was accepted"));
    }
    if records.len() != N {
        return Err(Failure::Writer("scope returned the wrong number of records"));
    }
    first_wrong(records, |i| match i {
        0 => first,
        i if i <= FILLED => template,
        i => Page64 { words: patched(i) },
    })?;
    guards(before, after, N)?;
    Ok(Done { cases: N as u64, bytes: (N * size_of::<Page64>()) as u64 })
}
