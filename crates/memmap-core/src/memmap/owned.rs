//! An owned, `mmap`-backed memmap for 100 GiB-class ranges (`std`).

use core::marker::PhantomData;
use core::ptr::NonNull;
use std::io;
use std::vec::Vec;

use memmap2::{MmapMut, MmapOptions};

use crate::InitError;
use crate::memmap::{Memmap, pageblocks_needed};
use crate::model::config::KernelConfig;
use crate::model::page::StructPage;

/// A memmap that owns its storage: an anonymous private mapping of `nr_pages` struct pages
/// (zero-filled and faulted in lazily by the OS, like fresh memory; transparent huge pages are
/// requested, as the kernel maps the vmemmap with 2 MiB pages) and the pageblock array.
pub struct OwnedMemmap<P: StructPage> {
    map: MmapMut,
    nr_pages: usize,
    base_pfn: u64,
    pageblocks: Vec<u8>,
    cfg: KernelConfig,
    vaddr_base: Option<u64>,
    _page: PhantomData<P>,
}

impl<P: StructPage> core::fmt::Debug for OwnedMemmap<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("OwnedMemmap")
            .field("base_pfn", &self.base_pfn)
            .field("nr_pages", &self.nr_pages)
            .field("bytes", &self.map.len())
            .finish()
    }
}

