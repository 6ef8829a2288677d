//! Words as symbols: what an 8-byte word of a struct page points at ([`Sym`]), read by one
//! side's [`Normalizer`] and refined by the compound geometry ([`classify`]).

use std::collections::BTreeMap;

use super::{Geometry, SP};
use crate::facts::{Facts, Region};

/// One word after normalization.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Sym {
    /// A plain value.
    Raw(u64),
    /// A pointer into struct page `own + delta`, byte `off`, with low tag bits `tag`.
    Page {
        /// Pfn distance from the page holding the word.
        delta: i64,
        /// Byte offset in the target struct page (a multiple of 8).
        off: u8,
        /// Low tag bits (`1` for `compound_head`).
        tag: u8,
    },
    /// A pointer into the head struct page of the compound page holding the word (a tail's
    /// `compound_head`: `HEAD+0|1`).
    Head {
        /// Byte offset in the head.
        off: u8,
        /// Low tag bits.
        tag: u8,
    },
    /// In an aliased vmemmap page (dedup or HVO): a pointer into the same slot of another vmemmap
    /// page (a self pointer written at the shared frame's original address).
    AliasSelf {
        /// Byte offset.
        off: u8,
        /// Low tag bits.
        tag: u8,
    },
    /// The head struct page of the huge page folio of rank `rank` (PFN order) on node `nid`.
    FolioHead {
        /// The node id.
        nid: u32,
        /// Rank among the node's folios.
        rank: usize,
        /// Byte offset.
        off: u8,
        /// Low tag bits.
        tag: u8,
    },
    /// The region's `dev_pagemap`.
    Pgmap,
    /// A kernel-image address, by name.
    Kimage(String),
    /// A direct-map address (such as `zone->free_area[]` list heads) ([`Normalizer::direct_map`]).
    Direct(u64),
}

impl std::fmt::Display for Sym {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Sym::Raw(v) => write!(f, "{v:#018x}"),
            Sym::Page { delta, off, tag } => {
                write!(f, "page({delta:+})+{off}")?;
                if *tag != 0 {
                    write!(f, "|{tag}")?;
                }
                Ok(())
            }
            Sym::Head { off, tag } => {
                write!(f, "HEAD+{off}")?;
                if *tag != 0 {
                    write!(f, "|{tag}")?;
                }
                Ok(())
            }
            Sym::AliasSelf { off, tag } => {
                write!(f, "ALIAS_SELF+{off}")?;
                if *tag != 0 {
                    write!(f, "|{tag}")?;
                }
                Ok(())
            }
            Sym::FolioHead { nid, rank, off, tag } => {
                write!(f, "FOLIO[node {nid} #{rank}]+{off}")?;
                if *tag != 0 {
                    write!(f, "|{tag}")?;
                }
                Ok(())
            }
            Sym::Pgmap => write!(f, "PGMAP"),
            Sym::Kimage(n) => write!(f, "&{n}"),
            Sym::Direct(a) => write!(f, "&dm:{a:#x}"),
        }
    }
}

/// How one side's pointers are read.
#[derive(Debug, Clone, Default)]
pub struct Normalizer {
    /// Address of the struct page of pfn 0.
    pub vmemmap_base: u64,
    /// Size of the vmemmap area.
    pub vmemmap_size: u64,
    /// The region's pgmap pointer.
    pub pgmap: Option<u64>,
    /// Kernel-image addresses and their names.
    pub kimage: BTreeMap<u64, String>,
    /// The heads of the huge page folios, per node in PFN order: a pointer to a head is read by the
    /// folio's rank, since the model packs its folios while a kernel places them where memory was
    /// free.
    pub folio_heads: Vec<(u32, u64)>,
    /// The direct map `[start, start + size)`: pointers into it (free-list heads in `struct zone`)
    /// become [`Sym::Direct`], matched by consistent renaming; `None`: raw values.
    pub direct_map: Option<(u64, u64)>,
}

