//! Simulated physical memory, and the init_on_alloc / init_on_free policy (`mm/page_alloc.c`'s
//! `want_init_on_alloc()`, `want_init_on_free()`, `should_skip_init()`) as data.
//!
//! A [`PhysArena`] holds the *contents* of a PFN range (4 KiB per PFN): caller storage, or an
//! anonymous `mmap` under `std` ([`OwnedArena`]).

use core::fmt;
use core::marker::PhantomData;
use core::ptr::NonNull;

/// Bytes per PFN in the arena (`PAGE_SIZE` of the modelled kernel; the presets use 4 KiB).
pub(crate) const ARENA_PAGE_SIZE: usize = stream_hal::PAGE_SIZE;

/// How allocations are zeroed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ClearMode {
    /// `kernel_init_pages()`: one `clear_page()` (4 KiB) per page of the allocation.
    PerPage,
    /// `clear_highpages_kasan_tagged()` on `!HIGHMEM`: one `clear_pages()` for the whole
    /// allocation.
    #[default]
    Batch,
}

crate::named!(ClearMode { PerPage => "per-page", Batch => "batch" });

/// GFP flags that matter to page initialization (model bit values; the kernel's `___GFP_*` bit
/// numbers depend on the configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Gfp(pub u32);

impl Gfp {
    /// No flag (`GFP_KERNEL`-like for this model).
    pub const NONE: Gfp = Gfp(0);
    /// `__GFP_ZERO`: the caller wants zeroed pages whatever init_on_alloc says.
    pub const ZERO: Gfp = Gfp(1 << 0);
    /// `__GFP_SKIP_ZERO`: skip zeroing (honoured only with hardware tag-based KASAN).
    pub const SKIP_ZERO: Gfp = Gfp(1 << 1);

    /// Whether every bit of `other` is set.
    #[must_use]
    pub const fn contains(self, other: Gfp) -> bool {
        self.0 & other.0 == other.0
    }
}

/// The boot-time memory auto-init settings (`init_on_alloc=`, `init_on_free=`, page poisoning,
/// hardware tag-based KASAN) and how to clear.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct InitPolicy {
    /// `init_on_alloc=1` (or `CONFIG_INIT_ON_ALLOC_DEFAULT_ON`).
    pub init_on_alloc: bool,
    /// `init_on_free=1`.
    pub init_on_free: bool,
    /// Page poisoning requested: it "takes precedence over init_on_alloc and init_on_free"
    /// (both static keys stay off).
    pub page_poisoning: bool,
    /// Hardware tag-based KASAN is enabled (`kasan_hw_tags_enabled()`): only then is
    /// `__GFP_SKIP_ZERO` honoured.
    pub kasan_hw_tags: bool,
    /// Batch or per-page clearing.
    pub clear: ClearMode,
}

impl InitPolicy {
    /// `want_init_on_free()`: the `init_on_free` static key.
    #[must_use]
    pub(crate) const fn want_init_on_free(&self) -> bool {
        self.init_on_free && !self.page_poisoning
    }

    /// `post_alloc_hook()`'s `init = !want_init_on_free() && want_init_on_alloc(gfp) &&
    /// !should_skip_init(gfp)`: whether an allocation is zeroed (init_on_free takes precedence,
    /// because the pages were zeroed when freed).
    #[must_use]
    pub(crate) const fn init_at_alloc(&self, gfp: Gfp) -> bool {
        // The `init_on_alloc` static key (off under page poisoning), or `__GFP_ZERO`.
        let want_init_on_alloc = (self.init_on_alloc && !self.page_poisoning) || gfp.contains(Gfp::ZERO);
        let should_skip_init = self.kasan_hw_tags && gfp.contains(Gfp::SKIP_ZERO);
        !self.want_init_on_free() && want_init_on_alloc && !should_skip_init
    }
}

/// Bad arena storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArenaError {
    /// The byte length is not a whole number of pages.
    NotWholePages {
        /// Length given.
        len: usize,
    },
    /// `base_pfn + pages` overflows.
    Overflow,
}

impl fmt::Display for ArenaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ArenaError::NotWholePages { len } => write!(f, "{len} bytes is not a whole number of pages"),
            ArenaError::Overflow => f.write_str("arena pfn range overflows"),
        }
    }
}

impl core::error::Error for ArenaError {}

/// The contents of the PFNs `[base_pfn, base_pfn + nr_pages)`: `ARENA_PAGE_SIZE` bytes each.
pub struct PhysArena<'a> {
    ptr: NonNull<u8>,
    base_pfn: u64,
    nr_pages: u64,
    _borrow: PhantomData<&'a mut [u8]>,
}

// SAFETY: a `PhysArena` is an exclusive borrow of `[u8]`. Shared between threads, it is only
// written through `clear`/`page_ptr`, whose contract makes each caller own the pages it
// touches, so no two threads access the same bytes without synchronization.
unsafe impl Send for PhysArena<'_> {}
// SAFETY: as above.
unsafe impl Sync for PhysArena<'_> {}

