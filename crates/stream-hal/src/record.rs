//! [`Record`]: the bound that makes streaming a value's bytes sound.

/// A type whose values can be copied byte for byte by the streaming stores: **every byte of
/// every value is initialized**.
///
/// The streaming backends load a record with integer and vector loads (`movdqu`, 8-byte loads
/// feeding `movnti` or `stnp`) before they store it. Loading a padding byte as part of an
/// integer is undefined behaviour in Rust (Miri: "constructing invalid value ... uninitialized
/// memory"), so `T: Copy` is not enough: a `#[repr(C, align(64))] struct Line([u64; 9])` has 56
/// bytes of padding. `Record` rules that out at compile time.
///
/// Implemented for the integer, floating-point, `bool` and `char` types, the atomics, and arrays
/// of records. Implement it for your own `#[repr(C)]` (or `#[repr(transparent)]`) types whose
/// fields are all `Record` and which have no padding; a type that derives
/// `bytemuck::NoUninit` or zerocopy's `IntoBytes` meets the contract, and those derives check
/// it for you:
///
/// ```
/// use core::sync::atomic::{AtomicU32, AtomicU64};
///
/// /// Per-frame metadata in the style of a Rust kernel's frame table (Asterinas' `MetaSlot`
/// /// keeps atomics in a 64-byte slot): 8 + 4 + 4 + 6 * 8 = 64 bytes, no padding.
/// #[repr(C, align(64))]
/// struct FrameMeta {
///     paddr: u64,
///     refcount: AtomicU32,
///     kind: u32,
///     storage: [AtomicU64; 6],
/// }
///
/// // SAFETY: `repr(C)`, every field is a `Record`, and the fields fill all 64 bytes (the
/// // assertion below proves it), so no value of `FrameMeta` has an uninitialized byte.
/// unsafe impl stream_hal::Record for FrameMeta {}
/// const _: () = assert!(size_of::<FrameMeta>() == 8 + 4 + 4 + 6 * 8);
///
/// let mut slots: Vec<_> = (0..1024).map(|_| core::mem::MaybeUninit::<FrameMeta>::uninit()).collect();
/// let frames = stream_hal::fill_with(&mut slots, |i| FrameMeta {
///     paddr: (1 << 30) + i as u64 * 4096,
///     refcount: AtomicU32::new(0),
///     kind: 7,
///     storage: Default::default(),
/// });
/// assert_eq!(frames[3].paddr, (1 << 30) + 3 * 4096);
/// ```
///
/// A type with padding does not compile:
///
/// ```compile_fail
/// use core::mem::MaybeUninit;
/// #[derive(Clone, Copy)]
/// #[repr(C, align(64))]
/// struct Line([u64; 9]); // 72 bytes of data, 128 bytes of size: 56 padding bytes
/// let mut slots = [MaybeUninit::<Line>::uninit(); 4];
/// stream_hal::fill(&mut slots, &Line([0; 9]));
/// ```
///
/// # Safety
///
/// Every byte of every value of the type must be initialized: no padding (between fields or at
/// the end), no `MaybeUninit` or union fields that may hold uninitialized bytes, and every field
/// itself such a type. Pointers and references are not `Record`s (a byte copy would drop their
/// provenance).
pub unsafe trait Record: Sized {}

macro_rules! records {
    ($($t:ty),* $(,)?) => {
        $(
            // SAFETY: a primitive with no padding; every value's bytes are initialized.
            unsafe impl Record for $t {}
        )*
    };
}

records!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64, bool, char, ());

// SAFETY: an array has no padding between its elements (its size is `N * size_of::<T>()`), so
// its bytes are initialized exactly when every element's are.
unsafe impl<T: Record, const N: usize> Record for [T; N] {}

macro_rules! atomic_records {
    ($($width:literal => $($t:ident),*;)*) => {
        $($(
            #[cfg(target_has_atomic = $width)]
            // SAFETY: an atomic has the size and bit validity of its integer (or `bool`), with
            // no padding.
            unsafe impl Record for core::sync::atomic::$t {}
        )*)*
    };
}

atomic_records! {
    "8" => AtomicU8, AtomicI8, AtomicBool;
    "16" => AtomicU16, AtomicI16;
    "32" => AtomicU32, AtomicI32;
    "64" => AtomicU64, AtomicI64;
    "ptr" => AtomicUsize, AtomicIsize;
}
