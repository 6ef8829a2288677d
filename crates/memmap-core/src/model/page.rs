//! `struct page` as a type whose size is a compile-time constant, as `sizeof(struct page)` is in
//! C: [`Page64`] (x86-64/arm64) and [`Page72`] (`WANT_PAGE_VIRTUAL`), `#[repr(C, align(8))]`
//! arrays of native-endian words. The field offsets ([`offsets`]) are checked at compile time
//! against a `#[repr(C)]` mirror of the C struct, and the large-folio overlay ([`folio`])
//! against the page words it aliases, as the kernel's `FOLIO_MATCH` does.

use core::fmt;
use core::mem::{offset_of, size_of};

/// Byte offsets of the `struct page` fields.
pub mod offsets {
    /// `flags`.
    pub const FLAGS: usize = 0;
    /// `lru.next`, `compound_head` of a tail page, `folio->pgmap` of a ZONE_DEVICE page.
    pub const LRU_NEXT: usize = 8;
    /// Same word as [`LRU_NEXT`].
    pub const COMPOUND_HEAD: usize = 8;
    /// Same word as [`LRU_NEXT`].
    pub const PGMAP: usize = 8;
    /// `lru.prev`.
    pub const LRU_PREV: usize = 16;
    /// Same word as [`LRU_PREV`].
    pub const ZONE_DEVICE_DATA: usize = 16;
    /// `mapping`.
    pub const MAPPING: usize = 24;
    /// `index` (`__folio_index`).
    pub const INDEX: usize = 32;
    /// `private`.
    pub const PRIVATE: usize = 40;
    /// `_mapcount`.
    pub const MAPCOUNT: usize = 48;
    /// `page_type` (same bytes as `_mapcount`).
    pub const PAGE_TYPE: usize = 48;
    /// `_refcount`.
    pub const REFCOUNT: usize = 52;
    /// `memcg_data`.
    pub const MEMCG_DATA: usize = 56;
    /// `virtual` (`WANT_PAGE_VIRTUAL` only).
    pub const VIRTUAL: usize = 64;
}

