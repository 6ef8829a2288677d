//! The safe typed front end: a streaming writer over `&mut [MaybeUninit<T>]`.
//!
//! Soundness argument, in one place:
//!
//! 1. A [`StreamWriter`] exists only inside [`scope`], which owns it on its own stack frame and
//!    lends the closure a `&mut`. The closure cannot move it out, `mem::forget` it or drop it.
//! 2. [`scope`] runs [`crate::drain`] after the closure, on the normal path and (through a drop
//!    guard) during unwinding, and only then turns the written prefix into `&mut [T]`. So no
//!    safe code can read, overwrite or publish a streamed slot before the fence.
//! 3. The writer is `!Send` and `!Sync`: `drain` orders the stores of the *calling* thread only,
//!    so the stores must be issued on the thread that drains.
//! 4. The writer's lifetime parameter is invariant and universally quantified in [`scope`]'s
//!    closure bound (a "brand"), so the writers of two nested scopes have different types and
//!    cannot be swapped with `mem::swap` to smuggle one out of its scope.
//! 5. Slots are written strictly in order, so "the first `written()` slots are initialized" is
//!    the only bookkeeping needed to hand back a `&mut [T]` of initialized values.
//! 6. Records are [`Record`]s: the backends load them with integer and vector loads, which must
//!    not read padding. A record moved in ([`StreamWriter::push`], [`StreamWriter::fill_with`])
//!    is owned by the writer while its bytes are read and is then forgotten: its bytes now live
//!    in the slot, which the caller owns. Copies of one template ([`StreamWriter::fill`])
//!    need `T: Copy`.

use core::fmt;
use core::marker::PhantomData;
use core::mem::{ManuallyDrop, MaybeUninit};

use crate::Record;

/// Writes `T` records into uninitialized slots, in order, with streaming stores.
///
/// Obtain one with [`scope`]; see the [crate documentation](crate) for the ordering rules it
/// enforces. All fill methods write consecutive slots starting at [`written`](Self::written).
pub struct StreamWriter<'w, T> {
    base: *mut T,
    capacity: usize,
    written: usize,
    /// Invariant in `'w`: the brand of the enclosing [`scope`] call.
    _brand: PhantomData<fn(&'w ()) -> &'w ()>,
    /// `*mut T` makes the writer `!Send + !Sync` (see the module documentation, point 3).
    _slots: PhantomData<*mut T>,
}

/// Returned when a write does not fit in the remaining slots; nothing was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriterFull {
    /// Slots that were requested.
    pub requested: usize,
    /// Slots that were left.
    pub remaining: usize,
}

impl fmt::Display for WriterFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stream writer full: {} slots requested, {} left", self.requested, self.remaining)
    }
}

impl core::error::Error for WriterFull {}

impl<T: Record> StreamWriter<'_, T> {
    /// Total number of slots.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of slots written so far (they are the first `written()` slots).
    #[must_use]
    pub fn written(&self) -> usize {
        self.written
    }

    /// Number of slots still unwritten.
    #[must_use]
    pub fn remaining(&self) -> usize {
        self.capacity - self.written
    }

    /// Streams `value` into the next slot.
    ///
    /// # Errors
    ///
    /// [`WriterFull`] if every slot is written.
    pub fn push(&mut self, value: T) -> Result<(), WriterFull> {
        if self.written == self.capacity {
            return Err(WriterFull { requested: 1, remaining: 0 });
        }
        let value = ManuallyDrop::new(value);
        // SAFETY: `written < capacity`, so the slot is inside the borrowed slice, writable and
        // aligned for a `T`; the slice is exclusively borrowed by the enclosing `scope`, which
        // drains before anything else can access it; `value` is a local that no other thread can
        // reach, and `T: Record` has no uninitialized bytes. Its bytes move into the slot, so the
        // local is not dropped.
        unsafe { crate::store_record(self.base.add(self.written), &*value) };
        self.written += 1;
        Ok(())
    }

    /// Streams `f(i)` into every remaining slot `i` (absolute slot index); returns how many
    /// slots were written.
    ///
    /// Build the record as a value in `f` (copy a template, change fields): the optimizer keeps
    /// it in registers, which is the fast way (see [`crate::store_record`]).
    pub fn fill_with(&mut self, f: impl FnMut(usize) -> T) -> usize {
        let n = self.remaining();
        // SAFETY: `n == remaining()`.
        unsafe { self.fill_with_unchecked(n, f) };
        n
    }

    /// # Safety
    ///
    /// `n <= self.remaining()`.
    #[inline]
    unsafe fn fill_with_unchecked(&mut self, n: usize, mut f: impl FnMut(usize) -> T) {
        let start = self.written;
        for i in start..start + n {
            let value = ManuallyDrop::new(f(i));
            // SAFETY: `i < written + n <= capacity`, so the slot is inside the borrowed slice;
            // `value` is a local (see `push`) whose bytes move into the slot.
            unsafe { crate::store_record(self.base.add(i), &*value) };
            // Count as we go, so that a panic in `f` leaves `written` exact for the unwinding
            // path of `scope` (which drains; the prefix is never handed out after a panic).
            self.written = i + 1;
        }
    }
}

