//! # memmap-core: a byte-faithful model of Linux `struct page` initialization
//!
//! Linux keeps a 64-byte `struct page` for every 4 KiB page (the *memmap*). This crate models
//! it byte for byte and implements the kernel's initializers three ways:
//!
//! * **Slow**: the kernel's per-page code (`__init_single_page`, `__init_zone_device_page`,
//!   `memmap_init_compound`, `prep_compound_head`/`_tail`), same stores, same order;
//! * **Template**: one template page built through the slow path, copied into every slot with
//!   only the PFN-dependent fields refreshed (the 2026 Li Zhe series);
//! * **Streaming**: the template copied with `stream-hal` streaming stores, drained where the
//!   upstream ordering rules require.
//!
//! The central property, checked by property tests over every configuration: the template and
//! streaming paths produce a memmap byte-identical to the slow path, with identical pageblock
//! migrate types, `cond_resched` calls and tracepoint events.
//!
//! ## Map of the crate
//!
//! | module | kernel |
//! |---|---|
//! | [`config`] | Kconfig values, `page-flags-layout.h` ([`KernelConfig`], [`FlagsLayout`]) |
//! | [`flags`] | `enum pageflags`, page types, migrate types, `TAIL_MAPPING` |
//! | [`page`] | `struct page` ([`Page64`], [`Page72`]) and the `struct folio` overlay |
//! | [`memmap`] | the vmemmap and `pageblock_flags` ([`Memmap`]; [`OwnedMemmap`] under `std`) |
//! | [`hooks`] | `cond_resched()` and the `page_ref_set` tracepoint ([`InitHooks`]) |
//! | [`zone_device`] | `memmap_init_zone_device()` and friends |
//! | [`memblock`] | memory, reserved (`MEMBLOCK_RSRV_NOINIT`) and zone ranges of a node ([`NodeLayout`]) |
//! | [`node`] | boot-time `memmap_init()` of a node, eager / deferred / on-demand ([`Node::boot`]) |
//! | [`deferred`] | `defer_init()`, `deferred_init_memmap()`, `deferred_grow_zone()` |
//! | [`padata`] | `padata_do_multithreaded()`: the work split, and a runner on real threads |
//! | [`ondemand`] | the 2013 RFC: one struct page per 2 MiB block at boot, expansion on first use |
//! | [`buddy`] | the buddy allocator over a node's zones ([`Node::alloc_pages`], [`Node::free_pages`]) |
//! | [`arena`] | page contents and init_on_alloc / init_on_free ([`PhysArena`], [`InitPolicy`]) |
//! | [`sync`] | the spin lock and the per-block init states the node shares between threads |
//!
//! ## Baseline
//!
//! v6.18+ `enum pageflags` order (`PG_reserved` = 13, `PG_head` = 6), `memdesc_flags_t` flags,
//! classic `head | 1` compound-head encoding, `prep_compound_head()` after the tail loop of
//! `memmap_init_compound()` (so page\[2\]'s `_deferred_list` holds self-pointers), FS_DAX refcount
//! 0, `folio->pgmap` at byte 8.
//!
//! ## Example
//!
//! ```
//! use memmap_core::{
//!     DevPagemap, InitOptions, KernelConfig, Memmap, MemoryType, NoHooks, Page64, Strategy,
//!     StructPage, ZoneDeviceRange, memmap_init_zone_device, pageblocks_needed,
//! };
//!
//! let cfg = KernelConfig::X86_64;
//! let (base, n) = (0x100000, 4096);
//! let mut pages = vec![Page64::ZEROED; n];
//! let mut pageblocks = vec![0u8; pageblocks_needed(&cfg, base, n as u64)];
//! let mut memmap = Memmap::new(cfg, base, &mut pages, &mut pageblocks)?;
//! let pgmap = DevPagemap::new(MemoryType::FsDax);
//! let range = ZoneDeviceRange { zone: cfg.zone_device(), nid: 0, start_pfn: base, nr_pages: n as u64 };
//! let report = memmap_init_zone_device(
//!     &mut memmap, &range, &pgmap, &InitOptions::new(Strategy::Streaming), &mut NoHooks)?;
//! assert_eq!(report.used, Strategy::Streaming);
//! let page = memmap.read(base + 7);
//! assert_eq!(page.refcount(), 0);           // FS_DAX
//! assert_eq!(page.mapcount(), -1);
//! assert_eq!(page.pgmap(), pgmap.addr);     // folio->pgmap
//! assert_eq!(memmap.layout().zone(page.flags()), cfg.zone_device());
//! # Ok::<(), memmap_core::InitError>(())
//! ```
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(any(test, feature = "std"))]
extern crate std;

