//! Loom models of the spin lock and the block-state machine: every interleaving of two
//! threads, and every value a load may return under the orderings used, with each access to
//! the protected data checked against the happens-before order (loom's `UnsafeCell`). A
//! weakened acquire or release shows up as a data race on that data ("Causality violation").
//!
//! ```sh
//! RUSTFLAGS="--cfg memmap_core_loom" cargo test -p memmap-core --lib sync::loom_tests
//! ```
//!
//! (`ci/loom.sh`.) Which weakened ordering each model catches is recorded in
//! `docs/testing.md`.

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

use super::{AtomicU8, BLOCK_DONE, BLOCK_UNINIT, BlockStates, RunOnce, SpinLock};

/// The data a block's initializer writes and its users read: a stand-in for its struct pages.
struct Block {
    state: AtomicU8,
    pages: UnsafeCell<u64>,
}

impl Block {
    fn new() -> Arc<Block> {
        Arc::new(Block { state: AtomicU8::new(BLOCK_UNINIT), pages: UnsafeCell::new(0) })
    }

    fn states(&self) -> BlockStates<'_> {
        BlockStates::new(core::slice::from_ref(&self.state))
    }

    /// The initializer: writes the pages (a tracked write).
    fn init(&self, v: u64) {
        // SAFETY: only the thread that runs the initializer writes (run_once/the test's own
        // protocol guarantee it; loom checks the claim).
        self.pages.with_mut(|p| unsafe { *p = v });
    }

    /// Reads the pages (a tracked read).
    fn read(&self) -> u64 {
        // SAFETY: called only after the block is published; loom checks the claim.
        self.pages.with(|p| unsafe { *p })
    }
}

/// Two threads increment a counter under the lock: the increments never overlap, and both
/// are seen.
#[test]
fn spin_lock_excludes_and_publishes() {
    loom::model(|| {
        let lock = Arc::new(SpinLock::new(0u64));
        let other = {
            let lock = lock.clone();
            thread::spawn(move || *lock.lock() += 1)
        };
        *lock.lock() += 1;
        other.join().unwrap();
        assert_eq!(*lock.lock(), 2);
    });
}

/// Two threads run the same block's initializer: exactly one runs it, and both see its
/// writes when `run_once` returns, whichever way they got there (`Ran`, `Waited` or
/// `AlreadyDone`).
#[test]
fn run_once_runs_once_and_publishes() {
    loom::model(|| {
        let b = Block::new();
        let other = {
            let b = b.clone();
            thread::spawn(move || {
                let r = b.states().run_once(0, || b.init(42));
                assert_eq!(b.read(), 42);
                r
            })
        };
        let mine = b.states().run_once(0, || b.init(42));
        assert_eq!(b.read(), 42);
        let theirs = other.join().unwrap();
        assert_eq!([mine, theirs].iter().filter(|&&r| r == RunOnce::Ran).count(), 1, "{mine:?} {theirs:?}");
        assert_eq!(b.states().get(0), BLOCK_DONE);
    });
}

/// The first initializer panics after a partial write: the block goes back to `UNINIT` and
/// the other thread takes over (directly, or from its wait loop), writing the pages again: the
/// two writes are ordered, and the block ends initialized by the second. (Or the other thread
/// runs first and the panicking one waits for it or finds the block done.)
#[test]
fn run_once_after_a_panicking_initializer() {
    quiet_panics("initializer fails");
    loom::model(|| {
        let b = Block::new();
        let other = {
            let b = b.clone();
            thread::spawn(move || {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    b.states().run_once(0, || {
                        b.init(1);
                        panic!("initializer fails");
                    })
                }))
            })
        };
        let mine = b.states().run_once(0, || b.init(2));
        let theirs = other.join().unwrap();
        // This thread's initializer is the only one that returns: it always runs.
        assert_eq!(mine, RunOnce::Ran);
        // The other one ran first (and panicked), or found the block being initialized or done.
        assert!(matches!(theirs, Err(_) | Ok(RunOnce::Waited | RunOnce::AlreadyDone)), "{theirs:?}");
        assert_eq!(b.read(), 2);
        assert_eq!(b.states().get(0), BLOCK_DONE);
    });
}

/// The expected panics of a model print nothing (loom runs the model once per interleaving);
/// any other panic is printed as usual.
fn quiet_panics(expected: &'static str) {
    let previous = std::panic::take_hook();
    std::panic::set_hook(std::boxed::Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() != Some(&expected) {
            previous(info);
        }
    }));
}

/// `mark_done` publishes (deferred init): a thread that finds the block done reads what the
/// initializing thread wrote before marking it.
#[test]
fn mark_done_publishes_to_is_done() {
    loom::model(|| {
        let b = Block::new();
        let other = {
            let b = b.clone();
            thread::spawn(move || {
                b.init(9);
                b.states().mark_done(0);
            })
        };
        if b.states().is_done(0) {
            assert_eq!(b.read(), 9);
        }
        other.join().unwrap();
    });
}
