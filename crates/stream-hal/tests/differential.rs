//! Exhaustive differential test of `memcpy_nontemporal` against `copy_nonoverlapping`: every
//! destination alignment 0..64, every source alignment 0..64 and every length 0..=256, plus the
//! page-crossing lengths 4095, 4096, 4097, 65549 and 1 MiB + 7, with guard bytes before and
//! after every destination. Runs for the native backend (the crate root) and for the generic
//! backend (`stream_hal::generic`) on the same host.
//!
//! Under Miri only a sample runs (the interpreter is about 10^4 times slower).

mod common;
use common::{Aligned, check_copy, pattern};

type CopyFn = unsafe fn(*mut u8, *const u8, usize);

const NATIVE: CopyFn = stream_hal::memcpy_nontemporal;
const GENERIC: CopyFn = stream_hal::generic::memcpy_nontemporal;

fn source(len: usize) -> Aligned {
    let mut src = Aligned::new(len, 0);
    src.bytes_mut().copy_from_slice(&pattern(len, 7));
    src
}

fn exhaustive_small(copy: CopyFn) {
    let (aligns, lens): (Vec<usize>, Vec<usize>) = if cfg!(miri) {
        (vec![0, 1, 8, 15], vec![0, 1, 3, 4, 7, 8, 9, 15, 16, 17, 33, 65])
    } else {
        ((0..64).collect(), (0..=256).collect())
    };
    let src = source(64 + 256);
    let mut dst = Aligned::new(common::GUARD * 2 + 64 + 256, 0);
    for &dst_off in &aligns {
        for &src_off in &aligns {
            for &len in &lens {
                check_copy(copy, &mut dst, &src, src_off, dst_off, len);
            }
        }
    }
}

fn large_lengths(copy: CopyFn) {
    let lens: &[usize] = if cfg!(miri) { &[4097] } else { &[4095, 4096, 4097, 65549, (1 << 20) + 7] };
    let aligns: &[usize] = if cfg!(miri) { &[0, 9] } else { &[0, 1, 4, 8, 9, 15, 16, 33, 63] };
    let max = *lens.iter().max().unwrap();
    let src = source(max + 64);
    let mut dst = Aligned::new(common::GUARD * 2 + 64 + max, 0);
    for &len in lens {
        for &dst_off in aligns {
            for &src_off in aligns {
                check_copy(copy, &mut dst, &src, src_off, dst_off, len);
            }
        }
    }
}

#[test]
fn native_every_alignment_and_length_up_to_256() {
    exhaustive_small(NATIVE);
}

#[test]
fn generic_every_alignment_and_length_up_to_256() {
    exhaustive_small(GENERIC);
}

#[test]
fn native_page_crossing_lengths() {
    large_lengths(NATIVE);
}

#[test]
fn generic_page_crossing_lengths() {
    large_lengths(GENERIC);
}

/// `store_record` for every record size the crate promises to handle without a loop (8 to 128
/// bytes, plus odd sizes), at every destination offset within a 64-byte line.
#[test]
fn store_record_every_size_and_offset() {
    macro_rules! sizes {
        ($($n:literal)*) => {$(
            let offsets: Vec<usize> = if cfg!(miri) { vec![0, 1, 4, 8, 12] } else { (0..64).collect() };
            for off in offsets {
                let src: [u8; $n] = core::array::from_fn(|i| (i as u8).wrapping_mul(13) | 0x80);
                let mut buf = Aligned::new(64 + $n + 64 + 64, common::GUARD_BYTE);
                let dst = buf.bytes_mut().as_mut_ptr().wrapping_add(64 + off).cast::<[u8; $n]>();
                // SAFETY: `dst` is inside `buf` with room for the record; `[u8; N]` has no
                // alignment requirement; source and destination are distinct.
                unsafe { stream_hal::store_record(dst, &src) };
                stream_hal::drain();
                let b = buf.bytes();
                assert!(b[..64 + off].iter().all(|&x| x == common::GUARD_BYTE), "size {} off {}", $n, off);
                assert_eq!(&b[64 + off..64 + off + $n], &src[..], "size {} off {}", $n, off);
                assert!(b[64 + off + $n..].iter().all(|&x| x == common::GUARD_BYTE), "size {} off {}", $n, off);
                let mut buf2 = Aligned::new(64 + $n + 64 + 64, common::GUARD_BYTE);
                let dst2 = buf2.bytes_mut().as_mut_ptr().wrapping_add(64 + off).cast::<[u8; $n]>();
                // SAFETY: as above.
                unsafe { stream_hal::store_record_words(dst2, &src) };
                stream_hal::drain();
                assert_eq!(buf.bytes(), buf2.bytes(), "store_record_words differs, size {} off {}", $n, off);
            }
        )*};
    }
    sizes!(1 3 4 7 8 12 16 20 24 32 40 48 56 64 72 80 88 96 104 112 120 128 130);
}

/// `store_words` for records of 1 to 16 words at every 8-byte-aligned offset within a
/// 64-byte line (16-byte aligned and 8 mod 16), guarded.
#[test]
fn store_words_every_length_and_alignment() {
    macro_rules! lens {
        ($($n:literal)*) => {$(
            for off in (0..64usize).step_by(8) {
                let words: [u64; $n] = core::array::from_fn(|i| 0x0101_0101_0101_0101u64.wrapping_mul(i as u64 + 3) | 1);
                let mut buf = Aligned::new(64 + 8 * $n + 64 + 64, common::GUARD_BYTE);
                let dst = buf.bytes_mut().as_mut_ptr().wrapping_add(64 + off).cast::<[u64; $n]>();
                // SAFETY: `dst` is 8-aligned and inside `buf` with room for the record.
                unsafe { stream_hal::store_words(dst, words) };
                stream_hal::drain();
                let b = buf.bytes();
                let expect: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
                assert!(b[..64 + off].iter().all(|&x| x == common::GUARD_BYTE), "{} words off {}", $n, off);
                assert_eq!(&b[64 + off..64 + off + 8 * $n], &expect[..], "{} words off {}", $n, off);
                assert!(b[64 + off + 8 * $n..].iter().all(|&x| x == common::GUARD_BYTE), "{} words off {}", $n, off);
            }
        )*};
    }
    lens!(1 2 3 4 5 6 7 8 9 10 11 12 16);
}
