//! The safe entry points of the copy engine ([`super::engine`]): a template copied into a run
//! of a memmap's struct pages, through the access path.

use super::engine::{ListSelf, Plain, Refresh, with_store};
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
        if !self.contains_range(from, n) {
            return Err(InitError::OutOfRange {
                start_pfn: from,
                nr_pages: n,
                memmap_start: self.base_pfn(),
                memmap_end: self.end_pfn(),
            });
        }
        with_store!(used, S => {
            init_one(self, from);
            let (cfg, layout) = (*self.config(), *self.layout());
            let refresh = Refresh::new(&cfg, &layout, list);
            let mut tmpl = self.read(from);
            let drained = PageAccess::copy_run::<S, _>(self, &refresh, (from + 1, to), &mut tmpl, &mut Plain);
            Ok(CopyReport { pages: n, drains: u64::from(drained) })
        }, slow => {
            for pfn in from..to {
                init_one(self, pfn);
            }
            Ok(CopyReport { pages: n, drains: 0 })
        })
    }
}
