//! `struct hstate`: the huge page sizes, and the HVO size arithmetic of
//! `mm/hugetlb_vmemmap.h`.

use core::fmt;

use memmap_core::StructPage;

use crate::HugetlbError;

/// `PAGE_SHIFT` of the modelled kernels: hstates are defined for 4 KiB base pages.
pub const PAGE_SHIFT: u32 = 12;

/// `PAGE_SIZE`.
pub const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;

/// `HUGETLB_VMEMMAP_RESERVE_SIZE`: "Reserve one vmemmap page, all vmemmap addresses are mapped
/// to it".
pub const HUGETLB_VMEMMAP_RESERVE_SIZE: u64 = PAGE_SIZE;

/// `HUGETLB_VMEMMAP_RESERVE_PAGES` = `HUGETLB_VMEMMAP_RESERVE_SIZE / sizeof(struct page)`:
/// the struct pages of the first vmemmap page of a huge page, which HVO keeps unique and which
/// `hugetlb_folio_init_vmemmap()` always initializes (head plus tails `1..RESERVE`).
///
/// 64 for the 64-byte layout. For the 72-byte layout the C integer division gives 56 (the
/// 57th struct page straddles the page boundary); HVO is off with that layout anyway, so the
/// fallback initializes tails `56..nr` and the bytes are the same as with any other split.
#[must_use]
pub const fn hugetlb_vmemmap_reserve_pages<P: StructPage>() -> u64 {
    HUGETLB_VMEMMAP_RESERVE_SIZE / P::SIZE as u64
}

/// A huge page size (`struct hstate`), for 4 KiB base pages: 2 MiB (order 9) or 1 GiB
/// (order 18).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hstate {
    order: u32,
}

impl Hstate {
    /// 2 MiB pages (`PMD_ORDER`, order 9).
    pub const H2M: Hstate = Hstate { order: 9 };
    /// 1 GiB pages (`PUD_ORDER`, order 18).
    pub const H1G: Hstate = Hstate { order: 18 };
    /// Every supported hstate, smallest first.
    pub const ALL: [Hstate; 2] = [Hstate::H2M, Hstate::H1G];

    /// The hstate of `bytes`-sized pages.
    ///
    /// # Errors
    ///
    /// [`HugetlbError::UnsupportedHstate`] unless `bytes` is 2 MiB or 1 GiB.
    pub const fn from_size(bytes: u64) -> Result<Hstate, HugetlbError> {
        match bytes {
            0x20_0000 => Ok(Hstate::H2M),
            0x4000_0000 => Ok(Hstate::H1G),
            _ => Err(HugetlbError::UnsupportedHstate { size: bytes }),
        }
    }

    /// The hstate of order `order` (`huge_page_order`).
    ///
    /// # Errors
    ///
    /// [`HugetlbError::UnsupportedHstate`] unless `order` is 9 or 18.
    pub const fn from_order(order: u32) -> Result<Hstate, HugetlbError> {
        match order {
            9 => Ok(Hstate::H2M),
            18 => Ok(Hstate::H1G),
            _ => Err(HugetlbError::UnsupportedHstate {
                size: if order < 52 { PAGE_SIZE << order } else { u64::MAX },
            }),
        }
    }

    /// `huge_page_order(h)`.
    #[must_use]
    pub const fn order(self) -> u32 {
        self.order
    }

    /// `pages_per_huge_page(h)`.
    #[must_use]
    pub const fn nr_pages(self) -> u64 {
        1 << self.order
    }

    /// `huge_page_size(h)` in bytes.
    #[must_use]
    pub const fn size(self) -> u64 {
        PAGE_SIZE << self.order
    }

    /// `hugepagesz=` spelling: `2M` or `1G`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        if self.order == 9 { "2M" } else { "1G" }
    }

    /// Parses [`Hstate::name`] (case-insensitive suffix).
    #[must_use]
    pub fn from_name(s: &str) -> Option<Hstate> {
        match s {
            "2M" | "2m" => Some(Hstate::H2M),
            "1G" | "1g" => Some(Hstate::H1G),
            _ => None,
        }
    }

    /// `hugetlb_vmemmap_size(h)` = `pages_per_huge_page(h) * sizeof(struct page)`: 32 KiB for
    /// 2 MiB pages and 16 MiB for 1 GiB pages with the 64-byte layout.
    #[must_use]
    pub const fn vmemmap_size<P: StructPage>(self) -> u64 {
        self.nr_pages() * P::SIZE as u64
    }

    /// Number of vmemmap pages (4 KiB) a huge page's struct pages span.
    #[must_use]
    pub const fn vmemmap_pages<P: StructPage>(self) -> u64 {
        self.vmemmap_size::<P>().div_ceil(PAGE_SIZE)
    }

    /// `hugetlb_vmemmap_optimizable_size(h)`: what HVO can free, `vmemmap_size - PAGE_SIZE`,
    /// or 0 when `sizeof(struct page)` is not a power of two ("struct page crosses page
    /// boundaries").
    #[must_use]
    pub const fn vmemmap_optimizable_size<P: StructPage>(self) -> u64 {
        if !P::SIZE.is_power_of_two() {
            return 0;
        }
        self.vmemmap_size::<P>().saturating_sub(HUGETLB_VMEMMAP_RESERVE_SIZE)
    }
}

impl fmt::Display for Hstate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memmap_core::{Page64, Page72};

    #[test]
    fn sizes_and_vmemmap_arithmetic_match_the_kernel_table() {
        // kernel-spec §6.3: 2 MiB -> 32 KiB of vmemmap (8 pages, 7 freed); 1 GiB -> 16 MiB
        // (4096 pages, 4095 freed).
        assert_eq!(Hstate::H2M.vmemmap_size::<Page64>(), 32 << 10);
        assert_eq!(Hstate::H2M.vmemmap_optimizable_size::<Page64>() / PAGE_SIZE, 7);
        assert_eq!(Hstate::H1G.vmemmap_size::<Page64>(), 16 << 20);
        assert_eq!(Hstate::H1G.vmemmap_optimizable_size::<Page64>() / PAGE_SIZE, 4095);
        assert_eq!(Hstate::H1G.vmemmap_optimizable_size::<Page72>(), 0);
        assert_eq!(hugetlb_vmemmap_reserve_pages::<Page64>(), 64);
        assert_eq!(hugetlb_vmemmap_reserve_pages::<Page72>(), 56);
    }

    #[test]
    fn only_2m_and_1g_are_hstates() {
        assert_eq!(Hstate::from_size(2 << 20), Ok(Hstate::H2M));
        assert_eq!(Hstate::from_size(1 << 30), Ok(Hstate::H1G));
        assert_eq!(Hstate::from_size(4 << 20), Err(HugetlbError::UnsupportedHstate { size: 4 << 20 }));
        assert_eq!(Hstate::from_size(0), Err(HugetlbError::UnsupportedHstate { size: 0 }));
        assert_eq!(Hstate::from_order(10), Err(HugetlbError::UnsupportedHstate { size: 4 << 20 }));
        assert_eq!(Hstate::from_name("1G"), Some(Hstate::H1G));
        assert_eq!(Hstate::from_name("3M"), None);
    }
}
