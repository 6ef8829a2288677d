//! [`Record`]: the bound that makes streaming a value's bytes sound.

/// A type whose values can be copied byte for byte by the streaming stores: **every byte of
/// every value is initialized**.
///
/// The backends load a record with integer and vector loads, and loading a padding byte as an
/// integer is undefined behaviour, so `T: Copy` is not enough.
///
/// Implemented for the primitives, the atomics, `UnsafeCell` and `Cell` of a record, and arrays
/// of records. For your own types, **without `unsafe`**: a derive that proves there is no
/// padding, then this crate's macro that implements `Record` on that proof:
///
/// * feature `bytemuck`: `#[derive(bytemuck::NoUninit)]` (or `Pod`) on the type, then
///   `stream_hal::bytemuck_record!(Type)`;
/// * feature `zerocopy`: `#[derive(zerocopy::IntoBytes)]`, then
///   `stream_hal::zerocopy_record!(Type)` (also for slots with atomics or `UnsafeCell`).
///
/// **With `unsafe impl`**, for `#[repr(C)]` types without padding whose fields are all
/// `Record`; a `const` assertion on the size does the derives' check by hand:
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
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `stream_hal::Record`: stream-hal copies only types whose every byte is initialized (no padding)",
    label = "`{Self}` does not implement `stream_hal::Record`",
    note = "with stream-hal's `bytemuck` feature: `#[derive(bytemuck::NoUninit)]` on the type, then `stream_hal::bytemuck_record!({Self});`",
    note = "with stream-hal's `zerocopy` feature: `#[derive(zerocopy::IntoBytes)]`, then `stream_hal::zerocopy_record!({Self});`",
    note = "or, for a `#[repr(C)]` type without padding whose fields are all `Record`s: `unsafe impl stream_hal::Record for {Self} {{}}` with a `// SAFETY:` comment"
)]
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

// SAFETY: `UnsafeCell<T>` and `Cell<T>` have the in-memory representation of `T` (std
// documents both), so their bytes are initialized exactly when `T`'s are. Neither is `Copy`,
// so the by-reference fills (`fill`, `template_fill`, bounded by `Copy`) never read one that
// another thread could be writing: the value-taking paths (`fill_with`, `fill_records`,
// `StreamWriter::push`) store a value the caller handed over, and `store_record` leaves that
// rule to its caller, as for atomics.
unsafe impl<T: Record> Record for core::cell::UnsafeCell<T> {}
// SAFETY: as for `UnsafeCell<T>` above.
unsafe impl<T: Record> Record for core::cell::Cell<T> {}

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

/// Implements [`Record`] for types that implement `bytemuck::NoUninit` (feature `bytemuck`).
///
/// ```
/// # #[cfg(feature = "bytemuck")] {
/// use core::mem::MaybeUninit;
///
/// /// 8 + 4 + 4 + 48 = 64 bytes: the derive checks that there is no padding.
/// #[derive(Clone, Copy, bytemuck::NoUninit)]
/// #[repr(C, align(64))]
/// struct FrameMeta {
///     paddr: u64,
///     refcount: u32,
///     kind: u32,
///     storage: [u64; 6],
/// }
/// stream_hal::bytemuck_record!(FrameMeta);
///
/// let mut slots = vec![MaybeUninit::<FrameMeta>::uninit(); 256];
/// let frames = stream_hal::fill_with(&mut slots, |i| FrameMeta { paddr: i as u64 * 4096, refcount: 0, kind: 7, storage: [0; 6] });
/// assert_eq!(frames[3].paddr, 3 * 4096);
/// # }
/// ```
///
/// A padded type is refused by the derive, so the macro has nothing to implement:
///
/// ```compile_fail
/// # #[cfg(not(feature = "bytemuck"))] compile_error!("needs the bytemuck feature");
/// #[derive(Clone, Copy, bytemuck::NoUninit)]
/// #[repr(C)]
/// struct Padded { a: u8, b: u64 } // 7 padding bytes after `a`
/// stream_hal::bytemuck_record!(Padded);
/// ```
#[cfg(feature = "bytemuck")]
#[macro_export]
macro_rules! bytemuck_record {
    ($($t:ty),+ $(,)?) => {$(
        const _: () = {
            /// Compiles only for `T: bytemuck::NoUninit`.
            const fn is_no_uninit<T: $crate::__private::bytemuck::NoUninit>() {}
            is_no_uninit::<$t>();
        };
        // SAFETY: `$t: bytemuck::NoUninit` (the constant above does not compile otherwise), and
        // `NoUninit`'s safety contract is that no value of the type has an uninitialized or
        // padding byte, which is `Record`'s contract.
        unsafe impl $crate::Record for $t {}
    )+};
}

