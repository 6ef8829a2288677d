//! Backend selection: one implementation of the crate-internal surface per build.
//!
//! * `unsafe fn memcpy_nontemporal(dst: *mut u8, src: *const u8, len: usize)`
//! * `fn drain()`
//! * `fn prefetch(p: *const u8)`: a cache hint that never faults
//! * `unsafe fn flush_cache_range(start: *const u8, len: usize) -> bool`: write back and
//!   invalidate the range's cache lines, or `false` where the backend has no instruction for it
//! * `unsafe fn clear(dst: *mut u8, len: usize)`, `clear_cached`, `clear_streaming`
//! * `fn streaming_clear_method() -> &'static str`
//! * `fn detect_cpu_features() -> Option<CpuFeatures>`, `fn detect_cache_info() -> CacheInfo`
//! * `fn wide_fill_methods() -> impl Iterator<Item = FillMethod>`
//! * `unsafe fn store_record(dst: *mut u8, src: *const u8, size: usize)`: `size` is always a
//!   compile-time constant at the call site (`size_of::<T>()`) and the function is
//!   `#[inline(always)]`, so every branch on it folds away
//! * `unsafe fn store_record_words(dst: *mut u8, src: *const u8, size: usize)`
//! * `unsafe fn store_words<const N: usize>(dst: *mut u64, words: [u64; N])`
//! * `const BACKEND: Backend`
//!
//! The choice, first match wins:
//!
//! 1. `--cfg stream_hal_force_generic`: generic;
//! 2. `cfg(stream_hal_emulate)` (a test switch, set with `RUSTFLAGS="--cfg stream_hal_emulate"`):
//!    the target architecture's backend with its instructions emulated by ordinary accesses,
//!    so that Miri and the sanitizers check all of its address arithmetic and loads (see
//!    [`emulation`](crate::emulation));
//! 3. Miri, or a sanitizer (`cfg(stream_hal_sanitizer)`, from the build script): generic, so
//!    the tool sees every store as an ordinary store;
//! 4. `target_arch = "x86_64"`, `"aarch64"`, `"riscv64"` or `"powerpc64"`: that backend
//!    (x86-64 with or without SSE2, from `target_feature`);
//! 5. anything else: generic (for loongarch64 with the reason that the ISA has no streaming
//!    store or block-zeroing instruction, see [`GenericReason::NoStreamingInstructions`]).
//!
//! Everything is decided from `cfg`, which comes from the target specification, so custom
//! target JSON files get the same backend as the built-in targets of their architecture.
//!
//! [`GenericReason::NoStreamingInstructions`]: crate::GenericReason::NoStreamingInstructions

pub(crate) mod blocks;

/// Calls `flush(p)` once for every `line`-byte cache line that holds a byte of
/// `start..start + len`, with `p` inside the range (the line's start, or `start` for the first
/// line): a line-granular instruction given any address of a line acts on the whole line, and
/// an address inside the caller's range is one it may name. A `line` smaller than the CPU's
/// visits some lines twice, never skips one.
///
/// # Safety
///
/// `start..start + len` is valid for reads, `line` is a power of two, and `flush(p)` may be
/// called for any readable `p`.
#[inline(always)]
#[allow(dead_code)] // unused when the generic backend is selected
pub(crate) unsafe fn for_each_line(
    start: *const u8,
    len: usize,
    line: usize,
    mut flush: impl FnMut(*const u8),
) {
    if len == 0 {
        return;
    }
    let end = start.addr() + len;
    let mut p = start;
    loop {
        flush(p);
        // The next line's start, as an offset from `start` (no pointer leaves the range).
        let next = (p.addr() & !(line - 1)) + line;
        if next >= end {
            break;
        }
        p = start.wrapping_add(next - start.addr());
    }
}
pub(crate) mod dczid;
pub(crate) mod generic;
#[cfg(test)]
#[allow(dead_code)] // used by the tests of the aarch64, riscv64 and powerpc64 backends only
pub(crate) mod testing;
pub(crate) mod x86_cache;

/// Brings one backend's implementation of the crate-internal surface into scope.
macro_rules! use_backend {
    ($m:ident) => {
        pub(crate) use self::$m::{
            clear, clear_cached, clear_streaming, detect_cache_info, detect_cpu_features, drain,
            flush_cache_range, memcpy_nontemporal, prefetch, store_record, store_record_words, store_words,
            streaming_clear_method, wide_fill_methods,
        };
    };
}

