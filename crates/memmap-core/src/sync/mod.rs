//! Synchronization for the shared node: a spin lock (the kernel's `spinlock_t`, usable in
//! `no_std`) and per-block initialization states.
//!
//! Every hand-over of a struct page between threads goes through a [`SpinLock`] or an
//! acquire/release pair on a [`BlockStates`] byte; that is what makes the `node` module's
//! raw-pointer accesses free of data races.

#[cfg(all(test, memmap_core_loom))]
mod loom_tests;

use core::fmt;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::Ordering;

// The atomics the primitives below are built on: core's, or loom's in memmap-core's own test
// build under `--cfg memmap_core_loom` (`loom_tests.rs`, `ci/loom.sh`). The cfg is the crate's
// own and needs `cfg(test)`, so a dependent's `--cfg loom` never reaches it.
#[cfg(not(all(test, memmap_core_loom)))]
pub(crate) use core::sync::atomic::{AtomicBool, AtomicU8};
#[cfg(all(test, memmap_core_loom))]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU8};

#[cfg(all(test, memmap_core_loom, not(feature = "std")))]
compile_error!("`--cfg memmap_core_loom` needs memmap-core's `std` feature (loom runs on std threads)");

/// Spins politely: a CPU hint, and under `std` a yield after a while so that the holder can
/// run on an oversubscribed machine; under loom every turn yields to the model's scheduler.
#[inline]
fn relax(spins: &mut u32) {
    *spins = spins.wrapping_add(1);
    #[cfg(all(test, memmap_core_loom))]
    {
        loom::thread::yield_now();
    }
    #[cfg(all(feature = "std", not(all(test, memmap_core_loom))))]
    if *spins % 64 == 0 {
        std::thread::yield_now();
        return;
    }
    #[cfg(not(all(test, memmap_core_loom)))]
    core::hint::spin_loop();
}

/// The lock's data: in a `core::cell::UnsafeCell`, or under loom in loom's, which reports a
/// too-weak acquire or release as a data race on the data.
#[cfg(not(all(test, memmap_core_loom)))]
mod cell {
    pub(super) struct DataCell<T>(core::cell::UnsafeCell<T>);

    /// Access to the data while the lock is held.
    pub(super) struct Access<T>(*mut T);

    impl<T> DataCell<T> {
        pub(super) const fn new(value: T) -> Self {
            DataCell(core::cell::UnsafeCell::new(value))
        }

        pub(super) fn get_mut(&mut self) -> &mut T {
            self.0.get_mut()
        }

        pub(super) fn into_inner(self) -> T {
            self.0.into_inner()
        }

        /// The access of a new lock holder.
        pub(super) fn access(&self) -> Access<T> {
            Access(self.0.get())
        }
    }

    impl<T> Access<T> {
        /// The pointer to the data (valid, and exclusive to the holder, while the lock is held).
        pub(super) fn ptr(&self) -> *mut T {
            self.0
        }
    }
}

/// The lock's data under loom (see the version without it).
#[cfg(all(test, memmap_core_loom))]
mod cell {
    pub(super) struct DataCell<T>(loom::cell::UnsafeCell<T>);

    /// The tracked access of the lock holder, from taking the lock to releasing it.
    pub(super) struct Access<T>(loom::cell::MutPtr<T>);

    impl<T> DataCell<T> {
        pub(super) fn new(value: T) -> Self {
            DataCell(loom::cell::UnsafeCell::new(value))
        }

        pub(super) fn get_mut(&mut self) -> &mut T {
            // SAFETY: `&mut self` is exclusive: no other access to the value exists, tracked or
            // not, for the returned borrow.
            self.0.with_mut(|p| unsafe { &mut *p })
        }

        pub(super) fn into_inner(self) -> T {
            self.0.into_inner()
        }

        /// The access of a new lock holder.
        pub(super) fn access(&self) -> Access<T> {
            Access(self.0.get_mut())
        }
    }

    impl<T> Access<T> {
        /// The pointer to the data (valid, and exclusive to the holder, while the lock is held).
        pub(super) fn ptr(&self) -> *mut T {
            self.0.with(|p| p)
        }
    }
}

