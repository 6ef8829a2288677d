//! HVO, the HugeTLB vmemmap optimization (`mm/hugetlb_vmemmap.c`), and when it does not run:
//! the model ([`ModelRemap`]) and the remapping interface ([`VmemmapRemap`]). What each step
//! does and when HVO is unavailable: `docs/hugetlb-init.md` in the repository.

use core::fmt;

use memmap_core::offsets;
use memmap_core::{KernelConfig, Memmap, NoHooks, StructPage, pageblocks_needed};

use crate::folio::{folio_assign_hugetlb_vmemmap_optimized, is_optimized_hugetlb_head};
use crate::hstate::{HUGE_MAX_HSTATE, Hstate, Hstates, hugetlb_vmemmap_reserve_pages};

/// Fault injection for the two allocations of `vmemmap_remap_free()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
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
    pub(crate) const fn alloc_for(self, index: u64) -> RemapAlloc {
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

/// How the huge pages were allocated, which decides what the shared tail page of Linux 7.1+
/// holds ([`Behaviour::hvo_shared_tail`](memmap_core::Behaviour)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum TailPageOrigin {
    /// Boot-time pages (`hugepagesz=1G hugepages=N`) with pre-HVO
    /// ([`KernelConfig::sparsemem_vmemmap_preinit`]; without it their tail page is
    /// [`TailPageOrigin::Runtime`]'s): `vmemmap_populate_hvo()` maps the folio's tail vmemmap
    /// onto the zone's zeroed tail page before `memmap_init()`, whose `__init_single_page()` of
    /// the PFNs it initializes at boot writes through to it (the last writer of a slot wins);
    /// `hugetlb_vmemmap_init()` then runs `init_compound_tail()` on it. The model takes a node's
    /// memory to start its highest zone, of which `memmap_init()` initializes the first
    /// `PAGES_PER_SECTION` PFNs under `CONFIG_DEFERRED_STRUCT_PAGE_INIT`.
    #[default]
    Boot,
    /// Pages allocated at run time (`nr_hugepages`): `vmemmap_get_tail()` allocates a zeroed
    /// page and runs `init_compound_tail()` on its struct pages.
    Runtime,
}

/// The HVO knobs of one boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HvoParams {
    /// `hugetlb_free_vmemmap=` (default on, `CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP_DEFAULT_ON`).
    pub boot_option: bool,
    /// Injected allocation failures.
    pub fault: HvoFault,
    /// How the pages were allocated (Linux 7.1+ shared tail page contents).
    pub tail_page: TailPageOrigin,
}

impl Default for HvoParams {
    fn default() -> Self {
        HvoMode::On.params()
    }
}

/// The three HVO situations the tests and the bench program ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HvoMode {
    /// `hugetlb_free_vmemmap=on`, no failure.
    On,
    /// `hugetlb_free_vmemmap=off`.
    Off,
    /// On, with every page-table allocation failing (every folio falls back).
    Fail,
}

memmap_core::named!(HvoMode { On => "on", Off => "off", Fail => "fail" });

impl HvoMode {
    /// The boot parameters of the mode.
    #[must_use]
    pub const fn params(self) -> HvoParams {
        match self {
            HvoMode::On => {
                HvoParams { boot_option: true, fault: HvoFault::None, tail_page: TailPageOrigin::Boot }
            }
            HvoMode::Off => {
                HvoParams { boot_option: false, fault: HvoFault::None, tail_page: TailPageOrigin::Boot }
            }
            HvoMode::Fail => HvoParams {
                boot_option: true,
                fault: HvoFault::PageTable { every: 1 },
                tail_page: TailPageOrigin::Boot,
            },
        }
    }
}

