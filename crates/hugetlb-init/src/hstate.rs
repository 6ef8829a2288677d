//! The huge page sizes of a configuration ([`Hstate`], [`Hstates`]): which sizes the
//! architecture registers for its page size, their orders, their vmemmap arithmetic and the
//! modelled addresses of `hstates[]`.

use core::fmt;

use memmap_core::{Arch, KernelConfig, StructPage};

use crate::HugetlbError;

/// `HUGE_MAX_HSTATE` of the modelled architectures: the most huge page sizes one configuration
/// has (arm64 with 4 KiB pages registers four: PUD, contiguous PMD, PMD, contiguous PTE).
pub(crate) const HUGE_MAX_HSTATE: usize = 4;

/// [`Hstate::vmemmap_reserve_pages`] of any hstate of `cfg`.
#[must_use]
pub(crate) const fn hugetlb_vmemmap_reserve_pages<P: StructPage>(cfg: &KernelConfig) -> u64 {
    cfg.page_size() / P::SIZE as u64
}

/// The modelled kernel address of `hstates[]`; a comparison with a real kernel matches the
/// two by name.
pub(crate) const HSTATES_ADDR: u64 = 0xffff_ffff_8400_0000;

/// The modelled size of one `struct hstate` in [`HSTATES_ADDR`]'s array.
pub(crate) const HSTATE_MODEL_SIZE: u64 = 0x1_0000;

/// The modelled offset of `hugepage_freelists[]` (one `struct list_head` per node) in a
/// `struct hstate`.
pub(crate) const HUGEPAGE_FREELISTS_OFFSET: u64 = 0x100;

/// The modelled address of `&h->hugepage_freelists[nid]`, the list head the free folios'
/// `lru` links point to at either end.
#[must_use]
pub const fn hugepage_freelist_addr(hstate: Hstate, nid: u32) -> u64 {
    let slot = hstate.index() as u64;
    // A modelled kernel address: it wraps, as pointer arithmetic does, for node ids no kernel
    // has (`nid * 16` reaches 64 GiB, past the top of the address space from `hstates[]`).
    (HSTATES_ADDR + slot * HSTATE_MODEL_SIZE + HUGEPAGE_FREELISTS_OFFSET).wrapping_add(nid as u64 * 16)
}

/// The page-table entry that maps a huge page of an hstate: the case of the architecture's
/// `arch_hugetlb_valid_size()` that accepts its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum HugePageLevel {
    /// One PUD entry (`PUD_SIZE`): 1 GiB with 4 KiB pages (x86-64, arm64, riscv64), and with
    /// 4 or 64 KiB pages on powerpc64's radix MMU.
    Pud,
    /// A run of contiguous PMD entries (arm64 `CONT_PMD_SIZE`: 32 MiB, 1 GiB or 16 GiB with
    /// 4, 16 or 64 KiB pages).
    ContPmd,
    /// One PMD entry (`PMD_SIZE`): 2 MiB with 4 KiB pages, 32 MiB (arm64 16 KiB), 512 MiB
    /// (arm64 64 KiB), 2 MiB on powerpc64 radix with 64 KiB pages.
    Pmd,
    /// A run of contiguous PTEs (arm64 `CONT_PTE_SIZE`: 64 KiB with 4 KiB pages, 2 MiB with 16
    /// and 64 KiB pages).
    ContPte,
    /// A NAPOT PTE (riscv64 Svnapot, `napot_cont_size()`: 64 KiB).
    Napot,
}

/// A huge page size of one kernel configuration (`struct hstate`): its order in the
/// configuration's base pages (`huge_page_order`), the base page size it counts in, its place
/// in `hstates[]` and the page-table level that maps it.
///
/// Only [`Hstate::new`], [`Hstate::from_order`] and [`Hstates::of`] make one, from a
/// [`KernelConfig`] (whose `PAGE_SHIFT` is the one source of the page size): the sizes the
/// configuration's architecture accepts (`arch_hugetlb_valid_size()`), per page size. A boot
/// refuses an hstate of another configuration ([`HugetlbError::HstateNotOfConfig`]).
///
/// ```
/// use hugetlb_init::{Hstate, HugetlbError};
/// use memmap_core::KernelConfig;
///
/// let h = Hstate::new(&KernelConfig::ARM64_16K, 32 << 20)?; // the PMD size with 16 KiB pages
/// assert_eq!((h.order(), h.nr_pages(), h.name()), (11, 2048, "32M"));
/// assert!(matches!(
///     Hstate::new(&KernelConfig::ARM64_16K, 64 << 10), // a 4 KiB-page size only
///     Err(HugetlbError::UnsupportedHstate { size: 0x10000, .. })
/// ));
/// # Ok::<(), HugetlbError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hstate {
    order: u8,
    page_shift: u8,
    index: u8,
    level: HugePageLevel,
}