impl fmt::Debug for PhysArena<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PhysArena")
            .field("base_pfn", &self.base_pfn)
            .field("nr_pages", &self.nr_pages)
            .finish()
    }
}

impl<'a> PhysArena<'a> {
    /// The contents of the PFNs starting at `base_pfn`, in `memory` (a whole number of pages).
    ///
    /// # Errors
    ///
    /// [`ArenaError::NotWholePages`], [`ArenaError::Overflow`].
    pub fn new(base_pfn: u64, memory: &'a mut [u8]) -> Result<Self, ArenaError> {
        if memory.len() % ARENA_PAGE_SIZE != 0 {
            return Err(ArenaError::NotWholePages { len: memory.len() });
        }
        let nr_pages = (memory.len() / ARENA_PAGE_SIZE) as u64;
        base_pfn.checked_add(nr_pages).ok_or(ArenaError::Overflow)?;
        Ok(PhysArena { ptr: NonNull::from(memory).cast(), base_pfn, nr_pages, _borrow: PhantomData })
    }

    /// First PFN.
    #[must_use]
    pub fn base_pfn(&self) -> u64 {
        self.base_pfn
    }

    /// Number of pages.
    #[must_use]
    pub fn nr_pages(&self) -> u64 {
        self.nr_pages
    }

    /// Whether `[start, start + nr)` has contents here.
    #[must_use]
    pub(crate) fn covers(&self, start: u64, nr: u64) -> bool {
        start >= self.base_pfn && start.checked_add(nr).is_some_and(|e| e <= self.base_pfn + self.nr_pages)
    }

    /// The contents, read-only, through exclusive access.
    #[must_use]
    pub fn bytes(&mut self) -> &[u8] {
        // SAFETY: `&mut self` excludes every other access; the storage is `nr_pages` pages.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.nr_pages as usize * ARENA_PAGE_SIZE) }
    }

    /// The contents, writable, through exclusive access.
    #[must_use]
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `bytes`.
        unsafe {
            core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.nr_pages as usize * ARENA_PAGE_SIZE)
        }
    }

    /// Address of the contents of `pfn`.
    ///
    /// # Safety
    ///
    /// `pfn` must be covered ([`PhysArena::covers`]).
    pub(crate) unsafe fn page_ptr(&self, pfn: u64) -> *mut u8 {
        // SAFETY: the caller guarantees `pfn` is in the arena, so the offset is in bounds.
        unsafe { self.ptr.as_ptr().add((pfn - self.base_pfn) as usize * ARENA_PAGE_SIZE) }
    }

    /// Zeroes the contents of `[pfn, pfn + nr)` with `mode`, then drains (the aarch64
    /// `clear_pages` fallback streams).
    ///
    /// # Safety
    ///
    /// The range must be covered, and no other thread may access its contents during the call.
    pub(crate) unsafe fn clear(&self, pfn: u64, nr: u64, mode: ClearMode) {
        match mode {
            // SAFETY: the caller guarantees the range is covered and exclusively ours;
            // `nr * 4096` bytes fit in the arena, so the product does not overflow.
            ClearMode::Batch => unsafe { stream_hal::clear_pages(self.page_ptr(pfn), nr as usize) },
            ClearMode::PerPage => {
                for p in pfn..pfn + nr {
                    // SAFETY: as above, one page at a time.
                    unsafe { stream_hal::clear_pages(self.page_ptr(p), 1) };
                }
            }
        }
        stream_hal::drain();
    }

    /// The contents of `[pfn, pfn + nr)` as a mutable slice.
    ///
    /// # Safety
    ///
    /// The range must be covered, and the caller must own it exclusively for `'b`.
    #[allow(clippy::mut_from_ref)] // exclusivity is the caller's contract, as for `page_ptr`
    pub(crate) unsafe fn range_mut(&self, pfn: u64, nr: u64) -> &mut [u8] {
        // SAFETY: covered (so in bounds) and exclusively owned, per the caller.
        unsafe { core::slice::from_raw_parts_mut(self.page_ptr(pfn), nr as usize * ARENA_PAGE_SIZE) }
    }
}

/// An owned, `mmap`-backed arena (`std`): fresh zero pages faulted in lazily by the OS.
#[cfg(feature = "std")]
pub struct OwnedArena {
    map: memmap2::MmapMut,
    base_pfn: u64,
    nr_pages: u64,
}

#[cfg(feature = "std")]
impl fmt::Debug for OwnedArena {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedArena")
            .field("base_pfn", &self.base_pfn)
            .field("nr_pages", &self.nr_pages)
            .finish()
    }
}

