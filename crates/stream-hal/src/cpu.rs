//! CPU features the backends use beyond what the target enables at compile time, and who
//! decides them.
//!
//! Only one such feature exists today: x86-64's `CLZERO` (AMD), which the x86-64
//! [`clear`](crate::clear) uses for large ranges. Finding it out takes a `CPUID`, and in
//! confidential guests (AMD SEV-ES/SNP, Intel TDX) `CPUID` traps to the guest's #VC/#VE handler,
//! which early boot code must control. So the features are a value the caller can set:
//!
//! * [`set_cpu_features`] stores the features the caller detected (a kernel passes what its own
//!   CPU setup found); from then on this crate never executes `CPUID`. It can be called again
//!   at any time (tests use it to run both clear paths).
//! * If nothing was set, the first clear that needs to know runs `CPUID` once and caches the
//!   answer, unless the crate feature `no-cpuid` is enabled: then the unset features are
//!   [`CpuFeatures::NONE`] and `CPUID` never runs.
//!
//! On aarch64 nothing here matters: the `dc zva` block size and permission are read from
//! `DCZID_EL0` at every clear (an EL0/EL1 register read that does not trap).

use core::sync::atomic::{AtomicU32, Ordering};

/// CPU features [`clear`](crate::clear) can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct CpuFeatures {
    /// x86-64 `CLZERO` (CPUID `0x8000_0008`, EBX bit 0; AMD Zen and later): zeroes a 64-byte
    /// line without reading it, weakly ordered like a non-temporal store.
    pub clzero: bool,
}

impl CpuFeatures {
    /// No optional feature: the baseline every CPU of the target has.
    pub const NONE: CpuFeatures = CpuFeatures { clzero: false };

    /// With `CLZERO` present or not.
    #[must_use]
    pub const fn with_clzero(mut self, present: bool) -> Self {
        self.clzero = present;
        self
    }

    /// Detects the features with `CPUID` (x86-64, native backend). `None` where there is nothing
    /// to detect (other architectures, the generic backend, emulated builds).
    #[must_use]
    pub fn detect() -> Option<CpuFeatures> {
        crate::arch::detect_cpu_features()
    }

    const fn encode(self) -> u32 {
        KNOWN | self.clzero as u32
    }

    const fn decode(bits: u32) -> CpuFeatures {
        CpuFeatures { clzero: bits & 1 != 0 }
    }
}

/// Bit set in [`FEATURES`] once the features are known (set or detected).
const KNOWN: u32 = 1 << 31;

/// The features: 0 while unknown, else [`KNOWN`] plus the feature bits. Relaxed ordering is
/// enough everywhere: the value is self-contained (no other memory is published with it), and
/// two threads racing to detect store the same value.
static FEATURES: AtomicU32 = AtomicU32::new(0);

/// Sets the CPU features this crate may use, replacing any earlier value (set or detected).
/// After this call the crate never executes `CPUID`.
///
/// Setting a feature the CPU lacks makes the next large [`clear`](crate::clear) execute an
/// instruction the CPU does not have (an invalid-opcode fault), which is why kernels pass what
/// their own CPU setup detected.
pub fn set_cpu_features(features: CpuFeatures) {
    FEATURES.store(features.encode(), Ordering::Relaxed);
}

/// The CPU features in effect: the value given to [`set_cpu_features`], else (without the
/// `no-cpuid` feature) the value `CPUID` reports, detected on the first call and cached, else
/// [`CpuFeatures::NONE`].
#[must_use]
pub fn cpu_features() -> CpuFeatures {
    let bits = FEATURES.load(Ordering::Relaxed);
    if bits & KNOWN != 0 {
        return CpuFeatures::decode(bits);
    }
    let detected = if cfg!(feature = "no-cpuid") {
        CpuFeatures::NONE
    } else {
        CpuFeatures::detect().unwrap_or(CpuFeatures::NONE)
    };
    // Keep a value another thread set meanwhile; otherwise cache the detected one.
    match FEATURES.compare_exchange(0, detected.encode(), Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => detected,
        Err(bits) => CpuFeatures::decode(bits),
    }
}