/// Whether HVO can run at all for folios of `hstate` with struct pages of layout `P`
/// (`vmemmap_should_optimize_folio` minus the per-folio "already optimized" test).
///
/// # Errors
///
/// The first [`HvoUnavailable`] reason that applies, in the kernel's order (config, boot
/// option, optimizable size).
pub fn hvo_availability<P: StructPage>(
    cfg: &KernelConfig,
    params: &HvoParams,
    hstate: Hstate,
) -> Result<(), HvoUnavailable> {
    if !cfg.hugetlb_vmemmap {
        return Err(HvoUnavailable::ConfigOff);
    }
    if !cfg.sparsemem_vmemmap {
        return Err(HvoUnavailable::NoSparsememVmemmap);
    }
    if !params.boot_option {
        return Err(HvoUnavailable::BootOptionOff);
    }
    if !P::SIZE.is_power_of_two() {
        return Err(HvoUnavailable::StructPageNotPowerOfTwo);
    }
    if hstate.vmemmap_optimizable_size::<P>() == 0 {
        return Err(HvoUnavailable::NothingToFree);
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

/// What the tail vmemmap pages of an optimized folio map.
#[derive(Debug, Clone, Copy)]
pub enum TailTarget {
    /// The folio's own (possibly copied) head vmemmap page: Linux 6.x, whose reads of tails
    /// past the first vmemmap page show "fake heads".
    HeadPage,
    /// The node's shared tail page of the hstate (`vmemmap_tails[]`, Linux 7.1+): created from
    /// `init` by the first folio that needs it, then reused.
    Shared {
        /// The hstate whose tail page it is.
        hstate: Hstate,
        /// Its struct pages, for a backend that creates it now.
        init: SharedTailInit,
    },
}

/// The struct pages of a new shared tail page (Linux 7.1+), computed slot by slot (up to 1024,
/// too many to build on the stack): `init_compound_tail()` applied to what the page held, zeros
/// ([`TailPageOrigin::Runtime`]) or the boot's `__init_single_page()` of the last PFN mapping
/// to the slot ([`TailPageOrigin::Boot`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedTailInit {
    hstate: Hstate,
    zone: u32,
    nid: u32,
    origin: TailPageOrigin,
    early_start: u64,
    early_end: u64,
}

impl SharedTailInit {
    /// The tail page of `hstate` for the folio whose head (which gives the node and zone,
    /// `folio_zone()`) is at `head_pfn` of `m`; `early_init` is the PFN range `memmap_init()`
    /// initialized at boot, cut here to the memmap (only its PFNs have a struct page it could
    /// have written).
    ///
    /// # Panics
    ///
    /// If `head_pfn` is outside the memmap.
    #[must_use]
    pub fn new<P: StructPage>(
        m: &Memmap<'_, P>,
        head_pfn: u64,
        hstate: Hstate,
        origin: TailPageOrigin,
        early_init: core::ops::Range<u64>,
    ) -> SharedTailInit {
        let head = m.read(head_pfn);
        let layout = *m.layout();
        SharedTailInit {
            hstate,
            zone: layout.zone(head.flags()),
            nid: layout.node(head.flags()),
            origin,
            early_start: early_init.start.max(m.base_pfn()),
            early_end: early_init.end.min(m.end_pfn()),
        }
    }

    /// Struct pages of the tail page: one vmemmap page's worth.
    #[must_use]
    pub const fn slots<P: StructPage>(&self) -> u64 {
        self.hstate.vmemmap_reserve_pages::<P>()
    }

    /// The struct page of slot `j` (below [`SharedTailInit::slots`]); `m` is the memmap
    /// [`SharedTailInit::new`] was given, which tells which folios are optimized boot folios.
    #[must_use]
    pub fn slot<P: StructPage>(&self, m: &Memmap<'_, P>, j: u64) -> P {
        let cfg = *m.config();
        let layout = *m.layout();
        let per_page = self.slots::<P>();
        let mut slot = P::ZEROED;
        if self.origin == TailPageOrigin::Boot && self.early_start < self.early_end {
            // The last PFN of the early range in slot `j` of the tail vmemmap (index >=
            // per_page) of a folio of this hstate: every folio of the hstate on the node shares
            // the page.
            let nr = self.hstate.nr_pages();
            let e = self.early_end - 1;
            let top = e.checked_sub((e % per_page + per_page - j % per_page) % per_page);
            let mut cand = top.filter(|&t| t >= self.early_start);
            while let Some(p) = cand {
                let idx = p % nr;
                if idx >= per_page && folio_of_boot(m, p - idx, self.hstate) {
                    slot = single_page_record(&cfg, m.vaddr(p), p, self.zone, self.nid);
                    break;
                }
                cand = p.checked_sub(per_page).filter(|&q| q >= self.early_start);
            }
        }
        // init_compound_tail(tail, NULL, order, zone)
        slot.set_u32_at(offsets::MAPCOUNT, u32::MAX);
        let flags = layout.set_zone(layout.set_node(slot.flags(), self.nid), self.zone);
        slot.set_u64_at(offsets::FLAGS, flags);
        slot.set_u64_at(offsets::MAPPING, cfg.tail_mapping());
        slot.set_u64_at(offsets::COMPOUND_HEAD, cfg.compound_head_word(0, self.hstate.order(), P::SIZE));
        slot.set_u64_at(offsets::PRIVATE, 0);
        slot
    }
}

/// The vmemmap remapping of steps 1-4 of `docs/hugetlb-init.md`, for one node's
/// memmap.
pub trait VmemmapRemap<P: StructPage> {
    /// `vmemmap_remap_free()` for the folio of `nr_pages` base pages at `head_pfn`: remaps its
    /// vmemmap pages after the first read-only onto `tail` (the possibly copied head vmemmap
    /// page, or the node's shared tail page, whose struct pages a backend that creates it
    /// reads from [`SharedTailInit::slot`] with `memmap`) and frees the old ones. On error
    /// nothing changed.
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
        tail: TailTarget,
    ) -> Result<RemapDone, HvoError>;

    /// The PFN whose stored struct page the virtual struct page of `pfn` shows: `pfn` itself
    /// when the memory management unit does the aliasing (real remaps) or `pfn` is not an
    /// optimized tail; in the no_std model the aliased page, `head + (pfn - head) % R` (`R`
    /// struct pages per vmemmap page) or the slot of the shared tail page.
    fn storage_pfn(&self, memmap: &Memmap<'_, P>, pfn: u64) -> u64;
}

/// The no_std HVO model (see `docs/hugetlb-init.md`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelRemap {
    /// Vmemmap pages freed so far.
    pub freed_pages: u64,
    /// Linux 7.1+: per hstate ([`Hstate::index`]), the first PFN of the vmemmap page whose
    /// storage holds the node's shared tail page. The model keeps it in vmemmap page 1 of the
    /// first folio that needed it: that folio's own page 1 is freed by the remap, and every
    /// read of it goes to the shared page anyway.
    pub shared_tail: [Option<u64>; HUGE_MAX_HSTATE],
}

