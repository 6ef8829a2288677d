//! Prints the backend, the caches this machine reports and where Auto streams from:
//! `cargo run -p stream-hal --example cache` (add `--features std` on aarch64, riscv64 and
//! powerpc64, where the caches come from Linux's sysfs).

use stream_hal::{CacheInfo, Reuse, auto_threshold, backend, cache_info};

fn main() {
    println!("backend: {}", backend());
    println!("caches: {}", cache_info());
    if let Some(share) = cache_info().last_level_share() {
        println!("one CPU's share of the last level: {share} bytes");
    }
    for reuse in [Reuse::WriteOnce, Reuse::ReadSoon] {
        println!("auto ({reuse}) streams from {} bytes", auto_threshold(reuse));
    }
    // What detection alone finds, without a caller's value (the same here).
    println!("detected now: {}", CacheInfo::detect());
}
