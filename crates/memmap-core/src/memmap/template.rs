//! The safe entry points of the copy engine ([`super::engine`]): a template copied into a run
//! of a memmap's struct pages, through the access path.

use super::engine::{ListSelf, Plain, Refresh, Stores, with_store};
use crate::InitError;
use crate::fill::Strategy;
use crate::memmap::{Memmap, PageAccess};
use crate::model::page::StructPage;

/// What a template run ([`Memmap::fill_run`]) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CopyReport {
    /// Struct pages written.
    pub pages: u64,
    /// `stream_hal::drain()` calls (1 for a streamed run, else 0).
    pub drains: u64,
}

impl<P: StructPage> Memmap<'_, P> {
    /// Copies `template` into every struct page of `[from, to)` with the per-PFN fields
    /// refreshed (section bits, `virtual`, and the list self-pointers `list` names), with the
    /// stores of the resolved strategy `used`: `stream-hal` streaming stores drained before
    /// returning for [`Strategy::Streaming`], normal stores for any other.
    /// Pageblock-aligned PFNs get no pageblock work here (callers that need it use the slow
    /// path's `pageblock_init`).
    ///
    /// # Errors
    ///
    /// [`InitError::OutOfRange`] if the range is not inside the memmap (nothing is written).
    pub(crate) fn copy_template(
        &mut self,
        template: &P,
        from: u64,
        to: u64,
        list: ListSelf,
        used: Strategy,
    ) -> Result<CopyReport, InitError> {
        let n = to.saturating_sub(from);
        if n == 0 {
            return Ok(CopyReport { pages: 0, drains: 0 });
        }
        self.check_run(from, n)?;
        let (cfg, layout) = (*self.config(), *self.layout());
        let refresh = Refresh::new(&cfg, &layout, list);
        let mut tmpl = *template;
        let drains = with_store!(Stores::of(used), S => {
            u64::from(PageAccess::copy_run::<S, _>(self, &refresh, (from, to), &mut tmpl, &mut Plain))
        });
        Ok(CopyReport { pages: n, drains })
    }
}

impl<P: StructPage> Memmap<'_, P> {
    /// [`InitError::OutOfRange`] unless the `n` PFNs from `from` are inside the memmap.
    fn check_run(&self, from: u64, n: u64) -> Result<(), InitError> {
        if self.contains_range(from, n) {
            return Ok(());
        }
        Err(InitError::OutOfRange {
            start_pfn: from,
            nr_pages: n,
            memmap_start: self.base_pfn(),
            memmap_end: self.end_pfn(),
        })
    }

    /// The run of an initializer built on this crate (`hugetlb-init`'s gigantic-page tails) for
    /// the resolved strategy `used`: `init_one` on every PFN of `[from, to)` for
    /// [`Strategy::Slow`]; otherwise on `from` only, whose struct page is then copied into the
    /// rest with the per-PFN fields `list` names refreshed (so `init_one` must leave every page
    /// the same but for those).
    ///
    /// # Errors
    ///
    /// [`InitError::OutOfRange`] if the range is not inside the memmap (nothing is written).
    pub fn fill_run(
        &mut self,
        (from, to): (u64, u64),
        list: ListSelf,
        used: Strategy,
        mut init_one: impl FnMut(&mut Self, u64),
    ) -> Result<CopyReport, InitError> {
        let n = to.saturating_sub(from);
        if n == 0 {
            return Ok(CopyReport { pages: 0, drains: 0 });
        }
        self.check_run(from, n)?;
        with_store!(used, _S => {
            init_one(self, from);
            let template = self.read(from);
            let copied = self.copy_template(&template, from + 1, to, list, used)?;
            Ok(CopyReport { pages: n, drains: copied.drains })
        }, slow => {
            for pfn in from..to {
                init_one(self, pfn);
            }
            Ok(CopyReport { pages: n, drains: 0 })
        })
    }
}
