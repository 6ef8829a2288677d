//! Criterion benchmark of the hugetlb hot function: the fallback
//! `hugetlb_folio_init_tail_vmemmap(folio, 64, 262144)` of one 1 GiB folio (HVO unavailable,
//! as in the seed: 262,080 tail struct pages, 16 MiB), with each strategy.
//!
//! The storage is populated and the head prepared once; every iteration rewrites the same tails
//! ("rebind" figures). The bench program compares strategies interleaved with the machine's fill
//! limit; this is the per-function view.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use hugetlb_init::Hstate;
use hugetlb_init::folio::{
    hugetlb_folio_init_tail_vmemmap, hugetlb_folio_init_vmemmap, reserve_bootmem_head,
};
use memmap_core::{FillOptions, KernelConfig, NoHooks, OwnedMemmap, Page64, Strategy, StructPage};

fn tail_init_1g(c: &mut Criterion) {
    let cfg = KernelConfig::ARM64;
    let h = Hstate::new(&cfg, 1 << 30).expect("arm64 has 1 GiB pages");
    let head = 1u64 << 20;
    let mut owned = OwnedMemmap::<Page64>::new(cfg, head, h.nr_pages()).expect("mmap");
    owned.populate().expect("populate");
    {
        let mut m = owned.memmap();
        reserve_bootmem_head(&mut m, head, 2, 0, &mut NoHooks);
        hugetlb_folio_init_vmemmap(&mut m, head, h, 64, &FillOptions::new(Strategy::Slow), &mut NoHooks);
    }
    let mut g = c.benchmark_group("hugetlb_tail_init/1G");
    g.sample_size(10).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    g.throughput(Throughput::Bytes((h.nr_pages() - 64) * Page64::SIZE as u64));
    for strategy in [Strategy::Slow, Strategy::Template, Strategy::Streaming] {
        g.bench_function(strategy.name(), |b| {
            b.iter(|| {
                let mut m = owned.memmap();
                let t = hugetlb_folio_init_tail_vmemmap(
                    &mut m,
                    head,
                    h.order(),
                    64,
                    h.nr_pages(),
                    &FillOptions::new(strategy),
                    &mut NoHooks,
                );
                black_box(t.pages)
            });
        });
    }
    g.finish();
}

criterion_group!(benches, tail_init_1g);
criterion_main!(benches);
