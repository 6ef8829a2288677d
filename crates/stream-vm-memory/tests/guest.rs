//! Zero, fill, pattern fill and streaming copy into a `GuestMemoryMmap` with a dirty bitmap:
//! bytes read back through vm-memory, dirty bits, region boundaries, unaligned ranges and the
//! error cases.

mod common;

use proptest::prelude::*;
use stream_vm_memory::{Error, fill, fill_pattern, write, zero};
use vm_memory::bitmap::{AtomicBitmap, Bitmap};
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion};

type Mem = GuestMemoryMmap<AtomicBitmap>;

const PAGE: u64 = 4096;

/// Regions: [0, 64 KiB) and [64 KiB, 192 KiB) adjacent, a hole [192 KiB, 256 KiB), then
/// [256 KiB, 320 KiB). Every byte starts as 0x5a and every dirty bit clear.
fn memory() -> Mem {
    let mem = Mem::from_ranges(&[
        (GuestAddress(0), 0x1_0000),
        (GuestAddress(0x1_0000), 0x2_0000),
        (GuestAddress(0x4_0000), 0x1_0000),
    ])
    .unwrap();
    for r in mem.iter() {
        mem.write_slice(&vec![0x5a; r.len() as usize], r.start_addr()).unwrap();
        vm_memory::MmapRegion::bitmap(r).reset();
    }
    mem
}

/// The whole of a region's bytes.
fn region_bytes(mem: &Mem, start: u64) -> Vec<u8> {
    let r = mem.find_region(GuestAddress(start)).unwrap();
    let mut v = vec![0; r.len() as usize];
    mem.read_slice(&mut v, r.start_addr()).unwrap();
    v
}

/// The guest addresses of the first region (from `start`) that are dirty, page by page.
fn dirty_pages(mem: &Mem) -> Vec<u64> {
    let mut pages = Vec::new();
    for r in mem.iter() {
        let mut off = 0;
        while off < r.len() {
            if r.bitmap().dirty_at(off as usize) {
                pages.push(r.start_addr().0 + off);
            }
            off += PAGE;
        }
    }
    pages
}

/// Pages touched by `addr..addr + len`.
fn pages_of(addr: u64, len: u64) -> Vec<u64> {
    if len == 0 {
        return Vec::new();
    }
    (addr / PAGE..(addr + len).div_ceil(PAGE)).map(|p| p * PAGE).collect()
}

/// Checks every byte of the two adjacent regions [0, 192 KiB) against `expect(addr)`.
fn assert_low_bytes(mem: &Mem, expect: impl Fn(u64) -> u8) {
    let mut all = region_bytes(mem, 0);
    all.extend(region_bytes(mem, 0x1_0000));
    for (i, &b) in all.iter().enumerate() {
        assert_eq!(b, expect(i as u64), "byte at {i:#x}");
    }
}

#[test]
fn zero_across_a_region_boundary_unaligned() {
    let mem = memory();
    let (addr, len) = (0xf003u64, 0x2_0ffdu64 - 0xf003); // 0xf003 .. 0x2_0ffd, crossing 0x1_0000
    zero(&mem, GuestAddress(addr), len as usize).unwrap();
    assert_low_bytes(&mem, |a| if (addr..addr + len).contains(&a) { 0 } else { 0x5a });
    assert_eq!(dirty_pages(&mem), pages_of(addr, len));
    // The region after the hole is untouched.
    assert!(region_bytes(&mem, 0x4_0000).iter().all(|&b| b == 0x5a));
}

#[test]
fn zero_of_several_mib_streams_and_reads_back() {
    // Above stream-hal's 1 MiB streaming threshold: the streaming path, then the drain.
    let mem = Mem::from_ranges(&[(GuestAddress(0), 3 << 20), (GuestAddress(3 << 20), 2 << 20)]).unwrap();
    mem.write_slice(&vec![0xff; 5 << 20], GuestAddress(0)).unwrap();
    mem.iter().for_each(|r| vm_memory::MmapRegion::bitmap(r).reset());
    zero(&mem, GuestAddress(0x801), (5 << 20) - 0x802).unwrap();
    let mut back = vec![0u8; 5 << 20];
    mem.read_slice(&mut back, GuestAddress(0)).unwrap();
    assert!(back[..0x801].iter().all(|&b| b == 0xff));
    assert!(back[0x801..(5 << 20) - 1].iter().all(|&b| b == 0));
    assert_eq!(back[(5 << 20) - 1], 0xff);
    assert_eq!(dirty_pages(&mem).len(), 5 << 8);
}

#[test]
fn fill_byte_and_pattern_keep_their_phase_across_regions() {
    let mem = memory();
    let (addr, len) = (0xff00u64, 0x300u64);
    fill(&mem, GuestAddress(addr), len as usize, 0xc3).unwrap();
    assert_low_bytes(&mem, |a| if (addr..addr + len).contains(&a) { 0xc3 } else { 0x5a });

    // A 7-byte pattern from an odd address through the boundary: byte addr + i is
    // pattern[i % 7] on both sides.
    let pattern = [1u8, 2, 3, 4, 5, 6, 7];
    let (addr, len) = (0x3_33u64 + 0xc000, 0x1_2345u64);
    fill_pattern(&mem, GuestAddress(addr), len as usize, &pattern).unwrap();
    assert_low_bytes(&mem, |a| {
        if (addr..addr + len).contains(&a) {
            pattern[((a - addr) % 7) as usize]
        } else if (0xff00..0x10200).contains(&a) {
            0xc3
        } else {
            0x5a
        }
    });
    let mut expect_dirty = pages_of(0xff00, 0x300);
    expect_dirty.extend(pages_of(addr, len));
    expect_dirty.sort_unstable();
    expect_dirty.dedup();
    assert_eq!(dirty_pages(&mem), expect_dirty);
}

