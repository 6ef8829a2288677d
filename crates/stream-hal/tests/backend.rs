//! Backend selection: the build reports the backend its configuration calls for.
//!
//! The expectation comes from outside the crate: CI sets `STREAM_HAL_EXPECT_BACKEND` for each
//! job (`x86_64`, `x86_64-movnti`, `aarch64`, `riscv64`, `powerpc64`, `generic:address`,
//! `generic:miri`, `generic:force-generic`, `generic:no-streaming:loongarch64`, ...). Without
//! it, the expectation follows from the target and the `--cfg` switches (a plain `cargo test`
//! on x86-64, aarch64 or riscv64 must report a streaming backend).

use stream_hal::{Backend, GenericReason, backend};

fn describe(b: Backend) -> String {
    match b {
        Backend::Generic(GenericReason::Sanitizer(s)) => format!("generic:{s}"),
        Backend::Generic(GenericReason::Miri) => "generic:miri".into(),
        Backend::Generic(GenericReason::ForceGeneric) => "generic:force-generic".into(),
        Backend::Generic(GenericReason::UnsupportedTarget(a)) => format!("generic:unsupported:{a}"),
        Backend::Generic(GenericReason::NoStreamingInstructions(a)) => format!("generic:no-streaming:{a}"),
        Backend::Generic(_) => "generic:other".into(),
        other => other.name().into(),
    }
}

fn default_expectation() -> String {
    let arch = std::env::consts::ARCH;
    if cfg!(stream_hal_force_generic) {
        "generic:force-generic".into()
    } else if cfg!(stream_hal_emulate) && cfg!(target_arch = "x86_64") {
        if cfg!(target_feature = "sse2") { "x86_64-emulated".into() } else { "x86_64-movnti-emulated".into() }
    } else if cfg!(stream_hal_emulate) && matches!(arch, "aarch64" | "riscv64" | "powerpc64") {
        format!("{arch}-emulated")
    } else if cfg!(miri) {
        "generic:miri".into()
    } else if cfg!(target_arch = "x86_64") {
        if cfg!(target_feature = "sse2") { "x86_64".into() } else { "x86_64-movnti".into() }
    } else if matches!(arch, "aarch64" | "riscv64" | "powerpc64") {
        arch.into()
    } else if arch == "loongarch64" {
        "generic:no-streaming:loongarch64".into()
    } else {
        format!("generic:unsupported:{arch}")
    }
}

#[test]
fn backend_matches_the_build_configuration() {
    let expected = std::env::var("STREAM_HAL_EXPECT_BACKEND").unwrap_or_else(|_| default_expectation());
    assert_eq!(describe(backend()), expected, "backend() = {}", backend());
}

#[test]
fn streaming_flag_and_display_agree() {
    let b = backend();
    let text = b.to_string();
    match b {
        Backend::Generic(_) => {
            assert!(!b.is_streaming());
            assert!(text.starts_with("generic ("), "{text}");
            assert_eq!(b.name(), "generic");
        }
        Backend::Emulated(_) => {
            assert!(!b.is_streaming(), "emulated instructions stream nothing");
            assert!(text.contains("emulated") && b.name().ends_with("-emulated"), "{text}");
        }
        Backend::Powerpc64 => {
            assert!(!b.is_streaming(), "powerpc64 has no non-temporal store");
            assert!(text.contains("dcbz"), "{text}");
            assert_eq!(b.name(), "powerpc64");
        }
        _ => {
            assert!(b.is_streaming());
            assert!(text.contains("streaming"), "{text}");
            assert_ne!(b.name(), "generic");
        }
    }
}

#[test]
fn reasons_are_named() {
    assert_eq!(
        Backend::Generic(GenericReason::Sanitizer("address")).to_string(),
        "generic (sanitizer: address)"
    );
    assert_eq!(Backend::Generic(GenericReason::Miri).to_string(), "generic (Miri)");
    assert_eq!(
        Backend::Generic(GenericReason::ForceGeneric).to_string(),
        "generic (cfg stream_hal_force_generic)"
    );
    assert_eq!(
        Backend::Generic(GenericReason::NoStreamingInstructions("loongarch64")).to_string(),
        "generic (loongarch64 has no streaming store or block-zeroing instruction)"
    );
    assert_eq!(
        Backend::Generic(GenericReason::UnsupportedTarget("riscv64")).to_string(),
        "generic (unsupported target: riscv64)"
    );
    assert!(!Backend::Generic(GenericReason::Miri).is_streaming());
    assert!(Backend::X86_64 { vector: false }.is_streaming());
    assert!(Backend::Aarch64.is_streaming());
    assert!(Backend::Riscv64.is_streaming());
    assert!(!Backend::Powerpc64.is_streaming());
    assert_eq!(Backend::Riscv64.name(), "riscv64");
    assert_eq!(Backend::Emulated(stream_hal::Arch::Riscv64).name(), "riscv64-emulated");
    assert_eq!(Backend::Emulated(stream_hal::Arch::Powerpc64).name(), "powerpc64-emulated");
}

