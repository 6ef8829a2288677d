//! CPU features the backends use beyond the compile-time target ([`CpuFeatures`]): detected
//! once, vouched for with the `unsafe` [`set_cpu_features`], or narrowed with the safe
//! [`restrict_cpu_features`]. No ID register is read for aarch64's MOPS (`ID_AA64ISAR2_EL1`
//! traps at EL0 and does not say whether it is enabled).

use core::sync::atomic::{AtomicU32, Ordering};

/// The size of the block a block-zeroing instruction (`cbo.zero`, `dcbz`) zeroes: a power of
/// two from 8 to 4096 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockSize {
    /// log2 of the size in bytes, 3..=12.
    log2: u8,
}

impl BlockSize {
    /// The smallest block size accepted.
    pub const MIN: usize = 8;
    /// The largest block size accepted (Linux's riscv `clear_page` also refuses blocks larger
    /// than a page).
    pub const MAX: usize = 4096;

    /// `bytes` as a block size, if it is a power of two in [`MIN`](Self::MIN)..=[`MAX`](Self::MAX).
    #[must_use]
    pub const fn new(bytes: usize) -> Option<BlockSize> {
        if bytes.is_power_of_two() && bytes >= Self::MIN && bytes <= Self::MAX {
            Some(BlockSize { log2: bytes.trailing_zeros() as u8 })
        } else {
            None
        }
    }

    /// The size in bytes.
    #[must_use]
    pub const fn bytes(self) -> usize {
        1 << self.log2
    }
}

/// CPU features [`clear`](crate::clear) can use.
///
/// | feature | used by | detected (unless `--cfg stream_hal_no_cpuid`) |
/// |---|---|---|
/// | `CLZERO` (AMD) | x86-64 `clear` from 1 MiB | `CPUID 0x8000_0008`, EBX bit 0 |
/// | `rep stosb` streams large ranges (AMD) | x86-64 `clear` from [`CLEAR_REP_LARGE_MIN`](crate::CLEAR_REP_LARGE_MIN) without `CLZERO` | `CPUID 0` vendor `AuthenticAMD` or `HygonGenuine` |
/// | Zicboz `cbo.zero` and its block size | riscv64 `clear` | Linux: `riscv_hwprobe`; elsewhere not at all |
/// | `dcbz` block size | powerpc64 `clear` | Linux: `getauxval(AT_DCACHEBSIZE)`; elsewhere not at all |
/// | FEAT_MOPS | aarch64 `clear`, `clear_cached` | Linux: `getauxval(AT_HWCAP2)` bit `HWCAP2_MOPS`; elsewhere not at all |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct CpuFeatures {
    /// x86-64 `CLZERO` (CPUID `0x8000_0008`, EBX bit 0; AMD): zeroes a 64-byte
    /// line without reading it, weakly ordered like a non-temporal store.
    pub clzero: bool,
    /// riscv64 Zicboz: `cbo.zero` present, with this block size.
    zicboz: Option<BlockSize>,
    /// powerpc64: the block size `dcbz` zeroes.
    dcbz: Option<BlockSize>,
    /// x86-64: `rep stosb` clears large ranges with the fast-string microcode's own
    /// non-temporal stores (AMD), so it beats `movntdq` there; on Intel it stays on the cached
    /// path.
    large_rep_stosb: bool,
    /// aarch64 FEAT_MOPS: the memory-set instructions (`SETP`/`SETM`/`SETE`, `SETPN`/...).
    mops: bool,
}

impl CpuFeatures {
    /// No optional feature: the baseline every CPU of the target has.
    pub const NONE: CpuFeatures =
        CpuFeatures { clzero: false, zicboz: None, dcbz: None, large_rep_stosb: false, mops: false };

    /// With `CLZERO` present or not.
    #[must_use]
    pub const fn with_clzero(mut self, present: bool) -> Self {
        self.clzero = present;
        self
    }

    /// With riscv64 Zicboz (`cbo.zero`) present with the given block size, or absent (`None`).
    #[must_use]
    pub const fn with_zicboz(mut self, block: Option<BlockSize>) -> Self {
        self.zicboz = block;
        self
    }

    /// With powerpc64 `dcbz` usable with the given data-cache block size, or not (`None`).
    #[must_use]
    pub const fn with_dcbz(mut self, block: Option<BlockSize>) -> Self {
        self.dcbz = block;
        self
    }

    /// With x86-64 `rep stosb` taken as the faster clear from
    /// [`CLEAR_REP_LARGE_MIN`](crate::CLEAR_REP_LARGE_MIN) up on CPUs without `CLZERO` (AMD),
    /// or not. A speed choice, not an instruction claim: either value is safe on every CPU.
    #[must_use]
    pub const fn with_large_rep_stosb(mut self, faster: bool) -> Self {
        self.large_rep_stosb = faster;
        self
    }

