//! Backend selection: the build reports the backend its configuration calls for.
//!
//! The expectation comes from outside the crate: CI sets `STREAM_HAL_EXPECT_BACKEND` for each
//! job (`x86_64`, `x86_64-movnti`, `aarch64`, `generic:address`, `generic:miri`,
//! `generic:force-generic`, ...). Without it, the expectation follows from the target and the
//! enabled features (a plain `cargo test` on x86-64 or aarch64 must report a streaming backend).

use stream_hal::{Backend, GenericReason, backend};

fn describe(b: Backend) -> String {
    match b {
        Backend::Generic(GenericReason::Sanitizer(s)) => format!("generic:{s}"),
        Backend::Generic(GenericReason::Miri) => "generic:miri".into(),
        Backend::Generic(GenericReason::ForceGeneric) => "generic:force-generic".into(),
        Backend::Generic(GenericReason::UnsupportedTarget(a)) => format!("generic:unsupported:{a}"),
        Backend::Generic(_) => "generic:other".into(),
        other => other.name().into(),
    }
}

fn default_expectation() -> String {
    if cfg!(feature = "force-generic") {
        "generic:force-generic".into()
    } else if cfg!(stream_hal_emulate) && cfg!(target_arch = "x86_64") {
        if cfg!(target_feature = "sse2") { "x86_64-emulated".into() } else { "x86_64-movnti-emulated".into() }
    } else if cfg!(stream_hal_emulate) && cfg!(target_arch = "aarch64") {
        "aarch64-emulated".into()
    } else if cfg!(miri) {
        "generic:miri".into()
    } else if cfg!(target_arch = "x86_64") {
        if cfg!(target_feature = "sse2") { "x86_64".into() } else { "x86_64-movnti".into() }
    } else if cfg!(target_arch = "aarch64") {
        "aarch64".into()
    } else {
        format!("generic:unsupported:{}", std::env::consts::ARCH)
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
    assert_eq!(Backend::Generic(GenericReason::ForceGeneric).to_string(), "generic (feature force-generic)");
    assert_eq!(
        Backend::Generic(GenericReason::UnsupportedTarget("riscv64")).to_string(),
        "generic (unsupported target: riscv64)"
    );
    assert!(!Backend::Generic(GenericReason::Miri).is_streaming());
    assert!(Backend::X86_64 { vector: false }.is_streaming());
    assert!(Backend::Aarch64.is_streaming());
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
