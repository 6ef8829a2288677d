//! How a machine's fill bandwidth moves from one run to the next: `ROUNDS` rounds (default
//! 60) of a 1 GiB non-zero streaming fill (`stream_fill`) and `memset`, on one thread and on
//! every core, one line per round, then each column's spread. On a shared 2-vCPU guest the
//! all-core column alternates between about one and about two times the one-thread rate, which
//! is why memmap-bench pairs every scenario round with a limit run next to it (README,
//! "Paired limits").
//!
//! ```sh
//! cargo run --release -p memmap-bench --example bandwidth_modes -- 60
//! ```

use std::time::Duration;

use memmap_bench::limits::{FillKind, run_method};

const LEN: usize = 1 << 30;

fn main() {
    let rounds: usize = match std::env::args().nth(1).map(|s| s.parse()) {
        None => 60,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: bandwidth_modes [ROUNDS > 0]");
            std::process::exit(2);
        }
    };
    let mut map = match memmap_bench::limits::resident_buffer(LEN) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("map 1 GiB: {e}");
            std::process::exit(1);
        }
    };
    let cores = stream_par::available_cpus();
    let columns: Vec<(usize, &str)> =
        [1, cores].into_iter().flat_map(|t| [(t, "stream_fill"), (t, "memset")]).collect();
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); columns.len()];
    print!("round");
    for (t, m) in &columns {
        print!("  {m:>11}/{t}");
    }
    println!("   (GB/s)");
    for r in 0..rounds {
        print!("{r:5}");
        for (k, &(t, m)) in columns.iter().enumerate() {
            // SAFETY: `map` is a page-aligned mapping of 1 GiB (whole pages) that nothing else
            // touches while the method runs.
            let d = unsafe { run_method(m, FillKind::Nonzero, t, map.as_mut_ptr(), LEN) }
                .unwrap_or(Duration::ZERO);
            let g = LEN as f64 / d.as_secs_f64().max(1e-9) / 1e9;
            rates[k].push(g);
            print!("  {g:>13.2}");
        }
        println!();
    }
    let one = memmap_bench::measure::median_f64(&rates[0]);
    println!("\nspread (one-thread stream_fill median {one:.2} GB/s):");
    for ((t, m), v) in columns.iter().zip(&rates) {
        let (lo, hi) = v.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        let high = v.iter().filter(|&&x| x > 1.4 * one).count();
        println!(
            "  {m:>11} on {t} thread(s): min {lo:.2}, median {:.2}, max {hi:.2}; {high} of {} rounds above 1.4x the one-thread median",
            memmap_bench::measure::median_f64(v),
            v.len()
        );
    }
}
