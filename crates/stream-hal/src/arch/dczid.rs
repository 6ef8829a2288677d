//! How the aarch64 `clear_pages` zeroes, in the order of Linux's `clear_page.S`: FEAT_MOPS,
//! else `dc zva` as `DCZID_EL0` allows, else `stnp xzr, xzr`. Pure logic, tested on every host.
//!
//! `DCZID_EL0`: bits `[3:0]` are `BS`, log2 of the block size in 4-byte words; bit `4` is
//! `DZP`, "DC ZVA prohibited".

/// How the aarch64 backend zeroes memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)] // only constructed by the aarch64 backend outside tests
pub(crate) enum ZeroMethod {
    /// FEAT_MOPS is in effect: the memory-set instructions (`SETPN`/`SETMN`/`SETEN`, or
    /// `SETP`/`SETM`/`SETE` for the cached clear) zero the whole range, at any alignment.
    Mops,
    /// `dc zva` is permitted and zeroes `block_bytes`-byte naturally aligned blocks.
    DcZva {
        /// `4 << DCZID_EL0.BS` bytes (64 on most cores, at most `4 << 15`).
        block_bytes: usize,
    },
    /// `DCZID_EL0.DZP` is set: `dc zva` is prohibited, use `stnp xzr, xzr`.
    Prohibited,
}

/// Bit 4 of `DCZID_EL0`.
pub(crate) const DZP: u64 = 1 << 4;

/// Decodes a `DCZID_EL0` value.
#[allow(dead_code)] // only called by the aarch64 backend outside tests
pub(crate) const fn decode(dczid: u64) -> ZeroMethod {
    if dczid & DZP != 0 {
        ZeroMethod::Prohibited
    } else {
        ZeroMethod::DcZva { block_bytes: 4 << (dczid & 0xf) }
    }
}

/// The method: [`ZeroMethod::Mops`] when `mops` (FEAT_MOPS in effect), else
/// [`decode`]`(read_dczid())`; `DCZID_EL0` is only read when it decides.
#[allow(dead_code)] // only called by the aarch64 backend outside tests
pub(crate) fn select(mops: bool, read_dczid: impl FnOnce() -> u64) -> ZeroMethod {
    if mops { ZeroMethod::Mops } else { decode(read_dczid()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mops_wins_over_dc_zva_and_is_chosen_without_reading_dczid() {
        assert_eq!(select(true, || unreachable!("DCZID_EL0 read although MOPS decides")), ZeroMethod::Mops);
        assert_eq!(select(false, || 4), ZeroMethod::DcZva { block_bytes: 64 });
        assert_eq!(select(false, || DZP | 4), ZeroMethod::Prohibited);
    }

    #[test]
    fn block_size_is_four_shifted_by_bs() {
        assert_eq!(decode(0), ZeroMethod::DcZva { block_bytes: 4 });
        // BS = 4 is what Cortex-A and Neoverse cores (and QEMU) report: 64-byte blocks.
        assert_eq!(decode(4), ZeroMethod::DcZva { block_bytes: 64 });
        assert_eq!(decode(9), ZeroMethod::DcZva { block_bytes: 2048 });
        assert_eq!(decode(0xf), ZeroMethod::DcZva { block_bytes: 4 << 15 });
    }

    #[test]
    fn dzp_forces_the_fallback_whatever_the_block_size() {
        for bs in 0..16 {
            assert_eq!(decode(DZP | bs), ZeroMethod::Prohibited);
        }
    }

    #[test]
    fn bits_above_dzp_are_ignored() {
        assert_eq!(decode(0xffe0 | 4), ZeroMethod::DcZva { block_bytes: 64 });
    }
}