#[test]
fn safe_entry_points_reject_bad_input_and_write_nothing() {
    let mut dst = [1u8; 8];
    assert_eq!(
        stream_hal::copy_nontemporal(&mut dst, &[2u8; 7]),
        Err(stream_hal::SliceError::LengthMismatch { dst: 8, src: 7 })
    );
    assert_eq!(dst, [1; 8]);
    let mut page = vec![3u8; 4097];
    assert_eq!(
        stream_hal::clear_pages_in(&mut page, stream_hal::PageSize::Size4K),
        Err(stream_hal::SliceError::NotWholePages { len: 4097, page_size: 4096 })
    );
    assert!(page.iter().all(|&b| b == 3));
    assert_eq!(
        stream_hal::clear_pages_in(&mut page[..4096], stream_hal::PageSize::Size16K),
        Err(stream_hal::SliceError::NotWholePages { len: 4096, page_size: 16384 })
    );
    assert!(page.iter().all(|&b| b == 3));
    assert_eq!(stream_hal::clear_pages_in(&mut page[..4096], stream_hal::PageSize::Size4K), Ok(()));
    assert!(page[..4096].iter().all(|&b| b == 0) && page[4096] == 3);
    stream_hal::copy_nontemporal(&mut dst, &[9u8; 8]).unwrap();
    assert_eq!(dst, [9; 8]);
}

/// `prefetch` is a hint: safe with any pointer (null, dangling, unmapped, the kernel half),
/// never faults, and changes no memory.
#[test]
fn prefetch_never_faults_and_changes_nothing() {
    let buf: Vec<u8> = (0..8192u32).map(|i| (i * 7 + 3) as u8).collect();
    let before = buf.clone();
    for off in (0..buf.len()).step_by(64) {
        stream_hal::prefetch(buf[off..].as_ptr());
    }
    for p in [0usize, 1, 4096, usize::MAX & !63, 0xffff_8000_0000_0000, 0x7fff_ffff_f000] {
        stream_hal::prefetch(core::ptr::without_provenance::<u64>(p));
    }
    stream_hal::prefetch(core::ptr::dangling::<[u8; 4096]>());
    assert_eq!(buf, before);
}

/// `flush_cache_range` flushes wherever the backend has a cache-maintenance instruction
/// (x86-64, aarch64, powerpc64, emulated or not) and says so, and nowhere else; it changes no
/// byte, whatever the slice's alignment and length (one byte, one line, a line boundary
/// crossed, many pages), and an empty slice is fine.
#[test]
fn flush_cache_range_flushes_where_it_can_and_changes_nothing() {
    let buf: Vec<u8> = (0..3 * 4096 + 77u32).map(|i| (i * 13 + 5) as u8).collect();
    let before = buf.clone();
    let expect = match backend() {
        Backend::Generic(_) => false,
        other => !other.name().starts_with("riscv64"),
    };
    for (start, len) in [(0, 0), (0, 1), (63, 2), (1, 64), (5, 200), (64, 4096), (3, buf.len() - 3)] {
        assert_eq!(
            stream_hal::bench_kit::flush_cache_range(&buf[start..start + len]),
            expect,
            "{start}+{len}"
        );
    }
    let words: Vec<u64> = (0..1000).collect();
    assert_eq!(stream_hal::bench_kit::flush_cache_range(&words), expect);
    assert_eq!(stream_hal::bench_kit::flush_cache_range::<u64>(&[]), expect);
    assert_eq!(buf, before);
    assert!(words.iter().copied().eq(0..1000));
}

/// The features detected on this machine are the ones CI says the CPU model has
/// (`STREAM_HAL_EXPECT_FEATURES`, e.g. `zicboz=64` under `qemu-riscv64 -cpu rv64,zicboz=true`,
/// `zicboz=none` with `zicboz=false`, `dcbz=128` under qemu-ppc64le, `clzero=no`, `mops=yes`
/// under `qemu-aarch64 -cpu max` and `mops=no` under `-cpu neoverse-n1`), and the streaming
/// clear method follows from them.
#[test]
fn detected_features_match_the_cpu_model() {
    let Ok(expect) = std::env::var("STREAM_HAL_EXPECT_FEATURES") else {
        eprintln!("STREAM_HAL_EXPECT_FEATURES not set: detected {:?}", stream_hal::CpuFeatures::detect());
        return;
    };
    let detected = stream_hal::CpuFeatures::detect().expect("this backend detects features");
    assert_eq!(
        stream_hal::cpu_features(),
        detected,
        "nothing was set, so the detected features are in effect"
    );
    for item in expect.split(',') {
        let (name, value) = item.split_once('=').expect("NAME=VALUE");
        let block =
            |b: Option<stream_hal::BlockSize>| b.map_or("none".to_string(), |b| b.bytes().to_string());
        let found = match name {
            "clzero" => {
                if detected.clzero {
                    "yes".into()
                } else {
                    "no".into()
                }
            }
            "zicboz" => block(detected.zicboz()),
            "mops" => {
                if detected.mops() {
                    "yes".into()
                } else {
                    "no".into()
                }
            }
            "dcbz" => block(detected.dcbz()),
            other => panic!("unknown feature {other}"),
        };
        assert_eq!(found, value, "{name}: detected {detected:?}");
    }
    let method = stream_hal::streaming_clear_method();
    match stream_hal::backend() {
        Backend::Powerpc64 => {
            assert_eq!(method, if detected.dcbz().is_some() { "dcbz" } else { "write_bytes" })
        }
        Backend::Riscv64 => assert_eq!(method, "ntl.all sd"),
        // MOPS or not, the streaming clear is the `stnp` loop (MOPS serves `clear`).
        Backend::Aarch64 => assert_eq!(method, "stnp"),
        Backend::X86_64 { .. } if detected.clzero => assert_eq!(method, "clzero"),
        _ => {}
    }
}