pub mod arena;
pub mod buddy;
pub mod config;
pub mod deferred;
pub mod flags;
pub mod hooks;
mod init;
pub mod memblock;
pub mod memmap;
pub mod node;
pub mod ondemand;
#[cfg(feature = "std")]
mod owned;
pub mod padata;
pub mod page;
mod shared;
pub mod sync;
pub mod zone_device;

use core::fmt;

#[cfg(feature = "std")]
pub use arena::OwnedArena;
pub use arena::{ArenaError, ClearMode, Gfp, InitPolicy, PhysArena};
pub use buddy::{AllocError, BadPageReason, FreeError, PageBlock};
pub use config::{ConfigError, FlagsLayout, KernelConfig};
pub use deferred::{DeferCounter, DeferredReport};
pub use flags::{MigrateType, PG, PageType, TAIL_MAPPING};
#[cfg(feature = "std")]
pub use hooks::RecordingHooks;
pub use hooks::{CountingHooks, InitHooks, NoHooks, PageRefEvent};
pub use memblock::{LayoutError, NodeLayout, PfnRange, ReservedRange, ZoneSpan};
pub use memmap::{Memmap, PAGEBLOCK_UNSET, pageblocks_needed};
pub use node::{
    BootOptions, BootOrder, BootReport, InitMode, Node, NodeError, NodeParts, NodeStats, pg_uninitialized_2m,
};
#[cfg(feature = "std")]
pub use owned::OwnedMemmap;
pub use padata::{PadataChunks, PadataJob, PadataPlan};
#[cfg(feature = "std")]
pub use padata::{PadataReport, padata_do_multithreaded};
pub use page::{Page, Page64, Page72, StructPage};
pub use shared::resolve_strategy;
pub use sync::{BlockStates, RunOnce, SpinLock};
pub use zone_device::{
    DevPagemap, DrainPolicy, InitOptions, InitReport, MemoryType, VmemAltmap, ZoneDeviceRange,
    compound_nr_pages, memmap_init_zone_device, vmemmap_can_optimize,
};

/// How to initialize a range of struct pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// The kernel's per-page code.
    Slow,
    /// A template built through the slow path, copied with normal stores.
    Template,
    /// The template copied with `stream-hal` streaming stores.
    Streaming,
    /// Choose by the kernel's rules and a size threshold.
    Auto,
}

impl Strategy {
    /// All strategies.
    pub const ALL: [Strategy; 4] = [Strategy::Slow, Strategy::Template, Strategy::Streaming, Strategy::Auto];

    /// Lower-case name (`slow`, `template`, `streaming`, `auto`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Strategy::Slow => "slow",
            Strategy::Template => "template",
            Strategy::Streaming => "streaming",
            Strategy::Auto => "auto",
        }
    }

    /// Parses [`Strategy::name`].
    #[must_use]
    pub fn from_name(s: &str) -> Option<Strategy> {
        Self::ALL.into_iter().find(|x| x.name() == s)
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why an init call used the strategy it used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StrategyReason {
    /// The caller asked for it and nothing prevented it.
    Requested,
    /// The `page_ref_set` tracepoint is active: every page must emit its events.
    PageRefTracepoint,
    /// KASAN or KMSAN is configured: the fast paths are off.
    KasanOrKmsan,
    /// `stream-hal` is running its generic backend because of a sanitizer ([`Strategy::Auto`]).
    SanitizerBuild,
    /// [`Strategy::Auto`]: at or above the streaming threshold.
    AboveThreshold,
    /// [`Strategy::Auto`]: below the streaming threshold.
    BelowThreshold,
}

impl fmt::Display for StrategyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StrategyReason::Requested => "requested",
            StrategyReason::PageRefTracepoint => "page_ref_set tracepoint active",
            StrategyReason::KasanOrKmsan => "KASAN/KMSAN configured",
            StrategyReason::SanitizerBuild => "sanitizer build (stream-hal generic)",
            StrategyReason::AboveThreshold => "at or above the streaming threshold",
            StrategyReason::BelowThreshold => "below the streaming threshold",
        })
    }
}