/// The huge page sizes of one configuration, largest first ([`Hstates::of`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hstates {
    list: [Hstate; HUGE_MAX_HSTATE],
    len: u8,
}

/// `(log2 of the size, level)` of each huge page size of `cfg`'s architecture and page size,
/// largest first. Kernel sources: x86-64 `arch/x86/mm/hugetlbpage.c` (PMD, and PUD with
/// `X86_FEATURE_GBPAGES`, which the model assumes); arm64 `arch/arm64/mm/hugetlbpage.c`
/// (`__hugetlb_valid_size()`: PUD where `pud_sect_supported()`, i.e. 4 KiB pages, then
/// CONT_PMD, PMD, CONT_PTE); riscv64 `arch/riscv/mm/hugetlbpage.c` (PMD, PUD, and the NAPOT
/// orders with Svnapot: `NAPOT_CONT64KB_ORDER` only); powerpc64 radix
/// `check_and_get_huge_psize()` in `arch/powerpc/include/asm/book3s/64/hugetlb.h` (2M and 1G;
/// the hash MMU's 16M and 16G are not modelled).
const fn arch_sizes(cfg: &KernelConfig) -> &'static [(u32, HugePageLevel)] {
    use HugePageLevel::{ContPmd, ContPte, Napot, Pmd, Pud};
    match (cfg.arch, cfg.page_shift) {
        (Arch::X86_64, 12) => &[(30, Pud), (21, Pmd)],
        (Arch::Arm64, 12) => &[(30, Pud), (25, ContPmd), (21, Pmd), (16, ContPte)],
        (Arch::Arm64, 14) => &[(30, ContPmd), (25, Pmd), (21, ContPte)],
        (Arch::Arm64, 16) => &[(34, ContPmd), (29, Pmd), (21, ContPte)],
        (Arch::Riscv64, 12) if cfg.riscv_svnapot => &[(30, Pud), (21, Pmd), (16, Napot)],
        (Arch::Riscv64, 12) => &[(30, Pud), (21, Pmd)],
        (Arch::Powerpc64, 12 | 16) => &[(30, Pud), (21, Pmd)],
        _ => &[],
    }
}

impl Hstates {
    /// The huge page sizes `cfg`'s architecture registers with `cfg`'s page size, largest first
    /// (see [`HugePageLevel`]): x86-64 1G, 2M; arm64 4 KiB 1G, 32M, 2M, 64K; arm64 16 KiB 1G,
    /// 32M, 2M; arm64 64 KiB 16G, 512M, 2M; riscv64 1G, 2M (and 64K with
    /// [`KernelConfig::riscv_svnapot`]); powerpc64 (radix) 1G, 2M with 4 or 64 KiB pages. Empty
    /// for a page size the architecture does not have.
    #[must_use]
    pub const fn of(cfg: &KernelConfig) -> Hstates {
        let sizes = arch_sizes(cfg);
        let placeholder = Hstate { order: 0, page_shift: 0, index: 0, level: HugePageLevel::Pmd };
        let mut out = Hstates { list: [placeholder; HUGE_MAX_HSTATE], len: 0 };
        let mut i = 0;
        while i < sizes.len() && i < HUGE_MAX_HSTATE {
            let (shift, level) = sizes[i];
            // Every table size is above the page size it is listed for.
            out.list[i] = Hstate {
                order: (shift - cfg.page_shift) as u8,
                page_shift: cfg.page_shift as u8,
                index: i as u8,
                level,
            };
            i += 1;
        }
        out.len = i as u8;
        out
    }

    /// The hstates, largest first.
    #[must_use]
    pub fn as_slice(&self) -> &[Hstate] {
        &self.list[..self.len as usize]
    }