/// The typed read accessors of the 8-byte `struct page` fields, one per `name = offset` row:
/// each is [`StructPage::u64_at`] of its offset.
macro_rules! word_fields {
    ($($(#[$doc:meta])* $name:ident = $offset:expr;)*) => {
        $(
            $(#[$doc])*
            #[inline(always)]
            fn $name(&self) -> u64 {
                self.u64_at($offset)
            }
        )*
    };
}

/// A `struct page` of `WORDS` 64-bit words.
///
/// Only `Page<8>` ([`Page64`]) and `Page<9>` ([`Page72`]) implement [`StructPage`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C, align(8))]
pub struct Page<const WORDS: usize> {
    words: [u64; WORDS],
}

/// The 64-byte layout of x86-64 and arm64 (no KMSAN, LAST_CPUPID in flags, no
/// WANT_PAGE_VIRTUAL).
pub type Page64 = Page<8>;

/// The 72-byte `WANT_PAGE_VIRTUAL` layout: [`Page64`] plus `virtual` at byte 64. Its size is not
/// a power of two, so every vmemmap optimization is off with it.
pub type Page72 = Page<9>;

/// The `#[repr(C)]` mirror of the 64-byte C `struct page`, used only for the compile-time layout
/// checks (`offset_of!`), as `FOLIO_MATCH` does in C.
#[repr(C)]
#[allow(dead_code)]
struct CStructPage {
    flags: u64,
    lru_next: u64,
    lru_prev: u64,
    mapping: u64,
    index: u64,
    private: u64,
    mapcount: i32,
    refcount: i32,
    memcg_data: u64,
}

/// The `#[repr(C)]` mirror of the 72-byte `WANT_PAGE_VIRTUAL` C `struct page`.
#[repr(C)]
#[allow(dead_code)]
struct CStructPageVirtual {
    page: CStructPage,
    virtual_: u64,
}

const _: () = {
    assert!(size_of::<Page64>() == 64 && size_of::<Page72>() == 72);
    assert!(size_of::<CStructPage>() == 64 && size_of::<CStructPageVirtual>() == 72);
    assert!(offset_of!(CStructPage, flags) == offsets::FLAGS);
    assert!(offset_of!(CStructPage, lru_next) == offsets::LRU_NEXT);
    assert!(offset_of!(CStructPage, lru_prev) == offsets::LRU_PREV);
    assert!(offset_of!(CStructPage, mapping) == offsets::MAPPING);
    assert!(offset_of!(CStructPage, index) == offsets::INDEX);
    assert!(offset_of!(CStructPage, private) == offsets::PRIVATE);
    assert!(offset_of!(CStructPage, mapcount) == offsets::MAPCOUNT);
    assert!(offset_of!(CStructPage, refcount) == offsets::REFCOUNT);
    assert!(offset_of!(CStructPage, memcg_data) == offsets::MEMCG_DATA);
    assert!(offset_of!(CStructPageVirtual, virtual_) == offsets::VIRTUAL);
};

/// A `struct page` layout: implemented by [`Page64`] and [`Page72`]. Its size is a
/// compile-time constant, so hot loops are monomorphized on the layout.
pub trait StructPage:
    Copy + Eq + fmt::Debug + Send + Sync + 'static + stream_hal::Record + sealed::Sealed
{
    /// `sizeof(struct page)`.
    const SIZE: usize;
    /// `WANT_PAGE_VIRTUAL`: the layout has `virtual`.
    const WANT_PAGE_VIRTUAL: bool;
    /// All bytes zero (`mm_zero_struct_page`).
    const ZEROED: Self;

    /// The page as words.
    fn words(&self) -> &[u64];
    /// The page as mutable words.
    fn words_mut(&mut self) -> &mut [u64];

    /// Stores this page at `dst` with streaming stores, straight from its words (by value, so a
    /// page built in registers is stored without a round trip through memory). Does not fence.
    ///
    /// # Safety
    ///
    /// `dst` must be valid for writes and aligned; nothing may access it before
    /// `stream_hal::drain()`.
    unsafe fn store_streaming(self, dst: *mut Self);

    /// The 8-byte field at byte `offset` (a multiple of 8).
    #[inline(always)]
    fn u64_at(&self, offset: usize) -> u64 {
        self.words()[offset / 8]
    }
    /// Sets the 8-byte field at byte `offset`.
    #[inline(always)]
    fn set_u64_at(&mut self, offset: usize, value: u64) {
        self.words_mut()[offset / 8] = value;
    }
    /// The 4-byte field at byte `offset` (a multiple of 4).
    #[inline(always)]
    fn u32_at(&self, offset: usize) -> u32 {
        (self.words()[offset / 8] >> half_shift(offset)) as u32
    }
    /// Sets the 4-byte field at byte `offset`, leaving the other half of the word alone.
    #[inline(always)]
    fn set_u32_at(&mut self, offset: usize, value: u32) {
        let s = half_shift(offset);
        let w = &mut self.words_mut()[offset / 8];
        *w = (*w & !(0xffff_ffffu64 << s)) | (u64::from(value) << s);
    }
    word_fields! {
        /// `flags`.
        flags = offsets::FLAGS;
        /// `compound_head` (word at 8; bit 0 set on tail pages).
        compound_head = offsets::COMPOUND_HEAD;
        /// `folio->pgmap` of a ZONE_DEVICE head or single page (word at 8).
        pgmap = offsets::PGMAP;
    }
    /// Tests flag bit `bit` (a [`crate::PG`] number). `page->flags` is one
    /// 64-bit word: a `bit` of 64 or more names no flag and reads as clear.
    #[inline(always)]
    fn test_flag(&self, bit: u32) -> bool {
        1u64.checked_shl(bit).is_some_and(|mask| self.flags() & mask != 0)
    }
    /// `_mapcount`.
    #[inline(always)]
    fn mapcount(&self) -> i32 {
        self.u32_at(offsets::MAPCOUNT) as i32
    }
    /// `page_type` (same bytes as `_mapcount`).
    #[inline(always)]
    fn page_type(&self) -> u32 {
        self.u32_at(offsets::PAGE_TYPE)
    }
    /// `_refcount`.
    #[inline(always)]
    fn refcount(&self) -> i32 {
        self.u32_at(offsets::REFCOUNT) as i32
    }
    /// `virtual`, for layouts that have it.
    #[inline(always)]
    fn virtual_address(&self) -> Option<u64> {
        self.words().get(8).copied()
    }
    /// The page's bytes in memory order (`out` is `SIZE` bytes).
    fn to_bytes(&self, out: &mut [u8]) {
        for (chunk, w) in out.chunks_exact_mut(8).zip(self.words().iter()) {
            chunk.copy_from_slice(&w.to_ne_bytes());
        }
    }
}

// SAFETY: `Page<W>` is `#[repr(C, align(8))]` around `[u64; W]`: its size is `8 * W` and every
// byte belongs to a word, so no value has an uninitialized byte.
unsafe impl<const W: usize> stream_hal::Record for Page<W> {}
const _: () = assert!(size_of::<Page<8>>() == 64 && size_of::<Page<9>>() == 72);

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Page64 {}
    impl Sealed for super::Page72 {}
}

/// [`StructPage`] for the layout `$page` of `$words` words (`$size` bytes).
macro_rules! struct_page_layout {
    ($page:ty, $words:literal, $size:literal, want_page_virtual: $virtual:literal) => {
        impl StructPage for $page {
            const SIZE: usize = $size;
            const WANT_PAGE_VIRTUAL: bool = $virtual;
            const ZEROED: Self = Page { words: [0; $words] };
            fn words(&self) -> &[u64] {
                &self.words
            }
            fn words_mut(&mut self) -> &mut [u64] {
                &mut self.words
            }
            #[inline(always)]
            unsafe fn store_streaming(self, dst: *mut Self) {
                // SAFETY: the caller guarantees `dst` is writable and aligned (8 bytes) for the
                // page, whose only field is its word array (`#[repr(C)]`).
                unsafe { stream_hal::store_words(dst.cast::<[u64; $words]>(), self.words) }
            }
        }
    };
}

struct_page_layout!(Page64, 8, 64, want_page_virtual: false);
struct_page_layout!(Page72, 9, 72, want_page_virtual: true);

/// Shift of the 32-bit half at byte `offset` (a multiple of 4) inside its native-endian word.
const fn half_shift(offset: usize) -> u32 {
    let low_half = offset % 8 == 0;
    if cfg!(target_endian = "little") == low_half { 0 } else { 32 }
}

impl<const W: usize> fmt::Debug for Page<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = &self.words;
        let half = |offset: usize| (w[offset / 8] >> half_shift(offset)) as u32;
        let mut d = f.debug_struct("Page");
        d.field("flags", &format_args!("{:#018x}", w[0]))
            .field("word8", &format_args!("{:#018x}", w[1]))
            .field("word16", &format_args!("{:#018x}", w[2]))
            .field("mapping", &format_args!("{:#018x}", w[3]))
            .field("index", &format_args!("{:#x}", w[4]))
            .field("private", &format_args!("{:#x}", w[5]))
            .field("mapcount", &(half(offsets::MAPCOUNT) as i32))
            .field("refcount", &(half(offsets::REFCOUNT) as i32))
            .field("memcg_data", &format_args!("{:#x}", w[7]));
        if W > 8 {
            d.field("virtual", &format_args!("{:#018x}", w[8]));
        }
        d.finish()
    }
}

