//! A hook that calls back into the node it is called from.
//!
//! The node calls its hooks (`cond_resched`, the `page_ref_set` tracepoint) while it holds its
//! memmap lock, the innermost of its spin locks (resize lock, then zone locks, then memmap
//! lock). A hook that allocates or frees from that node would take the node's locks from under
//! the memmap lock: the memmap lock itself (a self-deadlock: the lock spins forever on its own
//! holder), or a zone lock (the order inverted: a deadlock with any thread that holds the zone
//! lock and waits for the memmap lock, as an on-demand expansion does). The rule is that a
//! hook must not call into the node it is called from; with `std`, a call that does panics
//! with a message naming the rule instead of deadlocking, the first time it happens and
//! whether or not it would have deadlocked this time. Calls into another node are allowed.
//!
//! `Node::boot` cannot be re-entered from its hooks: the node does not exist outside `boot`
//! until `boot` returns. What a hook can reach is a booted node: deferred init, on-demand
//! expansion, `deferred_grow_zone`, and the tracepoint on allocation and free.
//!
//! Every scenario runs on its own thread with a timeout, so that a deadlock fails the test
//! instead of hanging it. The nodes are leaked (`'static`), so that a hook can find its node
//! through a `static` once it is booted.

mod support;

use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use memmap_core::{
    BootOptions, Gfp, InitHooks, InitMode, KernelConfig, Node, NodeLayout, Page64, PageBlock, PfnRange,
    ZoneSpan,
};
use support::{Storage, tiny};

const ZONE: u32 = 2;
/// What a scenario may take before it counts as deadlocked.
const TIMEOUT: Duration = Duration::from_secs(if cfg!(miri) { 600 } else { 20 });

type Slot = OnceLock<&'static Node<'static, Page64, Reenter>>;

/// What the hook does with the node it finds in its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// Allocates one page (and keeps it).
    Alloc,
    /// Allocates one page and frees it again.
    AllocFree,
}

/// Hooks that call into the node in `slot` from `cond_resched` (and, with `from_tracepoint`,
/// from the `page_ref_set` tracepoint), once the slot is filled.
struct Reenter {
    slot: &'static Slot,
    action: Action,
    from_resched: bool,
    tracepoint: bool,
    from_tracepoint: bool,
    /// Allocations the hook made.
    held: Vec<PageBlock>,
    calls: u64,
}

impl Reenter {
    fn new(slot: &'static Slot, action: Action) -> Self {
        Reenter {
            slot,
            action,
            from_resched: true,
            tracepoint: false,
            from_tracepoint: false,
            held: Vec::new(),
            calls: 0,
        }
    }

    fn call_into_node(&mut self) {
        let Some(node) = self.slot.get() else { return };
        self.calls += 1;
        if let Ok(b) = node.alloc_pages(ZONE, 0, Gfp::NONE) {
            match self.action {
                Action::Alloc => self.held.push(b),
                Action::AllocFree => node.free_pages(b).expect("free"),
            }
        }
    }
}

impl InitHooks for Reenter {
    fn cond_resched(&mut self, _pfn: u64) {
        if self.from_resched {
            self.call_into_node();
        }
    }
    fn page_ref_tracepoint_enabled(&self) -> bool {
        self.tracepoint
    }
    fn page_ref_set(&mut self, _event: &memmap_core::PageRefEvent) {
        if self.from_tracepoint {
            self.call_into_node();
        }
    }
}

/// A pointer to something a test leaked (never dereferenced).
struct Leaked(#[allow(dead_code)] *const ());

// SAFETY: `Leaked` is only stored, never dereferenced, so sending it to another thread cannot
// give that thread access to anything.
unsafe impl Send for Leaked {}

/// What the tests leak, reachable from a static: a scenario's thread may still spin on its node
/// when the test ends, so nothing is freed, and Miri's leak check does not count what a static
/// reaches.
static LEAKED: Mutex<Vec<Leaked>> = Mutex::new(Vec::new());

/// `Box::leak`, with the allocation kept in [`LEAKED`].
fn leak<T>(value: T) -> &'static mut T {
    let r = Box::leak(Box::new(value));
    LEAKED.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(Leaked((&raw const *r).cast()));
    r
}

/// A deferred node of three sections in one zone (the first section initialized at boot, the
/// other two deferred), or an on-demand node of the same span.
fn layout() -> NodeLayout<'static> {
    let pps = tiny().pages_per_section();
    let zones: &'static [ZoneSpan] = leak([ZoneSpan::new(ZONE, pps, 4 * pps)]);
    let memory: &'static [PfnRange] = leak([PfnRange::new(pps, 4 * pps)]);
    NodeLayout { nid: 0, zones, memory, reserved: &[] }
}

/// Boots a leaked node with `hooks` and publishes it in `hooks.slot`.
fn boot(cfg: KernelConfig, mode: InitMode, hooks: Reenter) -> &'static Node<'static, Page64, Reenter> {
    let slot = hooks.slot;
    boot_into(cfg, mode, hooks, slot)
}

/// Boots a leaked node with `hooks` and publishes it in `slot`.
fn boot_into(
    cfg: KernelConfig,
    mode: InitMode,
    hooks: Reenter,
    slot: &'static Slot,
) -> &'static Node<'static, Page64, Reenter> {
    let l = layout();
    let st: &'static mut Storage = leak(Storage::new(&cfg, l.span(), false));
    let (node, _) = st.boot_with(cfg, l, &BootOptions::new(mode), hooks);
    let node: &'static Node<'static, Page64, Reenter> = leak(node);
    assert!(slot.set(node).is_ok(), "one node per slot");
    node
}

/// How a scenario ended.
#[derive(Debug)]
enum Outcome {
    /// It returned.
    Returned,
    /// It panicked with this message.
    Panicked(String),
}

