//! Zeroing (and filling) guest memory: stream-vm-memory against vm-memory's own `write_slice`,
//! next to the machine's limits on the same pages, measured in one process with the methods
//! interleaved round by round; medians reported.
//!
//! ```sh
//! cargo bench -p stream-vm-memory --bench zero                 # 4 GiB, 7 rounds
//! STREAM_VM_MEMORY_BENCH_MIB=1024 STREAM_VM_MEMORY_BENCH_ROUNDS=5 cargo bench -p stream-vm-memory --bench zero
//! STREAM_VM_MEMORY_BENCH_BACKING=memfd cargo bench -p stream-vm-memory --bench zero   # or shm
//! ```
//!
//! The guest memory is two `GuestMemoryMmap` regions of half the size each (with an
//! `AtomicBitmap`): private anonymous memory (`anon`, the default), a memfd (`memfd`), or a
//! file in `/dev/shm` (`shm`, a tmpfs with a size limit), touched once before timing so no
//! page fault is measured; every method writes the whole range from one region into the
//! other. A second table times calls of 4 KiB (a page a VMM zeroes or writes), 20 000 calls
//! per round on pages spread over the first 64 MiB, in nanoseconds per call.

use std::hint::black_box;
use std::time::Instant;

use stream_vm_memory::{fill, zero};
use vm_memory::bitmap::{AtomicBitmap, Bitmap};
use vm_memory::{
    Bytes, FileOffset, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion, GuestRegionMmap,
    MmapRegion,
};

type Mem = GuestMemoryMmap<AtomicBitmap>;

/// The chunk a VMM without a bulk zero would loop `write_slice` over.
const CHUNK: usize = 2 << 20;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

struct Method<'a> {
    name: &'static str,
    run: Box<dyn Fn() + 'a>,
    times: Vec<f64>,
}

/// Calls of 4 KiB per round in the small-call table.
const SMALL_CALLS: usize = 20_000;

/// The pages the small calls go to: the first 64 MiB of the first region (of `first` bytes),
/// every 17th page, so that consecutive calls do not hit the same cache lines.
fn small_page(i: usize, first: usize) -> u64 {
    let pages = (64 << 20).min(first) / 4096;
    ((i * 17) % pages * 4096) as u64
}

/// Two regions of `half` and `len - half` bytes backed by `backing`: `anon`, `memfd` or `shm`.
fn guest_memory(backing: &str, len: usize, half: usize) -> Mem {
    if backing == "anon" {
        return Mem::from_ranges(&[(GuestAddress(0), half), (GuestAddress(half as u64), len - half)])
            .expect("guest memory");
    }
    let file = match backing {
        "memfd" => {
            let fd = rustix::fs::memfd_create("stream-vm-memory-bench", rustix::fs::MemfdFlags::CLOEXEC)
                .expect("memfd_create");
            std::fs::File::from(fd)
        }
        "shm" => {
            let path = format!("/dev/shm/stream-vm-memory-bench-{}", std::process::id());
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
                .expect("a file in /dev/shm");
            std::fs::remove_file(&path).expect("unlink");
            f
        }
        other => panic!("STREAM_VM_MEMORY_BENCH_BACKING={other}: expected anon, memfd or shm"),
    };
    file.set_len(len as u64).expect("file size");
    let region = |off: usize, n: usize| {
        let f = file.try_clone().expect("dup");
        let m = MmapRegion::<AtomicBitmap>::build(
            Some(FileOffset::new(f, off as u64)),
            n,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
        )
        .expect("mmap");
        GuestRegionMmap::new(m, GuestAddress(off as u64)).expect("region")
    };
    Mem::from_regions(vec![region(0, half), region(half, len - half)]).expect("guest memory")
}