    /// How many there are.
    #[must_use]
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the configuration has none.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `i`-th, largest first.
    #[must_use]
    pub const fn get(&self, i: usize) -> Option<Hstate> {
        if i < self.len as usize { Some(self.list[i]) } else { None }
    }

    /// The hstate of `bytes`-sized pages, if the configuration has it.
    #[must_use]
    pub const fn find(&self, bytes: u64) -> Option<Hstate> {
        let mut i = 0;
        while i < self.len as usize {
            if self.list[i].size() == bytes {
                return Some(self.list[i]);
            }
            i += 1;
        }
        None
    }

    /// An iterator over the hstates, largest first.
    pub fn iter(&self) -> core::iter::Copied<core::slice::Iter<'_, Hstate>> {
        self.as_slice().iter().copied()
    }
}

impl<'a> IntoIterator for &'a Hstates {
    type Item = Hstate;
    type IntoIter = core::iter::Copied<core::slice::Iter<'a, Hstate>>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl fmt::Debug for Hstates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// The sizes, largest first, comma-separated (`1G, 32M, 2M, 64K`), or `none`.
impl fmt::Display for Hstates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        for (i, h) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(h.name())?;
        }
        Ok(())
    }
}

/// `hugepagesz=` spellings of the powers of two from 1 KiB (`SIZE_NAMES[s / 10 - 1][s % 10]`
/// for `2^s` bytes).
const SIZE_NAMES: [[&str; 10]; 6] = [
    ["1K", "2K", "4K", "8K", "16K", "32K", "64K", "128K", "256K", "512K"],
    ["1M", "2M", "4M", "8M", "16M", "32M", "64M", "128M", "256M", "512M"],
    ["1G", "2G", "4G", "8G", "16G", "32G", "64G", "128G", "256G", "512G"],
    ["1T", "2T", "4T", "8T", "16T", "32T", "64T", "128T", "256T", "512T"],
    ["1P", "2P", "4P", "8P", "16P", "32P", "64P", "128P", "256P", "512P"],
    ["1E", "2E", "4E", "8E", "16E", "32E", "64E", "128E", "256E", "512E"],
];

impl Hstate {
    /// The hstate of `bytes`-sized pages of `cfg` (`hugepagesz=`).
    ///
    /// # Errors
    ///
    /// [`HugetlbError::UnsupportedHstate`] (naming the sizes `cfg` has) unless `bytes` is one
    /// of [`Hstates::of`]`(cfg)`.
    pub const fn new(cfg: &KernelConfig, bytes: u64) -> Result<Hstate, HugetlbError> {
        let all = Hstates::of(cfg);
        match all.find(bytes) {
            Some(h) => Ok(h),
            None => Err(HugetlbError::UnsupportedHstate { size: bytes, supported: all }),
        }
    }

    /// The hstate of `cfg` of order `order` (`huge_page_order`, in `cfg`'s base pages).
    ///
    /// # Errors
    ///
    /// [`HugetlbError::UnsupportedHstate`] unless `cfg` has an hstate of that order (the size
    /// reported saturates at `u64::MAX`).
    pub const fn from_order(cfg: &KernelConfig, order: u32) -> Result<Hstate, HugetlbError> {
        let shift = order.saturating_add(cfg.page_shift);
        let size = if shift < 64 { 1u64 << shift } else { u64::MAX };
        Hstate::new(cfg, size)
    }

    /// The hstate of `cfg` named by a `hugepagesz=` size ([`Hstate::parse_size`]: `2M`, `32m`,
    /// `1G`, `64K`, or bytes), if `cfg` has one of that size.
    #[must_use]
    pub fn from_name(cfg: &KernelConfig, s: &str) -> Option<Hstate> {
        Hstates::of(cfg).find(Hstate::parse_size(s)?)
    }