impl Normalizer {
    /// The symbol of word `v` held by the struct page of `pfn`.
    #[must_use]
    pub fn sym(&self, pfn: u64, v: u64) -> Sym {
        if self.pgmap == Some(v) && v != 0 {
            return Sym::Pgmap;
        }
        if let Some(n) = self.kimage.get(&v) {
            return Sym::Kimage(n.clone());
        }
        if v >= self.vmemmap_base && v - self.vmemmap_base < self.vmemmap_size {
            let rel = v - self.vmemmap_base;
            let target = rel / SP as u64;
            let within = (rel % SP as u64) as u8;
            if let Some(&(nid, _)) = self.folio_heads.iter().find(|&&(_, h)| h == target && h != pfn) {
                let rank = self.folio_heads.iter().filter(|&&(n, h)| n == nid && h < target).count();
                return Sym::FolioHead { nid, rank, off: within & !7, tag: within & 7 };
            }
            return Sym::Page { delta: target as i64 - pfn as i64, off: within & !7, tag: within & 7 };
        }
        if let Some((lo, size)) = self.direct_map {
            if v >= lo && v - lo < size {
                return Sym::Direct(v);
            }
        }
        Sym::Raw(v)
    }
}

/// The kernel-side normalizer of region `r`.
#[must_use]
pub fn kernel_normalizer(facts: &Facts, r: &Region) -> Normalizer {
    let kimage = facts
        .kernel_symbols
        .iter()
        .filter_map(|(k, v)| Some((u64::from_str_radix(k.strip_prefix("0x")?, 16).ok()?, v.clone())))
        .collect();
    let folio_heads = facts.regions.iter().filter_map(|x| x.folio.map(|f| (f.nid, f.head_pfn))).collect();
    // The direct map where the kernel's configuration puts it with `nokaslr` (x86-64 with 4-level
    // paging at 0xffff888000000000, arm64 at 0xfff0000000000000, ppc64el at 0xc000000000000000),
    // 64 TiB of it.
    let direct_map = (r.kind == "hotplug")
        .then(|| crate::compare::model::kernel_config(facts).ok())
        .flatten()
        .map(|(c, _)| (c.page_offset, 1u64 << 46));
    Normalizer {
        vmemmap_base: facts.vmemmap_base,
        vmemmap_size: facts.vmemmap_size,
        pgmap: r.pgmap_addr,
        kimage,
        folio_heads,
        direct_map,
    }
}

/// Refines a page pointer by class: into the compound head ([`Sym::Head`]), or, in an aliased
/// vmemmap page, into the same slot of another vmemmap page ([`Sym::AliasSelf`]); `pfn` is in
/// `geo`'s numbering. A compound head is never an alias, so its pointers stay page pointers.
#[must_use]
pub fn classify(geo: Geometry, pfn: u64, s: Sym, aliased: bool) -> Sym {
    let per = (4096 / SP) as i64;
    match s {
        Sym::Page { delta, off, tag } => {
            let idx = geo.index(pfn);
            if let Some(idx) = idx {
                if geo.compound > 1 && idx > 0 && delta == -(idx as i64) {
                    return Sym::Head { off, tag };
                }
            }
            let head = geo.compound > 1 && idx == Some(0);
            if aliased && !head && delta != 0 && delta % per == 0 {
                return Sym::AliasSelf { off, tag };
            }
            s
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Geometry {
        Geometry { start_pfn: 0x1000, init_start: 0x1000, compound: 512 }
    }

    #[test]
    fn pointers_become_symbols() {
        let n = Normalizer {
            vmemmap_base: 0xffff_ea00_0000_0000,
            vmemmap_size: 1 << 40,
            pgmap: Some(0xffff_8880_0000_1000),
            kimage: BTreeMap::new(),
            folio_heads: Vec::new(),
            direct_map: None,
        };
        let own = 0x1005u64;
        let addr = |pfn: u64| 0xffff_ea00_0000_0000 + pfn * 64;
        assert_eq!(n.sym(own, addr(own) + 8), Sym::Page { delta: 0, off: 8, tag: 0 });
        assert_eq!(classify(geo(), own, n.sym(own, addr(0x1000) + 1), false), Sym::Head { off: 0, tag: 1 });
        assert_eq!(n.sym(own, 0xffff_8880_0000_1000), Sym::Pgmap);
        assert_eq!(n.sym(own, 0xdead_0000_0000_0400), Sym::Raw(0xdead_0000_0000_0400));
        // An aliased page's self pointer written for the same slot 64 pages away.
        assert_eq!(
            classify(geo(), own, n.sym(own, addr(own + 128) + 8), true),
            Sym::AliasSelf { off: 8, tag: 0 }
        );
        assert_eq!(
            classify(geo(), own, n.sym(own, addr(own + 128) + 8), false),
            Sym::Page { delta: 128, off: 8, tag: 0 }
        );
    }
}