/// The large-folio overlay of `struct folio` on the first four pages of a compound page
/// (`include/linux/mm_types.h`, 64-bit, 6.15+; [`folio::v6_12`] has the fields that moved), as
/// byte offsets from the head page of the 64-byte layout, each pinned at compile time to the
/// page word it aliases (`FOLIO_MATCH`).
pub mod folio {
    use super::offsets;

    /// `_flags_1` (page\[1\].flags; the folio order in its low 8 bits).
    pub const FLAGS_1: usize = 64;
    /// `_head_1` (page\[1\].compound_head).
    pub const HEAD_1: usize = 72;
    /// `atomic_t _large_mapcount` (page\[1\] + 16, low half).
    pub(crate) const LARGE_MAPCOUNT: usize = 80;
    /// `atomic_t _nr_pages_mapped` (page\[1\] + 16, high half).
    pub(crate) const NR_PAGES_MAPPED: usize = 84;
    /// `atomic_t _entire_mapcount` (page\[1\].mapping, low half).
    pub(crate) const ENTIRE_MAPCOUNT: usize = 88;
    /// `atomic_t _pincount` (page\[1\].mapping, high half).
    pub(crate) const PINCOUNT: usize = 92;
    /// `mm_id_mapcount_t _mm_id_mapcount[2]` (page\[1\].index).
    pub(crate) const MM_ID_MAPCOUNT: usize = 96;
    /// `unsigned long _mm_ids` (page\[1\].private).
    pub(crate) const MM_IDS: usize = 104;
    /// `atomic_t _mapcount_1` (page\[1\]._mapcount).
    pub(crate) const MAPCOUNT_1: usize = 112;
    /// `atomic_t _refcount_1` (page\[1\]._refcount).
    pub(crate) const REFCOUNT_1: usize = 116;
    /// `unsigned int _nr_pages` (page\[1\].memcg_data, low half; `NR_PAGES_IN_LARGE_FOLIO`).
    pub(crate) const NR_PAGES: usize = 120;
    /// `_flags_2` (page\[2\].flags).
    pub(crate) const FLAGS_2: usize = 128;
    /// `_head_2` (page\[2\].compound_head).
    pub(crate) const HEAD_2: usize = 136;
    /// `struct list_head _deferred_list` (`next` at page\[2\] + 16, `prev` = page\[2\].mapping).
    pub(crate) const DEFERRED_LIST: usize = 144;
    /// `_flags_3` (page\[3\].flags).
    pub(crate) const FLAGS_3: usize = 192;
    /// `_head_3` (page\[3\].compound_head).
    pub(crate) const HEAD_3: usize = 200;
    /// `_hugetlb_subpool` (page\[3\] + 16).
    pub const HUGETLB_SUBPOOL: usize = 208;
    /// `_hugetlb_cgroup` (page\[3\].mapping).
    pub const HUGETLB_CGROUP: usize = 216;
    /// `_hugetlb_cgroup_rsvd` (page\[3\].index).
    pub const HUGETLB_CGROUP_RSVD: usize = 224;
    /// `_hugetlb_hwpoison` (page\[3\].private).
    pub(crate) const HUGETLB_HWPOISON: usize = 232;