#[cfg(feature = "std")]
impl OwnedArena {
    /// Maps `nr_pages` pages of contents for the PFNs starting at `base_pfn`.
    ///
    /// # Errors
    ///
    /// The `mmap` error, or [`std::io::ErrorKind::InvalidInput`] for a size that overflows.
    pub fn new(base_pfn: u64, nr_pages: u64) -> std::io::Result<Self> {
        let bad = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "arena size overflows");
        base_pfn.checked_add(nr_pages).ok_or_else(bad)?;
        let len =
            usize::try_from(nr_pages).ok().and_then(|n| n.checked_mul(ARENA_PAGE_SIZE)).ok_or_else(bad)?;
        // MAP_NORESERVE: an arena models a node's physical memory and only the pages that are
        // allocated and cleared are ever touched; reserving swap for all of it would refuse
        // large sparse arenas under the default overcommit heuristic.
        let map = memmap2::MmapOptions::new().len(len.max(1)).no_reserve_swap().map_anon()?;
        // Physical memory is mapped with large pages in the kernel's direct map: ask for
        // transparent huge pages (ignored where unavailable).
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        Ok(OwnedArena { map, base_pfn, nr_pages })
    }

    /// Faults every page in (`MADV_POPULATE_WRITE`, or touching each page).
    ///
    /// # Errors
    ///
    /// Never on Linux ≥ 5.14; the fallback cannot fail.
    pub fn populate(&mut self) -> std::io::Result<()> {
        #[cfg(target_os = "linux")]
        if self.map.advise(memmap2::Advice::PopulateWrite).is_ok() {
            return Ok(());
        }
        for b in self.map.iter_mut().step_by(4096) {
            // SAFETY: `b` is a valid byte of the mapping; the volatile read-modify-write faults
            // the page in writable without changing it.
            unsafe { core::ptr::write_volatile(b, core::ptr::read_volatile(b)) };
        }
        Ok(())
    }

    /// The arena view.
    ///
    /// # Panics
    ///
    /// Never: the size was validated by [`OwnedArena::new`].
    #[must_use]
    pub fn arena(&mut self) -> PhysArena<'_> {
        let len = self.nr_pages as usize * ARENA_PAGE_SIZE;
        PhysArena::new(self.base_pfn, &mut self.map[..len]).expect("validated in new()")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// init_on_alloc zeroes only when init_on_free is off and `__GFP_SKIP_ZERO` (with hardware
    /// tag-based KASAN) does not skip it; `__GFP_ZERO` zeroes without init_on_alloc; page
    /// poisoning turns both keys off.
    #[test]
    fn init_at_alloc_is_post_alloc_hooks_rule() {
        let on = InitPolicy { init_on_alloc: true, ..InitPolicy::default() };
        let cases: [(InitPolicy, Gfp, bool); 7] = [
            (InitPolicy::default(), Gfp::NONE, false),
            (InitPolicy::default(), Gfp::ZERO, true),
            (on, Gfp::NONE, true),
            (on, Gfp::SKIP_ZERO, true),
            (InitPolicy { kasan_hw_tags: true, ..on }, Gfp::SKIP_ZERO, false),
            (InitPolicy { kasan_hw_tags: true, ..on }, Gfp::NONE, true),
            (InitPolicy { page_poisoning: true, ..on }, Gfp::NONE, false),
        ];
        for (policy, gfp, zeroed) in cases {
            assert_eq!(policy.init_at_alloc(gfp), zeroed, "{policy:?} {gfp:?}");
        }
        let both = InitPolicy { init_on_free: true, ..on };
        assert!(!both.init_at_alloc(Gfp::NONE) && !both.init_at_alloc(Gfp::ZERO));
    }

    #[test]
    fn init_on_free_takes_precedence_and_skip_zero_needs_hw_tags() {
        let p = InitPolicy { init_on_alloc: true, ..InitPolicy::default() };
        assert!(p.init_at_alloc(Gfp::NONE));
        let p = InitPolicy { init_on_alloc: true, init_on_free: true, ..InitPolicy::default() };
        assert!(!p.init_at_alloc(Gfp::NONE) && !p.init_at_alloc(Gfp::ZERO));
        let p = InitPolicy::default();
        assert!(!p.init_at_alloc(Gfp::NONE) && p.init_at_alloc(Gfp::ZERO));
        let p = InitPolicy { init_on_alloc: true, ..InitPolicy::default() };
        assert!(p.init_at_alloc(Gfp::SKIP_ZERO), "SKIP_ZERO ignored without hardware tags");
        let p = InitPolicy { init_on_alloc: true, kasan_hw_tags: true, ..InitPolicy::default() };
        assert!(!p.init_at_alloc(Gfp::SKIP_ZERO));
        let p = InitPolicy {
            init_on_alloc: true,
            init_on_free: true,
            page_poisoning: true,
            ..InitPolicy::default()
        };
        assert!(!p.init_at_alloc(Gfp::NONE) && !p.want_init_on_free());
        assert!(p.init_at_alloc(Gfp::ZERO), "__GFP_ZERO is honoured even with page poisoning");
    }

    #[test]
    fn arena_rejects_partial_pages() {
        let mut v = std::vec![0u8; 4097];
        assert_eq!(PhysArena::new(0, &mut v).unwrap_err(), ArenaError::NotWholePages { len: 4097 });
        let mut v = std::vec![0u8; 4096];
        assert_eq!(PhysArena::new(u64::MAX, &mut v).unwrap_err(), ArenaError::Overflow);
    }
}