impl<P: StructPage> VmemmapRemap<P> for ModelRemap {
    fn remap_free(
        &mut self,
        memmap: &mut Memmap<'_, P>,
        head_pfn: u64,
        nr_pages: u64,
        alloc: RemapAlloc,
        tail: TailTarget,
    ) -> Result<RemapDone, HvoError> {
        if !alloc.page_table {
            return Err(HvoError::NoMemory);
        }
        let page_size = memmap.config().page_size();
        if let TailTarget::Shared { hstate, init } = tail {
            let slot = hstate.index();
            if self.shared_tail.get(slot).is_some_and(Option::is_none) {
                let per_page = init.slots::<P>();
                let frame = head_pfn + per_page;
                if !memmap.contains_range(frame, per_page) || nr_pages < 2 * per_page {
                    return Err(HvoError::Remap { errno: 22 });
                }
                for j in 0..per_page {
                    let rec = init.slot(memmap, j);
                    memmap.write(frame + j, rec);
                }
                self.shared_tail[slot] = Some(frame);
            }
        }
        let freed = nr_pages.saturating_mul(P::SIZE as u64).div_ceil(page_size).saturating_sub(1);
        self.freed_pages += freed;
        Ok(RemapDone { head_copied: false, freed_pages: freed })
    }

    fn storage_pfn(&self, memmap: &Memmap<'_, P>, pfn: u64) -> u64 {
        let per_page = hugetlb_vmemmap_reserve_pages::<P>(memmap.config());
        if !P::SIZE.is_power_of_two() {
            return pfn;
        }
        // Largest hstate first: a 1 GiB folio contains 2 MiB-aligned PFNs.
        for h in &Hstates::of(memmap.config()) {
            let head = pfn & !(h.nr_pages() - 1);
            if pfn - head < per_page || !memmap.contains_range(head, 2) {
                continue;
            }
            if is_optimized_hugetlb_head(memmap.config(), &memmap.read(head), &memmap.read(head + 1), h) {
                return match self.shared_tail[h.index()] {
                    Some(frame) => frame + (pfn - head) % per_page,
                    None => head + (pfn - head) % per_page,
                };
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
pub(crate) fn hugetlb_vmemmap_optimize_folio<P: StructPage, R: VmemmapRemap<P>>(
    m: &mut Memmap<'_, P>,
    remap: &mut R,
    head_pfn: u64,
    hstate: Hstate,
    params: &HvoParams,
    list_index: u64,
    early_init: core::ops::Range<u64>,
) -> HvoOutcome {
    if let Err(why) = hvo_availability::<P>(m.config(), params, hstate) {
        return HvoOutcome::Unavailable(why);
    }
    folio_assign_hugetlb_vmemmap_optimized(m, head_pfn, true);
    let tail = if m.config().behaviour().hvo_shared_tail {
        // Without pre-HVO boot folios are optimized after boot, onto a tail page as a run-time
        // folio's.
        let origin =
            if m.config().sparsemem_vmemmap_preinit { params.tail_page } else { TailPageOrigin::Runtime };
        TailTarget::Shared { hstate, init: SharedTailInit::new(m, head_pfn, hstate, origin, early_init) }
    } else {
        TailTarget::HeadPage
    };
    match remap.remap_free(m, head_pfn, hstate.nr_pages(), params.fault.alloc_for(list_index), tail) {
        Ok(done) => HvoOutcome::Optimized { head_copied: done.head_copied, freed_pages: done.freed_pages },
        Err(e) => {
            folio_assign_hugetlb_vmemmap_optimized(m, head_pfn, false);
            HvoOutcome::Failed(e)
        }
    }
}

/// Whether the folio of `hstate` at `head_pfn` is a boot folio this memmap holds (its head is
/// a hugetlb head of that order).
fn folio_of_boot<P: StructPage>(m: &Memmap<'_, P>, head_pfn: u64, hstate: Hstate) -> bool {
    m.contains_range(head_pfn, 2) && {
        let (head, page1) = (m.read(head_pfn), m.read(head_pfn + 1));
        crate::folio::is_hugetlb_head(m.config(), &head, &page1, hstate.order())
    }
}

/// The struct page `__init_single_page(page, pfn, zone, nid)` writes for `pfn` at `vaddr`,
/// computed in a one-page scratch memmap (always accepted: `pfn` is inside a memmap of `cfg`).
fn single_page_record<P: StructPage>(cfg: &KernelConfig, vaddr: u64, pfn: u64, zone: u32, nid: u32) -> P {
    let mut page = [P::ZEROED];
    let mut pageblocks = [0u8; 2];
    let need = pageblocks_needed(cfg, pfn, 1);
    let mut scratch = Memmap::new(*cfg, pfn, &mut page, &mut pageblocks[..need])
        .unwrap_or_else(|e| unreachable!("a one-page memmap at a pfn of a memmap of this config: {e}"))
        .with_vaddr_base(vaddr);
    scratch.init_single_page(pfn, zone, nid, &mut NoHooks);
    scratch.read(pfn)
}

/// Why HVO does not run at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HvoUnavailable {
    /// `CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP` is not set ([`KernelConfig::hugetlb_vmemmap`](memmap_core::KernelConfig::hugetlb_vmemmap)).
    ConfigOff,
    /// The configuration is not SPARSEMEM_VMEMMAP, which HVO depends on.
    NoSparsememVmemmap,
    /// Booted with `hugetlb_free_vmemmap=off` ([`HvoParams::boot_option`](crate::HvoParams::boot_option) false).
    BootOptionOff,
    /// `sizeof(struct page)` is not a power of two (72-byte layout): nothing is optimizable.
    StructPageNotPowerOfTwo,
    /// The hstate's struct pages fit in the one vmemmap page HVO keeps
    /// (`hugetlb_vmemmap_optimizable_size()` is 0: 2 MiB pages of 16 or 64 KiB base pages, the
    /// 64 KiB pages of 4 KiB).
    NothingToFree,
}

impl fmt::Display for HvoUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HvoUnavailable::ConfigOff => "CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP is off",
            HvoUnavailable::NoSparsememVmemmap => "not SPARSEMEM_VMEMMAP",
            HvoUnavailable::BootOptionOff => "hugetlb_free_vmemmap=off",
            HvoUnavailable::StructPageNotPowerOfTwo => "sizeof(struct page) is not a power of two",
            HvoUnavailable::NothingToFree => "the hstate's struct pages fit in one vmemmap page",
        })
    }
}