/// Runs `f` on its own thread; a scenario that does not end within [`TIMEOUT`] is a deadlock
/// and fails the test (the spinning thread is left behind).
fn run(what: &str, f: impl FnOnce() + Send + 'static) -> Outcome {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(match r {
            Ok(()) => Outcome::Returned,
            Err(e) => Outcome::Panicked(
                e.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_string()))
                    .unwrap_or_default(),
            ),
        });
    });
    match rx.recv_timeout(TIMEOUT) {
        Ok(o) => o,
        Err(_) => panic!("{what}: deadlocked (no return and no panic within {TIMEOUT:?})"),
    }
}

/// The panic the rule promises.
fn assert_reentry_panic(what: &str, o: Outcome) {
    match o {
        Outcome::Panicked(m) => assert!(
            m.contains("called back into the node"),
            "{what}: panicked, but not with the re-entry message: {m:?}"
        ),
        Outcome::Returned => panic!("{what}: a hook called into its own node and nothing said so"),
    }
}

fn slot() -> &'static Slot {
    leak(OnceLock::new())
}

/// `cond_resched` of deferred init allocating from the node while its zone has free pages and
/// the tracepoint is off: nothing would have to wait here, but the same hook deadlocks as soon
/// as the zone runs empty or the tracepoint is on (below), so it is refused every time.
#[test]
fn deferred_init_resched_hook_that_allocates_panics_with_the_rule() {
    let o = run("deferred init, hook allocates", || {
        let node = boot(tiny(), InitMode::Deferred, Reenter::new(slot(), Action::AllocFree));
        node.deferred_init_memmap_serial();
    });
    assert_reentry_panic("deferred init, hook allocates", o);
}

/// The same with the `page_ref_set` tracepoint on: the allocation's `set_page_count` takes
/// the memmap lock the hook's thread holds (a self-deadlock before the rule).
#[test]
fn deferred_init_resched_hook_that_allocates_with_the_tracepoint_panics() {
    let o = run("deferred init with the tracepoint, hook allocates", || {
        let cfg = KernelConfig { debug_page_ref: true, ..tiny() };
        let hooks = Reenter { tracepoint: true, ..Reenter::new(slot(), Action::Alloc) };
        let node = boot(cfg, InitMode::Deferred, hooks);
        node.deferred_init_memmap_serial();
    });
    assert_reentry_panic("deferred init with the tracepoint", o);
}

/// Deferred init on padata threads (the caller and a helper): whichever thread's hook calls
/// into the node first, the panic reaches the caller with its message.
#[test]
fn deferred_init_on_padata_threads_panics_with_the_rule() {
    let o = run("deferred init on two threads, hook allocates", || {
        let node = boot(tiny(), InitMode::Deferred, Reenter::new(slot(), Action::AllocFree));
        node.deferred_init_memmap(stream_par::Threads::Fixed(2));
    });
    assert_reentry_panic("deferred init on two threads", o);
}

/// On demand: an allocation that expands a block calls the tracepoint for every struct page
/// it initializes, under the zone lock and the memmap lock; a tracepoint hook that allocates
/// from the same zone would wait for the zone lock its own thread holds.
#[test]
fn tracepoint_hook_that_allocates_during_an_expansion_panics() {
    let o = run("on-demand expansion, tracepoint hook allocates", || {
        let cfg = KernelConfig { debug_page_ref: true, ..tiny() };
        let hooks = Reenter {
            from_resched: false,
            tracepoint: true,
            from_tracepoint: true,
            ..Reenter::new(slot(), Action::Alloc)
        };
        let node = boot(cfg, InitMode::OnDemand, hooks);
        let _b = node.alloc_pages(ZONE, 0, Gfp::NONE);
    });
    assert_reentry_panic("on-demand expansion, tracepoint hook", o);
}

/// The panic unwinds through the node's lock guards: every lock is free again afterwards, and
/// the node still allocates and frees from other threads.
#[test]
fn after_the_panic_the_node_is_not_locked() {
    let s = slot();
    let o = run("deferred init, hook allocates", move || {
        let node = boot(tiny(), InitMode::Deferred, Reenter::new(s, Action::Alloc));
        node.deferred_init_memmap_serial();
    });
    assert_reentry_panic("deferred init, hook allocates", o);
    let o = run("allocating after the panic", move || {
        let node = s.get().expect("booted");
        let b = node.alloc_pages(ZONE, 0, Gfp::NONE).expect("free pages left");
        node.free_pages(b).expect("free");
        let _ = node.zone_free_pages(ZONE);
        let _ = node.first_deferred_pfn();
    });
    assert!(matches!(o, Outcome::Returned), "{o:?}");
}

/// Calls into another node are fine: node A's deferred init allocates a page from node B in
/// every `cond_resched`.
#[test]
fn a_hook_may_allocate_from_another_node() {
    let o = run("hook allocates from another node", || {
        let (slot_a, slot_b) = (slot(), slot());
        let quiet = Reenter { from_resched: false, ..Reenter::new(slot_b, Action::Alloc) };
        let b = boot_into(tiny(), InitMode::Eager, quiet, slot_b);
        // A's hook finds B in its slot.
        let a = boot_into(tiny(), InitMode::Deferred, Reenter::new(slot_b, Action::Alloc), slot_a);
        let before = b.zone_free_pages(ZONE);
        let r = a.deferred_init_memmap_serial();
        assert!(r.pages_initialized > 0);
        let taken = before - b.zone_free_pages(ZONE);
        assert!(taken > 0, "A's hook allocated nothing from B");
        assert!(!a.deferred_pending());
    });
    assert!(matches!(o, Outcome::Returned), "{o:?}");
}
