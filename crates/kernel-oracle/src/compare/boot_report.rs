//! The results of comparing the boot configurations' nodes ([`super::boot`]): the classes
//! counted, per zone and node, and their report.

use std::fmt::Write as _;

/// The classes the comparison counts, in report order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CmpClass {
    /// [`Class::FreeHead`](crate::facts::zones::Class::FreeHead).
    FreeHead,
    /// [`Class::FreeTail`](crate::facts::zones::Class::FreeTail).
    FreeTail,
    /// [`Class::FreeHead`](crate::facts::zones::Class::FreeHead) or
    /// [`Class::FreeTail`](crate::facts::zones::Class::FreeTail) in use since boot: `index` set, or
    /// `lru` neither init's self-pointers nor a merge's poison. The free path resets the other
    /// words.
    FreeUsed,
    /// [`Class::FreeTail`](crate::facts::zones::Class::FreeTail) holding a merge's poison where the
    /// model's boot leaves self-pointers: merged since boot. Where the model's boot leaves the same
    /// poison the page is a [`CmpClass::FreeTail`] and compared whole.
    FreeMerged,
    /// [`Class::FreeHead`](crate::facts::zones::Class::FreeHead) whose links differ from the
    /// model's and whose pageblock an allocation since boot gave another migrate type (it moved
    /// the pageblock's free blocks to that type's lists).
    FreeMoved,
    /// [`Class::Reserved`](crate::facts::zones::Class::Reserved), as init left it (count 1).
    Reserved,
    /// [`Class::Reserved`](crate::facts::zones::Class::Reserved) holding the vmemmap (`SECTION_INFO`), modelled.
    ReservedVmemmap,
    /// [`Class::Reserved`](crate::facts::zones::Class::Reserved) with more references than init's and no vmemmap frame.
    ReservedReferenced,
    /// [`Class::Allocated`](crate::facts::zones::Class::Allocated).
    Allocated,
    /// [`Class::Absent`](crate::facts::zones::Class::Absent).
    Absent,
}

impl CmpClass {
    /// Every class, in report order.
    pub const ALL: [CmpClass; 10] = [
        CmpClass::FreeHead,
        CmpClass::FreeTail,
        CmpClass::FreeUsed,
        CmpClass::FreeMerged,
        CmpClass::FreeMoved,
        CmpClass::Reserved,
        CmpClass::ReservedVmemmap,
        CmpClass::ReservedReferenced,
        CmpClass::Allocated,
        CmpClass::Absent,
    ];

    /// The name in reports.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            CmpClass::FreeHead => "free (head)",
            CmpClass::FreeTail => "free (in a block)",
            CmpClass::FreeUsed => "free (used since boot)",
            CmpClass::FreeMerged => "free (merged since boot)",
            CmpClass::FreeMoved => "free (head, moved by a steal)",
            CmpClass::Reserved => "reserved",
            CmpClass::ReservedVmemmap => "reserved (vmemmap, bootmem info)",
            CmpClass::ReservedReferenced => "reserved (referenced after boot)",
            CmpClass::Allocated => "allocated after boot",
            CmpClass::Absent => "no struct page",
        }
    }

    /// What is compared, for reports.
    #[must_use]
    pub const fn compared(self) -> &'static str {
        match self {
            CmpClass::FreeHead => {
                "all but the lru order (links: a free block of its order, on the model's list)"
            }
            CmpClass::FreeTail | CmpClass::Reserved | CmpClass::ReservedVmemmap => "every byte",
            CmpClass::FreeUsed => "all but lru and index",
            CmpClass::FreeMerged | CmpClass::FreeMoved => "all but lru",
            CmpClass::ReservedReferenced => "zone/node/section, PG_reserved",
            CmpClass::Allocated => "zone/node/section",
            CmpClass::Absent => "no memory in the layout, nothing written",
        }
    }
}

/// Pages of one class and how many of them differ.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClassCount {
    /// Pages.
    pub pages: u64,
    /// Pages that differ.
    pub differ: u64,
    /// The first difference, described.
    pub first: Option<String>,
}

impl ClassCount {
    pub(crate) fn add(&mut self, differs: Option<String>) {
        self.pages += 1;
        if let Some(d) = differs {
            self.differ += 1;
            self.first.get_or_insert(d);
        }
    }
}

/// The pageblocks of one zone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageblockCount {
    /// The same migrate type.
    pub equal: u64,
    /// MOVABLE in the model, a type an allocation falls back for in the kernel: an allocation stole
    /// the block since boot (`steal_suitable_fallback()`).
    pub changed_by_allocation: u64,
    /// No section: the kernel has no pageblock bits, the layout no memory.
    pub absent: u64,
    /// Differences (also an absent pageblock with memory in the layout).
    pub differ: u64,
    /// The first difference, described.
    pub first: Option<String>,
}

