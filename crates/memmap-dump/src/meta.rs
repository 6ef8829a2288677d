//! The metadata of a dump (`meta.json`): what every dump records, and the kind-specific
//! fields under [`DumpMeta::detail`].

use memmap_core::{FlagsLayout, PG};
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

/// Version of the dump format.
pub const FORMAT_VERSION: u32 = 1;

/// The dump kinds.
pub const KINDS: [&str; 4] = ["zone-device", "hugetlb", "hotplug", "node"];

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
    /// The bits of the release `cfg` models.
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

/// Declares [`DumpMeta`] and the `Partial` it is deserialized through from one field list.
macro_rules! dump_meta {
    ($($(#[doc = $doc:literal])* $name:ident: $ty:ty,)*) => {
        /// Fields common to every dump.
        ///
        /// Deserialized field by field, not through `#[serde(flatten)]` (which buffers the whole
        /// object first): every other key goes into [`DumpMeta::detail`].
        #[derive(Debug, Clone, PartialEq, Serialize)]
        pub struct DumpMeta {
            $($(#[doc = $doc])* pub $name: $ty,)*
            /// `stream_hal::backend().name()` of that build (absent in dumps of older builds).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub backend_name: Option<String>,
            /// Kind-specific fields.
            #[serde(flatten)]
            pub detail: serde_json::Map<String, serde_json::Value>,
        }

        /// The fields of a [`DumpMeta`] met so far, while it is deserialized.
        #[derive(Default)]
        struct Partial {
            $($name: Option<$ty>,)*
            backend_name: Option<Option<String>>,
            detail: serde_json::Map<String, serde_json::Value>,
        }

        impl Partial {
            /// Takes the value of `key` from `map`.
            fn field<'de, A: MapAccess<'de>>(&mut self, key: String, map: &mut A) -> Result<(), A::Error> {
                match key.as_str() {
                    $(stringify!($name) => set(&mut self.$name, map, stringify!($name)),)*
                    "backend_name" => set(&mut self.backend_name, map, "backend_name"),
                    _ => {
                        let v = map.next_value()?;
                        self.detail.insert(key, v);
                        Ok(())
                    }
                }
            }

            /// The metadata, once every required field was met.
            fn finish<E: de::Error>(self) -> Result<DumpMeta, E> {
                Ok(DumpMeta {
                    $($name: self.$name.ok_or_else(|| E::missing_field(stringify!($name)))?,)*
                    backend_name: self.backend_name.flatten(),
                    detail: self.detail,
                })
            }
        }
    };
}

dump_meta! {
    /// [`FORMAT_VERSION`].
    format: u32,
    /// `zone-device`, `hugetlb` or `hotplug`.
    kind: String,
    /// Kernel config preset name.
    config: String,
    /// `little` or `big`: byte order of the words in `memmap.bin`.
    endianness: String,
    /// First PFN in `memmap.bin`.
    start_pfn: u64,
    /// Struct pages in `memmap.bin`.
    nr_pages: u64,
    /// `sizeof(struct page)`: 64, or 72 with `virtual`.
    struct_page_size: usize,
    /// Modelled kernel address of the struct page of `start_pfn` at init time.
    page_addr_base: u64,
    /// `page_addr_base` in hex, for people.
    page_addr_base_hex: String,
    /// `ZONE_DEVICE`'s index (the zone of the initialized pages, for `zone-device`).
    zone: u32,
    /// Node id.
    nid: u32,
    /// Page-flags layout.
    flags_layout: FlagsLayoutJson,
    /// Flag bits and type values.
    pg_bits: PgBits,
    /// First PFN of every MOVABLE pageblock overlapping the range, ascending.
    movable_pageblock_pfns: Vec<u64>,
    /// Number of `cond_resched` hook calls.
    resched_pfns: u64,
    /// Number of `page_ref_set` tracepoint events.
    page_ref_events: u64,
    /// The strategy actually used.
    strategy: String,
    /// The strategy requested.
    strategy_requested: String,
    /// Why `strategy` was used.
    strategy_reason: String,
    /// `stream_hal::backend()` of the build that wrote the dump.
    backend: String,
}

/// Stores the next value of `map` in `slot`, refusing a second one for the same field.
fn set<'de, T: Deserialize<'de>, A: MapAccess<'de>>(
    slot: &mut Option<T>,
    map: &mut A,
    name: &'static str,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(de::Error::duplicate_field(name));
    }
    *slot = Some(map.next_value()?);
    Ok(())
}

/// Where a dump of one range is: its pfns, first struct page's modelled address, zone and node.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Placement {
    pub(crate) start_pfn: u64,
    pub(crate) nr_pages: u64,
    pub(crate) page_addr_base: u64,
    pub(crate) zone: u32,
    pub(crate) nid: u32,
}

/// How a dump's struct pages were written: the strategy used, the one asked for, why.
#[derive(Debug, Clone)]
pub(crate) struct Written {
    pub(crate) used: memmap_core::Strategy,
    pub(crate) requested: memmap_core::Strategy,
    pub(crate) reason: String,
}

impl DumpMeta {
    /// The meta of a `kind` dump of `cfg`; movable pageblocks, hook counts and `detail` are left to
    /// the caller.
    pub(crate) fn of(
        kind: &str,
        cfg: &memmap_core::KernelConfig,
        layout: &FlagsLayout,
        struct_page_size: usize,
        at: Placement,
        how: Written,
    ) -> DumpMeta {
        DumpMeta {
            format: FORMAT_VERSION,
            kind: kind.into(),
            config: cfg.name.into(),
            endianness: host_endianness().into(),
            start_pfn: at.start_pfn,
            nr_pages: at.nr_pages,
            struct_page_size,
            page_addr_base: at.page_addr_base,
            page_addr_base_hex: format!("{:#x}", at.page_addr_base),
            zone: at.zone,
            nid: at.nid,
            flags_layout: FlagsLayoutJson::from(layout),
            pg_bits: PgBits::of(cfg),
            movable_pageblock_pfns: Vec::new(),
            resched_pfns: 0,
            page_ref_events: 0,
            strategy: how.used.name().into(),
            strategy_requested: how.requested.name().into(),
            strategy_reason: how.reason,
            backend: stream_hal::backend().to_string(),
            backend_name: Some(stream_hal::backend().name().into()),
            detail: serde_json::Map::new(),
        }
    }
}

impl<'de> Deserialize<'de> for DumpMeta {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct MetaVisitor;
        impl<'de> Visitor<'de> for MetaVisitor {
            type Value = DumpMeta;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a dump's meta.json object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DumpMeta, A::Error> {
                let mut p = Partial::default();
                while let Some(key) = map.next_key::<String>()? {
                    p.field(key, &mut map)?;
                }
                p.finish()
            }
        }
        d.deserialize_map(MetaVisitor)
    }
}