impl<P: StructPage> OwnedMemmap<P> {
    /// Maps storage for the struct pages of `[base_pfn, base_pfn + nr_pages)`.
    ///
    /// # Errors
    ///
    /// The `mmap` error, or [`io::ErrorKind::InvalidInput`] carrying the [`InitError`]
    /// ([`io::Error::get_ref`]) for an invalid configuration, a range that passes the end of
    /// the `u64` PFN space or ends past the configuration's last pfn.
    pub fn new(cfg: KernelConfig, base_pfn: u64, nr_pages: u64) -> io::Result<Self> {
        let invalid = |e: InitError| io::Error::new(io::ErrorKind::InvalidInput, e);
        cfg.flags_layout().map_err(|e| invalid(InitError::Config(e)))?;
        // The bounds `Memmap::from_raw_parts` enforces, checked here so that `memmap()` cannot
        // fail later. Below `max_pfn` (at most 2^52 pages) the byte count fits a 64-bit usize.
        let end = base_pfn
            .checked_add(nr_pages)
            .ok_or(invalid(InitError::RangeOverflow { start_pfn: base_pfn, nr_pages }))?;
        if end > cfg.max_pfn() {
            return Err(invalid(InitError::BeyondMaxPfn { end_pfn: end, max_pfn: cfg.max_pfn() }));
        }
        let n = usize::try_from(nr_pages).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let bytes = n
            .checked_mul(P::SIZE)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "memmap size overflows usize"))?;
        // A zero-length mapping is an error for mmap; keep one page so empty memmaps work.
        // MAP_NORESERVE: a memmap is often written only in part (on-demand and deferred init
        // touch a fraction of a node's struct pages); swap is not reserved for the rest.
        let map = MmapOptions::new().len(bytes.max(1)).no_reserve_swap().map_anon()?;
        // The kernel maps the vmemmap with PMD (2 MiB) pages where it can; ask for the same
        // (transparent huge pages; ignored where THP is unavailable or disabled).
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        Ok(OwnedMemmap {
            map,
            nr_pages: n,
            base_pfn,
            pageblocks: std::vec![0; pageblocks_needed(&cfg, base_pfn, nr_pages)],
            cfg,
            vaddr_base: None,
            _page: PhantomData,
        })
    }

    /// Sets the modelled address of the struct page of the first PFN (see
    /// [`Memmap::with_vaddr_base`]).
    #[must_use]
    pub fn with_vaddr_base(mut self, vaddr: u64) -> Self {
        self.vaddr_base = Some(vaddr);
        self
    }

    /// Number of struct pages.
    #[must_use]
    pub fn nr_pages(&self) -> usize {
        self.nr_pages
    }

    /// Size of the struct page storage in bytes.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.nr_pages * P::SIZE
    }

    /// A [`Memmap`] view (resets the pageblock array to unset).
    ///
    /// # Panics
    ///
    /// Never: the mapping is non-null and the configuration was validated by [`Self::new`].
    #[must_use]
    pub fn memmap(&mut self) -> Memmap<'_, P> {
        let ptr = NonNull::new(self.map.as_mut_ptr().cast::<P>()).expect("mmap never returns null");
        // SAFETY: the mapping is page-aligned (so aligned for `P`), readable and writable for
        // `nr_pages * SIZE` bytes, zero-initialized by the OS, and exclusively borrowed through
        // `&mut self` for the lifetime of the view. The configuration was validated in `new`,
        // and the pageblock array has the needed length, so this cannot fail.
        let m = unsafe {
            Memmap::from_raw_parts(self.cfg, self.base_pfn, ptr, self.nr_pages, &mut self.pageblocks)
        }
        .unwrap_or_else(|e: InitError| unreachable!("validated in new(): {e}"));
        match self.vaddr_base {
            Some(v) => m.with_vaddr_base(v),
            None => m,
        }
    }

    /// Faults the whole mapping in (`MADV_POPULATE_WRITE`, or touching every page where that is
    /// unavailable), so later initializations measure the initializer and not page faults.
    ///
    /// # Errors
    ///
    /// Never on Linux ≥ 5.14; the fallback cannot fail.
    pub fn populate(&mut self) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        if self.map.advise(memmap2::Advice::PopulateWrite).is_ok() {
            return Ok(());
        }
        let step = 4096;
        let len = self.map.len();
        let mut off = 0;
        while off < len {
            // A volatile read-modify-write of one byte per OS page faults it in writable without
            // changing its contents.
            let p = self.map.as_mut_ptr().wrapping_add(off);
            // SAFETY: `off < len`, inside the mapping, which is readable and writable.
            unsafe { p.write_volatile(p.read_volatile()) };
            off += step;
        }
        Ok(())
    }

    /// Gives the memory back to the OS (`MADV_DONTNEED`): the next access faults in fresh zero
    /// pages, as on a first device binding.
    ///
    /// # Errors
    ///
    /// The `madvise` error.
    pub fn discard(&mut self) -> io::Result<()> {
        // SAFETY: MADV_DONTNEED on a private anonymous mapping replaces its contents with zero
        // pages; no reference into the mapping outlives this `&mut self` borrow, so nothing
        // observes the change except through later accesses, which see initialized zeros.
        unsafe { self.map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) }
    }

    /// The struct page storage as bytes.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.map[..self.bytes()]
    }

    /// The struct page storage as mutable bytes (any bytes are valid struct pages: both layouts
    /// are plain words). The bench program's limit runs write the storage through this.
    #[must_use]
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        let n = self.bytes();
        &mut self.map[..n]
    }
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;
    use crate::model::page::Page64;

    #[test]
    fn owned_memmap_is_zeroed_and_writable_and_discardable() {
        let mut o = OwnedMemmap::<Page64>::new(KernelConfig::X86_64, 1 << 20, 100_000).unwrap();
        assert_eq!(o.bytes(), 6_400_000);
        o.populate().unwrap();
        {
            let mut m = o.memmap();
            assert_eq!(m.read((1 << 20) + 5), Page64::ZEROED);
            let mut p = Page64::ZEROED;
            p.set_u64_at(crate::offsets::FLAGS, 42);
            m.write((1 << 20) + 5, p);
            assert_eq!(m.read((1 << 20) + 5).flags(), 42);
        }
        assert_eq!(o.as_bytes()[5 * 64], 42);
        o.as_bytes_mut()[6 * 64] = 7;
        assert_eq!(o.memmap().read((1 << 20) + 6).flags(), 7);
        assert_eq!(o.as_bytes_mut().len(), o.bytes());
        o.discard().unwrap();
        assert!(o.as_bytes().iter().all(|&b| b == 0));
    }

    #[test]
    fn empty_and_overflowing_sizes() {
        let mut o = OwnedMemmap::<Page64>::new(KernelConfig::X86_64, 0, 0).unwrap();
        assert_eq!(o.memmap().nr_pages(), 0);
        assert!(OwnedMemmap::<Page64>::new(KernelConfig::X86_64, u64::MAX, 2).is_err());
    }
}
