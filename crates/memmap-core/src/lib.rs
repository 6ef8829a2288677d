//! # memmap-core: a byte-faithful model of Linux `struct page` initialization
//!
//! Linux keeps a `struct page` for every page frame (the *memmap*). This crate models it byte
//! for byte and implements the kernel's initializers three ways: **slow** (the kernel's per-page
//! code, same stores in the same order), **template** (one page built by the slow path, copied
//! with the PFN-dependent fields refreshed) and **streaming** (the template copied with
//! `stream-hal` streaming stores, drained where the kernel's ordering needs it). Property tests
//! check that all three leave byte-identical memmaps, pageblocks and hook calls.
//!
//! ## What to call first
//!
//! * ZONE_DEVICE (pmem, device-dax): [`memmap_init_zone_device`] on a [`Memmap`] (caller
//!   storage, or [`OwnedMemmap`] under `std`) with a [`DevPagemap`]; [`check_memremap_pages`]
//!   refuses the ranges the kernel maps no pages for.
//! * Memory hotplug: [`online_pages`] with the zone's free lists in a [`HotplugZone`].
//! * A node's boot: [`Node::boot`] ([`InitMode`]: eager, deferred, on demand), then the buddy
//!   allocator ([`Node::alloc_pages`], [`Node::free_pages`]) and [`Node::deferred_init_memmap`].
//! * Your own initializer (as `hugetlb-init`): the kernel's per-page operations are methods of
//!   [`Memmap`] (`init_single_page`, `prep_compound_head`, ...), the template loop is
//!   [`Memmap::fill_run`], the strategy choice [`FillOptions::resolve`].
//!
//! The model of one kernel is a [`KernelConfig`] (presets, or any `.config` through
//! [`KernelConfig::with_kconfig`]); what changed between releases is one table, [`Behaviour`].
//! `docs/kernel-model.md` in the repository summarises each release, `docs/kernel-oracle.md`
//! what comparing the model with real kernels under QEMU found.
//!
//! ## Features and `no_std`
//!
//! `std` (default): [`OwnedMemmap`], [`OwnedArena`], [`RecordingHooks`] and the threaded
//! runners. Without it the crate is `no_std` without `alloc`: all storage comes from the caller.
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
//! let range = ZoneDeviceRange::new(cfg.zone_device(), 0, base, n as u64);
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

mod error;
mod fill;
mod freelist;
mod hooks;
mod hotplug;
mod memmap;
mod model;
mod named;
mod node;
mod parallel;
mod sync;
mod zone_device;

pub use error::InitError;
pub use fill::{FillOptions, Strategy, StrategyReason};
pub use freelist::buddy_page_type;
#[cfg(feature = "std")]
pub use hooks::RecordingHooks;
pub use hooks::{CountingHooks, InitHooks, NoHooks, PageRefEvent};
pub use hotplug::{
    HotplugError, HotplugTarget, HotplugZone, OnlineOptions, OnlineReport, online_pages, take_free_block,
};
pub use memmap::engine::ListSelf;
pub use memmap::ops::{BootmemType, bootmem_info_sections};
#[cfg(feature = "std")]
pub use memmap::owned::OwnedMemmap;
pub use memmap::template::CopyReport;
pub use memmap::{Memmap, PAGE_POISON_BYTE, PAGEBLOCK_UNSET, PageMut, pageblocks_needed};
pub use model::config::{Arch, ConfigError, FlagsLayout, KernelConfig};
pub use model::flags::{MigrateType, PG, PageType};
pub use model::kconfig::{Kconfig, KconfigError};
pub use model::page::{Page, Page64, Page72, StructPage, folio, offsets};
pub use model::version::{Behaviour, FolioLayout, KernelVersion, PageFlagBits};
pub use named::Named;
#[cfg(feature = "std")]
pub use node::OwnedArena;
pub use node::{
    AllocError, ArenaError, BadPageReason, BootOptions, BootOrder, BootReport, ClearMode, DeferredReport,
    FreeError, Gfp, InitMode, InitPolicy, LayoutError, Node, NodeError, NodeLayout, NodeParts, NodeStats,
    PageBlock, PfnRange, PhysArena, ReservedRange, ZoneSpan, pg_uninitialized_2m,
};
pub use parallel::Piece;
#[cfg(feature = "std")]
pub use parallel::{ViewsReport, run_views};
pub use zone_device::{
    DevPagemap, DrainPolicy, InitOptions, InitReport, MAX_VMEMMAP_SHIFT, MemoryType, Unmappable, VmemAltmap,
    ZoneDeviceRange, check_memremap_pages, compound_nr_pages, hotplug_align_pages, memmap_init_zone_device,
    move_pfn_range_to_zone, vmemmap_alias, vmemmap_can_optimize,
};
#[cfg(feature = "std")]
pub use zone_device::{ParallelInit, memmap_init_zone_device_parallel};