#[test]
fn fill_with_zero_value_zeroes() {
    let mem = memory();
    fill(&mem, GuestAddress(0x10), 0x20, 0).unwrap();
    assert_low_bytes(&mem, |a| if (0x10..0x30).contains(&a) { 0 } else { 0x5a });
}

#[test]
fn write_copies_a_buffer_across_regions() {
    let mem = memory();
    let src: Vec<u8> = (0..0x1_1111u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let addr = 0xabcdu64;
    write(&mem, GuestAddress(addr), &src).unwrap();
    let end = addr + src.len() as u64;
    assert_low_bytes(&mem, |a| if (addr..end).contains(&a) { src[(a - addr) as usize] } else { 0x5a });
    assert_eq!(dirty_pages(&mem), pages_of(addr, src.len() as u64));
}

#[test]
fn out_of_range_ranges_are_typed_errors_and_write_nothing() {
    let mem = memory();
    let before: Vec<Vec<u8>> = [0, 0x1_0000, 0x4_0000].iter().map(|&s| region_bytes(&mem, s)).collect();

    // Runs into the hole at 192 KiB.
    match zero(&mem, GuestAddress(0x2_f000), 0x2000) {
        Err(Error::OutOfRange { addr, len, first_invalid }) => {
            assert_eq!((addr, len, first_invalid), (GuestAddress(0x2_f000), 0x2000, GuestAddress(0x3_0000)));
        }
        other => panic!("expected OutOfRange, got {other:?}"),
    }
    // Starts in the hole.
    assert!(matches!(
        fill(&mem, GuestAddress(0x3_8000), 1, 9),
        Err(Error::OutOfRange { first_invalid: GuestAddress(0x3_8000), .. })
    ));
    // Runs past the last region.
    assert!(matches!(
        write(&mem, GuestAddress(0x4_ff00), &[1; 0x200]),
        Err(Error::OutOfRange { first_invalid: GuestAddress(0x5_0000), .. })
    ));
    // Past 2^64.
    assert!(matches!(
        fill_pattern(&mem, GuestAddress(u64::MAX - 4), 16, &[1, 2]),
        Err(Error::AddressOverflow { len: 16, .. })
    ));
    // Empty pattern.
    assert!(matches!(fill_pattern(&mem, GuestAddress(0), 16, &[]), Err(Error::EmptyPattern)));

    let after: Vec<Vec<u8>> = [0, 0x1_0000, 0x4_0000].iter().map(|&s| region_bytes(&mem, s)).collect();
    assert_eq!(before, after, "a failed call wrote guest memory");
    assert!(dirty_pages(&mem).is_empty(), "a failed call marked pages dirty");
    // The error says what went wrong.
    let msg = zero(&mem, GuestAddress(0x2_f000), 0x2000).unwrap_err().to_string();
    assert!(msg.contains("0x30000"), "{msg}");
}

#[test]
fn empty_ranges_are_no_ops_anywhere() {
    let mem = memory();
    zero(&mem, GuestAddress(0x3_8000), 0).unwrap();
    write(&mem, GuestAddress(u64::MAX), &[]).unwrap();
    fill_pattern(&mem, GuestAddress(0), 0, &[]).unwrap();
    assert!(dirty_pages(&mem).is_empty());
}

proptest! {
    #![proptest_config(common::proptest_config(64))]

    /// Any range inside the two adjacent regions, any operation: the bytes match a model and
    /// exactly the touched pages are dirty.
    #[test]
    fn any_range_matches_the_model(
        start in 0u64..0x3_0000,
        len in 0u64..0x2_0000,
        op in 0u8..3,
        value in any::<u8>(),
        pattern in proptest::collection::vec(any::<u8>(), 1..40),
    ) {
        let len = len.min(0x3_0000 - start);
        let mem = memory();
        let mut model = vec![0x5au8; 0x3_0000];
        let range = start as usize..(start + len) as usize;
        match op {
            0 => {
                zero(&mem, GuestAddress(start), len as usize).unwrap();
                model[range].fill(0);
            }
            1 => {
                fill(&mem, GuestAddress(start), len as usize, value).unwrap();
                model[range].fill(value);
            }
            _ => {
                fill_pattern(&mem, GuestAddress(start), len as usize, &pattern).unwrap();
                for (i, b) in model[range].iter_mut().enumerate() {
                    *b = pattern[i % pattern.len()];
                }
            }
        }
        let mut all = region_bytes(&mem, 0);
        all.extend(region_bytes(&mem, 0x1_0000));
        prop_assert!(all == model, "bytes differ from the model");
        prop_assert_eq!(dirty_pages(&mem), pages_of(start, len));
    }
}
