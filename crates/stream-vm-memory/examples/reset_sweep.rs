//! The sweep behind `ResetPolicy::Auto`: at every size from 64 KiB up, for memory that is
//! resident, not resident, or half resident, on every backing this machine has, the time of
//! each reset path, and whether Auto is within 10 % of the fastest path that keeps the memory's
//! residency (what was resident stays resident).
//!
//! ```sh
//! cargo run --release -p stream-vm-memory --example reset_sweep                  # up to 1 GiB
//! cargo run --release -p stream-vm-memory --example reset_sweep -- --max 4G --rounds 5 --threads 1
//! ```
//!
//! Every run maps fresh memory (not timed), prepares it (not timed: written with a non-zero
//! byte where it is to be resident, advised `MADV_HUGEPAGE` for the THP cases), times one
//! `reset` call on all of it (with every available CPU, or `--threads N`), and unmaps it (not
//! timed). The paths run
//! interleaved, one round of each after the other in a new order each round, and the figure is
//! the median of the rounds (`--rounds`, and more below 4 MiB, up to 61, where a round takes
//! microseconds and a shared machine's noise is larger than the differences). hugetlbfs memory is swept where `HugePages_Free` has room (up to
//! the size it allows).

use std::fs::File;
use std::time::{Duration, Instant};

use stream_par::Threads;
use stream_vm_memory::{
    HugePageAdvice, Placement, PopulateOptions, ResetPolicy, Workers, advise_huge_pages, fill_parallel, reset,
};
use vm_memory::bitmap::AtomicBitmap;
use vm_memory::{FileOffset, GuestAddress, GuestMemoryMmap, GuestRegionMmap, MmapRegion};

type Mem = GuestMemoryMmap<AtomicBitmap>;

/// How the memory is backed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backing {
    /// Private anonymous, 4 KiB pages (no THP advice).
    Anon4k,
    /// Private anonymous, advised `MADV_HUGEPAGE`.
    AnonThp,
    /// A shared memfd (4 KiB shmem pages unless `shmem_enabled` says otherwise).
    Memfd,
    /// A `MFD_HUGETLB` memfd (2 MiB pages).
    Hugetlb,
}

/// What of it is resident before the reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Resident,
    NotResident,
    /// The first half.
    Half,
}

const PATHS: [(&str, ResetPolicy); 4] = [
    ("in-place", ResetPolicy::InPlace),
    ("discard", ResetPolicy::Discard { repopulate: false }),
    ("discard+refault", ResetPolicy::Discard { repopulate: true }),
    ("auto", ResetPolicy::Auto),
];

/// Whether path `k` leaves every page that was resident resident: discarding without
/// refaulting drops resident pages.
fn keeps_residency(state: State, k: usize) -> bool {
    !(k == 1 && state != State::NotResident)
}

fn map(backing: Backing, len: usize) -> Mem {
    match backing {
        Backing::Anon4k | Backing::AnonThp => Mem::from_ranges(&[(GuestAddress(0), len)]).expect("map"),
        Backing::Memfd | Backing::Hugetlb => {
            use rustix::fs::MemfdFlags;
            let huge = if backing == Backing::Hugetlb { MemfdFlags::HUGETLB } else { MemfdFlags::empty() };
            let fd = rustix::fs::memfd_create("reset-sweep", MemfdFlags::CLOEXEC | huge).expect("memfd");
            let file = File::from(fd);
            file.set_len(len as u64).expect("ftruncate");
            let region = MmapRegion::<AtomicBitmap>::from_file(FileOffset::new(file, 0), len).expect("mmap");
            Mem::from_regions(vec![GuestRegionMmap::new(region, GuestAddress(0)).expect("region")])
                .expect("memory")
        }
    }
}

