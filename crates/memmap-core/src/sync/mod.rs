//! Synchronization for the shared node: a spin lock (the kernel's `spinlock_t`, usable in
//! `no_std`) and per-block initialization states.
//!
//! The node's struct pages are written by several threads at once (padata workers of deferred
//! init, allocating threads expanding on-demand blocks), always on disjoint pages, and every
//! hand-over of a page from one thread to another goes through a [`SpinLock`] (zone lock,
//! memmap lock) or an acquire/release pair on a [`BlockStates`] byte. That is what makes the
//! raw-pointer accesses of the `node` module free of data races (ThreadSanitizer runs the concurrency
//! tests).

pub(crate) mod padata;

use core::cell::UnsafeCell;
use core::fmt;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// Spins politely: a CPU hint, and under `std` a yield after a while, so that waiting threads
/// on an oversubscribed machine (or under Miri's scheduler) let the holder run.
#[inline]
fn relax(spins: &mut u32) {
    *spins = spins.wrapping_add(1);
    #[cfg(feature = "std")]
    if *spins % 64 == 0 {
        std::thread::yield_now();
        return;
    }
    core::hint::spin_loop();
}

/// A test-and-test-and-set spin lock, as `spin_lock()`/`spin_unlock()`: acquire on lock,
/// release on unlock.
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    data: UnsafeCell<T>,
}

// SAFETY: the lock hands out access to `T` to one thread at a time (acquire/release on
// `locked`), so sharing the lock between threads only ever moves `T` between threads: `T: Send`
// suffices, exactly as for `std::sync::Mutex`.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: owning the lock owns the `T`.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    /// A new, unlocked lock.
    pub(crate) const fn new(value: T) -> Self {
        SpinLock { locked: AtomicBool::new(false), data: UnsafeCell::new(value) }
    }

    /// Takes the lock, spinning until it is free.
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        let mut spins = 0;
        loop {
            if self.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return SpinGuard { lock: self, _not_auto: PhantomData };
            }
            while self.locked.load(Ordering::Relaxed) {
                relax(&mut spins);
            }
        }
    }

    /// The value, through exclusive access to the lock (no locking needed).
    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    /// Consumes the lock.
    pub(crate) fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T> fmt::Debug for SpinLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpinLock").field("locked", &self.locked.load(Ordering::Relaxed)).finish()
    }
}

/// Access to the value of a held [`SpinLock`]; unlocks on drop.
///
/// `Sync` only when `T: Sync` (like `std::sync::MutexGuard`): a `&SpinGuard` hands out `&T`,
/// so sharing the guard between threads shares the `T`. Without the explicit impls below the
/// guard would be `Sync` whenever `T: Send` (through `&SpinLock<T>`), and two threads holding
/// `&SpinGuard<Cell<_>>` could race on the cell.
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
    /// Opts out of the auto traits; the impls below grant exactly the right ones.
    _not_auto: PhantomData<*mut T>,
}

// SAFETY: sending the guard sends the exclusive access to `T` it represents (`&mut T` through
// `DerefMut`) and the duty to release the lock; a spin lock can be released from any thread
// (the release store in `Drop` pairs with the acquiring compare-exchange in `lock` wherever it
// runs). That is sound exactly when `T: Send`.
unsafe impl<T: Send> Send for SpinGuard<'_, T> {}
// SAFETY: a shared `&SpinGuard` only gives `&T` (through `Deref`), so sharing it between
// threads shares `&T`: sound exactly when `T: Sync`.
unsafe impl<T: Sync> Sync for SpinGuard<'_, T> {}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this thread holds the lock, so no other reference
        // to the data exists.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`; `&mut self` makes this the only live reference.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

/// State of a block whose struct pages have not been written.
pub(crate) const BLOCK_UNINIT: u8 = 0;
/// State of a block being initialized by one thread; the others wait.
pub(crate) const BLOCK_INITIALIZING: u8 = 1;
/// State of a block whose struct pages are all initialized (except `MEMBLOCK_RSRV_NOINIT`
/// pages, which belong to their owner).
pub(crate) const BLOCK_DONE: u8 = 2;

/// Per-block initialization states (one byte per pageblock of a node), caller-provided.
///
/// A block goes `UNINIT → INITIALIZING → DONE` exactly once. The thread that moves it to
/// `INITIALIZING` (a compare-and-swap) writes the block's struct pages and publishes them with a
/// release store of `DONE`; every other thread that finds the block `INITIALIZING` waits until it
/// reads `DONE` with acquire ordering, after which the writes are visible to it. This is how the
/// on-demand expansion of the 2013 RFC runs once when two threads touch the same block, and how
/// deferred init publishes the blocks it finished.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockStates<'a> {
    states: &'a [AtomicU8],
}

/// What [`BlockStates::run_once`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunOnce {
    /// This call ran the initializer.
    Ran,
    /// The block was already initialized.
    AlreadyDone,
    /// Another thread was initializing it; this call waited for it to finish.
    Waited,
}

impl<'a> BlockStates<'a> {
    /// Wraps caller-provided state bytes (all must start at [`BLOCK_UNINIT`] or reflect
    /// earlier work).
    #[must_use]
    pub(crate) const fn new(states: &'a [AtomicU8]) -> Self {
        BlockStates { states }
    }

    /// The state of block `i` (acquire: if it is [`BLOCK_DONE`], the block's struct pages are
    /// visible to the caller).
    ///
    /// # Panics
    ///
    /// If `i` is out of range.
    #[inline]
    #[must_use]
    pub(crate) fn get(&self, i: usize) -> u8 {
        self.states[i].load(Ordering::Acquire)
    }

