//! Which backend a build uses and why ([`backend()`](crate::backend)), and the switches it was built with
//! ([`build_config`](crate::build_config)).

use core::fmt;

/// The backend this build of `stream-hal` uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// x86-64 streaming stores with an `sfence` drain.
    X86_64 {
        /// `true` when SSE2 is enabled, so 16-byte `movntdq` stores are used for aligned runs;
        /// `false` on soft-float kernel targets such as `x86_64-unknown-none`, where only the
        /// general-purpose-register `movnti` is used.
        vector: bool,
    },
    /// aarch64 `stnp` streaming stores with a `dmb ish` drain, `dc zva` clearing (MOPS memory
    /// sets where [`cpu_features`](crate::cpu_features) reports FEAT_MOPS).
    Aarch64,
    /// riscv64: `ntl.all`-hinted stores with a `fence w, rw` drain, Zicboz `cbo.zero` clearing
    /// where [`cpu_features`](crate::cpu_features) reports it.
    Riscv64,
    /// powerpc64: plain copies (the ISA has no non-temporal store) with a `sync` drain, `dcbz`
    /// clearing where [`cpu_features`](crate::cpu_features) gives the block size. Not [streaming](Backend::is_streaming).
    Powerpc64,
    /// Plain stores (`copy_nonoverlapping`, `write_bytes`); the reason says why.
    Generic(GenericReason),
    /// An architecture's backend with its instructions emulated by ordinary accesses, for
    /// checking it under Miri and the sanitizers (`--cfg stream_hal_emulate`; see
    /// [`emulation`](crate#emulation)). Nothing is streamed.
    Emulated(Arch),
}

/// An architecture with a streaming backend (for [`Backend::Emulated`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Arch {
    /// x86-64, with or without SSE2 (see [`Backend::X86_64`]).
    X86_64 {
        /// SSE2 enabled.
        vector: bool,
    },
    /// aarch64.
    Aarch64,
    /// riscv64.
    Riscv64,
    /// powerpc64.
    Powerpc64,
}

/// Why a build uses the generic backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GenericReason {
    /// The target architecture has no streaming backend (the architecture is named).
    UnsupportedTarget(&'static str),
    /// A sanitizer is enabled (named as rustc names it: `address`, `memory`, `thread`,
    /// `hwaddress`, `leak`, ...; several are comma-separated). Sanitizers cannot see inside
    /// inline assembly, so the generic backend keeps every store visible to them.
    Sanitizer(&'static str),
    /// The build runs under Miri, which cannot execute inline assembly.
    Miri,
    /// `--cfg stream_hal_force_generic` is set.
    ForceGeneric,
    /// The architecture (named) has no streaming store and no block-zeroing instruction, so
    /// plain stores are its best: loongarch64.
    NoStreamingInstructions(&'static str),
}

impl Backend {
    /// `true` if this backend issues streaming (non-temporal) stores: x86-64, aarch64 and
    /// riscv64 (`ntl.all`-hinted stores). powerpc64 only zeroes with `dcbz`.
    #[must_use]
    pub const fn is_streaming(&self) -> bool {
        matches!(self, Backend::X86_64 { .. } | Backend::Aarch64 | Backend::Riscv64)
    }

    /// Short machine-readable name: `x86_64`, `x86_64-movnti`, `aarch64`, `riscv64`,
    /// `powerpc64`, `generic`, or one of those architecture names followed by `-emulated`
    /// (`x86_64-movnti-emulated`, ...).
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            Backend::X86_64 { vector: true } => "x86_64",
            Backend::X86_64 { vector: false } => "x86_64-movnti",
            Backend::Aarch64 => "aarch64",
            Backend::Riscv64 => "riscv64",
            Backend::Powerpc64 => "powerpc64",
            Backend::Generic(_) => "generic",
            Backend::Emulated(Arch::X86_64 { vector: true }) => "x86_64-emulated",
            Backend::Emulated(Arch::X86_64 { vector: false }) => "x86_64-movnti-emulated",
            Backend::Emulated(Arch::Aarch64) => "aarch64-emulated",
            Backend::Emulated(Arch::Riscv64) => "riscv64-emulated",
            Backend::Emulated(Arch::Powerpc64) => "powerpc64-emulated",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::X86_64 { vector: true } => f.write_str("x86-64 streaming (movntdq + movnti, sfence)"),
            Backend::X86_64 { vector: false } => f.write_str("x86-64 streaming (movnti only, sfence)"),
            Backend::Aarch64 => f.write_str("aarch64 streaming (stnp, dmb ish, dc zva)"),
            Backend::Riscv64 => {
                f.write_str("riscv64 streaming (ntl.all + sd, fence w,rw, cbo.zero with Zicboz)")
            }
            Backend::Powerpc64 => f.write_str("powerpc64 (plain copies, sync, dcbz)"),
            Backend::Generic(reason) => write!(f, "generic ({reason})"),
            Backend::Emulated(Arch::X86_64 { vector: true }) => {
                f.write_str("x86-64 backend, instructions emulated (movntdq + movnti)")
            }
            Backend::Emulated(Arch::X86_64 { vector: false }) => {
                f.write_str("x86-64 backend, instructions emulated (movnti only)")
            }
            Backend::Emulated(Arch::Aarch64) => f.write_str("aarch64 backend, instructions emulated"),
            Backend::Emulated(Arch::Riscv64) => f.write_str("riscv64 backend, instructions emulated"),
            Backend::Emulated(Arch::Powerpc64) => f.write_str("powerpc64 backend, instructions emulated"),
        }
    }
}

impl fmt::Display for GenericReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GenericReason::UnsupportedTarget(arch) => write!(f, "unsupported target: {arch}"),
            GenericReason::Sanitizer(name) => write!(f, "sanitizer: {name}"),
            GenericReason::Miri => f.write_str("Miri"),
            GenericReason::ForceGeneric => f.write_str("cfg stream_hal_force_generic"),
            GenericReason::NoStreamingInstructions(arch) => {
                write!(f, "{arch} has no streaming store or block-zeroing instruction")
            }
        }
    }
}

/// What this build of `stream-hal` was compiled with, for a kernel's compile-time assertion
/// that its build took the switches it relies on:
///
/// ```
/// use stream_hal::{Backend, BuildConfig, build_config};
///
/// /// The stream-hal build a soft-float x86-64 kernel in a confidential guest expects: no
/// /// `CPUID` of stream-hal's own (it traps there) and the `movnti`-only backend.
/// const fn as_expected(c: BuildConfig) -> bool {
///     c.no_cpuid && matches!(c.backend, Backend::X86_64 { vector: false })
/// }
/// // The kernel writes:
/// // const _: () = assert!(
/// //     as_expected(build_config()),
/// //     "stream-hal built without STREAM_HAL_NO_CPUID=1 or for the wrong target",
/// // );
/// // This doctest is a hosted build with detection on, where the expectation is false:
/// const _: () = assert!(!as_expected(build_config()));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct BuildConfig {
    /// The backend ([`backend()`](crate::backend)).
    pub backend: Backend,
    /// Implicit CPU feature detection is off (`STREAM_HAL_NO_CPUID=1` or `--cfg
    /// stream_hal_no_cpuid`): no `CPUID`, `riscv_hwprobe` or auxiliary vector; only what
    /// [`set_cpu_features`](crate::set_cpu_features) passes is used.
    pub no_cpuid: bool,
    /// The generic backend was forced (`STREAM_HAL_FORCE_GENERIC=1` or `--cfg
    /// stream_hal_force_generic`).
    pub force_generic: bool,
}