    /// A size as `hugepagesz=` takes it: decimal digits with an optional `K`, `M`, `G` or `T`
    /// suffix (either case). `None` for anything else or a size past `u64::MAX`.
    #[must_use]
    pub fn parse_size(s: &str) -> Option<u64> {
        let (digits, shift) = match s.as_bytes().last()? {
            b'k' | b'K' => (&s[..s.len() - 1], 10),
            b'm' | b'M' => (&s[..s.len() - 1], 20),
            b'g' | b'G' => (&s[..s.len() - 1], 30),
            b't' | b'T' => (&s[..s.len() - 1], 40),
            _ => (s, 0),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse::<u64>().ok()?.checked_mul(1 << shift)
    }

    /// `huge_page_order(h)`, in base pages of [`Hstate::page_shift`].
    #[must_use]
    pub const fn order(self) -> u32 {
        self.order as u32
    }

    /// `PAGE_SHIFT` of the configuration the hstate belongs to.
    #[must_use]
    pub const fn page_shift(self) -> u32 {
        self.page_shift as u32
    }

    /// The slot of `hstates[]` the model gives it: its position in [`Hstates::of`], the
    /// largest size first (arm64 registers its sizes in that order; x86-64 registers the
    /// `hugepagesz=` it parses first, so a comparison with a real kernel matches the slots by
    /// name, see [`hugepage_freelist_addr`]).
    #[must_use]
    pub const fn index(self) -> usize {
        self.index as usize
    }

    /// The page-table level that maps it.
    #[must_use]
    pub const fn level(self) -> HugePageLevel {
        self.level
    }

    /// `pages_per_huge_page(h)`.
    #[must_use]
    pub const fn nr_pages(self) -> u64 {
        1 << self.order
    }

    /// `huge_page_size(h)` in bytes.
    #[must_use]
    pub const fn size(self) -> u64 {
        1 << (self.order + self.page_shift)
    }

    /// `hstate_is_gigantic(h)` in `cfg`: an order above `MAX_PAGE_ORDER`, so the buddy
    /// allocator cannot hand the page out and boot-time pages come from memblock.
    #[must_use]
    pub const fn is_gigantic(self, cfg: &KernelConfig) -> bool {
        self.order() > cfg.max_page_order
    }

    /// `hugepagesz=` spelling of the size: `64K`, `2M`, `32M`, `512M`, `1G`, `16G`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        let shift = (self.order + self.page_shift) as usize;
        // Every hstate is at least two base pages of at least 4 KiB.
        SIZE_NAMES[shift / 10 - 1][shift % 10]
    }

    /// `hugetlb_vmemmap_size(h)` = `pages_per_huge_page(h) * sizeof(struct page)`: with the
    /// 64-byte layout 32 KiB for 2 MiB pages of 4 KiB and 16 MiB for 1 GiB pages of 4 KiB.
    #[must_use]
    pub const fn vmemmap_size<P: StructPage>(self) -> u64 {
        self.nr_pages() * P::SIZE as u64
    }

    /// Number of vmemmap pages (base pages of [`Hstate::page_shift`]) a huge page's struct
    /// pages span.
    #[must_use]
    pub const fn vmemmap_pages<P: StructPage>(self) -> u64 {
        self.vmemmap_size::<P>().div_ceil(1 << self.page_shift)
    }

    /// `HUGETLB_VMEMMAP_RESERVE_PAGES`: the struct pages of one vmemmap page, which HVO keeps
    /// and `hugetlb_folio_init_vmemmap()` always initializes (head and tails `1..RESERVE`): 64
    /// with 4 KiB pages, 256 with 16 KiB, 1024 with 64 KiB; 56 for the 72-byte layout with
    /// 4 KiB pages (C integer division; HVO is off with that layout).
    #[must_use]
    pub const fn vmemmap_reserve_pages<P: StructPage>(self) -> u64 {
        (1u64 << self.page_shift) / P::SIZE as u64
    }

    /// `hugetlb_vmemmap_optimizable_size(h)`: what HVO can free, `hugetlb_vmemmap_size(h) -
    /// HUGETLB_VMEMMAP_RESERVE_SIZE` (one base page), or 0 when that is not positive (the
    /// struct pages fit in one vmemmap page: 2 MiB pages of 16 or 64 KiB pages) or
    /// `sizeof(struct page)` is not a power of two ("struct page crosses page boundaries").
    #[must_use]
    pub(crate) const fn vmemmap_optimizable_size<P: StructPage>(self) -> u64 {
        if !P::SIZE.is_power_of_two() {
            return 0;
        }
        self.vmemmap_size::<P>().saturating_sub(1 << self.page_shift)
    }
}