/// Bad input to an initializer. Nothing is written when one is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitError {
    /// The kernel configuration is invalid.
    Config(ConfigError),
    /// The pageblock array given to a memmap is too short.
    PageblocksTooShort {
        /// Bytes needed.
        needed: usize,
        /// Bytes given.
        got: usize,
    },
    /// A PFN range overflows `u64`.
    RangeOverflow,
    /// The memmap would reach past the largest PFN of the configuration
    /// ([`KernelConfig::max_pfn`]: `MAX_PHYSMEM_BITS` says no such page exists).
    BeyondMaxPfn {
        /// One past the last PFN asked for.
        end_pfn: u64,
        /// [`KernelConfig::max_pfn`].
        max_pfn: u64,
    },
    /// The range is not inside the memmap.
    OutOfRange {
        /// First PFN asked for.
        start_pfn: u64,
        /// Pages asked for.
        nr_pages: u64,
        /// First PFN of the memmap.
        memmap_start: u64,
        /// One past the last PFN of the memmap.
        memmap_end: u64,
    },
    /// The zone is not `ZONE_DEVICE`.
    NotZoneDevice {
        /// Zone given.
        zone: u32,
        /// `ZONE_DEVICE` of the configuration.
        zone_device: u32,
    },
    /// The node id does not fit in the flags' node field.
    NodeOutOfRange {
        /// Node given.
        nid: u32,
        /// Largest node id.
        max: u32,
    },
    /// `vmemmap_shift` is larger than [`zone_device::MAX_VMEMMAP_SHIFT`].
    VmemmapShiftTooLarge {
        /// Shift given.
        shift: u32,
        /// Largest accepted.
        max: u32,
    },
    /// The start or the length (after the altmap) is not a multiple of the compound size.
    Misaligned {
        /// First PFN to initialize.
        start_pfn: u64,
        /// Pages to initialize.
        nr_pages: u64,
        /// `1 << vmemmap_shift`.
        pfns_per_compound: u64,
    },
    /// The altmap does not lie inside the range.
    AltmapOutsideRange {
        /// `altmap.base_pfn`.
        base_pfn: u64,
        /// `altmap.reserve`.
        reserve: u64,
        /// `altmap.free`.
        free: u64,
        /// Range start.
        start_pfn: u64,
        /// Range end.
        end_pfn: u64,
    },
}

impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            InitError::Config(e) => write!(f, "invalid kernel config: {e}"),
            InitError::PageblocksTooShort { needed, got } => {
                write!(f, "pageblock array has {got} entries, {needed} needed")
            }
            InitError::RangeOverflow => f.write_str("pfn range overflows"),
            InitError::BeyondMaxPfn { end_pfn, max_pfn } => write!(
                f,
                "pfn range ends at {end_pfn:#x}, past the configuration's last pfn {:#x} (MAX_PHYSMEM_BITS)",
                max_pfn - 1
            ),
            InitError::OutOfRange { start_pfn, nr_pages, memmap_start, memmap_end } => write!(
                f,
                "pfns [{start_pfn:#x}, {:#x}) are not inside the memmap [{memmap_start:#x}, {memmap_end:#x})",
                start_pfn.saturating_add(nr_pages)
            ),
            InitError::NotZoneDevice { zone, zone_device } => {
                write!(f, "zone {zone} is not ZONE_DEVICE ({zone_device})")
            }
            InitError::NodeOutOfRange { nid, max } => write!(f, "node {nid} does not fit (max {max})"),
            InitError::VmemmapShiftTooLarge { shift, max } => {
                write!(f, "vmemmap_shift {shift} is larger than {max}")
            }
            InitError::Misaligned { start_pfn, nr_pages, pfns_per_compound } => write!(
                f,
                "start pfn {start_pfn:#x} and {nr_pages} pages are not aligned to the compound size {pfns_per_compound}"
            ),
            InitError::AltmapOutsideRange { base_pfn, reserve, free, start_pfn, end_pfn } => write!(
                f,
                "altmap [{base_pfn:#x}, +{reserve}+{free}) is not inside [{start_pfn:#x}, {end_pfn:#x})"
            ),
        }
    }
}

impl core::error::Error for InitError {}
