//! Criterion benchmarks of the memmap-core hot functions: `memmap_init_zone_device` with each
//! strategy for an fsdax-like range (one struct page per 4 KiB, no compound pages) and a
//! devdax-like range (2 MiB compound pages, vmemmap dedup), plus `__init_single_page`.
//!
//! `MEMMAP_BENCH_GIB` sets the device size (default 16 GiB: 4,194,304 struct pages, 256 MiB of
//! memmap). The storage is populated before measuring, so these are "rebind" figures; the
//! bench program `memmap-bench` reports first-binding figures and the machine's limit too.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use memmap_core::{
    DevPagemap, InitOptions, KernelConfig, MemoryType, NoHooks, OwnedMemmap, Page64, Strategy, StructPage,
    ZoneDeviceRange, memmap_init_zone_device,
};

fn zone_device(c: &mut Criterion) {
    let gib: u64 = std::env::var("MEMMAP_BENCH_GIB").ok().and_then(|v| v.parse().ok()).unwrap_or(16);
    let cfg = KernelConfig::X86_64;
    let nr = gib << 18;
    let base = 1 << 24;
    let mut owned = OwnedMemmap::<Page64>::new(cfg, base, nr).expect("mmap");
    owned.populate().expect("populate");
    let range = ZoneDeviceRange::new(cfg.zone_device(), 0, base, nr);

    for (name, pgmap) in [
        ("fsdax", DevPagemap::new(MemoryType::FsDax)),
        ("devdax-2m", DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(9)),
    ] {
        let mut g = c.benchmark_group(format!("zone_device/{name}"));
        g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
        let written = memmap_core::compound_nr_pages(&cfg, 64, &pgmap) * (nr / pgmap.vmemmap_nr());
        g.throughput(Throughput::Bytes(written * 64));
        for strategy in [Strategy::Slow, Strategy::Template, Strategy::Streaming] {
            g.bench_function(strategy.name(), |b| {
                b.iter(|| {
                    let mut m = owned.memmap();
                    let r = memmap_init_zone_device(
                        &mut m,
                        &range,
                        &pgmap,
                        &InitOptions::new(strategy),
                        &mut NoHooks,
                    )
                    .expect("valid range");
                    black_box(r.pages_initialized)
                });
            });
        }
        g.finish();
    }
}

fn init_single_page(c: &mut Criterion) {
    let cfg = KernelConfig::X86_64;
    let mut owned = OwnedMemmap::<Page64>::new(cfg, 0, 4096).expect("mmap");
    c.bench_function("init_single_page/4096-pages", |b| {
        b.iter(|| {
            let mut m = owned.memmap();
            for pfn in 0..4096 {
                m.init_single_page(pfn, 2, 0, &mut NoHooks);
            }
            black_box(m.read(7).flags())
        });
    });
}

criterion_group!(benches, zone_device, init_single_page);
criterion_main!(benches);
