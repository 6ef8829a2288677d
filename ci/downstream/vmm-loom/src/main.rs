//! Run by ci/nostd.sh with `RUSTFLAGS="--cfg loom"`, as a VMM's own loom tests build its whole
//! dependency graph: guest memory populated, written, reset and zeroed on two workers must
//! behave as in any other build (memmap-core's padata runner and locks on core's atomics, not
//! loom's, which panic outside a loom model).
use stream_par::Threads;
use stream_vm_memory::{PopulateOptions, ResetPolicy, Workers, populate_all, reset, zero_parallel};
use vm_memory::bitmap::AtomicBitmap;
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mem = GuestMemoryMmap::<AtomicBitmap>::from_ranges(&[
        (GuestAddress(0), 8 << 20),
        (GuestAddress(8 << 20), 8 << 20),
    ])?;
    let workers = Workers::new(Threads::Fixed(2));
    let p = populate_all(&mem, &PopulateOptions::new(workers.clone()))?;
    assert_eq!(p.populated, 16 << 20);
    mem.write_slice(&[0xaa; 4096], GuestAddress(0x1234))?;
    zero_parallel(&mem, GuestAddress(0x1000), 12 << 20, &workers)?;
    let mut back = [0xffu8; 4096];
    mem.read_slice(&mut back, GuestAddress(0x1234))?;
    assert!(back.iter().all(|&b| b == 0), "zero_parallel left bytes");
    let r = reset(&mem, GuestAddress(0), 16 << 20, ResetPolicy::Auto, &workers)?;
    assert_eq!(r.in_place + r.discarded, 16 << 20);
    println!("vmm-loom-check: populated, zeroed and reset 16 MiB on 2 workers under --cfg loom");
    Ok(())
}