fn prepare(mem: &Mem, backing: Backing, state: State, len: usize, w: &Workers) {
    if backing == Backing::AnonThp {
        advise_huge_pages(mem, GuestAddress(0), len).expect("advise");
    }
    let resident = match state {
        State::Resident => len,
        State::NotResident => 0,
        State::Half => len / 2,
    };
    if resident > 0 {
        let opts = PopulateOptions { huge_pages: HugePageAdvice::Leave, ..PopulateOptions::new(w.clone()) };
        stream_vm_memory::populate(mem, GuestAddress(0), resident, &opts).expect("populate");
        fill_parallel(mem, GuestAddress(0), resident, 0x5a, w).expect("fill");
    }
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn parse_size(s: &str) -> Option<usize> {
    let (n, mul) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1 << 10),
        b'M' | b'm' => (&s[..s.len() - 1], 1 << 20),
        b'G' | b'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    n.parse::<usize>().ok().map(|n| n * mul)
}

fn free_huge_pages() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().find_map(|l| l.strip_prefix("HugePages_Free:")?.trim().parse().ok()))
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1));
    let max = flag("--max").and_then(|s| parse_size(s)).unwrap_or(1 << 30);
    let rounds: usize = flag("--rounds").and_then(|s| s.parse().ok()).unwrap_or(5).max(1);
    let cpus: usize =
        flag("--threads").and_then(|s| s.parse().ok()).unwrap_or_else(stream_par::available_cpus).max(1);
    let w = Workers::new(Threads::Fixed(cpus)).with_placement(Placement::Auto);
    print_header(&args, cpus, rounds);
    let mut failures = 0;
    // Misses where the fastest path is in place and one getppid alone takes more than 10 % of
    // it; misses where it is the discard (one system call, as Auto's question is).
    let (mut floored, mut against_discard) = (0, 0);
    let huge_free = free_huge_pages() * (2 << 20);
    for backing in [Backing::Anon4k, Backing::AnonThp, Backing::Memfd, Backing::Hugetlb] {
        for state in [State::Resident, State::NotResident, State::Half] {
            let mut size = 64usize << 10;
            while size <= max {
                let len = if backing == Backing::Hugetlb { size.next_multiple_of(4 << 20) } else { size };
                if backing == Backing::Hugetlb && len > huge_free {
                    if size == 64 << 10 {
                        println!(
                            "{:<8} {:<12} skipped: {} bytes of free huge pages",
                            "hugetlb",
                            format!("{state:?}"),
                            huge_free
                        );
                    }
                    break;
                }
                // More rounds where a round takes microseconds (a shared machine's noise).
                let n = rounds.max((rounds * (4 << 20) / len).min(61));
                let (med, took) = measure(backing, state, len, n, &w);
                let (fastest, best) = (0..3)
                    .filter(|&k| keeps_residency(state, k))
                    .map(|k| (k, med[k]))
                    .min_by_key(|&(_, t)| t)
                    .expect("a candidate");
                let ratio = med[3].as_secs_f64() / best.as_secs_f64();
                let mincore = med[4].as_secs_f64() / best.as_secs_f64();
                let syscall = med[5].as_secs_f64() / best.as_secs_f64();
                let ok = ratio <= 1.10;
                failures += usize::from(!ok);
                floored += usize::from(!ok && fastest == 0 && syscall > 0.10);
                against_discard += usize::from(!ok && fastest == 1);
                let cell = |k: usize| {
                    format!(
                        "{:.3}{}",
                        med[k].as_secs_f64() * 1e3,
                        if keeps_residency(state, k) { "*" } else { " " }
                    )
                };
                println!(
                    "{:<8} {:<12} {:>8} {:>11} {:>11} {:>16} {:>11}  {:>9.2} {:>12.2} {:>12.2} {:<7} {:>3.0} % {:>3}",
                    format!("{backing:?}").to_lowercase(),
                    format!("{state:?}").to_lowercase(),
                    human(len),
                    cell(0),
                    cell(1),
                    cell(2),
                    format!("{:.3}", med[3].as_secs_f64() * 1e3),
                    ratio,
                    mincore,
                    syscall,
                    if ok { "ok" } else { "SLOWER" },
                    took * 100.0,
                    n,
                );
                size *= 4;
            }
        }
    }
    println!(
        "# {failures} size(s) where auto was more than 10 % slower than the fastest candidate: at {floored} of them the fastest is in place and one getppid alone took more than 10 % of it; at {against_discard} the fastest is the discard"
    );
}

