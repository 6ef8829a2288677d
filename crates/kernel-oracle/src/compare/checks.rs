//! The kernel-side class checks ([`class_checks`]): the assumptions the symbols rest on, checked
//! on the kernel's own struct pages.

use std::collections::BTreeMap;

use memmap_core::offsets;

use super::{Geometry, Normalizer, SP, Sym, kernel_normalizer, word};
use crate::facts::{Facts, Region};

/// Result of one class check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What was checked.
    pub name: String,
    /// `None` when it holds, else why not.
    pub failure: Option<String>,
}

/// Struct pages of one region to check: `(pfn, 64 bytes)` in pfn order, and the guest-physical
/// frame of each vmemmap page where known.
pub struct PageSet<'a> {
    /// The region.
    pub region: &'a Region,
    /// Its pages.
    pub pages: Vec<(u64, &'a [u8])>,
    /// Vmemmap page number to frame.
    pub gpa: BTreeMap<u64, u64>,
}

impl<'a> PageSet<'a> {
    /// The whole region from its dump bytes and facts.
    #[must_use]
    pub fn whole(region: &'a Region, bytes: &'a [u8]) -> Self {
        let first_vpage = region.start_pfn * SP as u64 / 4096;
        let pages =
            bytes.chunks_exact(SP).enumerate().map(|(i, p)| (region.start_pfn + i as u64, p)).collect();
        let gpa = region
            .vmemmap_gpa
            .iter()
            .enumerate()
            .filter_map(|(i, g)| g.map(|g| (first_vpage + i as u64, g)))
            .collect();
        PageSet { region, pages, gpa }
    }
}

/// The class checks of the regions of one configuration (see the module documentation); struct
/// pages read through the same vmemmap frame and slot are compared across all regions.
#[must_use]
pub fn class_checks(facts: &Facts, sets: &[PageSet<'_>]) -> Vec<Check> {
    let mut out = Vec::new();
    for set in sets {
        region_checks(facts, set, &mut out);
    }
    frame_checks(sets, &mut out);
    out
}

/// The checks of one region: pgmap words, self pointers, tails' compound words.
fn region_checks(facts: &Facts, set: &PageSet<'_>, out: &mut Vec<Check>) {
    let r = set.region;
    let what = format!("region at pfn {:#x}", r.start_pfn);
    if r.kind == "zone-device" {
        out.push(pgmap_check(set, &what));
    }
    let mut scan = PointerScan::new(facts, set);
    for &(pfn, p) in &set.pages {
        if p.iter().all(|&b| b == 0) {
            continue;
        }
        scan.self_pointers(pfn, p);
        scan.compound_word(pfn, p);
    }
    out.push(Check {
        name: format!("{what}: self pointers point at their own list head ({})", scan.selfs),
        failure: scan.bad_self,
    });
    if scan.geo.compound > 1 {
        out.push(Check {
            name: format!(
                "{what}: tails resolve to their head ({}; {} fake heads read through aliased frames; \
                 {} stale struct pages never initialized as tails)",
                scan.tails, scan.fake_heads, scan.stale
            ),
            failure: scan.bad_tail,
        });
    }
}

/// Every struct page of a ZONE_DEVICE region that holds a pgmap (heads, or every initialized
/// page without compound pages) holds the region's own.
fn pgmap_check(set: &PageSet<'_>, what: &str) -> Check {
    let r = set.region;
    let geo = Geometry::of(r);
    let mut bad = None;
    let mut seen = 0;
    for &(pfn, p) in &set.pages {
        if geo.index(pfn) == Some(0) || (geo.compound == 1 && geo.index(pfn).is_some()) {
            seen += 1;
            let v = word(p, offsets::PGMAP);
            if Some(v) != r.pgmap_addr && bad.is_none() {
                bad = Some(format!("pfn {pfn:#x} holds {v:#x}"));
            }
        }
    }
    Check {
        name: format!("{what}: pgmap words equal ({seen} pages)"),
        failure: bad.or_else(|| (seen == 0).then(|| "no page holds a pgmap".into())),
    }
}

/// The pointer checks of one region's struct pages: the counts and each check's first failure.
struct PointerScan<'a> {
    region: &'a Region,
    geo: Geometry,
    kn: Normalizer,
    vmemmap_base: u64,
    /// The region's vmemmap page number to frame.
    gpa: &'a BTreeMap<u64, u64>,
    /// How many of the region's vmemmap pages each frame backs.
    frame_uses: BTreeMap<u64, usize>,
    selfs: u64,
    tails: u64,
    fake_heads: u64,
    stale: u64,
    bad_self: Option<String>,
    bad_tail: Option<String>,
}

impl<'a> PointerScan<'a> {
    fn new(facts: &Facts, set: &'a PageSet<'a>) -> Self {
        let mut frame_uses: BTreeMap<u64, usize> = BTreeMap::new();
        for g in set.gpa.values() {
            *frame_uses.entry(*g).or_default() += 1;
        }
        PointerScan {
            region: set.region,
            geo: Geometry::of(set.region),
            kn: kernel_normalizer(facts, set.region),
            vmemmap_base: facts.vmemmap_base,
            gpa: &set.gpa,
            frame_uses,
            selfs: 0,
            tails: 0,
            fake_heads: 0,
            stale: 0,
            bad_self: None,
            bad_tail: None,
        }
    }

