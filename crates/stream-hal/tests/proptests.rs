//! Property tests: random lengths (up to 1 MiB) and offsets for `memcpy_nontemporal` and
//! `clear_pages`, and random record layouts for the typed writer; every destination is guarded.

mod common;
use std::mem::MaybeUninit;

use common::{Aligned, GUARD, GUARD_BYTE, check_copy, pattern};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    if cfg!(miri) {
        ProptestConfig { cases: 4, failure_persistence: None, ..ProptestConfig::default() }
    } else {
        ProptestConfig { cases: env_cases(128), ..ProptestConfig::default() }
    }
}

fn max_len() -> usize {
    if cfg!(miri) { 300 } else { 1 << 20 }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn memcpy_nontemporal_equals_memcpy(len in 0..=max_len(), src_off in 0usize..64, dst_off in 0usize..64, seed: u8) {
        let mut src = Aligned::new(len + 64, 0);
        src.bytes_mut().copy_from_slice(&pattern(len + 64, seed));
        let mut dst = Aligned::new(2 * GUARD + 64 + len, 0);
        check_copy(stream_hal::memcpy_nontemporal, &mut dst, &src, src_off, dst_off, len);
    }

    #[test]
    fn clear_zeroes_exactly_the_range(
        len in 0usize..if cfg!(miri) { 300 } else { 48 * 4096 },
        off in 0usize..4096,
        which in 0usize..4,
    ) {
        check_clear(CLEARS[which], len, off)?;
    }

    #[test]
    fn fill_bytes_equals_slice_fill(
        len in 0usize..if cfg!(miri) { 300 } else { 48 * 4096 },
        off in 0usize..64,
        value: u8,
        mode in 0usize..4,
    ) {
        // Every mode (cached, streaming, auto below and above its threshold), any alignment;
        // the guard bytes on both sides stay as they were.
        let mode = [
            stream_hal::FillMode::Cached,
            stream_hal::FillMode::Streaming,
            stream_hal::FillMode::AUTO,
            stream_hal::FillMode::Auto { threshold_bytes: 1 },
        ][mode];
        let mut buf = vec![GUARD_BYTE; 2 * GUARD + off + len];
        stream_hal::fill_bytes(&mut buf[GUARD + off..GUARD + off + len], value, mode);
        prop_assert!(buf[..GUARD + off].iter().all(|&b| b == GUARD_BYTE));
        prop_assert!(buf[GUARD + off..GUARD + off + len].iter().all(|&b| b == value));
        prop_assert!(buf[GUARD + off + len..].iter().all(|&b| b == GUARD_BYTE));
    }

    #[test]
    fn writer_slots_equal_the_model(
        n in 0usize..if cfg!(miri) { 8 } else { 3000 },
        split in 0usize..64,
        template in any::<[u64; 8]>(),
        salt: u64,
    ) {
        // A 64-byte record (struct page size) and a 72-byte one (WANT_PAGE_VIRTUAL size), each
        // with 4 guard slots on each side that the writer must not touch.
        writer_case::<8>(n, split, template, salt)?;
        let t9: [u64; 9] = core::array::from_fn(|i| template[i % 8] ^ i as u64);
        writer_case::<9>(n, split, t9, salt)?;
    }
}

fn writer_case<const W: usize>(
    n: usize,
    split: usize,
    template: [u64; W],
    salt: u64,
) -> Result<(), TestCaseError> {
    const G: usize = 4;
    let guard = [0xA5A5_A5A5_A5A5_A5A5u64; W];
    let mut slots = vec![MaybeUninit::new(guard); G + n + G];
    let split = split.min(n);
    let model: Vec<[u64; W]> = (0..n)
        .map(|i| {
            if i < split {
                template
            } else {
                let mut r = template;
                r[0] = i as u64 ^ salt;
                r[W - 1] = !(i as u64);
                r
            }
        })
        .collect();
    let (written, ()) = stream_hal::scope(&mut slots[G..G + n], |w| {
        w.fill_n(&template, split).unwrap();
        w.fill_with(|i| {
            let mut r = template;
            r[0] = i as u64 ^ salt;
            r[W - 1] = !(i as u64);
            r
        });
    });
    prop_assert_eq!(&written[..], &model[..]);
    for s in slots[..G].iter().chain(&slots[G + n..]) {
        // SAFETY: guard slots were initialized with `MaybeUninit::new` and never handed out.
        prop_assert_eq!(unsafe { s.assume_init() }, guard);
    }
    Ok(())
}

type ClearFn = unsafe fn(*mut u8, usize);

/// `clear` (size-dependent choice), its two forced methods, and the generic reference.
const CLEARS: [ClearFn; 4] =
    [stream_hal::clear, stream_hal::clear_cached, stream_hal::clear_streaming, stream_hal::generic::clear];

