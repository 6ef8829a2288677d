//! HVO, the HugeTLB vmemmap optimization (`mm/hugetlb_vmemmap.c`), and when it does not run.
//!
//! `__hugetlb_vmemmap_optimize_folio()` sets `HPG_vmemmap_optimized` on the folio and calls
//! `vmemmap_remap_free(start = head_vmemmap + PAGE_SIZE, end = head_vmemmap +
//! hugetlb_vmemmap_size(h), reuse = head_vmemmap)`, which
//!
//! 1. splits the vmemmap PMD into PTEs (`vmemmap_split_pmd`, which allocates a page-table page:
//!    the allocation whose failure makes HVO fail with `-ENOMEM`),
//! 2. allocates a **new** page, copies the head vmemmap page into it and maps it read-write
//!    as the head vmemmap page (so the old, physically contiguous vmemmap block can be freed
//!    whole); if that allocation fails it keeps the current head page (\[recalled\]
//!    `vmemmap_remap_free()`/`vmemmap_pte_range()`: "Fallback to the currently mapped head page
//!    in case should it fail to allocate"),
//! 3. maps every vmemmap page in `[start, end)` read-only (`PAGE_KERNEL_RO`) onto that page,
//! 4. frees the old vmemmap pages.
//!
//! On failure the flag is cleared again and the folio is left as before. Afterwards struct page
//! `64 * k + j` of the folio *is* struct page `j` of the head vmemmap page (with 64-byte pages).
//!
//! Two implementations of step 1-4 ([`VmemmapRemap`]):
//!
//! * [`ModelRemap`] (no_std): the vmemmap is caller storage without an MMU, so the remapping is
//!   a page table kept implicitly in the folio's head (an initialized hugetlb head with
//!   `HPG_vmemmap_optimized` set *is* the remap record). Reads go through
//!   [`VmemmapRemap::resolve`], which sends struct page `64 * k + j` to `j`. The old tail vmemmap
//!   storage is not touched (freed memory keeps its bytes), so tests can prove that no tail
//!   beyond the reserve was ever written. It keeps the current head page (the kernel's fallback
//!   in step 2): there is no allocator to take a new page from.
//! * `MemfdVmemmap`'s remapper (`std`, Linux): the vmemmap is a memfd mapped `MAP_SHARED`, and
//!   steps 2-4 are real: a spare page of the file receives the head copy, the tail vmemmap
//!   pages are `mmap(MAP_FIXED, PROT_READ)`ed onto it, and the old pages are punched out of the
//!   file. The memory saving is measurable and a write to an optimized tail faults.
//!
//! HVO does not run ([`HvoUnavailable`]) when `CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP` is off (or
//! SPARSEMEM_VMEMMAP, which it depends on, is), when booted with `hugetlb_free_vmemmap=off`, or
//! when `sizeof(struct page)` is not a power of two (`hugetlb_vmemmap_optimizable_size() == 0`:
//! the 72-byte layout). It fails ([`HvoError`]) on an injected allocation failure
//! ([`HvoFault`]). In every such case the fallback tail init runs and the bytes are those of a
//! boot without HVO.

use memmap_core::{KernelConfig, Memmap, StructPage};

use crate::folio::{folio_assign_hugetlb_vmemmap_optimized, is_optimized_hugetlb_head};
use crate::types::{Hstate, HvoError, HvoOutcome, HvoUnavailable, PAGE_SIZE, hugetlb_vmemmap_reserve_pages};

/// Fault injection for the two allocations of `vmemmap_remap_free()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HvoFault {
    /// No injected failure.
    #[default]
    None,
    /// The page-table allocation fails (HVO fails with `-ENOMEM`) for the folios at list
    /// positions `0, every, 2 * every, ...` of each node's list (`every = 1`: all folios).
    PageTable {
        /// Period (0 is treated as 1).
        every: u32,
    },
    /// The new head page allocation fails for the folios at those positions; HVO still
    /// succeeds on the current head page.
    HeadCopy {
        /// Period (0 is treated as 1).
        every: u32,
    },
}