    /// Whether `pfn`'s struct page is read through a frame backing several vmemmap pages.
    fn aliased(&self, pfn: u64) -> bool {
        self.gpa.get(&(pfn * SP as u64 / 4096)).is_some_and(|g| self.frame_uses[g] > 1)
    }

    /// Every word of page `p` (but `flags`) that points into its own struct page points at
    /// itself or at the word before it: the `next`/`prev` of an empty list head.
    fn self_pointers(&mut self, pfn: u64, p: &[u8]) {
        for w in 1..SP / 8 {
            if let Sym::Page { delta: 0, off, tag: 0 } = self.kn.sym(pfn, word(p, w * 8)) {
                self.selfs += 1;
                let o = off as usize;
                if o != w * 8 && o + 8 != w * 8 && self.bad_self.is_none() {
                    self.bad_self = Some(format!("pfn {pfn:#x} word @{} points at its own @{o}", w * 8));
                }
            }
        }
    }

    /// A tail's compound word resolves to its head, as `compound_head` (head address + 1) or
    /// as a `compound_info` mask; fake heads and stale struct pages are counted apart.
    fn compound_word(&mut self, pfn: u64, p: &[u8]) {
        let geo = self.geo;
        let Some(idx) = geo.index(pfn).filter(|&x| x > 0 && geo.compound > 1) else { return };
        let ch = word(p, offsets::COMPOUND_HEAD);
        let head_addr = self.vmemmap_base + (pfn - idx) * SP as u64;
        let own = self.vmemmap_base + pfn * SP as u64;
        if ch & 1 == 0 && self.aliased(pfn) {
            // A tail read through a frame that also holds the head (Linux 6.x HVO
            // maps every tail vmemmap page onto the first): a "fake head", which
            // page_fixed_fake_head() sees through. The frame check covers its bytes.
            self.fake_heads += 1;
            return;
        }
        let r = self.region;
        if ch & 1 == 0
            && r.kind == "zone-device"
            && ch != r.pgmap_addr.unwrap_or(0)
            && word(p, 0) & (1 << 6) == 0
        {
            // Not written as a tail at all: a struct page left from an earlier
            // mapping of the range (its own pgmap pointer, no PG_head). Linux before
            // "mm/mm_init: fix uninitialized struct pages for ZONE_DEVICE" leaves
            // tails 128.. of compound pages in early sections like this.
            self.stale += 1;
            return;
        }
        self.tails += 1;
        let resolved = if ch & 1 == 0 {
            None
        } else if ch == head_addr + 1 {
            Some(head_addr)
        } else {
            // Linux 7.x compound_info: a mask; the head is the tail's own address masked.
            Some(own & (ch & !1))
        };
        // A tail read through an aliased frame carries the compound word of the page
        // the frame was first written for; with the mask form that is the same head.
        if resolved != Some(head_addr) && self.bad_tail.is_none() {
            self.bad_tail =
                Some(format!("pfn {pfn:#x}: compound word {ch:#x} does not resolve to head {head_addr:#x}"));
        }
    }
}

/// Over all regions: struct pages read through the same vmemmap frame and slot are identical,
/// and the frames every region shares (a node-wide shared tail page) are named.
fn frame_checks(sets: &[PageSet<'_>], out: &mut Vec<Check>) {
    let mut by_frame: BTreeMap<(u64, u64), (u64, &[u8])> = BTreeMap::new();
    let mut bad = None;
    let mut aliases = 0u64;
    let mut frames_per_region: Vec<std::collections::BTreeSet<u64>> = Vec::new();
    for set in sets {
        let mut frames = std::collections::BTreeSet::new();
        for &(pfn, p) in &set.pages {
            let vpage = pfn * SP as u64 / 4096;
            let Some(&g) = set.gpa.get(&vpage) else { continue };
            frames.insert(g);
            let slot = pfn % (4096 / SP as u64);
            match by_frame.get(&(g, slot)) {
                Some(&(first, q)) => {
                    aliases += 1;
                    if q != p && bad.is_none() {
                        bad = Some(format!(
                            "pfns {first:#x} and {pfn:#x} share frame {g:#x} but read differently"
                        ));
                    }
                }
                None => {
                    by_frame.insert((g, slot), (pfn, p));
                }
            }
        }
        frames_per_region.push(frames);
    }
    out.push(Check {
        name: format!("struct pages read through one vmemmap frame are identical ({aliases} aliased reads)"),
        failure: bad,
    });
    let shared = if frames_per_region.len() > 1 {
        let first = &frames_per_region[0];
        first.iter().filter(|g| frames_per_region[1..].iter().all(|f| f.contains(g))).count()
    } else {
        0
    };
    if shared > 0 {
        out.push(Check {
            name: format!("{shared} vmemmap frame(s) shared by every region (a node-wide shared tail page)"),
            failure: None,
        });
    }
}