    /// The folio fields whose place differs in the layout before 6.15
    /// ([`FolioLayout::NrPages`](crate::FolioLayout::NrPages)), as byte
    /// offsets from the head page (64-byte layout). The fields not listed here (`_flags_N`,
    /// `_head_N`, `_mapcount_1`, `_refcount_1`) are where the module's constants say.
    pub mod v6_12 {
        /// `atomic_t _large_mapcount` (page\[1\] + 16, low half).
        pub(crate) const LARGE_MAPCOUNT: usize = 80;
        /// `atomic_t _entire_mapcount` (page\[1\] + 16, high half).
        pub(crate) const ENTIRE_MAPCOUNT: usize = 84;
        /// `atomic_t _nr_pages_mapped` (page\[1\].mapping, low half).
        pub(crate) const NR_PAGES_MAPPED: usize = 88;
        /// `atomic_t _pincount` (page\[1\].mapping, high half).
        pub(crate) const PINCOUNT: usize = 92;
        /// `unsigned int _folio_nr_pages` (page\[1\].index, low half).
        pub(crate) const FOLIO_NR_PAGES: usize = 96;
        /// `_hugetlb_subpool` (page\[2\] + 16).
        pub const HUGETLB_SUBPOOL: usize = 144;
        /// `_hugetlb_cgroup` (page\[2\].mapping).
        pub const HUGETLB_CGROUP: usize = 152;
        /// `_hugetlb_cgroup_rsvd` (page\[2\].index).
        pub const HUGETLB_CGROUP_RSVD: usize = 160;
    }

    /// The folio fields of 6.1's layout
    /// ([`FolioLayout::FolioDtor`](crate::FolioLayout::FolioDtor)), as byte
    /// offsets from the head page (64-byte layout); the hugetlb subpool and cgroup pointers are
    /// the `private` words of page\[1\] to page\[3\].
    pub mod v6_1 {
        /// `unsigned char _folio_dtor` (page\[1\] + 16, byte 0).
        pub const FOLIO_DTOR: usize = 80;
        /// `unsigned char _folio_order` (page\[1\] + 16, byte 1).
        pub const FOLIO_ORDER: usize = 81;
        /// `atomic_t _total_mapcount` (page\[1\] + 16, high half).
        pub(crate) const TOTAL_MAPCOUNT: usize = 84;
        /// `atomic_t _pincount` (page\[1\].mapping, low half).
        pub(crate) const PINCOUNT: usize = 88;
        /// `unsigned int _folio_nr_pages` (page\[1\].mapping, high half).
        pub(crate) const FOLIO_NR_PAGES: usize = 92;
        /// `COMPOUND_PAGE_DTOR` (`enum compound_dtor_id`).
        pub(crate) const COMPOUND_PAGE_DTOR: u8 = 1;
        /// `HUGETLB_PAGE_DTOR`.
        pub const HUGETLB_PAGE_DTOR: u8 = 2;
    }

    /// `FOLIO_MATCH(page_field, folio_field)`: the folio field lands on the page field of
    /// page `page`.
    // Rust 1.85 (the MSRV) does not count the uses in the `const _` below and warns.
    #[allow(dead_code)]
    const fn matches(folio_offset: usize, page: usize, page_offset: usize) -> bool {
        folio_offset == page * 64 + page_offset
    }