/// The re-entry check (`std`): a hook must not call back into the node it is called from.
///
/// Hooks run under the memmap lock, the innermost node lock; a node lock requested by the
/// thread holding it would spin on itself or invert the lock order, so it panics. Without `std`
/// (no thread identity) and under loom the rule stands unchecked.
#[cfg(all(feature = "std", not(all(test, memmap_core_loom))))]
mod reentry {
    use core::cell::Cell;

    std::thread_local! {
        /// The node whose memmap lock this thread holds (0: none).
        static HOLDING: Cell<u64> = const { Cell::new(0) };
    }

    /// Panics if this thread holds the memmap lock of `node` (never for `node == 0`).
    #[inline]
    pub(super) fn check(node: u64) {
        if node != 0 && HOLDING.try_with(Cell::get) == Ok(node) {
            panic!(
                "memmap-core: a hook called back into the node it was called from (node lock \
                 requested by the thread that holds the node's memmap lock, under which \
                 `cond_resched` and `page_ref_set` run). Hooks must not use their own node: it \
                 would deadlock. Hand the work to a thread that does not wait for the hook."
            );
        }
    }

    /// Records that this thread now holds the memmap lock of `node`; returns what to restore.
    #[inline]
    pub(super) fn enter(node: u64) -> u64 {
        HOLDING.try_with(|h| h.replace(node)).unwrap_or(0)
    }

    /// Undoes [`enter`].
    #[inline]
    pub(super) fn leave(prev: u64) {
        let _ = HOLDING.try_with(|h| h.set(prev));
    }
}

/// A test-and-test-and-set spin lock, as `spin_lock()`/`spin_unlock()`: acquire on lock,
/// release on unlock.
///
/// A lock of a node ([`SpinLock::of_node`]) also carries the node's id for the `reentry` check.
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    /// The node the lock belongs to (0: none). Read by the re-entry check only.
    #[cfg_attr(any(all(test, memmap_core_loom), not(feature = "std")), allow(dead_code))]
    node: u64,
    /// The node runs its hooks under this lock. Read by the re-entry check only.
    #[cfg_attr(any(all(test, memmap_core_loom), not(feature = "std")), allow(dead_code))]
    hooks: bool,
    data: cell::DataCell<T>,
}

// SAFETY: the lock hands out access to `T` to one thread at a time (acquire/release on
// `locked`), so sharing the lock between threads only ever moves `T` between threads: `T: Send`
// suffices, exactly as for `std::sync::Mutex`.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: owning the lock owns the `T`.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    /// A new, unlocked lock of no node (the tests').
    #[cfg(all(test, not(memmap_core_loom)))]
    pub(crate) const fn new(value: T) -> Self {
        Self::with_node(value, 0, false)
    }
    /// A new, unlocked lock of no node (the loom models').
    #[cfg(all(test, memmap_core_loom))]
    pub(crate) fn new(value: T) -> Self {
        Self::with_node(value, 0, false)
    }

    /// A new, unlocked lock of node `node` (a nonzero id).
    pub(crate) fn of_node(value: T, node: u64) -> Self {
        Self::with_node(value, node, false)
    }

    /// A new, unlocked lock of node `node` under which the node calls its hooks: the
    /// innermost of the node's locks.
    pub(crate) fn hooks_of_node(value: T, node: u64) -> Self {
        Self::with_node(value, node, true)
    }

    #[cfg(not(all(test, memmap_core_loom)))]
    const fn with_node(value: T, node: u64, hooks: bool) -> Self {
        SpinLock { locked: AtomicBool::new(false), node, hooks, data: cell::DataCell::new(value) }
    }
    #[cfg(all(test, memmap_core_loom))]
    fn with_node(value: T, node: u64, hooks: bool) -> Self {
        SpinLock { locked: AtomicBool::new(false), node, hooks, data: cell::DataCell::new(value) }
    }

    /// Takes the lock, spinning until it is free.
    ///
    /// # Panics
    ///
    /// With `std`, if this is a lock of a node and the calling thread holds that node's hooks
    /// lock (a hook calling back into its node; see the `reentry` module).
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        #[cfg(all(feature = "std", not(all(test, memmap_core_loom))))]
        reentry::check(self.node);
        let mut spins = 0;
        loop {
            // Acquire (on success): pairs with the Release store in `SpinGuard::drop` of the
            // previous holder, so its writes to the data happen before this holder's accesses.
            // Relaxed on failure: a failed attempt reads nothing through the lock.
            if self.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                #[cfg(all(feature = "std", not(all(test, memmap_core_loom))))]
                let prev = if self.hooks { reentry::enter(self.node) } else { 0 };
                return SpinGuard {
                    lock: self,
                    access: ManuallyDrop::new(self.data.access()),
                    #[cfg(all(feature = "std", not(all(test, memmap_core_loom))))]
                    prev,
                    _not_auto: PhantomData,
                };
            }
            // Relaxed: only a hint that the lock looks free; the compare-exchange above is what
            // acquires it.
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
        // Relaxed: a snapshot for printing; nothing is read through it.
        f.debug_struct("SpinLock").field("locked", &self.locked.load(Ordering::Relaxed)).finish()
    }
}

