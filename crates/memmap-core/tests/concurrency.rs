//! Concurrency: threads allocating from one zone while deferred init runs on other threads,
//! and threads racing to expand the same on-demand blocks. No page may be lost or handed out
//! twice. This file also runs under ThreadSanitizer:
//!
//! ```sh
//! RUSTFLAGS=-Zsanitizer=thread cargo +nightly test -Zbuild-std --release \
//!     --target x86_64-unknown-linux-gnu -p memmap-core --test concurrency
//! ```

mod support;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use memmap_core::{
    AllocError, BootOptions, Gfp, InitMode, KernelConfig, Node, NodeLayout, Page64, PageBlock, PfnRange,
    ReservedRange, StructPage, ZoneSpan,
};
use support::{Storage, free_blocks, free_map, maximal_blocks, tiny};

const NID: u32 = 0;
const ZONE: u32 = 2;

/// Live allocations of all threads: start -> end. Inserting an overlapping range fails.
struct Ledger(Mutex<BTreeMap<u64, u64>>);

impl Ledger {
    fn insert(&self, b: &PageBlock) {
        let (s, e) = (b.pfn(), b.pfn() + b.nr_pages());
        let mut m = self.0.lock().unwrap();
        if let Some((&ps, &pe)) = m.range(..e).next_back() {
            assert!(pe <= s, "[{s:#x}, {e:#x}) overlaps live [{ps:#x}, {pe:#x})");
        }
        m.insert(s, e);
    }
    fn remove(&self, b: &PageBlock) {
        assert!(self.0.lock().unwrap().remove(&b.pfn()).is_some());
    }
}

/// A small xorshift for per-thread choices.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn check_initialized(node: &Node<'_, Page64>, cfg: &KernelConfig, b: &PageBlock) {
    let fl = cfg.flags_layout().unwrap();
    for pfn in [b.pfn(), b.pfn() + b.nr_pages() - 1] {
        let p = node.block_page(b, pfn).unwrap();
        assert_eq!((fl.zone(p.flags()), fl.node(p.flags()), p.mapcount()), (ZONE, NID, -1), "pfn {pfn:#x}");
    }
}

/// Allocates and frees random orders until `iters` allocations succeeded; retries while the
/// zone is empty but deferred init is still pending. Returns the blocks still held.
fn churn(
    node: &Node<'_, Page64>,
    cfg: &KernelConfig,
    ledger: &Ledger,
    seed: u64,
    iters: usize,
) -> Vec<PageBlock> {
    let mut rng = Rng(seed);
    let mut held: Vec<PageBlock> = Vec::new();
    let mut done = 0;
    while done < iters {
        let order = (rng.next() % u64::from(cfg.max_page_order + 1)) as u32;
        match node.alloc_pages(ZONE, order, Gfp::NONE) {
            Ok(b) => {
                check_initialized(node, cfg, &b);
                ledger.insert(&b);
                held.push(b);
                done += 1;
            }
            Err(AllocError::NoMemory) if node.deferred_pending() || !held.is_empty() => {
                std::thread::yield_now()
            }
            Err(AllocError::NoMemory) => break,
            Err(e) => panic!("allocation failed: {e}"),
        }
        if !held.is_empty() && rng.next() % 3 == 0 {
            let b = held.swap_remove((rng.next() % held.len() as u64) as usize);
            ledger.remove(&b);
            node.free_pages(b).unwrap();
        }
    }
    held
}

fn config() -> KernelConfig {
    if cfg!(miri) { tiny() } else { KernelConfig::X86_64 }
}

#[test]
fn allocators_race_deferred_init_without_losing_or_duplicating_pages() {
    let cfg = config();
    let pps = cfg.pages_per_section();
    let sections = if cfg!(miri) { 3 } else { 6 };
    let zones = [ZoneSpan::new(ZONE, pps, (1 + sections) * pps)];
    let memory = [PfnRange::new(pps, (1 + sections) * pps - 9)];
    let reserved = [
        ReservedRange::new(2 * pps + 77, 2 * pps + pps / 2),
        ReservedRange::noinit(3 * pps + 5, 3 * pps + pps / 2 + 9),
    ];
    let l = NodeLayout { nid: NID, zones: &zones, memory: &memory, reserved: &reserved };
    let mut st = Storage::new(&cfg, l.span(), false);
    let (node, r) = st.boot(cfg, l, &BootOptions::new(InitMode::Deferred));
    assert!(r.first_deferred_pfn.is_some());
    let ledger = Ledger(Mutex::new(BTreeMap::new()));
    let iters = if cfg!(miri) { 6 } else { 3000 };
    let held: Vec<PageBlock> = std::thread::scope(|s| {
        let init = s.spawn(|| node.deferred_init_memmap(stream_par::Threads::Fixed(2)));
        let workers: Vec<_> = (0..2)
            .map(|t| {
                s.spawn({
                    let (node, ledger) = (&node, &ledger);
                    move || churn(node, &cfg, ledger, 0x9e37_79b9_7f4a_7c15 ^ (t + 1), iters)
                })
            })
            .collect();
        let mut held: Vec<PageBlock> = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
        init.join().unwrap();
        held.extend(churn(&node, &cfg, &ledger, 7, iters / 2));
        held
    });
    assert!(!node.deferred_pending());
    for b in held {
        ledger.remove(&b);
        node.free_pages(b).unwrap();
    }
    let z = zones[0].span;
    let free = (z.start..z.end).filter(|&p| l.is_free(p)).count() as u64;
    assert_eq!(node.zone_free_pages(ZONE), free, "pages lost");
    assert_eq!(node.zone_managed_pages(ZONE), free);
    assert_eq!(free_blocks(&node, ZONE), maximal_blocks(&free_map(&l, z), z.start, cfg.max_page_order));
}

#[test]
fn allocators_race_on_the_same_on_demand_blocks_and_expand_each_once() {
    let cfg = config();
    let mo = cfg.max_order_nr_pages();
    let n_mo = if cfg!(miri) { 2 } else { 24 };
    let zones = [ZoneSpan::new(ZONE, mo, (1 + n_mo) * mo)];
    let memory = [PfnRange::new(mo, (1 + n_mo) * mo)];
    let l = NodeLayout { nid: NID, zones: &zones, memory: &memory, reserved: &[] };
    let mut st = Storage::new(&cfg, l.span(), false);
    let (node, _) = st.boot(cfg, l, &BootOptions::new(InitMode::OnDemand));
    let blocks = n_mo * mo / cfg.pageblock_nr_pages();
    let ledger = Ledger(Mutex::new(BTreeMap::new()));
    let iters = if cfg!(miri) { 5 } else { 4000 };
    let held: Vec<PageBlock> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..3)
            .map(|t| {
                s.spawn({
                    let (node, ledger) = (&node, &ledger);
                    move || churn(node, &cfg, ledger, 0x2545_f491_4f6c_dd1d ^ t, iters)
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
    });
    let during = node.stats().expansions.load(Ordering::Relaxed);
    assert!(during <= blocks);
    assert_eq!(during + node.expand_all(), blocks, "every block expanded exactly once");
    for b in held {
        ledger.remove(&b);
        node.free_pages(b).unwrap();
    }
    assert_eq!(node.zone_free_pages(ZONE), n_mo * mo);
    assert_eq!(
        free_blocks(&node, ZONE),
        maximal_blocks(&free_map(&l, zones[0].span), mo, cfg.max_page_order)
    );
}