/// Why HVO failed for one folio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HvoError {
    /// `-ENOMEM`: the page-table page for splitting the vmemmap PMD could not be allocated.
    NoMemory,
    /// The real (memfd) remapping failed with this errno (e.g. `ENOMEM` when the process runs
    /// out of `vm.max_map_count` mappings); the folio's vmemmap was restored.
    Remap {
        /// `errno`.
        errno: i32,
    },
}

impl fmt::Display for HvoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HvoError::NoMemory => f.write_str("-ENOMEM (vmemmap page-table allocation failed)"),
            HvoError::Remap { errno } => write!(f, "vmemmap remap failed, errno {errno}"),
        }
    }
}

/// What HVO did to one folio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum HvoOutcome {
    /// The folio has not reached `prep_and_add_bootmem_folios()` yet.
    #[default]
    NotAttempted,
    /// Optimized: the tail vmemmap pages map the head vmemmap page read-only.
    Optimized {
        /// A new page received a copy of the head vmemmap page (false: the current head page
        /// was kept, after a failed allocation or in the no_std model).
        head_copied: bool,
        /// Old vmemmap pages freed.
        freed_pages: u64,
    },
    /// HVO does not run.
    Unavailable(HvoUnavailable),
    /// HVO failed; the folio is as before.
    Failed(HvoError),
}