    /// Whether block `i` is [`BLOCK_DONE`].
    ///
    /// # Panics
    ///
    /// If `i` is out of range.
    #[inline]
    #[must_use]
    pub(crate) fn is_done(&self, i: usize) -> bool {
        self.get(i) == BLOCK_DONE
    }

    /// Publishes block `i` as initialized (release).
    ///
    /// # Panics
    ///
    /// If `i` is out of range.
    #[inline]
    pub(crate) fn mark_done(&self, i: usize) {
        self.states[i].store(BLOCK_DONE, Ordering::Release);
    }

    /// Runs `init` for block `i` unless it ran (or is running) already; returns once the block is
    /// [`BLOCK_DONE`]. Exactly one of any number of concurrent callers runs `init`.
    ///
    /// If `init` panics the block stays `INITIALIZING` and later callers would wait forever, so
    /// the state is reset to `UNINIT` while unwinding.
    ///
    /// # Panics
    ///
    /// If `i` is out of range, or if `init` panics.
    pub(crate) fn run_once(&self, i: usize, init: impl FnOnce()) -> RunOnce {
        let state = &self.states[i];
        match state.compare_exchange(BLOCK_UNINIT, BLOCK_INITIALIZING, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) => {
                struct Reset<'s>(&'s AtomicU8);
                impl Drop for Reset<'_> {
                    fn drop(&mut self) {
                        self.0.store(BLOCK_UNINIT, Ordering::Release);
                    }
                }
                let reset = Reset(state);
                init();
                core::mem::forget(reset);
                state.store(BLOCK_DONE, Ordering::Release);
                RunOnce::Ran
            }
            Err(BLOCK_DONE) => RunOnce::AlreadyDone,
            Err(_) => {
                let mut spins = 0;
                loop {
                    match state.load(Ordering::Acquire) {
                        BLOCK_DONE => return RunOnce::Waited,
                        // The initializer panicked and reset the block: take over.
                        BLOCK_UNINIT => return self.run_once(i, init),
                        _ => relax(&mut spins),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// `impls::<T>()` is `true` when `T: Sync`: the inherent associated const wins over the
    /// blanket trait's only when its bound holds (the negative-trait assertion trick of
    /// `static_assertions::assert_not_impl_any!`).
    struct Probe<T: ?Sized>(PhantomData<T>);
    trait NotSync {
        const IS_SYNC: bool = false;
    }
    impl<T: ?Sized> NotSync for Probe<T> {}
    impl<T: ?Sized + Sync> Probe<T> {
        const IS_SYNC: bool = true;
    }

    /// A guard over a `Send + !Sync` value must not be `Sync`: sharing it would let two threads
    /// mutate the value through `&` (a `Cell`) at once. Checked at compile time.
    const _: () = {
        assert!(!<Probe<SpinGuard<'static, core::cell::Cell<u64>>>>::IS_SYNC);
        assert!(<Probe<SpinGuard<'static, u64>>>::IS_SYNC);
        assert!(!<Probe<core::cell::Cell<u64>>>::IS_SYNC, "the probe tells Sync from !Sync");
        assert!(<Probe<SpinLock<core::cell::Cell<u64>>>>::IS_SYNC, "the lock itself is Sync for T: Send");
    };

    #[test]
    fn lock_gives_exclusive_access() {
        let lock = SpinLock::new(0u64);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..if cfg!(miri) { 20 } else { 2000 } {
                        *lock.lock() += 1;
                    }
                });
            }
        });
        assert_eq!(lock.into_inner(), if cfg!(miri) { 80 } else { 8000 });
    }

    #[test]
    fn run_once_states() {
        let v: Vec<AtomicU8> = (0..2).map(|_| AtomicU8::new(BLOCK_UNINIT)).collect();
        let st = BlockStates::new(&v);
        let mut n = 0;
        assert_eq!(st.run_once(1, || n += 1), RunOnce::Ran);
        assert_eq!(st.run_once(1, || n += 1), RunOnce::AlreadyDone);
        assert_eq!(n, 1);
        assert!(st.is_done(1) && !st.is_done(0));
    }

    #[test]
    fn a_panicking_initializer_leaves_the_block_uninit() {
        let v: Vec<AtomicU8> = (0..1).map(|_| AtomicU8::new(BLOCK_UNINIT)).collect();
        let st = BlockStates::new(&v);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| st.run_once(0, || panic!("boom"))));
        assert!(r.is_err());
        assert_eq!(st.get(0), BLOCK_UNINIT);
        assert_eq!(st.run_once(0, || {}), RunOnce::Ran);
    }

    /// `BlockStates::run_once`: any number of threads touching one block initialize it once, and
    /// all of them return only after the initialization is visible.
    #[test]
    fn run_once_under_contention_initializes_once() {
        use std::sync::atomic::AtomicU64;
        let states: Vec<AtomicU8> = (0..4).map(|_| AtomicU8::new(BLOCK_UNINIT)).collect();
        let st = BlockStates::new(&states);
        let runs = AtomicU64::new(0);
        let data = std::sync::Mutex::new(0u64);
        let threads = if cfg!(miri) { 3 } else { 8 };
        let outcomes: Vec<RunOnce> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let r = st.run_once(2, || {
                            runs.fetch_add(1, Ordering::Relaxed);
                            std::thread::yield_now();
                            *data.lock().unwrap() = 42;
                        });
                        assert_eq!(*data.lock().unwrap(), 42, "returned before the block was initialized");
                        r
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(runs.load(Ordering::Relaxed), 1);
        assert_eq!(outcomes.iter().filter(|&&o| o == RunOnce::Ran).count(), 1);
        assert!(st.is_done(2) && !st.is_done(1));
    }
}