impl HvoFault {
    /// Which allocations succeed for the folio at list position `index`.
    #[must_use]
    pub const fn alloc_for(self, index: u64) -> RemapAlloc {
        const fn hit_at(index: u64, every: u32) -> bool {
            index % (if every == 0 { 1 } else { every as u64 }) == 0
        }
        match self {
            HvoFault::None => RemapAlloc { page_table: true, head_copy: true },
            HvoFault::PageTable { every } => {
                RemapAlloc { page_table: !hit_at(index, every), head_copy: true }
            }
            HvoFault::HeadCopy { every } => RemapAlloc { page_table: true, head_copy: !hit_at(index, every) },
        }
    }
}

/// Whether each allocation of one `vmemmap_remap_free()` call succeeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemapAlloc {
    /// The page-table page for the PMD split.
    pub page_table: bool,
    /// The new head vmemmap page.
    pub head_copy: bool,
}

/// The HVO knobs of one boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HvoParams {
    /// `hugetlb_free_vmemmap=` (default on, `CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP_DEFAULT_ON`).
    pub boot_option: bool,
    /// Injected allocation failures.
    pub fault: HvoFault,
}

impl Default for HvoParams {
    fn default() -> Self {
        HvoMode::On.params()
    }
}

/// The three HVO situations the tests and the bench program ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HvoMode {
    /// `hugetlb_free_vmemmap=on`, no failure.
    On,
    /// `hugetlb_free_vmemmap=off`.
    Off,
    /// On, with every page-table allocation failing (every folio falls back).
    Fail,
}

impl HvoMode {
    /// All modes.
    pub const ALL: [HvoMode; 3] = [HvoMode::On, HvoMode::Off, HvoMode::Fail];

    /// The boot parameters of the mode.
    #[must_use]
    pub const fn params(self) -> HvoParams {
        match self {
            HvoMode::On => HvoParams { boot_option: true, fault: HvoFault::None },
            HvoMode::Off => HvoParams { boot_option: false, fault: HvoFault::None },
            HvoMode::Fail => HvoParams { boot_option: true, fault: HvoFault::PageTable { every: 1 } },
        }
    }

    /// `on`, `off`, `fail`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            HvoMode::On => "on",
            HvoMode::Off => "off",
            HvoMode::Fail => "fail",
        }
    }

    /// Parses [`HvoMode::name`].
    #[must_use]
    pub fn from_name(s: &str) -> Option<HvoMode> {
        Self::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// Whether HVO can run at all for struct pages of layout `P` (`vmemmap_should_optimize_folio`
/// minus the per-folio "already optimized" test).
///
/// # Errors
///
/// The first [`HvoUnavailable`] reason that applies, in the kernel's order (config, boot
/// option, optimizable size).
pub fn hvo_availability<P: StructPage>(cfg: &KernelConfig, params: &HvoParams) -> Result<(), HvoUnavailable> {
    if !cfg.hugetlb_vmemmap {
        return Err(HvoUnavailable::ConfigOff);
    }
    if !cfg.sparsemem_vmemmap {
        return Err(HvoUnavailable::NoSparsememVmemmap);
    }
    if !params.boot_option {
        return Err(HvoUnavailable::BootOptionOff);
    }
    if !P::SIZE.is_power_of_two() || Hstate::H2M.vmemmap_optimizable_size::<P>() == 0 {
        return Err(HvoUnavailable::StructPageNotPowerOfTwo);
    }
    Ok(())
}

/// What a successful `vmemmap_remap_free()` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemapDone {
    /// A new page holds the head copy.
    pub head_copied: bool,
    /// Old vmemmap pages freed (all of them with a head copy, all but the head without).
    pub freed_pages: u64,
}