impl<T: Record + Copy> StreamWriter<'_, T> {
    /// Streams `template` into every remaining slot; returns how many slots were written.
    pub fn fill(&mut self, template: &T) -> usize {
        let n = self.remaining();
        // SAFETY: `n == remaining()`.
        unsafe { self.fill_unchecked(template, n) };
        n
    }

    /// Streams `template` into the next `n` slots.
    ///
    /// # Errors
    ///
    /// [`WriterFull`] if fewer than `n` slots remain (nothing is written).
    pub fn fill_n(&mut self, template: &T, n: usize) -> Result<(), WriterFull> {
        if n > self.remaining() {
            return Err(WriterFull { requested: n, remaining: self.remaining() });
        }
        // SAFETY: `n <= remaining()`.
        unsafe { self.fill_unchecked(template, n) };
        Ok(())
    }

    /// # Safety
    ///
    /// `n <= self.remaining()`.
    #[inline]
    unsafe fn fill_unchecked(&mut self, template: &T, n: usize) {
        // A local copy the optimizer can keep in registers for the whole loop.
        let t = *template;
        let start = self.written;
        for i in start..start + n {
            // SAFETY: `i < written + n <= capacity`: the slot is inside the borrowed slice; `t`
            // is a local copy no other thread can reach, and `T: Record`.
            unsafe { crate::store_record(self.base.add(i), &t) };
        }
        self.written = start + n;
    }
}

impl<T> fmt::Debug for StreamWriter<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamWriter")
            .field("capacity", &self.capacity)
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

/// Drains on drop: makes [`scope`] fence on the unwinding path too.
struct DrainOnDrop;

impl Drop for DrainOnDrop {
    fn drop(&mut self) {
        crate::drain();
    }
}

/// Lends `f` a [`StreamWriter`] over `slots`, drains, and returns the written prefix as
/// initialized `&mut [T]` together with `f`'s result.
///
/// The drain runs after `f` returns and, if `f` panics, while the panic unwinds.
///
/// ```
/// use core::mem::MaybeUninit;
/// let mut slots = [MaybeUninit::<[u64; 8]>::uninit(); 16];
/// let (records, pushed) = stream_hal::scope(&mut slots, |w| {
///     w.push([1; 8]).unwrap();
///     w.fill_n(&[2; 8], 3).unwrap();
///     w.written()
/// });
/// assert_eq!(pushed, 4);
/// assert_eq!(records, &[[1; 8], [2; 8], [2; 8], [2; 8]]);
/// ```
///
/// The writer cannot leave the scope, so the drain cannot be skipped:
///
/// ```compile_fail
/// use core::mem::MaybeUninit;
/// let mut slots = [MaybeUninit::<u64>::uninit(); 4];
/// let mut escaped = None;
/// stream_hal::scope(&mut slots, |w| escaped = Some(w));
/// ```
///
/// It cannot be used from another thread, whose stores this thread's drain would not order:
///
/// ```compile_fail
/// use core::mem::MaybeUninit;
/// let mut slots = [MaybeUninit::<u64>::uninit(); 4];
/// stream_hal::scope(&mut slots, |w| {
///     std::thread::scope(|s| {
///         s.spawn(|| w.push(1));
///     });
/// });
/// ```
///
/// And the writers of two nested scopes have different types, so they cannot be swapped:
///
/// ```compile_fail
/// use core::mem::MaybeUninit;
/// let mut a = [MaybeUninit::<u64>::uninit(); 4];
/// let mut b = [MaybeUninit::<u64>::uninit(); 4];
/// stream_hal::scope(&mut a, |wa| {
///     stream_hal::scope(&mut b, |wb| core::mem::swap(wa, wb));
/// });
/// ```
pub fn scope<'a, T: Record, R>(
    slots: &'a mut [MaybeUninit<T>],
    f: impl for<'w> FnOnce(&mut StreamWriter<'w, T>) -> R,
) -> (&'a mut [T], R) {
    let mut writer = StreamWriter {
        base: slots.as_mut_ptr().cast::<T>(),
        capacity: slots.len(),
        written: 0,
        _brand: PhantomData,
        _slots: PhantomData,
    };
    let guard = DrainOnDrop;
    let result = f(&mut writer);
    drop(guard); // drain()
    let written = writer.written;
    // SAFETY: the first `written` slots were each written with the bytes of a whole, valid `T`
    // (the writer only advances `written` after a store), the stores are ordered by the drain
    // above, and the memory is the exclusively borrowed `slots`, whose lifetime `'a` the result
    // keeps.
    let init = unsafe { core::slice::from_raw_parts_mut(slots.as_mut_ptr().cast::<T>(), written) };
    (init, result)
}

