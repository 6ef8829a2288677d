//! Times your own struct page initializer against the library's slow, template and streaming
//! paths and this machine's fill limit, on the same memory, with the bench's methodology
//! ([`memmap_bench::compare`]): interleaved rounds, a limit run next to each round, medians.
//!
//! The candidate here is assembled from the library's public API (the streaming path spread
//! over every CPU with `memmap_init_zone_device_parallel`); put your own initializer in its
//! closure. Its memmap is compared byte for byte with the slow path's.
//!
//! ```sh
//! cargo run --release -p memmap-bench --example custom_strategy -- 4G 15
//! ```
//!
//! Arguments: the device size (default 4G, whole 2 MiB pages) and the rounds (default 15).

use std::process::ExitCode;

use memmap_bench::compare::{Candidate, Comparison};
use memmap_bench::scenarios::zone_device::Case;
use memmap_core::{InitOptions, NoHooks, Strategy, memmap_init_zone_device_parallel};
use stream_par::Threads;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let size = match args.next().map(|s| memmap_bench::size::parse_pages(&s, 2 << 20)) {
        None => 4 << 30,
        Some(Ok(b)) => b,
        Some(Err(e)) => {
            eprintln!("custom_strategy: {e}");
            return ExitCode::from(2);
        }
    };
    let rounds = match args.next().map(|s| s.parse::<usize>()) {
        None => 15,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: custom_strategy [SIZE] [ROUNDS > 0]");
            return ExitCode::from(2);
        }
    };
    let cpus = stream_par::available_cpus();
    let mine = Candidate::new(format!("streaming-{cpus}t"), move |memmap, range, pgmap| {
        let opts = InitOptions::new(Strategy::Streaming);
        memmap_init_zone_device_parallel(memmap, range, pgmap, &opts, Threads::Fixed(cpus), |_, _| NoHooks)
            .map(|p| p.report.pages_initialized)
    });
    let name = format!("streaming-{cpus}t");
    match Comparison::new(Case::Fsdax, size).rounds(rounds).progress(true).run(vec![mine]) {
        Ok(c) => {
            print!("{}", c.report.table(false));
            println!("  {name} identical to slow: {}", c.identical(&name));
            if c.identical(&name) { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
        Err(e) => {
            eprintln!("custom_strategy: {e}");
            ExitCode::FAILURE
        }
    }
}