    /// With aarch64 FEAT_MOPS (the `SETP`/`SETM`/`SETE` memory-set instructions) present and
    /// enabled, or not. With it [`clear`](crate::clear) (so `clear_pages`) zeroes with
    /// `SETPN`/`SETMN`/`SETEN`, as Linux's arm64 `clear_page` does, and
    /// [`clear_cached`](crate::clear_cached) with `SETP`/`SETM`/`SETE`, instead of `dc zva`.
    #[must_use]
    pub const fn with_mops(mut self, present: bool) -> Self {
        self.mops = present;
        self
    }

    /// Whether aarch64 FEAT_MOPS is present (the clears use `SETP`/`SETPN` and their main and
    /// epilogue instructions instead of `dc zva`).
    #[must_use]
    pub const fn mops(self) -> bool {
        self.mops
    }

    /// Whether x86-64 [`clear`](crate::clear) hands ranges from
    /// [`CLEAR_REP_LARGE_MIN`](crate::CLEAR_REP_LARGE_MIN) up to `rep stosb` when the CPU has
    /// no `CLZERO`.
    #[must_use]
    pub const fn large_rep_stosb(self) -> bool {
        self.large_rep_stosb
    }

    /// The `cbo.zero` block size, if Zicboz is present.
    #[must_use]
    pub const fn zicboz(self) -> Option<BlockSize> {
        self.zicboz
    }

    /// The `dcbz` block size, if `dcbz` may be used.
    #[must_use]
    pub const fn dcbz(self) -> Option<BlockSize> {
        self.dcbz
    }

    /// The features present in both: a block-zeroing feature survives only where both give the
    /// same block size.
    #[must_use]
    pub const fn intersection(self, other: CpuFeatures) -> CpuFeatures {
        CpuFeatures {
            clzero: self.clzero && other.clzero,
            zicboz: same_block(self.zicboz, other.zicboz),
            dcbz: same_block(self.dcbz, other.dcbz),
            large_rep_stosb: self.large_rep_stosb && other.large_rep_stosb,
            mops: self.mops && other.mops,
        }
    }

    const fn encode(self) -> u32 {
        KNOWN
            | self.clzero as u32
            | (self.large_rep_stosb as u32) << 1
            | (self.mops as u32) << 2
            | block_bits(self.zicboz) << ZICBOZ_SHIFT
            | block_bits(self.dcbz) << DCBZ_SHIFT
    }

    const fn decode(bits: u32) -> CpuFeatures {
        CpuFeatures {
            clzero: bits & 1 != 0,
            large_rep_stosb: bits & 2 != 0,
            mops: bits & 4 != 0,
            zicboz: block_of_bits(bits >> ZICBOZ_SHIFT),
            dcbz: block_of_bits(bits >> DCBZ_SHIFT),
        }
    }
}

/// `a` if `a == b`, else `None`.
const fn same_block(a: Option<BlockSize>, b: Option<BlockSize>) -> Option<BlockSize> {
    match (a, b) {
        (Some(x), Some(y)) if x.log2 == y.log2 => Some(x),
        _ => None,
    }
}

/// 0 for `None`, else log2 of the size (3..=12, never 0).
const fn block_bits(b: Option<BlockSize>) -> u32 {
    match b {
        Some(b) => b.log2 as u32,
        None => 0,
    }
}

/// The inverse of [`block_bits`] on the low five bits.
const fn block_of_bits(bits: u32) -> Option<BlockSize> {
    match bits & 0x1f {
        0 => None,
        log2 => Some(BlockSize { log2: log2 as u8 }),
    }
}

/// Bit set in [`FEATURES`] once the features are known (set or detected).
const KNOWN: u32 = 1 << 31;
/// Where the Zicboz block size's log2 is kept in [`FEATURES`] (five bits).
const ZICBOZ_SHIFT: u32 = 8;
/// Where the `dcbz` block size's log2 is kept in [`FEATURES`] (five bits).
const DCBZ_SHIFT: u32 = 16;

/// The features: 0 while unknown, else [`KNOWN`] plus the feature bits. Relaxed ordering is
/// enough everywhere: the value is self-contained (no other memory is published with it), and
/// two threads racing to detect store the same value.
static FEATURES: AtomicU32 = AtomicU32::new(0);