/// Streams `template` into every slot and returns them initialized (drained). A record that is
/// not `Copy` (atomics, cells) is built per slot with [`fill_with`] or [`fill_records`](crate::fill_records)
/// instead; initialized bytes are filled with [`fill_bytes`](crate::fill_bytes).
pub fn fill<'a, T: Record + Copy>(slots: &'a mut [MaybeUninit<T>], template: &T) -> &'a mut [T] {
    scope(slots, |w| {
        w.fill(template);
    })
    .0
}

/// Streams `f(i)` into every slot `i` and returns them initialized (drained).
pub fn fill_with<T: Record>(slots: &mut [MaybeUninit<T>], f: impl FnMut(usize) -> T) -> &mut [T] {
    scope(slots, |w| {
        w.fill_with(f);
    })
    .0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;
    use std::vec::Vec;

    #[derive(Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    struct Rec72 {
        words: [u64; 9],
    }
    // SAFETY: nine `u64`s, no padding.
    unsafe impl Record for Rec72 {}

    #[test]
    fn fills_in_order_and_reports_counts() {
        let mut slots = vec![MaybeUninit::<Rec72>::uninit(); 10];
        let (out, (a, b, c)) = scope(&mut slots, |w| {
            w.push(Rec72 { words: [9; 9] }).unwrap();
            let a = w.fill_n(&Rec72 { words: [1; 9] }, 4);
            let b = w.fill_n(&Rec72 { words: [1; 9] }, 6);
            let c = w.fill_with(|i| Rec72 { words: [i as u64; 9] });
            (a, b, c)
        });
        assert_eq!(a, Ok(()));
        assert_eq!(b, Err(WriterFull { requested: 6, remaining: 5 }));
        assert_eq!(c, 5);
        let expect: Vec<Rec72> =
            [9, 1, 1, 1, 1, 5, 6, 7, 8, 9].iter().map(|&v| Rec72 { words: [v; 9] }).collect();
        assert_eq!(out, &expect[..]);
    }

    #[test]
    fn push_into_full_writer_is_an_error_and_writes_nothing() {
        let mut slots = vec![MaybeUninit::<u64>::uninit(); 1];
        let (out, r) = scope(&mut slots, |w| {
            w.push(1).unwrap();
            w.push(2)
        });
        assert_eq!(r, Err(WriterFull { requested: 1, remaining: 0 }));
        assert_eq!(out, &[1]);
    }

    #[test]
    fn panic_inside_the_scope_unwinds_through_the_drain() {
        let mut slots = vec![MaybeUninit::<u64>::uninit(); 8];
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            scope(&mut slots, |w| {
                w.fill_with(|i| if i == 3 { panic!("generator failed") } else { i as u64 });
            });
        }));
        assert!(caught.is_err());
        // The slots are still usable afterwards through safe code.
        let out = fill(&mut slots, &7);
        assert!(out.iter().all(|&v| v == 7));
    }

    #[test]
    fn zero_sized_and_empty() {
        let mut none: [MaybeUninit<u64>; 0] = [];
        assert!(fill(&mut none, &1).is_empty());
        let mut units = [MaybeUninit::<()>::uninit(); 3];
        assert_eq!(fill(&mut units, &()).len(), 3);
    }
}
