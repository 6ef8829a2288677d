//! Test harness: boots on caller-provided storage (the no_std HVO model), with guard struct pages
//! around every node's memory and poison (`MEMBLOCK_RSRV_NOINIT` garbage) inside it, and
//! captures everything observable.
#![allow(dead_code, unreachable_pub)]

#[allow(unused_imports)] // the std prelude, for the unit-test build of a no_std crate
use std::{borrow::ToOwned, boxed::Box, format, string::String, string::ToString, vec, vec::Vec};

use hugetlb_init::{
    BootParams, BootReport, BootRequest, Hstate, HugeBootmemPage, HugetlbError, HugetlbNode, HvoParams,
    ModelRemap, NodeReport, NodeSpec, boot,
};
use memmap_core::{
    KernelConfig, Memmap, PageRefEvent, RecordingHooks, Strategy, StructPage, pageblocks_needed,
};

/// Struct pages on each side of a node's memory that must stay untouched.
pub const GUARD_PAGES: u64 = 64;
/// The guard pattern word.
pub const GUARD_WORD: u64 = 0x5a5a_5a5a_5a5a_5a5a;
/// What the node's struct pages hold before boot (the kernel's struct page poison).
pub const NOINIT_WORD: u64 = u64::MAX;

pub fn filled<P: StructPage>(w: u64) -> P {
    let mut p = P::ZEROED;
    p.words_mut().fill(w);
    p
}

pub fn is_filled<P: StructPage>(p: &P, w: u64) -> bool {
    p.words().iter().all(|&x| x == w)
}

/// One node's storage: struct pages of `[base, base + pages.len())`.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeStore<P> {
    pub spec: NodeSpec,
    pub base: u64,
    /// Raw storage after boot.
    pub raw: Vec<P>,
    /// What the kernel reads through the vmemmap (HVO aliases resolved).
    pub view: Vec<P>,
    pub pageblocks: Vec<u8>,
    pub resched: Vec<u64>,
    pub events: Vec<PageRefEvent>,
    pub report: NodeReport,
}

impl<P: StructPage> NodeStore<P> {
    pub fn contains(&self, pfn: u64) -> bool {
        pfn >= self.base && pfn < self.base + self.raw.len() as u64
    }
}

/// Everything one boot produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Booted<P> {
    pub cfg: KernelConfig,
    pub nodes: Vec<NodeStore<P>>,
    pub records: Vec<HugeBootmemPage>,
    pub report: BootReport,
}

impl<P: StructPage> Booted<P> {
    fn node_of(&self, pfn: u64) -> &NodeStore<P> {
        // Guard zones of packed nodes overlap their neighbours' memory: the owner wins.
        self.nodes
            .iter()
            .find(|n| pfn >= n.spec.start_pfn && pfn < n.spec.end_pfn())
            .or_else(|| self.nodes.iter().find(|n| n.contains(pfn)))
            .unwrap_or_else(|| panic!("pfn {pfn:#x} in no node"))
    }
    /// The struct page of `pfn` as the kernel reads it.
    pub fn page(&self, pfn: u64) -> P {
        let n = self.node_of(pfn);
        n.view[(pfn - n.base) as usize]
    }
    /// The stored struct page of `pfn`.
    pub fn raw(&self, pfn: u64) -> P {
        let n = self.node_of(pfn);
        n.raw[(pfn - n.base) as usize]
    }
    pub fn pageblock(&self, pfn: u64) -> u8 {
        let n = self.node_of(pfn);
        let order = self.cfg.pageblock_order;
        n.pageblocks[((pfn >> order) - (n.base >> order)) as usize]
    }
    pub fn in_folio(&self, pfn: u64) -> bool {
        self.records.iter().any(|r| r.pfns().contains(&pfn))
    }
    /// Guard pages outside every node's memory are untouched, and memory outside the folios
    /// still holds the poison.
    pub fn untouched_outside_folios(&self) -> Result<(), String> {
        for n in &self.nodes {
            for (i, p) in n.raw.iter().enumerate() {
                let pfn = n.base + i as u64;
                let inside = pfn >= n.spec.start_pfn && pfn < n.spec.end_pfn();
                if !inside && !is_filled(p, GUARD_WORD) {
                    return Err(format!("guard struct page {pfn:#x} was written: {p:?}"));
                }
                if inside && !self.in_folio(pfn) && !is_filled(p, NOINIT_WORD) {
                    return Err(format!("struct page {pfn:#x} outside the folios was written: {p:?}"));
                }
            }
        }
        Ok(())
    }
}

pub fn params(strategy: Strategy, hvo: HvoParams) -> BootParams {
    BootParams::new(strategy, hvo)
}

