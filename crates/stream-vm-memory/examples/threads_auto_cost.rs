//! What the first parallel call with `Threads::Auto` costs a process: the bandwidth search
//! behind it (in stream-par) runs once per process, on that call, on a
//! buffer of its own. Each run of this program is a fresh process that zeroes 64 MiB of
//! resident guest memory twice with the policy named on the command line and prints both
//! times and the peak resident memory (`VmHWM`) before and after the first call:
//!
//! ```sh
//! cargo run --release -p stream-vm-memory --example threads_auto_cost -- auto     # Threads::Auto
//! cargo run --release -p stream-vm-memory --example threads_auto_cost -- fixed    # Threads::Fixed(2)
//! cargo run --release -p stream-vm-memory --example threads_auto_cost -- resolve  # Auto, resolved first
//! ```
//!
//! `resolve` is the pre-warmed VMM: it calls `Threads::Auto.resolve()` at start-up (timed
//! apart, as `resolve`) and passes the resulting policy, so the first zero pays nothing more.

use std::time::Instant;

use stream_par::Threads;
use stream_vm_memory::{Placement, Workers, zero_parallel};
use vm_memory::bitmap::AtomicBitmap;
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

/// The guest memory zeroed: 64 MiB, above `Threads::Auto`'s one-thread threshold (8 MiB).
const LEN: usize = 64 << 20;

/// A `kB` line of `/proc/self/status`, in MiB.
fn status_mib(key: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix(key)?.trim().strip_suffix("kB")?.trim().parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "auto".into());
    let mem = GuestMemoryMmap::<AtomicBitmap>::from_ranges(&[(GuestAddress(0), LEN)])?;
    mem.write_slice(&vec![0x5a; LEN], GuestAddress(0))?;
    let mut resolve_ms = None;
    let threads = match mode.as_str() {
        "auto" => Threads::Auto,
        "fixed" => Threads::Fixed(2),
        "resolve" => {
            let t = Instant::now();
            let r = Threads::Auto.resolve();
            resolve_ms = Some(t.elapsed().as_secs_f64() * 1e3);
            r
        }
        other => return Err(format!("unknown mode {other:?}: expected auto, fixed or resolve").into()),
    };
    let workers = Workers::new(threads).with_placement(Placement::Unpinned);
    let hwm_before = status_mib("VmHWM:");
    let t = Instant::now();
    zero_parallel(&mem, GuestAddress(0), LEN, &workers)?;
    let first = t.elapsed().as_secs_f64() * 1e3;
    let hwm_after = status_mib("VmHWM:");
    let t = Instant::now();
    zero_parallel(&mem, GuestAddress(0), LEN, &workers)?;
    let second = t.elapsed().as_secs_f64() * 1e3;
    println!(
        "{mode}: threads {threads}{}, first zero_parallel of 64 MiB {first:.1} ms, second {second:.1} ms, \
         peak RSS {hwm_before:.1} MiB before the first call, {hwm_after:.1} MiB after it, RSS now {:.1} MiB",
        resolve_ms.map_or(String::new(), |ms| format!(" (resolve took {ms:.1} ms)")),
        status_mib("VmRSS:")
    );
    Ok(())
}
