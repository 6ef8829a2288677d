//! Backend selection: one implementation of the crate-internal surface per build. First match
//! wins:
//!
//! 1. `--cfg stream_hal_force_generic`: generic;
//! 2. `cfg(stream_hal_emulate)` (a test switch, set with `RUSTFLAGS="--cfg stream_hal_emulate"`):
//!    the target architecture's backend, instructions emulated ([`emulation`](crate::emulation));
//! 3. Miri, or a sanitizer (`cfg(stream_hal_sanitizer)`, from the build script): generic, so
//!    the tool sees every store as an ordinary store;
//! 4. `target_arch = "x86_64"`, `"aarch64"`, `"riscv64"` or `"powerpc64"`: that backend
//!    (x86-64 with or without SSE2, from `target_feature`);
//! 5. anything else: generic (for loongarch64 with the reason that the ISA has no streaming
//!    store or block-zeroing instruction, see [`GenericReason::NoStreamingInstructions`]).
//!
//! Decided from `cfg` alone, so custom target JSON files get their architecture's backend.
//!
//! [`GenericReason::NoStreamingInstructions`]: crate::GenericReason::NoStreamingInstructions

pub(crate) mod blocks;

/// A function for an instruction that takes no operand and orders memory (a fence): `asm!`
/// natively, the emulation's drain under `cfg(stream_hal_emulate)`.
#[allow(unused_macros)] // unused when the generic backend is selected
macro_rules! barrier {
    ($(#[$doc:meta])* $name:ident = $insn:literal) => {
        $(#[$doc])*
        #[inline(always)]
        pub(crate) fn $name() {
            #[cfg(not(stream_hal_emulate))]
            // SAFETY: the barrier has no operands and no preconditions, writes no register, no
            // flag and no stack. Not `nomem`: it is also a compiler barrier, which keeps memory
            // accesses on their side of it.
            unsafe {
                core::arch::asm!($insn, options(nostack, preserves_flags));
            }
            #[cfg(stream_hal_emulate)]
            crate::emulation::drain();
        }
    };
}

/// A function for a prefetch hint at `p` (the instruction's operand `{p}`, of register class
/// `$class`): `asm!` natively, nothing under `cfg(stream_hal_emulate)`.
#[allow(unused_macros)] // unused when the generic backend is selected
macro_rules! prefetch_hint {
    ($(#[$doc:meta])* $name:ident($class:ident) = $($insn:literal),+) => {
        $(#[$doc])*
        #[inline(always)]
        pub(crate) fn $name(p: *const u8) {
            #[cfg(not(stream_hal_emulate))]
            // SAFETY: a prefetch hint has no architecturally visible effect besides timing: it
            // cannot fault whatever `p` is, writes no memory, no register and no flag, and uses
            // no stack.
            unsafe {
                core::arch::asm!($($insn),+, p = in($class) p, options(nostack, preserves_flags, readonly));
            }
            #[cfg(stream_hal_emulate)]
            let _ = p;
        }
    };
}

pub(crate) mod dczid;
pub(crate) mod generic;
#[cfg(feature = "bench-kit")]
pub mod kit;
#[cfg(test)]
#[allow(dead_code)] // used by the tests of the aarch64, riscv64 and powerpc64 backends only
pub(crate) mod testing;
pub(crate) mod x86_cache;

/// Brings one backend's implementation of the crate-internal surface into scope.
macro_rules! use_backend {
    ($m:ident) => {
        #[cfg(feature = "bench-kit")]
        use self::$m::kit as selected_kit;
        pub(crate) use self::$m::{
            clear, clear_cached, clear_streaming, detect_cache_info, detect_cpu_features, drain,
            memcpy_nontemporal, prefetch, store_record, store_record_words, store_words,
            streaming_clear_method,
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

/// The target architecture's name as `cfg(target_arch)` spells it (from the build script;
/// `unknown` in a build that does not run it).
#[allow(dead_code)] // unused when a streaming backend is selected
const fn target_arch_name() -> &'static str {
    match option_env!("STREAM_HAL_TARGET_ARCH") {
        Some(arch) => arch,
        None => "unknown",
    }
}

/// The C library's `getauxval(kind)` (glibc and musl on Linux): the auxiliary vector's value
/// for `kind`, 0 if absent. `None` elsewhere and when emulating, where nothing is detected.
#[allow(dead_code)] // used by the aarch64 and powerpc64 backends only
pub(crate) fn auxval(kind: core::ffi::c_ulong) -> Option<core::ffi::c_ulong> {
    #[cfg(all(target_os = "linux", any(target_env = "gnu", target_env = "musl"), not(stream_hal_emulate)))]
    {
        unsafe extern "C" {
            safe fn getauxval(kind: core::ffi::c_ulong) -> core::ffi::c_ulong;
        }
        Some(getauxval(kind))
    }
    #[cfg(not(all(
        target_os = "linux",
        any(target_env = "gnu", target_env = "musl"),
        not(stream_hal_emulate)
    )))]
    {
        let _ = kind;
        None
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
