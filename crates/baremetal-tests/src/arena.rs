//! The guest RAM the checks run on, handed out as disjoint byte slices.

use core::cell::Cell;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::{fmt, slice};

/// A range of the guest's RAM that belongs to the checks: not the kernel image, its stack or
/// page tables, nor firmware data (the architecture code derives it from the firmware's memory
/// map).
pub(crate) struct Arena {
    base: usize,
    len: usize,
}

impl Arena {
    /// Wraps `[base, base + len)`.
    ///
    /// # Safety
    ///
    /// The range must be RAM, mapped writable at the same virtual address as normal
    /// (cacheable) memory for as long as the `Arena` lives, and nothing else in the program (or
    /// any device) may access it during that time.
    pub(crate) const unsafe fn new(base: usize, len: usize) -> Self {
        Arena { base, len }
    }

    /// A bump allocator over the whole arena; the memory is reused by the next `bump()`.
    pub(crate) fn bump(&mut self) -> Bump<'_> {
        Bump { next: Cell::new(self.base), end: self.base + self.len, _arena: PhantomData }
    }
}

/// The arena had too little RAM left for a check's buffers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OutOfRam {
    /// Bytes requested.
    pub(crate) wanted: usize,
    /// Bytes left (before alignment).
    pub(crate) left: usize,
}

impl fmt::Display for OutOfRam {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "test arena exhausted: {} bytes wanted, {} left", self.wanted, self.left)
    }
}

/// Hands out disjoint slices of an [`Arena`] (which it borrows exclusively).
pub(crate) struct Bump<'a> {
    next: Cell<usize>,
    end: usize,
    _arena: PhantomData<&'a mut Arena>,
}

impl Bump<'_> {
    /// `len` bytes aligned to `align` (a power of two), every byte set to `fill`.
    // Hands out `&mut` from `&self` like any bump allocator: each call returns a range no other
    // call returns (see the SAFETY comment), so the slices never alias.
    #[allow(clippy::mut_from_ref)]
    pub(crate) fn bytes(&self, len: usize, align: usize, fill: u8) -> Result<&mut [u8], OutOfRam> {
        let start = self.reserve(len, align)?;
        let p = start as *mut u8;
        // SAFETY: `reserve` returned a range inside the arena that no earlier call handed out
        // and no later call will (the bump pointer only moves forward, and a new `Bump` needs a
        // new exclusive borrow of the arena, which ends every slice of this one). The arena's
        // contract makes it writable normal memory used by nothing else. `write_bytes`
        // initializes every byte, so the `u8` slice is valid.
        unsafe {
            p.write_bytes(fill, len);
            Ok(slice::from_raw_parts_mut(p, len))
        }
    }

    /// `n` uninitialized slots of `T`, aligned for `T`.
    #[allow(clippy::mut_from_ref)] // as for `bytes`
    pub(crate) fn slots<T>(&self, n: usize) -> Result<&mut [MaybeUninit<T>], OutOfRam> {
        let len = n.checked_mul(size_of::<T>()).ok_or(OutOfRam { wanted: usize::MAX, left: self.left() })?;
        let start = self.reserve(len, align_of::<T>())?;
        // SAFETY: as in `bytes`: a disjoint, exclusively owned, suitably aligned range of
        // `n * size_of::<T>()` bytes. `MaybeUninit<T>` has no validity requirement.
        Ok(unsafe { slice::from_raw_parts_mut(start as *mut MaybeUninit<T>, n) })
    }

    /// Moves the bump pointer to the next multiple of `align` plus `offset` (to place the next
    /// buffer at a chosen misalignment).
    pub(crate) fn skip_to(&self, align: usize, offset: usize) -> Result<(), OutOfRam> {
        let at = self.reserve(0, align)?;
        self.reserve(offset, 1).map(|_| ()).map_err(|_| OutOfRam { wanted: offset, left: self.end - at })
    }

    fn left(&self) -> usize {
        self.end - self.next.get()
    }

    fn reserve(&self, len: usize, align: usize) -> Result<usize, OutOfRam> {
        debug_assert!(align.is_power_of_two());
        let err = OutOfRam { wanted: len, left: self.left() };
        let start = self.next.get().checked_add(align - 1).ok_or(err)? & !(align - 1);
        let end = start.checked_add(len).ok_or(err)?;
        if end > self.end {
            return Err(err);
        }
        self.next.set(end);
        Ok(start)
    }
}
