//! What the kernel refuses before `memremap_pages()` creates any ZONE_DEVICE struct page
//! (`nvdimm_namespace_common_probe()`'s alignment of FS_DAX namespaces, `check_pfn_span()` in
//! `__add_pages()`): [`check_memremap_pages`], the same rules for every modelled release.

use super::unmappable::{SUBSECTION_SHIFT, Unmappable};
use super::{DevPagemap, MemoryType, ZoneDeviceRange};
use crate::InitError;
use crate::model::config::KernelConfig;

/// The pages `check_pfn_span()` wants the start and the length of a hot-added range to be
/// multiples of: `PAGES_PER_SUBSECTION` with `CONFIG_SPARSEMEM_VMEMMAP`, else
/// `PAGES_PER_SECTION`.
#[must_use]
pub const fn hotplug_align_pages(cfg: &KernelConfig) -> u64 {
    if cfg.sparsemem_vmemmap { subsection_pages(cfg) } else { cfg.pages_per_section() }
}

/// `memremap_compat_align()` in pages: `SUBSECTION_SIZE` (the generic value; PowerPC's hash
/// MMU, which wants 16 MiB, is not modelled).
const fn subsection_pages(cfg: &KernelConfig) -> u64 {
    let shift = SUBSECTION_SHIFT.saturating_sub(cfg.page_shift);
    if shift >= 64 { u64::MAX } else { 1 << shift }
}

/// The checks `memremap_pages()` and the pmem driver make before any ZONE_DEVICE struct page
/// of `range` exists: an `Err` means the kernel creates no page for it. An FS_DAX range must
/// be aligned to `memremap_compat_align()` (`nvdimm_namespace_common_probe()`), and every
/// range's start and length to [`hotplug_align_pages`] (`check_pfn_span()` in
/// `__add_pages()`). [`memmap_init_zone_device`] does not call it, as the kernel's does not; a
/// caller modelling a namespace calls it first. A zero-length range passes.
///
/// # Errors
///
/// [`InitError::NotMappable`] with the kernel's reason: [`Unmappable::PmemMisaligned`] for an
/// FS_DAX range whose start or end is not 2 MiB-aligned, [`Unmappable::AddPagesMisaligned`]
/// for any range whose start or length is not a multiple of [`hotplug_align_pages`];
/// [`InitError::RangeOverflow`] for a range that passes the end of the `u64` PFN space.
///
/// [`memmap_init_zone_device`]: super::memmap_init_zone_device
pub fn check_memremap_pages(
    cfg: &KernelConfig,
    range: &ZoneDeviceRange,
    pgmap: &DevPagemap,
) -> Result<(), InitError> {
    let (start_pfn, nr_pages) = (range.start_pfn, range.nr_pages);
    let end = start_pfn.checked_add(nr_pages).ok_or(InitError::RangeOverflow { start_pfn, nr_pages })?;
    let refused = |why, align_pages| InitError::NotMappable { start_pfn, nr_pages, align_pages, why };
    if pgmap.memory_type == MemoryType::FsDax {
        let align = subsection_pages(cfg);
        if (start_pfn | end) % align != 0 {
            return Err(refused(Unmappable::PmemMisaligned, align));
        }
    }
    let align = hotplug_align_pages(cfg);
    if (start_pfn | nr_pages) % align != 0 {
        return Err(refused(Unmappable::AddPagesMisaligned, align));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Named;
    use std::string::ToString;

    fn range(start_pfn: u64, nr_pages: u64) -> ZoneDeviceRange {
        ZoneDeviceRange::new(KernelConfig::X86_64.zone_device(), 0, start_pfn, nr_pages)
    }

    #[test]
    fn a_1mib_aligned_fsdax_namespace_is_refused_with_the_kernels_message() {
        let cfg = KernelConfig::X86_64;
        let fsdax = DevPagemap::new(MemoryType::FsDax);
        // memmap=1G!4097M: 1 MiB-aligned at both ends.
        let e = check_memremap_pages(&cfg, &range(0x100100, 0x40000), &fsdax).unwrap_err();
        assert_eq!(
            e,
            InitError::NotMappable {
                start_pfn: 0x100100,
                nr_pages: 0x40000,
                align_pages: 512,
                why: Unmappable::PmemMisaligned
            }
        );
        let text = e.to_string();
        assert!(
            text.contains("[mem 0x100100000-0x1400fffff flags 0x200] misaligned, unable to map"),
            "{text}"
        );
        assert!(text.contains("nvdimm_namespace_common_probe") && text.contains("-EOPNOTSUPP"), "{text}");
        // A devdax range with the same pfns fails in __add_pages instead.
        let generic = DevPagemap::new(MemoryType::Generic);
        let e = check_memremap_pages(&cfg, &range(0x100100, 0x40000), &generic).unwrap_err();
        assert!(e.to_string().contains("Misaligned __add_pages start: 0x100100 end: #1400ff"), "{e}");
    }

    #[test]
    fn aligned_ranges_of_every_type_pass_and_classic_sparsemem_wants_sections() {
        let cfg = KernelConfig::X86_64;
        for t in MemoryType::ALL.iter().copied() {
            let pgmap = DevPagemap::new(t);
            assert_eq!(check_memremap_pages(&cfg, &range(0x100000, 0x40000), &pgmap), Ok(()));
            assert_eq!(check_memremap_pages(&cfg, &range(0x100200, 0x200), &pgmap), Ok(()));
            assert_eq!(check_memremap_pages(&cfg, &range(0x100000, 0), &pgmap), Ok(()));
        }
        let classic = KernelConfig::X86_64_CLASSIC_SPARSE;
        let e =
            check_memremap_pages(&classic, &range(0x100200, 0x200), &DevPagemap::new(MemoryType::Generic));
        assert!(matches!(e, Err(InitError::NotMappable { align_pages: 32768, .. })), "{e:?}");
        assert_eq!(hotplug_align_pages(&classic), classic.pages_per_section());
        let over = check_memremap_pages(&cfg, &range(u64::MAX, 2), &DevPagemap::new(MemoryType::FsDax));
        assert!(matches!(over, Err(InitError::RangeOverflow { .. })));
    }
}