/// Sets the CPU features this crate may use, replacing any earlier value (set or detected).
/// After this call the crate detects nothing by itself.
///
/// To only turn features off, use the safe [`restrict_cpu_features`].
///
/// # Safety
///
/// Every feature `features` claims must be present on every CPU that any later call of this
/// crate's clear functions runs on (from any thread), and every block size must be exactly the
/// CPU's: the clears execute `clzero`, `cbo.zero`, `dcbz` and the MOPS memory-set instructions
/// on the caller's word alone. A missing instruction raises an invalid-instruction fault, and a
/// block size claimed smaller than the real one makes `cbo.zero`/`dcbz` zero memory outside the
/// range being cleared. On riscv64, `cbo.zero` must also be enabled for the privilege level the
/// code runs at (`menvcfg.CBZE`/`senvcfg.CBZE`, which Linux sets for user space). On aarch64,
/// FEAT_MOPS must be enabled likewise (with EL2 implemented `HCRX_EL2.MSCEn`, and for EL0
/// `SCTLR_EL1.MSCEn`, which Linux sets when it reports `HWCAP2_MOPS`), and a thread interrupted
/// inside a `SETP`/`SETM`/`SETE` sequence and resumed on a CPU with the other MOPS algorithm
/// (option A or B) takes the Memory Copy and Memory Set exception, which the kernel must handle
/// by restarting the sequence (Linux does) or avoid by keeping the clear on one CPU.
pub unsafe fn set_cpu_features(features: CpuFeatures) {
    FEATURES.store(features.encode(), Ordering::Relaxed);
}

/// Removes features: the features in effect become their [intersection](CpuFeatures::intersection)
/// with `allowed`, which is returned. Safe because it can only take away.
pub fn restrict_cpu_features(allowed: CpuFeatures) -> CpuFeatures {
    let mut current = cpu_features().encode();
    loop {
        let next = CpuFeatures::decode(current).intersection(allowed);
        match FEATURES.compare_exchange_weak(current, next.encode(), Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => current = seen,
        }
    }
}

/// The CPU features in effect: the value given to [`set_cpu_features`] (narrowed by
/// [`restrict_cpu_features`]), else (without `--cfg stream_hal_no_cpuid`) the detected value,
/// detected on the first call and cached, else [`CpuFeatures::NONE`].
#[must_use]
pub fn cpu_features() -> CpuFeatures {
    let bits = FEATURES.load(Ordering::Relaxed);
    if bits & KNOWN != 0 {
        return CpuFeatures::decode(bits);
    }
    let detected = if cfg!(stream_hal_no_cpuid) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_sizes_are_powers_of_two_in_range() {
        assert_eq!(BlockSize::new(64).map(BlockSize::bytes), Some(64));
        assert_eq!(BlockSize::new(8).map(BlockSize::bytes), Some(8));
        assert_eq!(BlockSize::new(4096).map(BlockSize::bytes), Some(4096));
        for bad in [0, 1, 4, 48, 96, 8192, usize::MAX] {
            assert_eq!(BlockSize::new(bad), None, "{bad}");
        }
    }

    #[test]
    fn encoding_round_trips_every_field() {
        let blocks = [None, BlockSize::new(8), BlockSize::new(64), BlockSize::new(128), BlockSize::new(4096)];
        for (clzero, rep) in [(false, false), (false, true), (true, false), (true, true)] {
            for zicboz in blocks {
                for dcbz in blocks {
                    for mops in [false, true] {
                        let f = CpuFeatures::NONE
                            .with_clzero(clzero)
                            .with_large_rep_stosb(rep)
                            .with_zicboz(zicboz)
                            .with_dcbz(dcbz)
                            .with_mops(mops);
                        assert_eq!(CpuFeatures::decode(f.encode()), f);
                        assert_eq!(f.mops(), mops);
                        assert_ne!(f.encode() & KNOWN, 0);
                    }
                }
            }
        }
    }

    #[test]
    fn intersection_keeps_only_what_both_have() {
        let b64 = BlockSize::new(64);
        let b32 = BlockSize::new(32);
        let all = CpuFeatures::NONE
            .with_clzero(true)
            .with_large_rep_stosb(true)
            .with_zicboz(b64)
            .with_dcbz(b64)
            .with_mops(true);
        assert_eq!(all.intersection(all), all);
        assert_eq!(
            all.intersection(CpuFeatures::NONE.with_large_rep_stosb(true)),
            CpuFeatures::NONE.with_large_rep_stosb(true)
        );
        assert_eq!(all.intersection(CpuFeatures::NONE), CpuFeatures::NONE);
        assert_eq!(CpuFeatures::NONE.intersection(all), CpuFeatures::NONE);
        assert_eq!(all.intersection(CpuFeatures::NONE.with_mops(true)), CpuFeatures::NONE.with_mops(true));
        // A different block size is not "the same feature, smaller": it is dropped.
        let other = CpuFeatures::NONE.with_clzero(true).with_zicboz(b32).with_dcbz(b64);
        assert_eq!(all.intersection(other), CpuFeatures::NONE.with_clzero(true).with_dcbz(b64));
    }
}
