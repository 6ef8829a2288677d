//! The runs of struct pages a node writes: `__init_single_page` on a range with the node's
//! strategy ([`Node::init_run`]), the run kinds and the per-PFN refresh of its copies.

use core::sync::atomic::Ordering;

use crate::hooks::InitHooks;
use crate::memmap::PageAccess;
use crate::memmap::engine::{AtPageblock, ListSelf, Plain, Refresh, with_store};
use crate::model::flags::MigrateType;
use crate::model::page::{StructPage, offsets};
use crate::node::owned::Owned;
use crate::node::{Inner, Node};

/// How [`Node::init_run`] treats pageblock-aligned PFNs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::node) enum PbMode {
    /// Nothing (`deferred_init_pages`, `init_unavailable_range`, on-demand expansion).
    None,
    /// `set_pageblock_migratetype(MOVABLE)` (`__init_page_from_nid`).
    Movable,
    /// `set_pageblock_migratetype(MOVABLE)` and `cond_resched()` (`memmap_init_range`).
    MovableResched,
}

/// One run of [`Node::init_run`]: `__init_single_page` on each PFN, then `extra_flags` ORed
/// in, then `set_page_count(count)` when `count != 1`, then the pageblock work.
#[derive(Debug, Clone, Copy)]
pub(in crate::node) struct RunKind {
    pub(in crate::node) pageblock: PbMode,
    pub(in crate::node) extra_flags: u64,
    pub(in crate::node) count: i32,
    /// Written in its final state, never read back while the node boots: the node's strategy
    /// rather than the boot's.
    pub(in crate::node) final_state: bool,
}

impl RunKind {
    pub(in crate::node) const fn plain(pageblock: PbMode) -> Self {
        RunKind { pageblock, extra_flags: 0, count: 1, final_state: false }
    }
}

impl<'a, P: StructPage, H: InitHooks + Send> Node<'a, P, H> {
    /// `set_page_count(page, v)` on a page `own` owns: a raw store, or the memmap's version
    /// (with the tracepoint) when the tracepoint is active.
    #[inline]
    pub(in crate::node) fn set_count(&self, own: &mut Owned<'_, P>, pfn: u64, v: i32) {
        if self.trace {
            assert!(own.owns(pfn), "struct page {pfn:#x} is not owned here");
            let mut g = self.inner.lock();
            let Inner { memmap, hooks } = &mut *g;
            memmap.set_page_count(pfn, v, hooks);
        } else {
            own.page_mut(pfn).set_u32_once_at(offsets::REFCOUNT, v as u32);
        }
    }

    /// `__init_single_page` on `[from, to)` of `zone`, pages `own` owns, with the node's
    /// strategy, plus `kind`'s extras (see [`RunKind`]). Returns the number of pages written.
    pub(in crate::node) fn init_run(
        &self,
        own: &mut Owned<'_, P>,
        from: u64,
        to: u64,
        zone: u32,
        kind: RunKind,
    ) -> u64 {
        if from >= to {
            return 0;
        }
        assert!(own.owns(from) && own.owns(to - 1), "init_run of pages not owned");
        let nid = self.layout.nid;
        let slow_one = |inner: &mut Inner<'a, P, H>, own: &mut Owned<'_, P>, pfn: u64| {
            let Inner { memmap, hooks } = inner;
            memmap.init_single_page(pfn, zone, nid, hooks);
            if kind.extra_flags != 0 {
                let f = own.word(pfn, offsets::FLAGS);
                own.set_word(pfn, offsets::FLAGS, f | kind.extra_flags);
            }
            if kind.count != 1 {
                memmap.set_page_count(pfn, kind.count, hooks);
            }
            if memmap.pageblock_aligned(pfn) {
                match kind.pageblock {
                    PbMode::None => {}
                    PbMode::Movable => memmap.set_pageblock_migratetype(pfn, MigrateType::Movable),
                    PbMode::MovableResched => memmap.pageblock_init(pfn, hooks),
                }
            }
        };
        let n = to - from;
        self.stats.pages_initialized.fetch_add(n, Ordering::Relaxed);
        let strategy = if kind.final_state { self.strategy.0 } else { self.run };
        with_store!(strategy, S => {
            let mut tmpl = {
                let mut g = self.inner.lock();
                slow_one(&mut g, own, from);
                g.memmap.read(from)
            };
            let refresh = self.refresh();
            let mut pageblock = |pfn: u64| {
                let mut g = self.inner.lock();
                let Inner { memmap, hooks } = &mut *g;
                match kind.pageblock {
                    PbMode::MovableResched => memmap.pageblock_init(pfn, hooks),
                    _ => memmap.set_pageblock_migratetype(pfn, MigrateType::Movable),
                }
            };
            if kind.pageblock == PbMode::None {
                own.copy_run::<S, _>(&refresh, (from + 1, to), &mut tmpl, &mut Plain);
            } else {
                own.copy_run::<S, _>(&refresh, (from + 1, to), &mut tmpl, &mut AtPageblock(&mut pageblock));
            }
        }, slow => {
            let mut g = self.inner.lock();
            for pfn in from..to {
                slow_one(&mut g, own, pfn);
            }
        });
        n
    }

    /// The per-PFN refresh of this node's template copies: pages fresh from
    /// `__init_single_page`, whose `lru` words are self-pointers.
    #[inline(always)]
    pub(super) fn refresh(&self) -> Refresh<'_> {
        Refresh::new(&self.cfg, &self.flags_layout, ListSelf::Both)
    }
}
