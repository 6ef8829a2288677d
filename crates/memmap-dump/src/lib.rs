//! # memmap-dump: the memmap dump format
//!
//! A *dump* is the struct pages of a pfn range as the model (or a real kernel) wrote them,
//! with the metadata needed to read them: what `memmap-bench dump` writes, what
//! `memmap-bench diff` compares, and what `kernel-oracle` compares real kernels' struct pages
//! against. This crate holds the format and everything that touches it, so that the program
//! and the oracle share one implementation:
//!
//! * [`ZoneDeviceDump`], [`HugetlbDump`] and [`HotplugDump`] describe what to model and run it ([`model`]),
//!   giving a [`Dump`] in memory;
//! * [`OutputDir`] writes a dump safely ([`mod@write`]); [`OutputFile`] writes any other output
//!   file (a plot, a report) by the same rules ([`output`]);
//! * [`open_dump`], [`read_dump`] and [`parse_dump`] read one back with every check done
//!   before data is read ([`read`]);
//! * [`diff`] compares two dumps.
//!
//! ## The format
//!
//! A dump is a directory with two files:
//!
//! * `DIR/memmap.bin`: the raw bytes of the struct pages of PFNs `[start_pfn, start_pfn +
//!   nr_pages)` in PFN order, exactly as they sit in memory (`struct_page_size` bytes each, words
//!   in the byte order named by `endianness`). Field offsets are those of
//!   [`memmap_core::offsets`]: `flags` @0, `lru.next`/`compound_head`/`pgmap` @8,
//!   `lru.prev`/`zone_device_data` @16, `mapping` @24, `index` @32, `private` @40,
//!   `_mapcount`/`page_type` @48 (4 bytes), `_refcount` @52 (4 bytes), `memcg_data` @56,
//!   `virtual` @64 (72-byte layout only).
//! * `DIR/meta.json`: an object with at least
//!   * the fields of [`DumpMeta`]: format, kind, preset, byte order, the pfn range and its
//!     first struct page's modelled address (`page_addr_base`, what pointer-valued fields are
//!     checked against), zone and node, flags layout and bits, MOVABLE pageblocks, hook counts,
//!     strategy and backend;
//!   * for `zone-device`: `pgmap_addr` (what `folio->pgmap` holds), `memory_type`,
//!     `vmemmap_shift`, `altmap` (`{base_pfn, reserve, free}` or `null`),
//!     `compound_nr_pages`, `init_start_pfn` (first PFN initialized, after the altmap),
//!     `pages_initialized`, `pr_debug` (the kernel's debug line);
//!   * for `hotplug`: `hotplug_zone` (`normal`/`movable`) and `hotplug_zone_index`,
//!     `memory_block_pages`, `online_pages_calls`, `chunks`, `managed_pages`,
//!     `max_order_free_blocks` (the `MAX_PAGE_ORDER` free list in list order), `taken_blocks`,
//!     `free_list_heads` (modelled address of each free-list head to its name).
//!
//! ## Writing and reading
//!
//! [`OutputDir`] refuses to overwrite an existing dump unless told to (`force`), never writes
//! through a symbolic link, and writes both files under temporary names before giving them
//! their names ([`mod@write`]). The reader checks `meta.json` (size, JSON, `format`, `kind`,
//! `endianness`, `struct_page_size`) and `memmap.bin`'s length before reading any data
//! ([`read`]); [`read_user_file`] applies the same rules (regular files only, a size cap,
//! gzip accepted) to any other file a user names, such as a kernel `.config`; [`check_json`]
//! bounds what parsing a JSON file can allocate ([`json`]).
//!
//! [`diff`] compares two dumps into a report (by field, by role, pageblocks, hooks, JSON); two
//! dumps that differ in `format`, `kind`, `endianness`, `struct_page_size`, `start_pfn`,
//! `nr_pages`, flags layout, flag bits or kernel release cannot be compared (the preset's name
//! may differ).
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod bytes;
pub mod diff;
mod error;
pub mod hotplug;
pub mod hugetlb;
pub mod json;
mod meta;
pub mod model;
pub mod node;
pub mod output;
pub mod read;
pub mod write;

pub use bytes::Bytes;
pub use error::DumpError;
pub use hotplug::HotplugDump;
pub use hugetlb::HugetlbDump;
pub use json::{JsonLimits, check_json};
pub use meta::{AltmapJson, DumpMeta, FORMAT_VERSION, FlagsLayoutJson, KINDS, PgBits, host_endianness};
pub use model::{Dump, ZoneDeviceDump};
pub use node::{LayoutFile, NodeDump, NodeLayoutJson, ZoneCounts};
pub use output::{OutputError, OutputFile};
pub use read::{
    Links, MAX_USER_FILE_BYTES, OpenDump, UserFile, open_dump, parse_dump, parse_meta, read_capped,
    read_dump, read_file, read_user_bytes, read_user_file, validate_meta,
};
pub use write::{MEMMAP_FILE, META_FILE, OutputDir};