/// Implements [`Record`] for types that implement `zerocopy::IntoBytes` (feature `zerocopy`).
///
/// ```
/// # #[cfg(feature = "zerocopy")] {
/// use core::mem::MaybeUninit;
///
/// #[derive(Clone, Copy, zerocopy::IntoBytes, zerocopy::Immutable)]
/// #[repr(C)]
/// struct Descriptor {
///     addr: u64,
///     len: u32,
///     flags: u16,
///     next: u16,
/// }
/// stream_hal::zerocopy_record!(Descriptor);
///
/// let mut ring = vec![MaybeUninit::<Descriptor>::uninit(); 128];
/// let ring = stream_hal::fill_with(&mut ring, |i| Descriptor { addr: 0, len: 0, flags: 0, next: (i as u16 + 1) % 128 });
/// assert_eq!(ring[127].next, 0);
/// # }
/// ```
///
/// A slot with interior mutability (`UnsafeCell`, atomics) needs no `unsafe` either:
///
/// ```
/// # #[cfg(feature = "zerocopy")] {
/// use core::cell::UnsafeCell;
/// use core::mem::MaybeUninit;
/// use core::sync::atomic::AtomicU32;
///
/// #[derive(zerocopy::IntoBytes)]
/// #[repr(C)]
/// struct MetaSlot {
///     storage: UnsafeCell<[u8; 56]>,
///     refcount: AtomicU32,
///     vtable_id: u32,
/// }
/// stream_hal::zerocopy_record!(MetaSlot);
///
/// let mut slots: Vec<_> = (0..256).map(|_| MaybeUninit::<MetaSlot>::uninit()).collect();
/// let slots = stream_hal::fill_with(&mut slots, |i| MetaSlot {
///     storage: UnsafeCell::new([0; 56]),
///     refcount: AtomicU32::new(0),
///     vtable_id: i as u32,
/// });
/// assert_eq!(slots[255].vtable_id, 255);
/// # }
/// ```
///
/// A padded type is refused by zerocopy's derive:
///
/// ```compile_fail
/// # #[cfg(not(feature = "zerocopy"))] compile_error!("needs the zerocopy feature");
/// #[derive(Clone, Copy, zerocopy::IntoBytes, zerocopy::Immutable)]
/// #[repr(C)]
/// struct Padded { a: u8, b: u64 }
/// stream_hal::zerocopy_record!(Padded);
/// ```
#[cfg(feature = "zerocopy")]
#[macro_export]
macro_rules! zerocopy_record {
    ($($t:ty),+ $(,)?) => {$(
        const _: () = {
            /// Compiles only for `T: zerocopy::IntoBytes`.
            const fn is_into_bytes<T: $crate::__private::zerocopy::IntoBytes>() {}
            is_into_bytes::<$t>();
        };
        // SAFETY: `$t: zerocopy::IntoBytes` (the constant above does not compile otherwise),
        // whose safety contract is that every byte of every value is initialized (no padding),
        // which is `Record`'s contract. Interior mutability (`UnsafeCell`, atomics) needs no
        // bound here: the fills that read a record by reference require `Copy`, which no
        // interior-mutable type is, and `store_record` leaves that rule to its caller.
        unsafe impl $crate::Record for $t {}
    )+};
}

/// `bytemuck_record!` without the `bytemuck` feature: the error names the feature to turn on.
#[cfg(not(feature = "bytemuck"))]
#[doc(hidden)]
#[macro_export]
macro_rules! bytemuck_record {
    ($($t:tt)*) => {
        ::core::compile_error!(
            "`stream_hal::bytemuck_record!` needs stream-hal's `bytemuck` feature: \
             stream-hal = { version = \"0.1\", features = [\"bytemuck\"] }"
        );
    };
}

/// `zerocopy_record!` without the `zerocopy` feature: the error names the feature to turn on.
#[cfg(not(feature = "zerocopy"))]
#[doc(hidden)]
#[macro_export]
macro_rules! zerocopy_record {
    ($($t:tt)*) => {
        ::core::compile_error!(
            "`stream_hal::zerocopy_record!` needs stream-hal's `zerocopy` feature: \
             stream-hal = { version = \"0.1\", features = [\"zerocopy\"] }"
        );
    };
}