/// The sweep's command, machine and column heads.
fn print_header(args: &[String], cpus: usize, rounds: usize) {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    let shmem =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/shmem_enabled").unwrap_or_default();
    println!("# stream-vm-memory reset sweep: {}", args[1..].join(" "));
    println!(
        "# {cpus} thread(s) (Threads::Fixed({cpus}); {} CPUs available), {rounds} rounds per path, median; load average at start {}; THP {}, shmem THP {}; stream-hal {} ({})",
        stream_par::available_cpus(),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
        thp.trim(),
        shmem.trim(),
        stream_hal::backend().name(),
        stream_hal::streaming_clear_method(),
    );
    println!(
        "# times in ms; candidates (*) are the paths that keep every resident page resident; ok: auto <= 1.10 x the fastest candidate"
    );
    println!(
        "# mincore/best, syscall/best: one mincore of the whole range alone, and one getppid (the cheapest system call), timed like a path, over the fastest candidate. Where the fastest is in place (no system call) and syscall/best is above 0.10, no Auto that asks the kernel anything can be within 10 %; where it is a discard (one system call), Auto's question has to cost no more than that call"
    );
    println!(
        "{:<8} {:<12} {:>8} {:>11} {:>11} {:>16} {:>11}  {:>9} {:>12} {:>12} verdict auto in place rounds",
        "backing",
        "state",
        "size",
        "in-place",
        "discard",
        "discard+refault",
        "auto",
        "auto/best",
        "mincore/best",
        "syscall/best"
    );
}

/// `n` rounds of every path on fresh memory of `len` bytes, with one `mincore` of the whole
/// range and one `getppid` (the cheapest system call) timed among them like paths, in a new
/// order each round: the medians (the paths', then `mincore`'s, then `getppid`'s), and the
/// share of the bytes Auto zeroed in place.
fn measure(backing: Backing, state: State, len: usize, n: usize, w: &Workers) -> (Vec<Duration>, f64) {
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); PATHS.len() + 2];
    let mut auto_in_place = 0u64;
    let mut vec = vec![0u8; len.div_ceil(4096)];
    for round in 0..n {
        // A new order each round: a rotation would run each path after the same one every
        // round and hand it whatever that one leaves behind.
        let mut order: Vec<usize> = (0..times.len()).collect();
        fastrand::Rng::with_seed(round as u64).shuffle(&mut order);
        for k in order {
            if k == PATHS.len() + 1 {
                let t = Instant::now();
                std::hint::black_box(std::os::unix::process::parent_id());
                times[k].push(t.elapsed());
                continue;
            }
            let mem = map(backing, len);
            prepare(&mem, backing, state, len, w);
            let t = Instant::now();
            if let Some(&(_, policy)) = PATHS.get(k) {
                let r = reset(&mem, GuestAddress(0), len, policy, w).expect("reset");
                if k == 3 {
                    auto_in_place += r.in_place;
                }
            } else {
                query(&mem, len, &mut vec);
            }
            times[k].push(t.elapsed());
            drop(mem);
        }
    }
    let took = auto_in_place as f64 / (n * len) as f64;
    (times.iter_mut().map(|v| median(v)).collect(), took)
}

/// One `mincore` of all of `mem`'s first `len` bytes: the least a residency answer costs.
/// `vec` has a byte per 4 KiB of `len`.
fn query(mem: &Mem, len: usize, vec: &mut [u8]) {
    use vm_memory::GuestMemoryBackend;
    let host = mem.get_host_address(GuestAddress(0)).expect("host address");
    // SAFETY: `mincore` writes one byte per page of `[host, host + len)` into `vec`, which
    // has `len.div_ceil(4096)` bytes: at least that many, since no page is smaller than
    // 4 KiB. (The range is `mem`'s one mapping; were it not mapped, the call would fail with
    // ENOMEM.)
    let rc = unsafe { libc::mincore(host.cast(), len, vec.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
}

fn human(n: usize) -> String {
    if n >= 1 << 30 {
        format!("{}G", n >> 30)
    } else if n >= 1 << 20 {
        format!("{}M", n >> 20)
    } else {
        format!("{}K", n >> 10)
    }
}