/// The vmemmap remapping of steps 1-4 of the [module documentation](self), for one node's
/// memmap.
pub trait VmemmapRemap<P: StructPage> {
    /// `vmemmap_remap_free()` for the folio of `nr_pages` base pages at `head_pfn`: remaps its
    /// vmemmap pages after the first read-only onto the (possibly copied) head vmemmap page and
    /// frees the old ones. On error nothing changed.
    ///
    /// # Errors
    ///
    /// [`HvoError::NoMemory`] when `alloc.page_table` is false; a backend error otherwise.
    fn remap_free(
        &mut self,
        memmap: &mut Memmap<'_, P>,
        head_pfn: u64,
        nr_pages: u64,
        alloc: RemapAlloc,
    ) -> Result<RemapDone, HvoError>;

    /// The PFN whose stored struct page the virtual struct page of `pfn` shows: `pfn` itself
    /// when the memory management unit does the aliasing (real remaps) or `pfn` is not an
    /// optimized tail; the aliased page `head + (pfn - head) % (PAGE_SIZE / sizeof(struct page))`
    /// in the no_std model.
    fn resolve(&self, memmap: &Memmap<'_, P>, pfn: u64) -> u64;
}

/// The no_std HVO model (see the [module documentation](self)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelRemap {
    /// Vmemmap pages freed so far.
    pub freed_pages: u64,
}

impl<P: StructPage> VmemmapRemap<P> for ModelRemap {
    fn remap_free(
        &mut self,
        _memmap: &mut Memmap<'_, P>,
        _head_pfn: u64,
        nr_pages: u64,
        alloc: RemapAlloc,
    ) -> Result<RemapDone, HvoError> {
        if !alloc.page_table {
            return Err(HvoError::NoMemory);
        }
        let freed = nr_pages.saturating_mul(P::SIZE as u64).div_ceil(PAGE_SIZE).saturating_sub(1);
        self.freed_pages += freed;
        Ok(RemapDone { head_copied: false, freed_pages: freed })
    }

    fn resolve(&self, memmap: &Memmap<'_, P>, pfn: u64) -> u64 {
        let per_page = hugetlb_vmemmap_reserve_pages::<P>();
        if !P::SIZE.is_power_of_two() {
            return pfn;
        }
        // Largest hstate first: a 1 GiB folio contains 2 MiB-aligned PFNs.
        for h in [Hstate::H1G, Hstate::H2M] {
            let head = pfn & !(h.nr_pages() - 1);
            if pfn - head < per_page || !memmap.contains_range(head, 2) {
                continue;
            }
            if is_optimized_hugetlb_head(&memmap.read(head), &memmap.read(head + 1), h) {
                return head + (pfn - head) % per_page;
            }
        }
        pfn
    }
}

/// `hugetlb_vmemmap_optimize_folio()` for one boot folio: if HVO can run, set
/// `HPG_vmemmap_optimized`, remap, and clear the flag again on failure.
///
/// # Panics
///
/// If the head is outside the memmap.
pub fn hugetlb_vmemmap_optimize_folio<P: StructPage, R: VmemmapRemap<P>>(
    m: &mut Memmap<'_, P>,
    remap: &mut R,
    head_pfn: u64,
    hstate: Hstate,
    params: &HvoParams,
    list_index: u64,
) -> HvoOutcome {
    if let Err(why) = hvo_availability::<P>(m.config(), params) {
        return HvoOutcome::Unavailable(why);
    }
    folio_assign_hugetlb_vmemmap_optimized(m, head_pfn, true);
    match remap.remap_free(m, head_pfn, hstate.nr_pages(), params.fault.alloc_for(list_index)) {
        Ok(done) => HvoOutcome::Optimized { head_copied: done.head_copied, freed_pages: done.freed_pages },
        Err(e) => {
            folio_assign_hugetlb_vmemmap_optimized(m, head_pfn, false);
            HvoOutcome::Failed(e)
        }
    }
}
