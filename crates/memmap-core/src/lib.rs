//! # memmap-core: a byte-faithful model of Linux `struct page` initialization
//!
//! Linux keeps a 64-byte `struct page` for every 4 KiB page (the *memmap*). This crate models
//! it byte for byte and implements the kernel's initializers three ways:
//!
//! * **Slow**: the kernel's per-page code (`__init_single_page`, `__init_zone_device_page`,
//!   `memmap_init_compound`, `prep_compound_head`/`_tail`), same stores, same order;
//! * **Template**: one template page built through the slow path, copied into every slot with
//!   only the PFN-dependent fields refreshed (the upstream template series);
//! * **Streaming**: the template copied with `stream-hal` streaming stores, drained where the
//!   upstream ordering rules require.
//!
//! The central property, checked by property tests over every configuration: the template and
//! streaming paths produce a memmap byte-identical to the slow path, with identical pageblock
//! migrate types, `cond_resched` calls and tracepoint events.
//!
//! ## What to call first
//!
//! * ZONE_DEVICE (pmem, device-dax) memmap init: [`memmap_init_zone_device`] on a [`Memmap`]
//!   (caller-provided storage, or [`OwnedMemmap`] under `std`) with a [`DevPagemap`];
//!   [`check_memremap_pages`] first refuses the ranges the kernel maps no ZONE_DEVICE pages
//!   for (misaligned pmem namespaces, ranges that are not whole sub-sections).
//! * Memory hotplug (a hot-added range onlined into `ZONE_NORMAL` or `ZONE_MOVABLE`):
//!   [`online_pages`] on a [`Memmap`] with the zone's free lists in a [`HotplugZone`].
//! * A node's boot: [`Node::boot`] from [`NodeParts`] ([`InitMode`]: eager, deferred, on
//!   demand), then the buddy allocator ([`Node::alloc_pages`], [`Node::free_pages`]) and
//!   deferred init ([`Node::deferred_init_memmap`]).
//! * Your own initializer on this model (as `hugetlb-init` does): the kernel's per-page
//!   operations are methods of [`Memmap`] (`init_single_page`, `prep_compound_tail`,
//!   `prep_compound_head`, ...), and the template engine is [`Memmap::copy_template`] with the
//!   strategy choice of [`FillOptions::resolve`].
//! * Records that are not struct pages (a Rust kernel's frame table): `stream_hal`'s
//!   `template_fill` and `fill_records`.
//!
//! ## Map of the crate
//!
//! | module | what | kernel |
//! |---|---|---|
//! | [`model`] | what a struct page is: [`KernelConfig`], [`FlagsLayout`], flag bits, [`Page64`]/[`Page72`] and the folio overlay | `page-flags-layout.h`, `page-flags.h`, `mm_types.h` |
//! | `memmap` | the PFN-indexed view ([`Memmap`]), pageblock bits, the kernel's per-page operations, the one safe access path to a struct page ([`Memmap::page_mut`], [`PageMut`]) and its copy engine (stores, the template loop with its per-PFN refresh, [`Memmap::copy_template`]) | `mm/mm_init.c`, `mm/internal.h` |
//! | `fill` | the strategy policy: [`Strategy`], [`FillOptions`], the choice of every initializer ([`FillOptions::resolve`]) | the upstream template and streaming series |
//! | `zone_device` | [`memmap_init_zone_device`]: slow path and template path, compound pages, altmap, vmemmap dedup | `memmap_init_zone_device()` |
//! | `parallel` | [`run_views`], the parallel runner over views of one memmap; the [`Threads`](stream_par::Threads) policy (`Auto`: where bandwidth stops growing) and the padata runner come from `stream-par`, the family's parallel runtime; the parallel ZONE_DEVICE init is [`memmap_init_zone_device_parallel`] | padata users: `deferred_init_memmap()`, `gather_bootmem_prealloc()` |
//! | `freelist` | the one zone free-list model: list heads per order and migrate type, the release's buddy encoding ([`buddy_page_type`]), every buddy routine, used by the node and hotplug | `mm/page_alloc.c`, `mm/page_isolation.c` |
//! | [`hotplug`] | onlining hot-added memory: the struct pages, the isolated pageblocks, the free lists | `online_pages()`, `undo_isolate_page_range()` |
//! | `node` | a node's boot ([`Node`]): memblock layout, eager/deferred/on-demand init, the buddy allocator, init_on_alloc | `memmap_init()`, `deferred_init_memmap()`, `mm/page_alloc.c` |
//!
//! The kernel behaviour each part models is described, with the kernel functions named, in the
//! documentation of each module; in the repository, `docs/kernel-model.md` summarises what
//! each kernel release does and `docs/kernel-oracle.md` what comparing the model with real
//! kernels under QEMU found.
//!
//! ## Crate features
//!
//! * `std` (default): [`OwnedMemmap`] and [`OwnedArena`] (anonymous `mmap` storage),
//!   [`RecordingHooks`], and the threaded runners ([`stream_par::padata_do_multithreaded`],
//!   [`Node::deferred_init_memmap`], [`memmap_init_zone_device_parallel`] with the
//!   [`stream_par::Threads`] policy). Without it the crate is `no_std` without `alloc`: all
//!   storage comes from the caller.
//!
//! ## MSRV
//!
//! Rust 1.85 (edition 2024), the workspace's `rust-version`; CI checks it with the
//! repository's `Cargo.lock`. Raising it is a minor-version change.
//!
//! ## no_std use
//!
//! The `std` feature is on by default, so a kernel (or any `no_std` crate) must turn the
//! default features off:
//!
//! ```toml
//! [dependencies]
//! memmap-core = { version = "0.1", default-features = false }
//! ```
//!
//! With the default features on a `-none` target (`x86_64-unknown-none`,
//! `aarch64-unknown-none`, a custom target JSON) the build fails with `can't find crate for
//! std`. Without them everything but the items listed under the `std` feature is there: the
//! model, [`Memmap`] over caller-provided `&mut [P]` and pageblock storage,
//! [`memmap_init_zone_device`], [`Node::boot`] and the buddy allocator; the threaded runners
//! are replaced by the caller's own (the padata split, [`stream_par::PadataPlan`], stays). CI builds it
//! this way for `x86_64-unknown-none` and `aarch64-unknown-none`.
//!
//! ## Kernel releases
//!
//! The model follows the release in [`KernelConfig::version`]; the presets are the kernels the
//! `kernel-oracle` tool boots under QEMU and compares byte for byte, and
//! [`KernelConfig::with_kconfig`] reads any other kernel's `.config`. What changed between
//! releases is one table, [`model::version::Behaviour`]; every initializer, the boot-time and
//! buddy code of [`Node`] included, writes the release's page flag bits
//! ([`Behaviour::page_flags`]) and free-block `page_type` ([`buddy_page_type`]).
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
pub use memmap::ops::BootmemType;
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