cfg_if::cfg_if! {
    if #[cfg(stream_hal_force_generic)] {
        use_backend!(generic);
        pub(crate) const BACKEND: crate::Backend = crate::Backend::Generic(crate::GenericReason::ForceGeneric);
    } else if #[cfg(all(target_arch = "x86_64", any(stream_hal_emulate, not(any(miri, stream_hal_sanitizer)))))] {
        mod x86_64;
        use_backend!(x86_64);
        pub(crate) const BACKEND: crate::Backend = if cfg!(stream_hal_emulate) {
            crate::Backend::Emulated(crate::Arch::X86_64 { vector: x86_64::VECTOR })
        } else {
            crate::Backend::X86_64 { vector: x86_64::VECTOR }
        };
    } else if #[cfg(all(target_arch = "aarch64", any(stream_hal_emulate, not(any(miri, stream_hal_sanitizer)))))] {
        mod aarch64;
        use_backend!(aarch64);
        pub(crate) const BACKEND: crate::Backend = if cfg!(stream_hal_emulate) {
            crate::Backend::Emulated(crate::Arch::Aarch64)
        } else {
            crate::Backend::Aarch64
        };
    } else if #[cfg(all(target_arch = "riscv64", any(stream_hal_emulate, not(any(miri, stream_hal_sanitizer)))))] {
        mod riscv64;
        use_backend!(riscv64);
        pub(crate) const BACKEND: crate::Backend = if cfg!(stream_hal_emulate) {
            crate::Backend::Emulated(crate::Arch::Riscv64)
        } else {
            crate::Backend::Riscv64
        };
    } else if #[cfg(all(target_arch = "powerpc64", any(stream_hal_emulate, not(any(miri, stream_hal_sanitizer)))))] {
        mod powerpc64;
        use_backend!(powerpc64);
        pub(crate) const BACKEND: crate::Backend = if cfg!(stream_hal_emulate) {
            crate::Backend::Emulated(crate::Arch::Powerpc64)
        } else {
            crate::Backend::Powerpc64
        };
    } else {
        use_backend!(generic);
        pub(crate) const BACKEND: crate::Backend = crate::Backend::Generic(generic_reason());
    }
}

/// Why the generic backend was chosen without `stream_hal_force_generic`.
#[allow(dead_code)] // unused when a streaming backend is selected
const fn generic_reason() -> crate::GenericReason {
    if cfg!(miri) {
        crate::GenericReason::Miri
    } else if cfg!(stream_hal_sanitizer) {
        match option_env!("STREAM_HAL_SANITIZERS") {
            Some(names) => crate::GenericReason::Sanitizer(names),
            None => crate::GenericReason::Sanitizer("unknown"),
        }
    } else if cfg!(target_arch = "loongarch64") {
        crate::GenericReason::NoStreamingInstructions("loongarch64")
    } else {
        crate::GenericReason::UnsupportedTarget(target_arch_name())
    }
}

/// The target architecture's name as `cfg(target_arch)` spells it, for the architectures Rust
/// supports (`unknown` for any other).
#[allow(dead_code)]
const fn target_arch_name() -> &'static str {
    if cfg!(target_arch = "x86") {
        "x86"
    } else if cfg!(target_arch = "x86_64") {
        "x86_64"
    } else if cfg!(target_arch = "arm") {
        "arm"
    } else if cfg!(target_arch = "aarch64") {
        "aarch64"
    } else if cfg!(target_arch = "riscv32") {
        "riscv32"
    } else if cfg!(target_arch = "riscv64") {
        "riscv64"
    } else if cfg!(target_arch = "powerpc") {
        "powerpc"
    } else if cfg!(target_arch = "powerpc64") {
        "powerpc64"
    } else if cfg!(target_arch = "s390x") {
        "s390x"
    } else if cfg!(target_arch = "loongarch64") {
        "loongarch64"
    } else if cfg!(target_arch = "mips") {
        "mips"
    } else if cfg!(target_arch = "mips64") {
        "mips64"
    } else if cfg!(target_arch = "sparc64") {
        "sparc64"
    } else if cfg!(target_arch = "wasm32") {
        "wasm32"
    } else if cfg!(target_arch = "wasm64") {
        "wasm64"
    } else {
        "unknown"
    }
}

/// 8 bytes from `src`, any alignment: the loads of the backends that store whole words.
///
/// # Safety
///
/// `src` readable for 8 initialized bytes.
#[allow(dead_code)] // used by the aarch64 and riscv64 backends only
#[inline(always)]
pub(crate) unsafe fn load64(src: *const u8) -> u64 {
    // SAFETY: the caller guarantees 8 readable bytes; `read_unaligned` has no alignment needs.
    unsafe { core::ptr::read_unaligned(src.cast::<u64>()) }
}

#[cfg(test)]
mod line_walk_tests {
    use super::for_each_line;
    use std::vec;
    use std::vec::Vec;

    /// Every line of the range is visited once, in order, at an address inside the range.
    #[test]
    fn every_line_once_inside_the_range() {
        let buf = [0u8; 1024];
        // Under Miri (twice per CI run, minutes for every start) the starts next to a line
        // boundary only.
        let starts: Vec<usize> =
            if cfg!(miri) { vec![0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129] } else { (0..130).collect() };
        for line in [16usize, 64, 128] {
            for &start in &starts {
                for len in [0usize, 1, 2, 15, 16, 63, 64, 65, 127, 128, 300, 700] {
                    let base = buf.as_ptr().wrapping_add(start);
                    let (lo, hi) = (base.addr(), base.addr() + len);
                    let mut seen = Vec::new();
                    // SAFETY: `start + len <= 830 < 1024`: the range is readable; the closure
                    // reads nothing.
                    unsafe { for_each_line(base, len, line, |p| seen.push(p.addr())) };
                    let lines = if len == 0 { 0 } else { (hi - 1) / line - lo / line + 1 };
                    assert_eq!(seen.len(), lines, "line {line} start {start} len {len}");
                    for (i, &p) in seen.iter().enumerate() {
                        assert!(lo <= p && p < hi, "{p:#x} outside {lo:#x}..{hi:#x}");
                        assert_eq!(p / line, lo / line + i, "line {i} of {start}+{len}");
                    }
                }
            }
        }
    }
}