/// Access to the value of a held [`SpinLock`]; unlocks on drop.
///
/// `Sync` only when `T: Sync` and never `Send`, like `std::sync::MutexGuard` (a `&SpinGuard`
/// hands out `&T`; the guard drops on the thread that locked, whose re-entry state it restores).
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
    /// Dropped (under loom: the tracked access ends) right before the unlock.
    access: ManuallyDrop<cell::Access<T>>,
    /// What the re-entry check restores on unlock.
    #[cfg(all(feature = "std", not(all(test, memmap_core_loom))))]
    prev: u64,
    /// Opts out of the auto traits; the impl below grants exactly the right one.
    _not_auto: PhantomData<*mut T>,
}

// SAFETY: a shared `&SpinGuard` only gives `&T` (through `Deref`), so sharing it between
// threads shares `&T`: sound exactly when `T: Sync`.
unsafe impl<T: Sync> Sync for SpinGuard<'_, T> {}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this thread holds the lock, so no other reference
        // to the data exists; the pointer is the lock's data, valid for the lock's lifetime.
        unsafe { &*self.access.ptr() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`; `&mut self` makes this the only live reference.
        unsafe { &mut *self.access.ptr() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: `access` is dropped exactly once, here, and not used afterwards (`self` is
        // being dropped; no reference from `deref` can outlive the guard).
        unsafe { ManuallyDrop::drop(&mut self.access) };
        #[cfg(all(feature = "std", not(all(test, memmap_core_loom))))]
        if self.lock.hooks {
            reentry::leave(self.prev);
        }
        // Release: pairs with the Acquire compare-exchange in `SpinLock::lock` of the next
        // holder, so this holder's writes to the data happen before its accesses.
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
/// release store of `DONE`; the others wait until they read `DONE` with acquire ordering.
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
    /// Wraps state atomics (all must start at [`BLOCK_UNINIT`] or reflect earlier work): the
    /// tests' and loom models' constructor (the node's is [`BlockStates::from_bytes`]).
    #[cfg(test)]
    #[must_use]
    pub(crate) const fn new(states: &'a [AtomicU8]) -> Self {
        BlockStates { states }
    }

    /// The caller's state bytes as block states, all reset to [`BLOCK_UNINIT`]. The exclusive
    /// borrow moves into the result, so for `'a` every access to the bytes goes through the
    /// atomics.
    #[cfg(not(all(test, memmap_core_loom)))]
    #[must_use]
    pub(crate) fn from_bytes(states: &'a mut [u8]) -> Self {
        states.fill(BLOCK_UNINIT);
        // SAFETY: `AtomicU8` has the same size, alignment and bit validity as `u8` (its
        // documentation guarantees it), so the slice is a valid `[AtomicU8]` of the same length;
        // the `&'a mut` borrow is exclusive and consumed here, so for `'a` no access to these
        // bytes bypasses the atomics.
        let states: &'a [AtomicU8] = unsafe { &*(core::ptr::from_mut(states) as *const [AtomicU8]) };
        BlockStates { states }
    }

    /// Under loom the states are loom's atomics, which cannot live in the caller's bytes: fresh
    /// ones, leaked (only in that test build); the caller's bytes are only reset.
    #[cfg(all(test, memmap_core_loom))]
    #[must_use]
    pub(crate) fn from_bytes(states: &'a mut [u8]) -> Self {
        states.fill(BLOCK_UNINIT);
        let fresh: std::vec::Vec<AtomicU8> = states.iter().map(|_| AtomicU8::new(BLOCK_UNINIT)).collect();
        BlockStates { states: std::boxed::Box::leak(fresh.into_boxed_slice()) }
    }

    /// The state of block `i`. If it is [`BLOCK_DONE`], the block's struct pages are visible to
    /// the caller.
    ///
    /// # Panics
    ///
    /// If `i` is out of range.
    #[inline]
    #[must_use]
    pub(crate) fn get(&self, i: usize) -> u8 {
        // Acquire: pairs with the Release stores of `BLOCK_DONE` in `mark_done` and `run_once`,
        // so the struct pages written before them are visible once `DONE` is read.
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

    /// Publishes block `i` as initialized.
    ///
    /// # Panics
    ///
    /// If `i` is out of range.
    #[inline]
    pub(crate) fn mark_done(&self, i: usize) {
        // Release: pairs with the Acquire load in `get` (`is_done`) and the acquiring loads of
        // `run_once` (its failed compare-exchange, its wait loop) in the threads that find the
        // block done and then read its struct pages.
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
        // Acquire on success: pairs with the Release store in `Reset::drop` of an initializer
        // that panicked, so its partial writes happen before this initializer's. Acquire on
        // failure: when the value read is `DONE` (`AlreadyDone`), pairs with the Release store
        // of `DONE` (below, or in `mark_done`), so the block's pages are visible on return.
        match state.compare_exchange(BLOCK_UNINIT, BLOCK_INITIALIZING, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) => {
                struct Reset<'s>(&'s AtomicU8);
                impl Drop for Reset<'_> {
                    fn drop(&mut self) {
                        // Release: pairs with the Acquire compare-exchange (success) of the
                        // thread that takes over, directly or from the wait loop below.
                        self.0.store(BLOCK_UNINIT, Ordering::Release);
                    }
                }
                let reset = Reset(state);
                init();
                core::mem::forget(reset);
                // Release: pairs with the Acquire load in `get` (`is_done`), the Acquire failure
                // of the compare-exchange above and the Acquire load of the wait loop below.
                state.store(BLOCK_DONE, Ordering::Release);
                RunOnce::Ran
            }
            Err(BLOCK_DONE) => RunOnce::AlreadyDone,
            Err(_) => {
                let mut spins = 0;
                loop {
                    // Acquire: pairs with the Release store of `DONE` above (`Waited`: the
                    // initializer's writes are visible on return). On `UNINIT` the compare-
                    // exchange of the retry acquires again.
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

#[cfg(all(test, not(memmap_core_loom)))]
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
    /// The same for `Send`.
    struct SendProbe<T: ?Sized>(PhantomData<T>);
    trait NotSend {
        const IS_SEND: bool = false;
    }
    impl<T: ?Sized> NotSend for SendProbe<T> {}
    impl<T: ?Sized + Send> SendProbe<T> {
        const IS_SEND: bool = true;
    }

    /// A guard over a `Send + !Sync` value must not be `Sync`: sharing it would let two threads
    /// mutate the value through `&` (a `Cell`) at once. Checked at compile time.
    const _: () = {
        assert!(!<Probe<SpinGuard<'static, core::cell::Cell<u64>>>>::IS_SYNC);
        assert!(<Probe<SpinGuard<'static, u64>>>::IS_SYNC);
        assert!(!<Probe<core::cell::Cell<u64>>>::IS_SYNC, "the probe tells Sync from !Sync");
        assert!(<Probe<SpinLock<core::cell::Cell<u64>>>>::IS_SYNC, "the lock itself is Sync for T: Send");
        // A guard drops on the thread that locked (the re-entry check restores that thread's
        // state on unlock), like `std::sync::MutexGuard`.
        assert!(!<SendProbe<SpinGuard<'static, u64>>>::IS_SEND);
        assert!(<SendProbe<SpinLock<u64>>>::IS_SEND, "the probe tells Send from !Send");
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
