//! # memmap-dump: the memmap dump format
//!
//! A *dump* is the struct pages of a pfn range as the model (or a real kernel) wrote them, with
//! the metadata needed to read them: what `memmap-bench dump` writes, what `memmap-bench diff`
//! compares, and what `kernel-oracle` compares real kernels' struct pages against. A dump is a
//! directory holding `memmap.bin` (the raw struct pages, in PFN order) and `meta.json` (a
//! [`DumpMeta`] and the kind's own fields); `docs/memmap-dump.md` gives the format.
//!
//! * [`ZoneDeviceDump`], [`HugetlbDump`] and [`HotplugDump`] model a [`Dump`] ([`model`]);
//! * [`OutputDir`] writes one without losing data ([`mod@write`]), [`OutputFile`] any other
//!   output ([`output`]);
//! * [`open_dump`], [`read_dump`] and [`parse_dump`] read one back, every check before any data
//!   ([`read`]); [`diff`] compares two.
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
