//! The caches in effect: detected once, replaced by the caller, and followed by Auto.
//!
//! One test function, because the value is process-wide: after `set_cache_info` nothing in
//! this process sees the detected caches again.

use stream_hal::{
    CacheInfo, CacheSource, FillMode, NoCacheInfo, READ_SOON_FALLBACK, Reuse, WRITE_ONCE_FLOOR,
    auto_threshold, build_config, cache_info, set_cache_info, streaming_threshold,
};

#[test]
fn the_caller_replaces_the_detected_caches_and_auto_follows() {
    let detected = CacheInfo::detect();
    let before = cache_info();
    eprintln!(
        "backend {}: detected {detected}; in effect {before}; auto streams from {} B (write-once), {} B (read-soon)",
        stream_hal::backend(),
        auto_threshold(Reuse::WriteOnce),
        auto_threshold(Reuse::ReadSoon),
    );
    if build_config().no_cpuid {
        assert_eq!(before, CacheInfo::unknown(NoCacheInfo::NoCpuid));
    } else {
        assert_eq!(before, detected);
        // Cached: a second call is the same value.
        assert_eq!(cache_info(), before);
    }
    if matches!(stream_hal::backend(), stream_hal::Backend::X86_64 { .. }) {
        assert!(
            matches!(
                detected.source(),
                CacheSource::CpuidLeaf4
                    | CacheSource::CpuidLeaf8000001D
                    | CacheSource::CpuidLeaf80000006
                    | CacheSource::Unknown(NoCacheInfo::NotReported)
            ),
            "{detected}"
        );
    }
    assert_eq!(FillMode::READ_SOON.threshold(), streaming_threshold(Reuse::ReadSoon, &before));

    // A kernel's own reading: 48 KiB L1d, 2 MiB L2, 64 MiB of L3 for 4 CPUs. The source is
    // the caller's whatever the value said.
    let mine = CacheInfo::new(64, [48 << 10, 2 << 20, 64 << 20, 0], 4);
    set_cache_info(mine);
    let now = cache_info();
    assert_eq!(now.source(), CacheSource::Caller);
    assert_eq!((now.data_sizes(), now.last_level_shared_by()), (mine.data_sizes(), Some(4)));
    assert_eq!(auto_threshold(Reuse::ReadSoon), 12 << 20);
    assert_eq!(FillMode::READ_SOON.threshold(), 12 << 20);
    assert!(!FillMode::READ_SOON.streams((12 << 20) - 1) && FillMode::READ_SOON.streams(12 << 20));
    assert_eq!(FillMode::AUTO.threshold(), WRITE_ONCE_FLOOR);
    // A detected value handed back is the caller's from then on.
    set_cache_info(detected);
    assert_eq!(cache_info().source(), CacheSource::Caller);

    // Replacing it again, from several threads while others read: every reader sees one of
    // the values written, whole, and the last one stays.
    let values: Vec<CacheInfo> =
        (1..=4u32).map(|n| CacheInfo::new(64, [32 << 10, 1 << 20, u64::from(n) << 24, 0], n)).collect();
    std::thread::scope(|s| {
        for v in &values {
            s.spawn(move || (0..500).for_each(|_| set_cache_info(*v)));
        }
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..5000 {
                    let c = cache_info();
                    let n = c.last_level_shared_by().unwrap_or(0);
                    // A reader that kept meeting a write in progress falls back to the detected
                    // caches (`before`, as nothing else was detected).
                    assert!(
                        values.contains(&c) || c == before || c == detected_as_caller(detected),
                        "{c:?} ({n})"
                    );
                }
            });
        }
    });
    set_cache_info(values[2]);
    assert_eq!(cache_info(), values[2]);

    // Nothing known: Read-soon falls back to 1 MiB, write-once keeps its floor.
    set_cache_info(CacheInfo::new(0, [0; 4], 0));
    assert_eq!(cache_info().last_level(), None);
    assert_eq!(
        (auto_threshold(Reuse::ReadSoon), auto_threshold(Reuse::WriteOnce)),
        (READ_SOON_FALLBACK, WRITE_ONCE_FLOOR)
    );
}

/// `detected` as `cache_info` returns it after `set_cache_info(detected)`.
fn detected_as_caller(detected: CacheInfo) -> CacheInfo {
    CacheInfo::new(
        detected.line_size().unwrap_or(0),
        detected.data_sizes(),
        detected.last_level_shared_by().unwrap_or(0),
    )
}
