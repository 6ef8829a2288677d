//! Which clear wins at which size: `stream_hal::clear_cached` (`rep stosb` on x86-64, `dc zva`
//! on aarch64), `stream_hal::clear_streaming` (`clzero` or `movntdq` on x86-64, `stnp` on
//! aarch64) and `stream_hal::clear` (the size rule that picks between them), each clearing a
//! 2 GiB buffer in calls of one size from 1 MiB to 2 GiB, on one thread and on every core (each
//! thread its own part of the buffer). The methods and sizes are interleaved round by round;
//! each cell is the median of `ROUNDS` rounds (default 5), in GB/s.
//!
//! ```sh
//! cargo run --release -p memmap-bench --example clear_methods -- 5
//! ```

use std::time::Instant;

const LEN: usize = 2 << 30;
const SIZES: [usize; 8] = [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 512 << 20, 1 << 30, 2 << 30];

type Clear = unsafe fn(*mut u8, usize);
const METHODS: [(&str, Clear); 3] = [
    ("cached", stream_hal::clear_cached),
    ("streaming", stream_hal::clear_streaming),
    ("clear", stream_hal::clear),
];

/// Clears `base..base + len` on `threads` threads, each its own `len / threads` bytes in calls
/// of `size` bytes, drained before the thread ends; returns GB/s.
fn run(base: usize, threads: usize, size: usize, f: Clear) -> f64 {
    let part = LEN / threads;
    let t = Instant::now();
    std::thread::scope(|s| {
        for k in 0..threads {
            s.spawn(move || {
                let start = base + k * part;
                let mut off = 0;
                while off < part {
                    let n = size.min(part - off);
                    // SAFETY: `[start + off, start + off + n)` lies inside this thread's part of
                    // the mapping `main` keeps alive until every thread is joined; no other
                    // thread touches the part, and nothing reads it before the drain below.
                    unsafe { f((start + off) as *mut u8, n) };
                    off += n;
                }
                stream_hal::drain();
            });
        }
    });
    LEN as f64 / t.elapsed().as_secs_f64().max(1e-9) / 1e9
}

fn main() {
    let rounds: usize = match std::env::args().nth(1).map(|s| s.parse()) {
        None => 5,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: clear_methods [ROUNDS > 0]");
            std::process::exit(2);
        }
    };
    let mut map = match memmap_bench::limits::resident_buffer(LEN) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("map 2 GiB: {e}");
            std::process::exit(1);
        }
    };
    let base = map.as_mut_ptr() as usize;
    let cores = stream_par::available_cpus();
    let threads: Vec<usize> = if cores > 1 { vec![1, cores] } else { vec![1] };
    println!(
        "{}; backend {}, streaming clear {}; 2 GiB cleared per cell, median of {rounds} rounds, GB/s",
        memmap_bench::report::CpuModel::detect().name,
        stream_hal::backend().name(),
        stream_hal::streaming_clear_method()
    );
    // rates[t][size][method]
    let mut rates = vec![vec![vec![Vec::new(); METHODS.len()]; SIZES.len()]; threads.len()];
    for r in 0..rounds {
        for (ti, &t) in threads.iter().enumerate() {
            for (si, &size) in SIZES.iter().enumerate() {
                if size > LEN / t {
                    continue;
                }
                for m in 0..METHODS.len() {
                    let m = (m + r) % METHODS.len();
                    rates[ti][si][m].push(run(base, t, size, METHODS[m].1));
                }
            }
        }
    }
    for (ti, &t) in threads.iter().enumerate() {
        println!("\n{t} thread(s): call size   cached  streaming    clear   streaming/cached");
        for (si, &size) in SIZES.iter().enumerate() {
            if rates[ti][si][0].is_empty() {
                continue;
            }
            let m: Vec<f64> = rates[ti][si].iter().map(|v| memmap_bench::measure::median_f64(v)).collect();
            println!(
                "  {:>18} {:>8.2} {:>10.2} {:>8.2} {:>17.2}x",
                format!("{} MiB", size >> 20),
                m[0],
                m[1],
                m[2],
                m[1] / m[0]
            );
        }
    }
}