/// One zone's comparison.
#[derive(Debug, Clone)]
pub struct ZoneResult {
    /// Node id.
    pub nid: u32,
    /// Zone name.
    pub name: String,
    /// Per class, in [`CmpClass::ALL`] order.
    pub classes: Vec<ClassCount>,
    /// Pageblocks.
    pub pageblocks: PageblockCount,
    /// `(counter, kernel, model)`: spanned, present, managed, free.
    pub counts: Vec<(&'static str, u64, u64)>,
}

impl ZoneResult {
    /// Whether nothing differs (the counters included).
    #[must_use]
    pub fn equal(&self) -> bool {
        self.classes.iter().all(|c| c.differ == 0)
            && self.pageblocks.differ == 0
            && self.counts.iter().all(|&(_, k, m)| k == m)
    }
}

/// One node's comparison.
#[derive(Debug, Clone)]
pub struct NodeResult {
    /// Node id.
    pub nid: u32,
    /// Its zones.
    pub zones: Vec<ZoneResult>,
    /// Each other init path (mode, order, strategy) against the reference path, or why the model
    /// refused it for this configuration (on-demand init needs a free page-flag bit).
    pub paths: Vec<(String, PathOutcome)>,
    /// The reference path.
    pub reference: String,
    /// Pages taken off the model's free lists (allocated after boot in the guest).
    pub taken: u64,
    /// `get_page_bootmem()` calls on vmemmap frames.
    pub bootmem: u64,
}

/// How another init path's model run came out against the reference path's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathOutcome {
    /// The same memmap, pageblocks and counters, but for struct pages that differ as the
    /// kernels' deferred and eager paths do.
    Same {
        /// Struct pages with a merge's poison on one side and self-pointers on the other.
        poison_only: u64,
        /// Reserved struct pages outside memory that 6.1's deferred init moves to node 0
        /// ([`Behaviour::reserved_page_nid_by_pfn`](memmap_core::Behaviour::reserved_page_nid_by_pfn)).
        rehomed: u64,
    },
    /// The first difference.
    Differs(String),
    /// The model refused the path for this configuration, and why.
    Refused(String),
}

/// The report of a run's nodes, as a table per zone.
#[must_use]
pub fn render(nodes: &[NodeResult]) -> String {
    let mut s = String::new();
    for n in nodes {
        let _ = writeln!(
            s,
            "  node {}: model {} ({} pages taken as allocated, {} vmemmap frames recorded); other paths: {}",
            n.nid,
            n.reference,
            n.taken,
            n.bootmem,
            n.paths
                .iter()
                .map(|(p, same)| match same {
                    PathOutcome::Same { poison_only: 0, rehomed: 0 } => format!("{p} same"),
                    PathOutcome::Same { poison_only, rehomed: 0 } =>
                        format!("{p} same but for {poison_only} pages' merge poison"),
                    PathOutcome::Same { poison_only, rehomed } => format!(
                        "{p} same but for {poison_only} pages' merge poison and {rehomed} reserved pages' node"
                    ),
                    PathOutcome::Differs(d) => format!("{p} DIFFERS ({d})"),
                    PathOutcome::Refused(e) => format!("{p} refused ({e})"),
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
        for z in &n.zones {
            let _ = writeln!(s, "    zone {}: {}", z.name, if z.equal() { "equal" } else { "DIFFERS" });
            for (class, c) in CmpClass::ALL.iter().zip(&z.classes).filter(|(_, c)| c.pages > 0) {
                let _ = writeln!(
                    s,
                    "      {:<34} {:>8} pages, {:>6} differ  ({})",
                    class.name(),
                    c.pages,
                    c.differ,
                    class.compared()
                );
                if let Some(f) = &c.first {
                    let _ = writeln!(s, "        first: {f}");
                }
            }
            let p = &z.pageblocks;
            let _ = writeln!(
                s,
                "      pageblocks: {} equal, {} changed by an allocation, {} without a section, {} differ",
                p.equal, p.changed_by_allocation, p.absent, p.differ
            );
            if let Some(f) = &p.first {
                let _ = writeln!(s, "        first: {f}");
            }
            let counts: Vec<String> = z
                .counts
                .iter()
                .map(
                    |&(name, k, m)| {
                        if k == m { format!("{name} {k}") } else { format!("{name} {k} (model {m})") }
                    },
                )
                .collect();
            let _ = writeln!(s, "      counts: {}", counts.join(", "));
        }
    }
    s
}

/// Whether every zone is equal and every path agrees.
#[must_use]
pub fn equal(nodes: &[NodeResult]) -> bool {
    nodes.iter().all(|n| {
        n.zones.iter().all(ZoneResult::equal)
            && n.paths.iter().all(|(_, s)| !matches!(s, PathOutcome::Differs(_)))
    })
}
