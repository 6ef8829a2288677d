//! Criterion benchmarks of the stream-hal primitives (non-zero data throughout).
//!
//! * `memcpy`: `memcpy_nontemporal` (+ drain) versus `copy_nonoverlapping` at 4 KiB, 64 KiB,
//!   1 MiB, 16 MiB and 256 MiB.
//! * `clear`: `clear_pages` versus `write_bytes(0)` at 2 MiB and 256 MiB.
//! * `records64`: filling 1 GiB of 64-byte records (16,777,216 records: the memmap of 64 GiB of
//!   4 KiB pages) with the typed streaming writer, versus the same fill with normal stores,
//!   versus a non-zero `memset` of the same buffer (the machine's fill limit for non-zero data).
//!
//! Run with `cargo bench -p stream-hal`; `STREAM_HAL_BENCH_GIB` changes the record buffer size.

#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;
use std::mem::MaybeUninit;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Slot {
    words: [u64; 8],
}

// SAFETY: eight `u64`s, no padding.
unsafe impl stream_hal::Record for Slot {}

const TEMPLATE: Slot =
    Slot { words: [0x0580_0000_0000_2000, 0xffff_8881_0000_0000, 0, 0, 0, 0, 0x0000_0000_ffff_ffff, 0] };

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(29) | 1).collect()
}

fn memcpy(c: &mut Criterion) {
    let mut g = c.benchmark_group("memcpy");
    g.sample_size(20).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    for (label, len) in [
        ("4KiB", 4 << 10),
        ("64KiB", 64 << 10),
        ("1MiB", 1 << 20),
        ("16MiB", 16 << 20),
        ("256MiB", 256 << 20),
    ] {
        let src = pattern(len);
        let mut dst = vec![0u8; len];
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("nontemporal", label), &len, |b, &len| {
            b.iter(|| {
                // SAFETY: both buffers are `len` bytes and distinct; drained before the next use.
                unsafe { stream_hal::memcpy_nontemporal(dst.as_mut_ptr(), src.as_ptr(), len) };
                stream_hal::drain();
            });
        });
        g.bench_with_input(BenchmarkId::new("copy_nonoverlapping", label), &len, |b, &len| {
            b.iter(|| {
                // SAFETY: as above.
                unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr(), len) };
                black_box(&mut dst);
            });
        });
    }
    g.finish();
}

fn clear(c: &mut Criterion) {
    let mut g = c.benchmark_group("clear");
    g.sample_size(20).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    for (label, npages) in [("2MiB", 512usize), ("256MiB", 65536)] {
        let len = npages * stream_hal::PAGE_SIZE;
        let mut buf = vec![1u8; len];
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("clear_pages", label), &npages, |b, &npages| {
            b.iter(|| {
                // SAFETY: `buf` holds `npages` pages.
                unsafe { stream_hal::clear_pages(buf.as_mut_ptr(), npages) };
                stream_hal::drain();
            });
        });
        g.bench_with_input(BenchmarkId::new("write_bytes", label), &len, |b, &len| {
            b.iter(|| {
                // SAFETY: `buf` holds `len` bytes.
                unsafe { std::ptr::write_bytes(buf.as_mut_ptr(), 0, len) };
                black_box(&mut buf);
            });
        });
    }
    g.finish();
}

fn records64(c: &mut Criterion) {
    let gib: usize = std::env::var("STREAM_HAL_BENCH_GIB").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let n = (gib << 30) / size_of::<Slot>();
    let mut slots: Vec<MaybeUninit<Slot>> = Vec::with_capacity(n);
    // SAFETY: `MaybeUninit` needs no initialization; capacity is `n`.
    unsafe { slots.set_len(n) };
    // Fault the buffer in before measuring (rebind rounds, not first binding).
    stream_hal::fill(&mut slots, &TEMPLATE);

    let mut g = c.benchmark_group("records64");
    g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(4));
    g.throughput(Throughput::Bytes((n * size_of::<Slot>()) as u64));
    g.bench_function("stream_writer_fill", |b| {
        b.iter(|| black_box(stream_hal::fill(&mut slots, &TEMPLATE).len()));
    });
    g.bench_function("stream_writer_fill_with_index", |b| {
        b.iter(|| {
            let out = stream_hal::fill_with(&mut slots, |i| {
                let mut r = TEMPLATE;
                r.words[4] = i as u64;
                r
            });
            black_box(out.len())
        });
    });
    g.bench_function("normal_store_fill", |b| {
        b.iter(|| {
            for s in slots.iter_mut() {
                s.write(black_box(TEMPLATE));
            }
            black_box(&mut slots);
        });
    });
    g.bench_function("memset_nonzero", |b| {
        b.iter(|| {
            // SAFETY: the buffer holds `n` records; 0x5a is a valid byte for `MaybeUninit`.
            unsafe { std::ptr::write_bytes(slots.as_mut_ptr().cast::<u8>(), 0x5a, n * size_of::<Slot>()) };
            black_box(&mut slots);
        });
    });
    g.finish();
}

criterion_group!(benches, memcpy, clear, records64);
criterion_main!(benches);
