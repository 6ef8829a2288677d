//! The error of the initializers and of memmap construction.

use core::fmt;

use crate::model::config::ConfigError;
use crate::zone_device::{KernelMessage, Unmappable};

/// Bad input to an initializer. Nothing is written when one is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
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
    /// A PFN range passes the end of the `u64` PFN space.
    RangeOverflow {
        /// First PFN asked for.
        start_pfn: u64,
        /// Pages asked for.
        nr_pages: u64,
    },
    /// The memmap would reach past the largest PFN of the configuration
    /// ([`KernelConfig::max_pfn`](crate::KernelConfig::max_pfn): `MAX_PHYSMEM_BITS` says no such page exists).
    BeyondMaxPfn {
        /// One past the last PFN asked for.
        end_pfn: u64,
        /// [`KernelConfig::max_pfn`](crate::KernelConfig::max_pfn).
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
    /// `vmemmap_shift` is larger than [`MAX_VMEMMAP_SHIFT`](crate::MAX_VMEMMAP_SHIFT).
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
    /// The kernel refuses to map the ZONE_DEVICE range at all: `memremap_pages()` (or the
    /// pmem driver before it) fails, and no struct page of it is initialized
    /// ([`check_memremap_pages`](crate::check_memremap_pages)).
    NotMappable {
        /// First PFN asked for.
        start_pfn: u64,
        /// Pages asked for.
        nr_pages: u64,
        /// The alignment in pages the kernel wants of the range.
        align_pages: u64,
        /// Which check refuses it.
        why: Unmappable,
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
            InitError::RangeOverflow { start_pfn, nr_pages } => write!(
                f,
                "pfn range [{start_pfn:#x}, +{nr_pages:#x}) overflows the u64 pfn space (at most {:#x} pages fit from that start)",
                u64::MAX - start_pfn
            ),
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
            InitError::NotMappable { start_pfn, nr_pages, align_pages, why } => {
                let what =
                    if why == Unmappable::PmemMisaligned { "start and end" } else { "start and length" };
                write!(
                    f,
                    "pfns [{start_pfn:#x}, +{nr_pages:#x}): the kernel maps no ZONE_DEVICE pages there: \"{}\" ({}, {}); the {what} must be multiples of {align_pages} pages",
                    KernelMessage::new(why, start_pfn, nr_pages, align_pages),
                    why.function(),
                    why.errno()
                )
            }
            InitError::AltmapOutsideRange { base_pfn, reserve, free, start_pfn, end_pfn } => write!(
                f,
                "altmap [{base_pfn:#x}, +{reserve}+{free}) is not inside [{start_pfn:#x}, {end_pfn:#x})"
            ),
        }
    }
}

impl core::error::Error for InitError {}

impl From<ConfigError> for InitError {
    fn from(e: ConfigError) -> Self {
        InitError::Config(e)
    }
}
