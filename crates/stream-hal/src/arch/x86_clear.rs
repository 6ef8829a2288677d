//! The x86-64 `clear_pages()` alternatives, as a pure model compiled and tested on every host.
//!
//! Linux patches `clear_pages()` at boot with `ALTERNATIVE_2` (kernel-spec §7.1-7.2): the
//! 64-byte unrolled store loop `memzero_page_aligned_unrolled` by default, `rep stosq` on CPUs
//! with `X86_FEATURE_REP_GOOD`, and `rep stosb` on CPUs with `X86_FEATURE_ERMS` (the last
//! alternative that applies wins, so ERMS is preferred over REP_GOOD). The three variants take
//! their count in `rcx` in different units: bytes for `rep stosb`, 8-byte words for `rep stosq`
//! (`shrq $3, %rcx`), 64-byte iterations for the loop (`len >> 6`).
//!
//! This crate's own [`crate::clear_pages`] always uses `rep stosb` on x86-64 (every CPU the
//! project targets has ERMS); the x86-64 backend also implements the other two variants so each
//! can be tested to zero exactly its range.

/// The CPU features `ALTERNATIVE_2` looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct X86ClearFeatures {
    /// `X86_FEATURE_ERMS`: enhanced `rep movsb`/`rep stosb` (CPUID.7.0:EBX bit 9).
    pub erms: bool,
    /// `X86_FEATURE_REP_GOOD`: a synthetic Linux feature, "rep microcode works well".
    pub rep_good: bool,
}

/// Which `clear_pages()` body the alternatives select.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum X86ClearVariant {
    /// `rep stosb` with `rcx` = length in bytes (ERMS).
    RepStosb,
    /// `shrq $3, %rcx; rep stosq` with `rcx` = length / 8 (REP_GOOD).
    RepStosq,
    /// `memzero_page_aligned_unrolled`: eight `movq` per iteration, `rcx` = length / 64.
    Unrolled64,
}

impl X86ClearVariant {
    /// The alternative `ALTERNATIVE_2(unrolled, stosq, REP_GOOD, stosb, ERMS)` patches in.
    #[must_use]
    pub const fn select(features: X86ClearFeatures) -> Self {
        if features.erms {
            X86ClearVariant::RepStosb
        } else if features.rep_good {
            X86ClearVariant::RepStosq
        } else {
            X86ClearVariant::Unrolled64
        }
    }

    /// The value of `rcx` when the body starts, for `len` bytes (`npages * PAGE_SIZE`).
    #[must_use]
    pub const fn count(self, len: usize) -> usize {
        match self {
            X86ClearVariant::RepStosb => len,
            X86ClearVariant::RepStosq => len >> 3,
            X86ClearVariant::Unrolled64 => len >> 6,
        }
    }

    /// Bytes stored per unit of [`X86ClearVariant::count`].
    #[must_use]
    pub const fn unit(self) -> usize {
        match self {
            X86ClearVariant::RepStosb => 1,
            X86ClearVariant::RepStosq => 8,
            X86ClearVariant::Unrolled64 => 64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s7_5_x86_alternative_prefers_erms_then_rep_good_then_the_loop() {
        let f = |erms, rep_good| X86ClearVariant::select(X86ClearFeatures { erms, rep_good });
        assert_eq!(f(true, true), X86ClearVariant::RepStosb);
        assert_eq!(f(true, false), X86ClearVariant::RepStosb);
        assert_eq!(f(false, true), X86ClearVariant::RepStosq);
        assert_eq!(f(false, false), X86ClearVariant::Unrolled64);
    }

    #[test]
    fn s7_5_x86_alternative_count_register_units() {
        for npages in [1usize, 2, 512] {
            let len = npages * crate::PAGE_SIZE;
            assert_eq!(X86ClearVariant::RepStosb.count(len), len);
            assert_eq!(X86ClearVariant::RepStosq.count(len), len >> 3);
            assert_eq!(X86ClearVariant::Unrolled64.count(len), len >> 6);
            for v in [X86ClearVariant::RepStosb, X86ClearVariant::RepStosq, X86ClearVariant::Unrolled64] {
                assert_eq!(v.count(len) * v.unit(), len, "{v:?} covers the whole range");
            }
        }
    }
}
