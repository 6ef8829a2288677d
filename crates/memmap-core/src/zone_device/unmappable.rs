//! Why the kernel refuses to map a ZONE_DEVICE range, and the message it prints: what
//! [`InitError::NotMappable`](crate::InitError::NotMappable) carries.

use core::fmt;

/// `SUBSECTION_SHIFT`: the sub-section (2 MiB) is the smallest unit of memory hotplug with
/// `CONFIG_SPARSEMEM_VMEMMAP`, on every architecture and page size.
pub(crate) const SUBSECTION_SHIFT: u32 = 21;

/// Why the kernel refuses to map a ZONE_DEVICE range (the two checks of
/// [`check_memremap_pages`](super::check_memremap_pages)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Unmappable {
    /// `nvdimm_namespace_common_probe()`: "misaligned, unable to map" (`-EOPNOTSUPP`); the
    /// namespace's start and end must be multiples of `memremap_compat_align()`.
    PmemMisaligned,
    /// `__add_pages()` → `check_pfn_span()`: "Misaligned __add_pages" (`-EINVAL`); the first
    /// pfn and the page count must be multiples of a sub-section (a section without
    /// `CONFIG_SPARSEMEM_VMEMMAP`).
    AddPagesMisaligned,
}

impl Unmappable {
    /// The kernel function that refuses the range.
    #[must_use]
    pub(crate) const fn function(self) -> &'static str {
        match self {
            Unmappable::PmemMisaligned => "nvdimm_namespace_common_probe",
            Unmappable::AddPagesMisaligned => "__add_pages",
        }
    }

    /// The error the kernel function returns.
    #[must_use]
    pub(crate) const fn errno(self) -> &'static str {
        match self {
            Unmappable::PmemMisaligned => "-EOPNOTSUPP",
            Unmappable::AddPagesMisaligned => "-EINVAL",
        }
    }
}

/// The kernel's message for a refused range, as its `dev_err()` or `WARN()` prints it.
pub(crate) struct KernelMessage {
    why: Unmappable,
    start_pfn: u64,
    nr_pages: u64,
    page_shift: u32,
}

impl KernelMessage {
    /// The message of [`InitError::NotMappable`] with these fields. The pmem check's alignment
    /// is a sub-section in pages, which gives the page size back for the byte addresses.
    pub(crate) const fn new(why: Unmappable, start_pfn: u64, nr_pages: u64, align_pages: u64) -> Self {
        let page_shift = SUBSECTION_SHIFT.saturating_sub(align_pages.trailing_zeros());
        KernelMessage { why, start_pfn, nr_pages, page_shift }
    }
}

impl fmt::Display for KernelMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let end_pfn = self.start_pfn.saturating_add(self.nr_pages);
        match self.why {
            Unmappable::PmemMisaligned => {
                // `%pr` of the namespace's resource: the physical byte range, end inclusive.
                let start = self.start_pfn.checked_shl(self.page_shift).unwrap_or(u64::MAX);
                let end = end_pfn.checked_shl(self.page_shift).unwrap_or(u64::MAX).saturating_sub(1);
                write!(f, "[mem {start:#010x}-{end:#010x} flags 0x200] misaligned, unable to map")
            }
            Unmappable::AddPagesMisaligned => write!(
                f,
                "Misaligned __add_pages start: {:#x} end: #{:x}",
                self.start_pfn,
                end_pfn.saturating_sub(1)
            ),
        }
    }
}