/// Boots on fresh guarded storage. On error: the error and whether every byte, pageblock and
/// hook is untouched.
pub fn boot_model<P: StructPage>(
    cfg: KernelConfig,
    specs: &[NodeSpec],
    request: &BootRequest<'_>,
    params: &BootParams,
    tracepoint: bool,
) -> Result<Booted<P>, (HugetlbError, bool)> {
    let mut stores: Vec<(u64, Vec<P>, Vec<u8>)> = specs
        .iter()
        .map(|s| {
            let base = s.start_pfn.saturating_sub(GUARD_PAGES);
            let n = s.start_pfn - base + s.nr_pages + GUARD_PAGES;
            let pages: Vec<P> = (0..n)
                .map(|i| {
                    let pfn = base + i;
                    if pfn >= s.start_pfn && pfn < s.end_pfn() {
                        filled(NOINIT_WORD)
                    } else {
                        filled(GUARD_WORD)
                    }
                })
                .collect();
            (base, pages, vec![0u8; pageblocks_needed(&cfg, base, n)])
        })
        .collect();
    let pristine: Vec<Vec<P>> = stores.iter().map(|s| s.1.clone()).collect();
    let total = request.total(specs.len()) as usize;
    let mut records = vec![HugeBootmemPage::EMPTY; total.max(1)];
    let (result, captured) = {
        let mut nodes: Vec<HugetlbNode<'_, P, ModelRemap, RecordingHooks>> = stores
            .iter_mut()
            .zip(specs)
            .map(|((base, pages, pb), s)| {
                let m = Memmap::new(cfg, *base, pages, pb).expect("memmap");
                HugetlbNode::new(*s, m, ModelRemap::default(), RecordingHooks::new(tracepoint))
            })
            .collect();
        let result = boot(&mut nodes, request, params, &mut records);
        let captured: Vec<(Vec<P>, Vec<u8>, RecordingHooks, NodeReport)> = nodes
            .iter_mut()
            .map(|n| {
                let base = n.memmap.base_pfn();
                let view = (0..n.memmap.nr_pages() as u64).map(|i| n.read(base + i)).collect();
                let pb = n.memmap.pageblock_bytes().to_vec();
                (view, pb, std::mem::take(&mut n.hooks), n.report)
            })
            .collect();
        (result, captured)
    };
    match result {
        Ok(report) => Ok(Booted {
            cfg,
            nodes: stores
                .into_iter()
                .zip(captured)
                .zip(specs)
                .map(|(((base, raw, _), (view, pageblocks, hooks, report)), spec)| NodeStore {
                    spec: *spec,
                    base,
                    raw,
                    view,
                    pageblocks,
                    resched: hooks.resched_pfns,
                    events: hooks.page_ref_events,
                    report,
                })
                .collect(),
            records: records[..total].to_vec(),
            report,
        }),
        Err(e) => {
            let untouched = stores.iter().zip(&pristine).all(|(s, p)| s.1 == *p)
                && captured.iter().all(|c| {
                    c.1.iter().all(|&b| b == memmap_core::PAGEBLOCK_UNSET)
                        && c.2.resched_pfns.is_empty()
                        && c.2.page_ref_events.is_empty()
                })
                && records.iter().all(|r| *r == HugeBootmemPage::EMPTY);
            Err((e, untouched))
        }
    }
}

/// `count` pages of `hstate` on each of `nodes` packed nodes.
pub fn packed(hstate: Hstate, nodes: u32, count: u64) -> Vec<NodeSpec> {
    (0..nodes).map(|nid| NodeSpec::packed(nid, hstate, count)).collect()
}

/// The hstate of `bytes`-sized pages of `cfg`.
pub fn hs(cfg: &KernelConfig, bytes: u64) -> Hstate {
    Hstate::new(cfg, bytes).unwrap_or_else(|e| panic!("{}: {e}", cfg.name))
}

/// x86-64's 2 MiB pages.
pub fn h2m() -> Hstate {
    hs(&KernelConfig::X86_64, 2 << 20)
}

/// x86-64's 1 GiB pages.
pub fn h1g() -> Hstate {
    hs(&KernelConfig::X86_64, 1 << 30)
}

/// x86-64's hstates to test: both natively, 2 MiB only under Miri.
pub fn hstates() -> Vec<Hstate> {
    if cfg!(miri) { vec![h2m()] } else { vec![h2m(), h1g()] }
}

/// The modelled address of the struct page of `pfn` (default vmemmap base).
pub fn vaddr<P: StructPage>(cfg: &KernelConfig, pfn: u64) -> u64 {
    cfg.vmemmap_start + pfn * P::SIZE as u64
}
