//! The metadata of a dump (`meta.json`): what every dump records, and the kind-specific
//! fields under [`DumpMeta::detail`].

use memmap_core::{FlagsLayout, PG};
use serde::{Deserialize, Serialize};

/// Version of the dump format.
pub const FORMAT_VERSION: u32 = 1;

/// The dump kinds.
pub const KINDS: [&str; 3] = ["zone-device", "hugetlb", "hotplug"];

/// The host's byte order as `meta.json` spells it.
#[must_use]
pub const fn host_endianness() -> &'static str {
    if cfg!(target_endian = "little") { "little" } else { "big" }
}

/// `flags_layout` in `meta.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlagsLayoutJson {
    /// `ZONES_PGSHIFT`.
    pub zones_pgshift: u32,
    /// `ZONES_WIDTH`.
    pub zones_width: u32,
    /// `NODES_PGSHIFT`.
    pub nodes_pgshift: u32,
    /// `NODES_WIDTH`.
    pub nodes_width: u32,
    /// `SECTIONS_PGSHIFT`.
    pub sections_pgshift: u32,
    /// `SECTIONS_WIDTH`.
    pub sections_width: u32,
    /// `LAST_CPUPID_PGSHIFT`.
    pub last_cpupid_pgshift: u32,
    /// `LAST_CPUPID_WIDTH`.
    pub last_cpupid_width: u32,
}

impl From<&FlagsLayout> for FlagsLayoutJson {
    fn from(l: &FlagsLayout) -> Self {
        FlagsLayoutJson {
            zones_pgshift: l.zones_pgshift,
            zones_width: l.zones_width,
            nodes_pgshift: l.nodes_pgshift,
            nodes_width: l.nodes_width,
            sections_pgshift: l.sections_pgshift,
            sections_width: l.sections_width,
            last_cpupid_pgshift: l.last_cpupid_pgshift,
            last_cpupid_width: l.last_cpupid_width,
        }
    }
}

/// `pg_bits` in `meta.json`: page flag bit numbers and type values of the modelled release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgBits {
    /// `PG_reserved`.
    pub reserved: u32,
    /// `PG_head`.
    pub head: u32,
    /// `PGTY_hugetlb << 24`, the `page_type` word of a hugetlb folio head.
    pub hugetlb_page_type: u32,
}

impl PgBits {
    /// The bits of the release `cfg` models
    /// ([`Behaviour::page_flags`](memmap_core::Behaviour::page_flags)).
    #[must_use]
    pub fn of(cfg: &memmap_core::KernelConfig) -> Self {
        let bits = cfg.behaviour().page_flags;
        PgBits { reserved: bits.reserved, head: bits.head, ..PgBits::baseline() }
    }

    /// The baseline's bits (6.12 and later).
    #[must_use]
    pub fn baseline() -> Self {
        PgBits {
            reserved: PG::RESERVED,
            head: PG::HEAD,
            hugetlb_page_type: memmap_core::PageType::word(memmap_core::PageType::HUGETLB),
        }
    }
}

/// `altmap` in `meta.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AltmapJson {
    /// `base_pfn`.
    pub base_pfn: u64,
    /// `reserve`.
    pub reserve: u64,
    /// `free`.
    pub free: u64,
}

/// Fields common to every dump.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DumpMeta {
    /// [`FORMAT_VERSION`].
    pub format: u32,
    /// `zone-device`, `hugetlb` or `hotplug`.
    pub kind: String,
    /// Kernel config preset name.
    pub config: String,
    /// `little` or `big`: byte order of the words in `memmap.bin`.
    pub endianness: String,
    /// First PFN in `memmap.bin`.
    pub start_pfn: u64,
    /// Struct pages in `memmap.bin`.
    pub nr_pages: u64,
    /// `sizeof(struct page)`: 64, or 72 with `virtual`.
    pub struct_page_size: usize,
    /// Modelled kernel address of the struct page of `start_pfn` at init time.
    pub page_addr_base: u64,
    /// `page_addr_base` in hex, for people.
    pub page_addr_base_hex: String,
    /// `ZONE_DEVICE`'s index (the zone of the initialized pages, for `zone-device`).
    pub zone: u32,
    /// Node id.
    pub nid: u32,
    /// Page-flags layout.
    pub flags_layout: FlagsLayoutJson,
    /// Flag bits and type values.
    pub pg_bits: PgBits,
    /// PFN of the first page of every pageblock overlapping the range whose migrate type is
    /// MOVABLE, ascending.
    pub movable_pageblock_pfns: Vec<u64>,
    /// Number of `cond_resched` hook calls.
    pub resched_pfns: u64,
    /// Number of `page_ref_set` tracepoint events.
    pub page_ref_events: u64,
    /// The strategy actually used.
    pub strategy: String,
    /// The strategy requested.
    pub strategy_requested: String,
    /// Why `strategy` was used.
    pub strategy_reason: String,
    /// `stream_hal::backend()` of the build that wrote the dump.
    pub backend: String,
    /// `stream_hal::backend().name()` of that build (absent in dumps of older builds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_name: Option<String>,
    /// Kind-specific fields.
    #[serde(flatten)]
    pub detail: serde_json::Map<String, serde_json::Value>,
}