/// Touches every page of `mem` once, leaving a non-zero pattern, so that no timed run faults.
fn touch_all(mem: &Mem) {
    let ones = vec![0x11u8; CHUNK];
    for r in mem.iter() {
        let mut off = 0;
        while off < r.len() as usize {
            let n = CHUNK.min(r.len() as usize - off);
            mem.write_slice(&ones[..n], GuestAddress(r.start_addr().0 + off as u64)).unwrap();
            off += n;
        }
    }
}

/// The run's conditions: size, backing, rounds, load, backend, THP.
fn print_header(mib: usize, backing: &str, rounds: usize) {
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    println!(
        "stream-vm-memory zero bench: {mib} MiB of {backing} memory in 2 regions, {rounds} rounds interleaved (order shuffled), load average {}, \
         stream-hal backend {}, streaming clear {}, THP {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        stream_hal::backend().name(),
        stream_hal::streaming_clear_method(),
        thp.trim()
    );
}

/// `rounds` rounds of every method, interleaved, in a new order each round (a rotation would
/// run each method after the same one every round).
fn run_rounds(methods: &mut [Method<'_>], rounds: usize) {
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..methods.len()).collect();
        fastrand::Rng::with_seed(round as u64).shuffle(&mut order);
        for i in order {
            let m = &mut methods[i];
            let t = Instant::now();
            (m.run)();
            m.times.push(t.elapsed().as_secs_f64());
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this once with tiny sizes.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let mib = if smoke { 8 } else { env_usize("STREAM_VM_MEMORY_BENCH_MIB", 4096) };
    let rounds = if smoke { 1 } else { env_usize("STREAM_VM_MEMORY_BENCH_ROUNDS", 7) };
    let len = mib << 20;
    let half = len / 2;
    let backing = std::env::var("STREAM_VM_MEMORY_BENCH_BACKING").unwrap_or_else(|_| "anon".into());
    let mem = guest_memory(&backing, len, half);
    touch_all(&mem);
    let zeros_chunk = vec![0u8; CHUNK];
    let fill_chunk = vec![0xa5u8; CHUNK];
    // One zero buffer as long as the range: calloc'd, its pages are the kernel's shared zero
    // page until written, so reading it costs no memory.
    let zeros_whole = vec![0u8; len];
    let chunked = |buf: &[u8]| {
        let mut off = 0;
        while off < len {
            let n = CHUNK.min(len - off);
            mem.write_slice(&buf[..n], GuestAddress(off as u64)).unwrap();
            off += n;
        }
    };
    let raw: Vec<(*mut u8, usize)> = mem
        .iter()
        .map(|r| (r.get_host_address(vm_memory::MemoryRegionAddress(0)).unwrap(), r.len() as usize))
        .collect();

    let mut methods = vec![
        Method {
            name: "vm-memory write_slice, 2 MiB zero buffer per call",
            run: Box::new(|| chunked(&zeros_chunk)),
            times: Vec::new(),
        },
        Method {
            name: "vm-memory write_slice, one zero buffer of the whole length",
            run: Box::new(|| mem.write_slice(&zeros_whole, GuestAddress(0)).unwrap()),
            times: Vec::new(),
        },
        Method {
            name: "stream_vm_memory::zero",
            run: Box::new(|| zero(&mem, GuestAddress(0), len).unwrap()),
            times: Vec::new(),
        },
        Method {
            name: "limit: stream_hal::clear_streaming on the regions' host memory",
            run: Box::new(|| {
                for &(p, n) in &raw {
                    // SAFETY: `p` is the host address of a whole region of `n` bytes mapped by
                    // `mem`, which outlives this closure; nothing else accesses guest memory
                    // while the benchmark runs; drained before the next method.
                    unsafe { stream_hal::clear_streaming(p, n) };
                }
                stream_hal::drain();
            }),
            times: Vec::new(),
        },
        Method {
            name: "limit: memset (ptr::write_bytes) on the regions' host memory",
            run: Box::new(|| {
                for &(p, n) in &raw {
                    // SAFETY: as above; plain stores need no drain.
                    unsafe { core::ptr::write_bytes(black_box(p), 0, n) };
                }
            }),
            times: Vec::new(),
        },
        Method {
            name: "part of zero: marking 4 KiB pages dirty (AtomicBitmap) alone",
            run: Box::new(|| {
                for r in mem.iter() {
                    r.bitmap().mark_dirty(0, r.len() as usize);
                }
            }),
            times: Vec::new(),
        },
        Method {
            name: "vm-memory write_slice, 2 MiB 0xa5 buffer per call",
            run: Box::new(|| chunked(&fill_chunk)),
            times: Vec::new(),
        },
        Method {
            name: "stream_vm_memory::fill 0xa5",
            run: Box::new(|| fill(&mem, GuestAddress(0), len, 0xa5).unwrap()),
            times: Vec::new(),
        },
    ];

    print_header(mib, &backing, rounds);
    run_rounds(&mut methods, rounds);
    report(&mem, len, &mut methods);
    drop(methods);
    small_calls(&mem, raw[0].1, rounds, &raw);
}

/// Checks that the runs did what they claim and prints the table of the whole-range methods.
fn report(mem: &Mem, len: usize, methods: &mut [Method<'_>]) {
    // The last method ran was fill 0xa5 or another: check the final state is consistent with
    // one of the writers (zeros or 0xa5) so the runs did what they claim.
    let mut probe = [0u8; 64];
    mem.read_slice(&mut probe, GuestAddress((len - 64) as u64)).unwrap();
    assert!(probe.iter().all(|&b| b == probe[0]) && (probe[0] == 0 || probe[0] == 0xa5));
    println!("{:<66} {:>10} {:>9}", "method", "median ms", "GB/s");
    for m in methods {
        let med = median(&mut m.times);
        println!("{:<66} {:>10.1} {:>9.2}", m.name, med * 1e3, len as f64 / med / 1e9);
    }
}

/// The small-call table: 4 KiB zeroes and writes, nanoseconds per call.
fn small_calls(mem: &Mem, first: usize, rounds: usize, raw: &[(*mut u8, usize)]) {
    let page = vec![0x3cu8; 4096];
    let zeros = vec![0u8; 4096];
    let base = raw[0].0;
    let mut methods = vec![
        Method {
            name: "stream_vm_memory::zero, 4 KiB",
            run: Box::new(|| {
                for i in 0..SMALL_CALLS {
                    zero(mem, GuestAddress(small_page(i, first)), 4096).unwrap();
                }
            }),
            times: Vec::new(),
        },
        Method {
            name: "stream_vm_memory::write, 4 KiB",
            run: Box::new(|| {
                for i in 0..SMALL_CALLS {
                    stream_vm_memory::write(mem, GuestAddress(small_page(i, first)), &page).unwrap();
                }
            }),
            times: Vec::new(),
        },
        Method {
            name: "vm-memory write_slice, 4 KiB of zeros",
            run: Box::new(|| {
                for i in 0..SMALL_CALLS {
                    mem.write_slice(&zeros, GuestAddress(small_page(i, first))).unwrap();
                }
            }),
            times: Vec::new(),
        },
        Method {
            name: "limit: memset of 4 KiB on the host memory",
            run: Box::new(|| {
                for i in 0..SMALL_CALLS {
                    // SAFETY: `small_page` is a page inside the first region's host mapping (of
                    // `first` bytes), which `mem` keeps mapped; nothing else
                    // accesses guest memory while the benchmark runs.
                    unsafe {
                        core::ptr::write_bytes(black_box(base.add(small_page(i, first) as usize)), 0, 4096)
                    };
                }
            }),
            times: Vec::new(),
        },
    ];
    run_rounds(&mut methods, rounds);
    println!("{:<66} {:>10}", "calls of 4 KiB", "median ns");
    for m in &mut methods {
        let med = median(&mut m.times);
        println!("{:<66} {:>10.0}", m.name, med * 1e9 / SMALL_CALLS as f64);
    }
}
