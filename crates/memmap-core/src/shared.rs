//! Helpers shared by the initializers of this crate and of `hugetlb-init`: the
//! [`Strategy::Auto`] decision and the per-PFN refresh of a template page.
//!
//! They live here, and not in each initializer, so that ZONE_DEVICE init and hugetlb tail init
//! choose strategies by the same rules and refresh the same fields.

use crate::hooks::InitHooks;
use crate::memmap::Memmap;
use crate::page::StructPage;
use crate::{Strategy, StrategyReason};

/// Decides the strategy an initializer actually uses for a request of `requested`, writing
/// `bytes` bytes of struct pages, with `threshold_bytes` as the [`Strategy::Auto`] streaming
/// threshold. Never returns [`Strategy::Auto`].
///
/// * [`Strategy::Slow`] is always honoured.
/// * Every other request falls back to Slow when the `page_ref_set` tracepoint is active
///   (every page must emit its event; `zone_device_page_init_optimization_enabled()`) or when
///   KASAN or KMSAN is configured.
/// * [`Strategy::Template`] and [`Strategy::Streaming`] are otherwise honoured.
/// * [`Strategy::Auto`] chooses Slow in a sanitizer build (`stream-hal` generic for a
///   sanitizer), Streaming at or above the threshold and Template below it.
#[must_use]
pub fn resolve_strategy<P: StructPage, H: InitHooks>(
    memmap: &Memmap<'_, P>,
    requested: Strategy,
    threshold_bytes: u64,
    hooks: &H,
    bytes: u64,
) -> (Strategy, StrategyReason) {
    let cfg = memmap.config();
    match requested {
        Strategy::Slow => return (Strategy::Slow, StrategyReason::Requested),
        _ if memmap.page_ref_tracepoint_active(hooks) => {
            return (Strategy::Slow, StrategyReason::PageRefTracepoint);
        }
        _ if cfg.kasan || cfg.kmsan => return (Strategy::Slow, StrategyReason::KasanOrKmsan),
        Strategy::Template | Strategy::Streaming => return (requested, StrategyReason::Requested),
        Strategy::Auto => {}
    }
    if let stream_hal::Backend::Generic(stream_hal::GenericReason::Sanitizer(_)) = stream_hal::backend() {
        return (Strategy::Slow, StrategyReason::SanitizerBuild);
    }
    if bytes >= threshold_bytes {
        (Strategy::Streaming, StrategyReason::AboveThreshold)
    } else {
        (Strategy::Template, StrategyReason::BelowThreshold)
    }
}

impl<P: StructPage> Memmap<'_, P> {
    /// Refreshes the PFN-dependent fields of the template `t` for `pfn`, as
    /// `memmap_init_page_from_template()` does: the section bits when they live in
    /// `page->flags` (`set_page_section_from_pfn`, classic SPARSEMEM) and `virtual`
    /// (`set_page_address`, `WANT_PAGE_VIRTUAL`; 64-bit kernels have no highmem zone).
    ///
    /// Address-dependent fields (list self-pointers) are the caller's business: they depend on
    /// what the template page is.
    #[inline(always)]
    pub fn refresh_template(&self, t: &mut P, pfn: u64) {
        let layout = self.layout();
        if layout.section_in_page_flags() {
            let f = layout.set_section(t.flags(), self.config().pfn_to_section_nr(pfn));
            t.set_flags(f);
        }
        if P::WANT_PAGE_VIRTUAL {
            t.set_virtual_address(self.config().pfn_to_virt(pfn));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CountingHooks, KernelConfig, Page64, Page72};
    use std::vec;

    #[test]
    fn auto_follows_the_threshold_and_slow_wins_with_the_tracepoint() {
        let cfg = KernelConfig { debug_page_ref: true, ..KernelConfig::X86_64 };
        let mut pages = vec![Page64::ZEROED; 4];
        let mut pb = vec![0; 1];
        let m = Memmap::new(cfg, 0, &mut pages, &mut pb).unwrap();
        let off = CountingHooks::new(false);
        let on = CountingHooks::new(true);
        let sanitizer = matches!(
            stream_hal::backend(),
            stream_hal::Backend::Generic(stream_hal::GenericReason::Sanitizer(_))
        );
        if !sanitizer {
            assert_eq!(
                resolve_strategy(&m, Strategy::Auto, 100, &off, 100),
                (Strategy::Streaming, StrategyReason::AboveThreshold)
            );
            assert_eq!(
                resolve_strategy(&m, Strategy::Auto, 100, &off, 99),
                (Strategy::Template, StrategyReason::BelowThreshold)
            );
        }
        assert_eq!(
            resolve_strategy(&m, Strategy::Streaming, 100, &on, 1000),
            (Strategy::Slow, StrategyReason::PageRefTracepoint)
        );
        assert_eq!(
            resolve_strategy(&m, Strategy::Slow, 100, &off, 1000),
            (Strategy::Slow, StrategyReason::Requested)
        );
    }

    #[test]
    fn refresh_sets_section_bits_and_virtual() {
        let cfg = KernelConfig::X86_64_CLASSIC_SPARSE;
        let mut pages = vec![Page72::ZEROED; 1];
        let mut pb = vec![0; 1];
        let m = Memmap::new(cfg, 0, &mut pages, &mut pb).unwrap();
        let mut t = Page72::ZEROED;
        let pfn = 3 * cfg.pages_per_section() + 5;
        m.refresh_template(&mut t, pfn);
        assert_eq!(m.layout().section(t.flags()), 3);
        assert_eq!(t.virtual_address(), Some(cfg.pfn_to_virt(pfn)));
    }
}
