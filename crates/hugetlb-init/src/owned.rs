//! An owned machine (`std`, Linux): one memfd-backed vmemmap per node with real HVO and the records
//! of its last boot, for the bench program and the tests.

use std::io;
use std::vec::Vec;

use memmap_core::{InitHooks, KernelConfig, NoHooks, StructPage};

use crate::HugetlbError;
use crate::boot::{BootParams, BootReport, HugetlbNode};
use crate::bootmem::{BootRequest, HugeBootmemPage, NodeSpec};
use crate::hstate::{HUGE_MAX_HSTATE, Hstates};
use crate::memfd::{MemfdRemap, MemfdVmemmap};

/// An owned machine for the bench program and the tests: one memfd-backed vmemmap per node
/// (real HVO), and the records of the last boot.
pub struct OwnedBoot<P: StructPage> {
    specs: Vec<NodeSpec>,
    vmemmaps: Vec<MemfdVmemmap<P>>,
    records: Vec<HugeBootmemPage>,
    poison: bool,
    dirty: bool,
}

impl<P: StructPage> core::fmt::Debug for OwnedBoot<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("OwnedBoot").field("specs", &self.specs).field("folios", &self.records.len()).finish()
    }
}

impl<P: StructPage> OwnedBoot<P> {
    /// A machine with the given nodes, each with a memfd vmemmap covering exactly its memory
    /// and enough spare pages for one head copy per huge page of `cfg`'s smallest size, and a
    /// shared tail page per size. With `poison` the struct pages start as memmap-core's
    /// `PAGE_POISON_BYTE` (all resident), without it as the file's zeros.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::InvalidInput`] (carrying memmap-core's `InitError` where it applies)
    /// for a node range the configuration cannot map, else the `memfd_create`/`ftruncate`/`mmap`
    /// error.
    pub fn new(cfg: KernelConfig, specs: &[NodeSpec], poison: bool) -> io::Result<Self> {
        let vmemmaps = specs
            .iter()
            .map(|s| {
                let smallest = Hstates::of(&cfg).iter().last();
                let spares = smallest.map_or(0, |h| s.capacity(h)).saturating_add(HUGE_MAX_HSTATE as u64);
                MemfdVmemmap::new(cfg, s.start_pfn, s.nr_pages, spares, poison)
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(OwnedBoot { specs: specs.to_vec(), vmemmaps, records: Vec::new(), poison, dirty: false })
    }

    /// `nodes` nodes of `count` pages of `hstate` each ([`NodeSpec::packed`], in `cfg`'s
    /// `ZONE_NORMAL`).
    ///
    /// # Errors
    ///
    /// As [`OwnedBoot::new`].
    pub fn packed(
        cfg: KernelConfig,
        hstate: crate::Hstate,
        nodes: u32,
        count: u64,
        poison: bool,
    ) -> io::Result<Self> {
        let zone = cfg.zone_normal();
        let specs: Vec<NodeSpec> =
            (0..nodes).map(|nid| NodeSpec { zone, ..NodeSpec::packed(nid, hstate, count) }).collect();
        Self::new(cfg, &specs, poison)
    }

    /// Boots (see [`crate::boot()`]) with no hooks. A second boot first resets the vmemmaps
    /// so that it starts from the same state as the first.
    ///
    /// # Errors
    ///
    /// [`HugetlbError`] (nothing written), or [`BootError::Io`] when a reset failed.
    pub fn boot(&mut self, request: &BootRequest<'_>, params: &BootParams) -> Result<BootReport, BootError> {
        self.boot_with_hooks(request, params, |_| NoHooks)
    }

    /// [`OwnedBoot::boot`] with `hooks(nid)` as each node's hooks.
    ///
    /// # Errors
    ///
    /// As [`OwnedBoot::boot`].
    pub fn boot_with_hooks<H: InitHooks + Send>(
        &mut self,
        request: &BootRequest<'_>,
        params: &BootParams,
        hooks: impl FnMut(u32) -> H,
    ) -> Result<BootReport, BootError> {
        let total = crate::bootmem::validate_with(self.specs.len(), |i| self.specs[i], request)?;
        // One record per page asked for; a count no address space holds (32-bit hosts) is refused.
        let total = usize::try_from(total)
            .map_err(|_| HugetlbError::RecordsTooShort { needed: usize::MAX, got: 0 })?;
        self.run_boot(hooks, std::vec![HugeBootmemPage::EMPTY; total], |nodes, records| {
            crate::boot(nodes, request, params, records)
        })
    }

    /// [`crate::boot_placed`] with `hooks(nid)` as each node's hooks: the folios of `placed`
    /// (head, hstate, node; grouped by node, each group in free-list order) instead of a
    /// request. A second boot first resets the vmemmaps, as [`OwnedBoot::boot`] does.
    ///
    /// # Errors
    ///
    /// As [`crate::boot_placed`], or [`BootError::Io`] when a reset failed.
    pub fn boot_placed_with_hooks<H: InitHooks + Send>(
        &mut self,
        placed: &[HugeBootmemPage],
        params: &BootParams,
        hooks: impl FnMut(u32) -> H,
    ) -> Result<BootReport, BootError> {
        self.run_boot(hooks, placed.to_vec(), |nodes, records| crate::boot_placed(nodes, records, params))
    }

    /// One boot of the machine: resets the vmemmaps if an earlier boot wrote them, takes
    /// `records` as the records, runs `boot` on the nodes (with `hooks(nid)` as each node's
    /// hooks).
    fn run_boot<H: InitHooks + Send>(
        &mut self,
        mut hooks: impl FnMut(u32) -> H,
        records: Vec<HugeBootmemPage>,
        boot: impl FnOnce(
            &mut [HugetlbNode<'_, P, MemfdRemap<'_, P>, H>],
            &mut [HugeBootmemPage],
        ) -> Result<BootReport, HugetlbError>,
    ) -> Result<BootReport, BootError> {
        if self.dirty {
            for v in &mut self.vmemmaps {
                v.reset(self.poison).map_err(BootError::Io)?;
            }
        }
        self.records = records;
        self.dirty = true;
        let mut nodes: Vec<HugetlbNode<'_, P, MemfdRemap<'_, P>, H>> = self
            .vmemmaps
            .iter_mut()
            .zip(&self.specs)
            .map(|(v, s)| {
                let (memmap, remap) = v.parts();
                HugetlbNode::new(*s, memmap, remap, hooks(s.nid))
            })
            .collect();
        Ok(boot(&mut nodes, &mut self.records)?)
    }

    /// The nodes.
    #[must_use]
    pub fn specs(&self) -> &[NodeSpec] {
        &self.specs
    }

    /// Per-folio records of the last boot (head PFN, hstate, nid, HVO outcome, fallback), in
    /// node order, each node in list order (ascending PFN).
    #[must_use]
    pub fn folios(&self) -> &[HugeBootmemPage] {
        &self.records
    }

    /// Node `i`'s vmemmap.
    #[cfg(test)]
    pub(crate) fn vmemmap(&self, i: usize) -> &MemfdVmemmap<P> {
        &self.vmemmaps[i]
    }

    /// Node `i`'s pageblock bytes of the last boot (`memmap_core::PAGEBLOCK_UNSET` where never
    /// set).
    ///
    /// # Panics
    ///
    /// If there is no node `i`.
    #[must_use]
    pub fn pageblocks(&self, i: usize) -> &[u8] {
        self.vmemmaps[i].pageblocks()
    }

    /// The struct page of `pfn` as the CPU sees it, if some node's vmemmap has it.
    #[must_use]
    pub fn read(&self, pfn: u64) -> Option<P> {
        self.vmemmaps
            .iter()
            .find(|v| pfn >= v.base_pfn() && pfn - v.base_pfn() < v.nr_pages())
            .map(|v| v.read(pfn))
    }

    /// The bytes of every struct page of every gigantic page of the last boot, folios in PFN
    /// order (what `memmap-bench dump hugetlb` writes as `memmap.bin`).
    ///
    /// # Panics
    ///
    /// Never: every folio lies in its node's vmemmap (checked by the boot).
    #[must_use]
    pub fn folio_bytes(&self) -> Vec<u8> {
        let mut folios: Vec<&HugeBootmemPage> = self.records.iter().collect();
        folios.sort_by_key(|r| r.head_pfn);
        let total: u64 = folios.iter().map(|r| r.hstate.nr_pages()).sum();
        let mut out = std::vec![0u8; total as usize * P::SIZE];
        let mut chunks = out.chunks_exact_mut(P::SIZE);
        for r in folios {
            for pfn in r.pfns() {
                let page = self.read(pfn).expect("folio inside a node");
                page.to_bytes(chunks.next().expect("sized above"));
            }
        }
        out
    }

    /// Memory all vmemmaps occupy (the memfds' allocated blocks: struct pages and head copies).
    ///
    /// # Errors
    ///
    /// The `fstat` error.
    pub fn resident_vmemmap_bytes(&self) -> io::Result<u64> {
        self.vmemmaps.iter().map(MemfdVmemmap::resident_bytes).sum()
    }
}

/// Error of [`OwnedBoot::boot`].
#[derive(Debug)]
#[non_exhaustive]
pub enum BootError {
    /// Bad input; nothing written.
    Invalid(HugetlbError),
    /// Resetting a vmemmap failed.
    Io(io::Error),
}

impl From<HugetlbError> for BootError {
    fn from(e: HugetlbError) -> Self {
        BootError::Invalid(e)
    }
}

impl core::fmt::Display for BootError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BootError::Invalid(e) => e.fmt(f),
            BootError::Io(e) => write!(f, "vmemmap reset failed: {e}"),
        }
    }
}

impl std::error::Error for BootError {}