    const _: () = {
        assert!(matches(FLAGS_1, 1, offsets::FLAGS));
        assert!(matches(HEAD_1, 1, offsets::COMPOUND_HEAD));
        assert!(matches(LARGE_MAPCOUNT, 1, offsets::LRU_PREV));
        assert!(matches(NR_PAGES_MAPPED, 1, offsets::LRU_PREV + 4));
        assert!(matches(ENTIRE_MAPCOUNT, 1, offsets::MAPPING));
        assert!(matches(PINCOUNT, 1, offsets::MAPPING + 4));
        assert!(matches(MM_ID_MAPCOUNT, 1, offsets::INDEX));
        assert!(matches(MM_IDS, 1, offsets::PRIVATE));
        assert!(matches(MAPCOUNT_1, 1, offsets::MAPCOUNT));
        assert!(matches(REFCOUNT_1, 1, offsets::REFCOUNT));
        assert!(matches(NR_PAGES, 1, offsets::MEMCG_DATA));
        assert!(matches(FLAGS_2, 2, offsets::FLAGS));
        assert!(matches(HEAD_2, 2, offsets::COMPOUND_HEAD));
        assert!(matches(DEFERRED_LIST, 2, offsets::LRU_PREV));
        assert!(matches(DEFERRED_LIST + 8, 2, offsets::MAPPING));
        assert!(matches(FLAGS_3, 3, offsets::FLAGS));
        assert!(matches(HEAD_3, 3, offsets::COMPOUND_HEAD));
        assert!(matches(HUGETLB_SUBPOOL, 3, offsets::LRU_PREV));
        assert!(matches(HUGETLB_CGROUP, 3, offsets::MAPPING));
        assert!(matches(HUGETLB_CGROUP_RSVD, 3, offsets::INDEX));
        assert!(matches(HUGETLB_HWPOISON, 3, offsets::PRIVATE));
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_accessors_read_the_right_bytes() {
        let mut p = Page64::ZEROED;
        let mut bytes = [0u8; 64];
        p.set_u32_at(offsets::MAPCOUNT, 0xffff_ffff);
        p.set_u32_at(offsets::REFCOUNT, 1);
        p.set_u64_at(offsets::MAPPING, 0xdead_0000_0000_0400);
        p.to_bytes(&mut bytes);
        assert_eq!(&bytes[48..52], &0xffff_ffffu32.to_ne_bytes());
        assert_eq!(&bytes[52..56], &1u32.to_ne_bytes());
        assert_eq!(&bytes[24..32], &0xdead_0000_0000_0400u64.to_ne_bytes());
        assert_eq!(p.mapcount(), -1);
        assert_eq!(p.refcount(), 1);
        assert_eq!(p.page_type(), 0xffff_ffff);
        assert_eq!(p.virtual_address(), None);
    }

    #[test]
    fn half_word_setters_preserve_the_other_half() {
        let mut p = Page64::ZEROED;
        p.set_u32_at(offsets::MAPCOUNT, 0x1234_5678);
        p.set_u32_at(offsets::REFCOUNT, 0x9abc_def0);
        assert_eq!(p.u32_at(offsets::MAPCOUNT), 0x1234_5678);
        assert_eq!(p.u32_at(offsets::REFCOUNT), 0x9abc_def0);
    }

    #[test]
    fn folio_constants_are_the_kernel_offsets() {
        // `struct folio` on 64-bit, offsets from the head as the kernel lays them out
        // (`include/linux/mm_types.h`): the folio constants must be those numbers.
        let kernel = [
            (folio::FLAGS_1, 64),
            (folio::HEAD_1, 72),
            (folio::LARGE_MAPCOUNT, 80),
            (folio::NR_PAGES_MAPPED, 84),
            (folio::ENTIRE_MAPCOUNT, 88),
            (folio::PINCOUNT, 92),
            (folio::MM_ID_MAPCOUNT, 96),
            (folio::MM_IDS, 104),
            (folio::MAPCOUNT_1, 112),
            (folio::REFCOUNT_1, 116),
            (folio::NR_PAGES, 120),
            (folio::FLAGS_2, 128),
            (folio::HEAD_2, 136),
            (folio::DEFERRED_LIST, 144),
            (folio::FLAGS_3, 192),
            (folio::HEAD_3, 200),
        ];
        for (ours, theirs) in kernel {
            assert_eq!(ours, theirs);
        }
    }
}