/// The `hugepagesz=` spelling ([`Hstate::name`]).
impl fmt::Display for Hstate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memmap_core::Named;
    use memmap_core::{Page64, Page72};
    use std::string::ToString;

    /// arm64 with 64 KiB pages (no preset: Debian builds no such kernel): 512 MiB sections.
    const ARM64_64K: KernelConfig = KernelConfig {
        page_shift: 16,
        section_size_bits: 29,
        pageblock_order: 13,
        max_page_order: 13,
        ..KernelConfig::ARM64
    };

    fn names(cfg: &KernelConfig) -> std::vec::Vec<(&'static str, u32, HugePageLevel)> {
        Hstates::of(cfg).iter().map(|h| (h.name(), h.order(), h.level())).collect()
    }

    #[test]
    fn each_architecture_and_page_size_has_the_kernels_sizes() {
        use HugePageLevel::*;
        // arch/arm64/mm/hugetlbpage.c's support matrix: 4K: CONT PTE 64K, PMD 2M, CONT PMD
        // 32M, PUD 1G; 16K: 2M, 32M, 1G (no PUD); 64K: 2M, 512M, 16G (no PUD).
        assert_eq!(
            names(&KernelConfig::ARM64),
            [("1G", 18, Pud), ("32M", 13, ContPmd), ("2M", 9, Pmd), ("64K", 4, ContPte)]
        );
        assert_eq!(
            names(&KernelConfig::ARM64_16K),
            [("1G", 16, ContPmd), ("32M", 11, Pmd), ("2M", 7, ContPte)]
        );
        assert_eq!(names(&ARM64_64K), [("16G", 18, ContPmd), ("512M", 13, Pmd), ("2M", 5, ContPte)]);
        assert_eq!(names(&KernelConfig::X86_64), [("1G", 18, Pud), ("2M", 9, Pmd)]);
        assert_eq!(names(&KernelConfig::RISCV64), [("1G", 18, Pud), ("2M", 9, Pmd), ("64K", 4, Napot)]);
        let no_napot = KernelConfig { riscv_svnapot: false, ..KernelConfig::RISCV64 };
        assert_eq!(names(&no_napot), [("1G", 18, Pud), ("2M", 9, Pmd)]);
        // powerpc64 radix: 2M and 1G with either page size.
        assert_eq!(names(&KernelConfig::PPC64EL), [("1G", 18, Pud), ("2M", 9, Pmd)]);
        assert_eq!(names(&KernelConfig::PPC64EL_64K), [("1G", 14, Pud), ("2M", 5, Pmd)]);
        // svnapot is riscv64's only.
        assert_eq!(Hstates::of(&KernelConfig { riscv_svnapot: true, ..KernelConfig::X86_64 }).len(), 2);
        // A page size the architecture does not have: no hstate at all.
        let x86_16k = KernelConfig { page_shift: 14, ..KernelConfig::X86_64 };
        assert!(Hstates::of(&x86_16k).is_empty());
        assert_eq!(Hstates::of(&x86_16k).to_string(), "none");
        assert_eq!(Hstates::of(&KernelConfig::ARM64).to_string(), "1G, 32M, 2M, 64K");
        for cfg in KernelConfig::ALL.iter().chain([&ARM64_64K]) {
            for (i, h) in Hstates::of(cfg).iter().enumerate() {
                assert_eq!(
                    (h.index(), h.page_shift(), h.size()),
                    (i, cfg.page_shift, 1 << (h.order() + cfg.page_shift))
                );
                assert_eq!(Hstate::new(cfg, h.size()), Ok(h));
                assert_eq!(Hstate::from_order(cfg, h.order()), Ok(h));
                assert_eq!(Hstate::from_name(cfg, h.name()), Some(h));
            }
        }
    }

    #[test]
    fn sizes_the_configuration_lacks_are_typed_errors() {
        let cfg = KernelConfig::ARM64_16K;
        let supported = Hstates::of(&cfg);
        for size in [64 << 10, 512 << 20, 0, 3 << 20, u64::MAX] {
            assert_eq!(Hstate::new(&cfg, size), Err(HugetlbError::UnsupportedHstate { size, supported }));
        }
        assert_eq!(
            Hstate::from_order(&cfg, 9),
            Err(HugetlbError::UnsupportedHstate { size: 8 << 20, supported })
        );
        assert_eq!(
            Hstate::from_order(&cfg, u32::MAX),
            Err(HugetlbError::UnsupportedHstate { size: u64::MAX, supported })
        );
        let e = Hstate::new(&cfg, 2 << 30).unwrap_err().to_string();
        assert!(e.contains("0x80000000") && e.contains("1G, 32M, 2M"), "{e}");
        assert_eq!(Hstate::from_name(&cfg, "64K"), None);
        assert_eq!(Hstate::from_name(&cfg, "32m"), Hstate::new(&cfg, 32 << 20).ok());
        assert_eq!(
            Hstate::from_name(&KernelConfig::X86_64, "2097152"),
            Hstate::new(&KernelConfig::X86_64, 2 << 20).ok()
        );
        for bad in ["", "M", "1.5G", "-2M", "2MB", "99999999999999999999", "20000000T"] {
            assert_eq!(Hstate::parse_size(bad), None, "{bad:?}");
        }
        assert_eq!(Hstate::parse_size("16G"), Some(16 << 30));
    }

    #[test]
    fn vmemmap_arithmetic_per_page_size() {
        let h = |cfg: &KernelConfig, size: u64| Hstate::new(cfg, size).unwrap();
        // (config, size, vmemmap bytes, vmemmap pages, HVO-freeable pages)
        let cases: [(&KernelConfig, u64, u64, u64, u64); 10] = [
            (&KernelConfig::X86_64, 2 << 20, 32 << 10, 8, 7),
            (&KernelConfig::X86_64, 1 << 30, 16 << 20, 4096, 4095),
            (&KernelConfig::ARM64, 64 << 10, 1 << 10, 1, 0),
            (&KernelConfig::ARM64, 32 << 20, 512 << 10, 128, 127),
            (&KernelConfig::ARM64_16K, 2 << 20, 8 << 10, 1, 0),
            (&KernelConfig::ARM64_16K, 32 << 20, 128 << 10, 8, 7),
            (&KernelConfig::ARM64_16K, 1 << 30, 4 << 20, 256, 255),
            (&KernelConfig::PPC64EL_64K, 2 << 20, 2 << 10, 1, 0),
            (&KernelConfig::PPC64EL_64K, 1 << 30, 1 << 20, 16, 15),
            (&ARM64_64K, 16 << 30, 16 << 20, 256, 255),
        ];
        for (cfg, size, bytes, pages, freed) in cases {
            let hs = h(cfg, size);
            assert_eq!(hs.vmemmap_size::<Page64>(), bytes, "{} {hs}", cfg.name);
            assert_eq!(hs.vmemmap_pages::<Page64>(), pages, "{} {hs}", cfg.name);
            assert_eq!(hs.vmemmap_optimizable_size::<Page64>() / cfg.page_size(), freed, "{} {hs}", cfg.name);
            assert_eq!(hs.vmemmap_optimizable_size::<Page72>(), 0);
        }
        // One vmemmap page of struct pages: 64, 256, 1024 (56 for the 72-byte layout).
        assert_eq!(hugetlb_vmemmap_reserve_pages::<Page64>(&KernelConfig::X86_64), 64);
        assert_eq!(hugetlb_vmemmap_reserve_pages::<Page72>(&KernelConfig::X86_64), 56);
        assert_eq!(hugetlb_vmemmap_reserve_pages::<Page64>(&KernelConfig::ARM64_16K), 256);
        assert_eq!(hugetlb_vmemmap_reserve_pages::<Page64>(&KernelConfig::PPC64EL_64K), 1024);
        assert_eq!(h(&KernelConfig::PPC64EL_64K, 1 << 30).vmemmap_reserve_pages::<Page64>(), 1024);
        // Gigantic: above MAX_PAGE_ORDER (10 on x86-64, 11 on arm64 16K, 8 on ppc64el 64K).
        assert!(!h(&KernelConfig::X86_64, 2 << 20).is_gigantic(&KernelConfig::X86_64));
        assert!(!h(&KernelConfig::ARM64_16K, 32 << 20).is_gigantic(&KernelConfig::ARM64_16K));
        assert!(h(&KernelConfig::ARM64_16K, 1 << 30).is_gigantic(&KernelConfig::ARM64_16K));
        assert!(h(&KernelConfig::PPC64EL_64K, 1 << 30).is_gigantic(&KernelConfig::PPC64EL_64K));
    }
}
