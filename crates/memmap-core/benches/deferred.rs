//! Criterion benchmarks of deferred / on-demand struct page init, the buddy allocator and
//! init_on_alloc clearing:
//!
//! * `boot/{eager,deferred,on-demand}`: `Node::boot` of one zone (the "boot" time), and
//!   `boot/{eager,on-demand}-kernel-order` with the kernel's pass order ([`BootOrder::Kernel`])
//!   instead of the fused boot;
//!   `full/deferred` adds `deferred_init_memmap(stream_par::Threads::Fixed(2))`, `full/on-demand` adds `expand_all()` (the
//!   "full availability" time);
//! * `alloc/order-{0,9}/{eager,on-demand}`: allocate every page of the zone at that order and free
//!   it again, on a fully initialized zone versus an on-demand zone (whose first allocation pass
//!   expands each block, then pays only the check);
//! * `init_on_alloc/{per-page,batch}`: allocate the zone in order-9 blocks with init_on_alloc.
//!
//! `MEMMAP_BENCH_GIB` sets the zone size (default 4 GiB: 1,048,576 struct pages, 64 MiB of
//! memmap). The bench program `memmap-bench` runs the full-size scenarios.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use memmap_core::Named;
use std::hint::black_box;

use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use memmap_core::{
    BootOptions, BootOrder, ClearMode, Gfp, InitMode, InitPolicy, KernelConfig, NoHooks, Node, NodeLayout,
    NodeParts, OwnedArena, OwnedMemmap, Page64, PfnRange, PhysArena, ZoneSpan,
};

const ZONE: u32 = 2;
const BASE: u64 = 1 << 20;

fn nr_pages() -> u64 {
    let gib: u64 = std::env::var("MEMMAP_BENCH_GIB").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    gib << 18
}

/// What every benchmark boots: one zone of `nr` pages from `BASE` on node 0, its memmap (not
/// yet populated) and the node's block states.
struct Zone {
    zones: [ZoneSpan; 1],
    memory: [PfnRange; 1],
    memmap: OwnedMemmap<Page64>,
    states: Vec<u8>,
}

impl Zone {
    fn new(nr: u64) -> Self {
        let cfg = KernelConfig::X86_64;
        let span = PfnRange::new(BASE, BASE + nr);
        Zone {
            zones: [ZoneSpan::new(ZONE, BASE, BASE + nr)],
            memory: [span],
            memmap: OwnedMemmap::new(cfg, BASE, nr).expect("mmap"),
            states: vec![0u8; Node::<Page64>::states_needed(&cfg, span)],
        }
    }

    /// The parts of a boot of the zone, with `arena` as its page contents.
    fn parts<'a>(&'a mut self, arena: Option<PhysArena<'a>>) -> NodeParts<'a, Page64> {
        let layout = NodeLayout { nid: 0, zones: &self.zones, memory: &self.memory, reserved: &[] };
        NodeParts { memmap: self.memmap.memmap(), layout, states: &mut self.states, arena, hooks: NoHooks }
    }
}

/// A benchmark group of ten samples, each of about two seconds.
fn group<'c>(c: &'c mut Criterion, name: &str) -> BenchmarkGroup<'c, WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(10).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    g
}

fn boot_and_full(c: &mut Criterion) {
    let nr = nr_pages();
    let mut zone = Zone::new(nr);
    zone.memmap.populate().expect("populate");
    let mut g = group(c, "deferred");
    g.throughput(Throughput::Bytes(nr * 64));
    let variants = InitMode::ALL
        .iter()
        .copied()
        .flat_map(|m| [(m, BootOrder::Fused), (m, BootOrder::Kernel)])
        .filter(|&(m, o)| m != InitMode::Deferred || o == BootOrder::Fused);
    for (mode, order) in variants {
        for full in [false, true] {
            if full && (mode == InitMode::Eager || order == BootOrder::Kernel) {
                continue;
            }
            let suffix = if order == BootOrder::Kernel { "-kernel-order" } else { "" };
            let name = format!("{}/{}{suffix}", if full { "full" } else { "boot" }, mode.name());
            g.bench_function(name, |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let parts = zone.parts(None);
                        let t = Instant::now();
                        let opts = BootOptions { order, ..BootOptions::new(mode) };
                        let (node, r) = Node::boot(parts, &opts).expect("boot");
                        if full {
                            match mode {
                                InitMode::Deferred => {
                                    black_box(node.deferred_init_memmap(stream_par::Threads::Fixed(2)));
                                }
                                InitMode::OnDemand => {
                                    black_box(node.expand_all());
                                }
                                _ => {}
                            }
                        }
                        total += t.elapsed();
                        black_box(r.pages_freed);
                    }
                    total
                });
            });
        }
    }
    g.finish();
}

fn alloc(c: &mut Criterion) {
    let nr = nr_pages().min(1 << 18); // at most 1 GiB: allocation throughput, not size
    let mut zone = Zone::new(nr);
    zone.memmap.populate().expect("populate");
    let mut g = group(c, "alloc");
    for order in [0u32, 9] {
        g.throughput(Throughput::Elements(nr >> order));
        for mode in [InitMode::Eager, InitMode::OnDemand] {
            g.bench_function(format!("order-{order}/{}", mode.name()), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let parts = zone.parts(None);
                        let opts = BootOptions { check_pages: false, ..BootOptions::new(mode) };
                        let (node, _) = Node::boot(parts, &opts).expect("boot");
                        let t = Instant::now();
                        let mut held = Vec::with_capacity((nr >> order) as usize);
                        while let Ok(p) = node.alloc_pages(ZONE, order, Gfp::NONE) {
                            held.push(p);
                        }
                        for p in held {
                            node.free_pages(p).expect("free");
                        }
                        total += t.elapsed();
                    }
                    total
                });
            });
        }
    }
    g.finish();
}

fn init_on_alloc(c: &mut Criterion) {
    let nr = nr_pages().min(1 << 18);
    let mut zone = Zone::new(nr);
    let mut arena = OwnedArena::new(BASE, nr).expect("mmap");
    arena.populate().expect("populate");
    let mut g = group(c, "init_on_alloc");
    g.throughput(Throughput::Bytes(nr * 4096));
    for clear in [ClearMode::PerPage, ClearMode::Batch] {
        g.bench_function(clear.name(), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let parts = zone.parts(Some(arena.arena()));
                    let policy = InitPolicy { init_on_alloc: true, clear, ..InitPolicy::default() };
                    let opts =
                        BootOptions { policy, check_pages: false, ..BootOptions::new(InitMode::Eager) };
                    let (node, _) = Node::boot(parts, &opts).expect("boot");
                    let t = Instant::now();
                    let mut held = Vec::new();
                    while let Ok(p) = node.alloc_pages(ZONE, 9, Gfp::NONE) {
                        held.push(p);
                    }
                    total += t.elapsed();
                    black_box(held.len());
                }
                total
            });
        });
    }
    g.finish();
}

criterion_group!(benches, boot_and_full, alloc, init_on_alloc);
criterion_main!(benches);
