//! The page checks of the allocator: `check_new_page()` at prep and `free_page_is_bad()` at free.

use super::BadPageReason;
use crate::hooks::InitHooks;
use crate::model::page::StructPage;
use crate::node::{InitMode, Node};

impl<P: StructPage, H: InitHooks + Send> Node<'_, P, H> {
    /// The LRU gen and refs fields of `page->flags` (checked at prep and free).
    pub(in crate::node) fn lru_field_mask(&self) -> u64 {
        let l = &self.flags_layout;
        let m = |w: u32, s: u32| if w == 0 { 0 } else { ((1u64 << w) - 1) << s };
        m(l.lru_gen_width, l.lru_gen_pgshift) | m(l.lru_refs_width, l.lru_refs_pgshift)
    }

    pub(in crate::node) fn uninit_mask(&self) -> u64 {
        if self.opts.mode == InitMode::OnDemand { 1 << self.uninit_bit } else { 0 }
    }

    /// The `PAGE_FLAGS_CHECK_AT_PREP` mask this node applies: every page flag, the LRU fields
    /// and (on-demand) `PG_uninitialized_2m`.
    #[must_use]
    pub fn page_flags_check_at_prep(&self) -> u64 {
        ((1u64 << self.cfg.nr_pageflags) - 1) | self.lru_field_mask() | self.uninit_mask()
    }

    /// The `PAGE_FLAGS_CHECK_AT_FREE` mask this node applies: the release's, the LRU fields and
    /// (on-demand) `PG_uninitialized_2m`.
    #[must_use]
    pub fn page_flags_check_at_free(&self) -> u64 {
        self.pg.check_at_free | self.lru_field_mask() | self.uninit_mask()
    }

    /// `page_expected_state()` for `page` of `zone` with `check_flags`.
    pub(in crate::node) fn page_state(
        &self,
        page: &P,
        zone: u32,
        check_flags: u64,
    ) -> Result<(), BadPageReason> {
        let f = page.flags();
        let (z, n) = (self.flags_layout.zone(f), self.flags_layout.node(f));
        if z != zone || n != self.layout.nid {
            return Err(BadPageReason::Links { zone: z, nid: n });
        }
        if page.mapcount() != -1 {
            return Err(BadPageReason::Mapcount(page.mapcount()));
        }
        if page.u64_at(crate::offsets::MAPPING) != 0 {
            return Err(BadPageReason::Mapping(page.u64_at(crate::offsets::MAPPING)));
        }
        if page.refcount() != 0 {
            return Err(BadPageReason::Refcount(page.refcount()));
        }
        if page.u64_at(crate::offsets::MEMCG_DATA) != 0 {
            return Err(BadPageReason::MemcgData(page.u64_at(crate::offsets::MEMCG_DATA)));
        }
        if f & check_flags != 0 {
            return Err(BadPageReason::Flags(f & check_flags));
        }
        Ok(())
    }
}