fn check_clear(clear: ClearFn, len: usize, off: usize) -> Result<(), TestCaseError> {
    let mut buf = Aligned::new(GUARD + 4096 + len + GUARD, GUARD_BYTE);
    let start = GUARD + off;
    // SAFETY: `start + len` is inside `buf`.
    unsafe { clear(buf.bytes_mut().as_mut_ptr().add(start), len) };
    stream_hal::drain();
    let b = buf.bytes();
    prop_assert!(
        b[..start].iter().all(|&x| x == GUARD_BYTE),
        "guard before changed: len {} off {}",
        len,
        off
    );
    prop_assert!(b[start..start + len].iter().all(|&x| x == 0), "not zeroed: len {} off {}", len, off);
    prop_assert!(
        b[start + len..].iter().all(|&x| x == GUARD_BYTE),
        "guard after changed: len {} off {}",
        len,
        off
    );
    Ok(())
}

/// Runs `f` with the CPU features in effect (detected: `CLZERO`, Zicboz, a `dcbz` block size,
/// FEAT_MOPS where the CPU has them), then with none of them, so every clear path of the backend runs.
/// Under emulation nothing is detected, so each feature is claimed with the `unsafe` setter,
/// which executes no instruction there. Restores the features in effect afterwards.
fn with_each_feature_set(mut f: impl FnMut()) {
    let before = stream_hal::cpu_features();
    let emulated = matches!(stream_hal::backend(), stream_hal::Backend::Emulated(_));
    if emulated {
        let block = stream_hal::BlockSize::new(64);
        let all = stream_hal::CpuFeatures::NONE
            .with_clzero(true)
            .with_zicboz(block)
            .with_dcbz(block)
            .with_mops(true);
        // SAFETY: an emulated build executes no `clzero`, `cbo.zero`, `dcbz` or MOPS memory set:
        // their emulation zeroes the 64-byte block (or, for MOPS, the range) with ordinary
        // writes, which the clears only issue on whole, aligned blocks of the range.
        unsafe { stream_hal::set_cpu_features(all) };
    }
    f();
    assert_eq!(
        stream_hal::restrict_cpu_features(stream_hal::CpuFeatures::NONE),
        stream_hal::CpuFeatures::NONE
    );
    f();
    // SAFETY: `before` is what was in effect when this function started: detected by the crate
    // itself (or NONE), so every feature it claims is the CPU's.
    unsafe { stream_hal::set_cpu_features(before) };
}

/// The size bands of `clear` (below, inside and at the start of the streaming band), page
/// aligned and not, with and without the optional features (`CLZERO`, Zicboz, `dcbz`,
/// FEAT_MOPS).
#[test]
fn clear_at_the_method_thresholds() {
    let min = stream_hal::CLEAR_STREAMING_MIN;
    let sizes: Vec<usize> = if cfg!(miri) {
        vec![4096, 3 * 4096 + 5]
    } else {
        vec![min - 4096, min - 1, min, min + 1, 2 * min + 3 * 4096]
    };
    with_each_feature_set(|| {
        for &len in &sizes {
            for off in [0, 8, 100] {
                for clear in CLEARS {
                    check_clear(clear, len, off).unwrap();
                }
            }
        }
    });
}

/// `clear_pages_of` clears exactly `npages` pages of the stated size, and `clear_pages` means
/// 4 KiB pages.
#[test]
fn page_counted_clears_use_the_stated_page_size() {
    use stream_hal::PageSize;
    let sizes = [PageSize::Size4K, PageSize::Size16K, PageSize::Size64K];
    for size in sizes {
        for npages in [0usize, 1, 3] {
            let len = npages * size.bytes();
            let mut buf = Aligned::new(GUARD + len + GUARD, GUARD_BYTE);
            // SAFETY: `GUARD + len` bytes are inside `buf`.
            unsafe { stream_hal::clear_pages_of(buf.bytes_mut().as_mut_ptr().add(GUARD), npages, size) };
            stream_hal::drain();
            let b = buf.bytes();
            assert!(
                b[..GUARD].iter().all(|&x| x == GUARD_BYTE)
                    && b[GUARD + len..].iter().all(|&x| x == GUARD_BYTE)
            );
            assert!(b[GUARD..GUARD + len].iter().all(|&x| x == 0), "{size:?} x {npages}");
            assert_eq!(PageSize::from_bytes(size.bytes()), Some(size));
        }
    }
    let mut buf = Aligned::new(GUARD + 2 * 4096 + GUARD, GUARD_BYTE);
    // SAFETY: two pages after the guard are inside `buf`.
    unsafe { stream_hal::clear_pages(buf.bytes_mut().as_mut_ptr().add(GUARD), 1) };
    stream_hal::drain();
    assert!(buf.bytes()[GUARD..GUARD + 4096].iter().all(|&x| x == 0));
    assert!(buf.bytes()[GUARD + 4096..].iter().all(|&x| x == GUARD_BYTE));
    assert_eq!(PageSize::from_bytes(8192), None);
}

/// `PROPTEST_CASES` from the environment (CI lowers it under emulation), else `default`.
fn env_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
