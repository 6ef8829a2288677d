//! Parallel zero and fill: across regions of odd sizes and alignments, byte-identical to one
//! thread, the dirty bitmap page by page, errors before any write, and NUMA placement with an
//! injected two-node topology run for real on this host's CPUs.

mod common;

use std::sync::Arc;

use common::*;
use proptest::prelude::*;
use stream_par::Threads;
use stream_vm_memory::numa::{GuestNodeRange, HostNode, MemoryNodes, Topology};
use stream_vm_memory::{
    Error, Placement, Workers, fill_parallel, fill_pattern, fill_pattern_parallel, zero, zero_parallel,
};
use vm_memory::GuestAddress;

const MIB: usize = 1 << 20;

/// Three regions: [0x1001, +9 MiB + 0x123) and right after it [.., +11 MiB - 7) (odd sizes, a
/// guest start off page alignment), a hole, then a last one at 64 MiB.
fn odd_memory() -> Mem {
    let a = 0x1001u64;
    let b = a + (9 * MIB + 0x123) as u64;
    anon(&[(a, 9 * MIB + 0x123), (b, 11 * MIB - 7), (64 << 20, 3 * MIB)], 0x5a)
}

fn two_threads() -> Workers {
    Workers::new(Threads::Fixed(2)).with_placement(Placement::Unpinned)
}

#[test]
fn parallel_zero_spans_odd_regions_and_matches_one_thread() {
    let (par, one) = (odd_memory(), odd_memory());
    let lay = layout(&par);
    let (addr, len) = (0x1001u64 + 0x777, (9 * MIB + 0x123 + 11 * MIB - 7) - 0x777 - 0x55);
    let r = zero_parallel(&par, GuestAddress(addr), len, &Workers::new(Threads::Fixed(3))).unwrap();
    zero(&one, GuestAddress(addr), len).unwrap();
    assert!(r.threads >= 2, "{r:?}");
    assert_eq!(r.bytes, len as u64);
    // Chunks tile the range exactly, each inside one region.
    let mut at = addr;
    for c in &r.chunks {
        assert_eq!(c.addr.0, at);
        at += c.len;
    }
    assert_eq!(at, addr + len as u64);
    assert!(bytes(&par) == bytes(&one), "parallel and one-thread zero differ");
    let mut model = vec![0x5a; bytes(&par).len()];
    model_apply(&mut model, &lay, |a| (addr..addr + len as u64).contains(&a).then_some(0));
    assert!(bytes(&par) == model, "zero_parallel differs from the model");
    assert_eq!(dirty(&par), dirty_model(&lay, &[(addr, len as u64)]));
    assert_eq!(dirty(&par), dirty(&one));
}

#[test]
fn parallel_fill_keeps_the_pattern_phase_across_regions_and_workers() {
    let (par, one) = (odd_memory(), odd_memory());
    let pattern: Vec<u8> = (1..=13).collect();
    let (addr, len) = (0x2000u64, 20 * MIB - 0x3000);
    fill_pattern_parallel(&par, GuestAddress(addr), len, &pattern, &two_threads()).unwrap();
    fill_pattern(&one, GuestAddress(addr), len, &pattern).unwrap();
    assert!(bytes(&par) == bytes(&one));
    assert_eq!(dirty(&par), dirty(&one));
    fill_parallel(&par, GuestAddress(0x1001), 3 * MIB, 0xc3, &two_threads()).unwrap();
    let mut back = vec![0; 3 * MIB];
    vm_memory::Bytes::read_slice(&par, &mut back, GuestAddress(0x1001)).unwrap();
    assert!(back.iter().all(|&b| b == 0xc3));
}

#[test]
fn errors_come_before_any_write() {
    let mem = odd_memory();
    let before = bytes(&mem);
    let end_of_second = 0x1001u64 + (20 * MIB + 0x123 - 7) as u64;
    // Runs into the hole after the second region.
    match zero_parallel(&mem, GuestAddress(0x1001), 21 * MIB, &two_threads()) {
        Err(Error::OutOfRange { first_invalid, .. }) => assert_eq!(first_invalid.0, end_of_second),
        other => panic!("{other:?}"),
    }
    // Starts before the first region.
    assert!(matches!(
        fill_parallel(&mem, GuestAddress(0), 2 * MIB, 1, &two_threads()),
        Err(Error::OutOfRange { first_invalid: GuestAddress(0), .. })
    ));
    // Wraps past 2^64.
    assert!(matches!(
        zero_parallel(&mem, GuestAddress(u64::MAX - 10), 11 + 1, &two_threads()),
        Err(Error::AddressOverflow { .. })
    ));
    assert!(matches!(
        fill_pattern_parallel(&mem, GuestAddress(0x1001), 1, &[], &two_threads()),
        Err(Error::EmptyPattern)
    ));
    assert!(bytes(&mem) == before, "a failed call wrote");
    assert!(dirty(&mem).is_empty(), "a failed call marked pages dirty");
    // Zero length: a no-op anywhere, even outside guest memory.
    assert_eq!(zero_parallel(&mem, GuestAddress(u64::MAX), 0, &two_threads()).unwrap().bytes, 0);
    assert_eq!(fill_pattern_parallel(&mem, GuestAddress(3), 0, &[], &two_threads()).unwrap().threads, 0);
    assert!(dirty(&mem).is_empty());
}

#[test]
fn a_region_ending_at_the_top_of_the_address_space() {
    // The last byte at u64::MAX - 1 (vm-memory refuses a region whose end would be 2^64).
    let len = 16 * MIB;
    let start = u64::MAX - len as u64;
    let mem = anon(&[(start, len)], 0x77);
    zero_parallel(&mem, GuestAddress(start), len, &two_threads()).unwrap();
    assert!(bytes(&mem).iter().all(|&b| b == 0));
    assert_eq!(dirty(&mem).len(), len / PAGE as usize);
    assert!(matches!(
        zero_parallel(&mem, GuestAddress(start), len + 1, &two_threads()),
        Err(Error::OutOfRange { .. } | Error::AddressOverflow { .. })
    ));
}

/// The CPUs this test may use for its two fake nodes: the first two CPUs the process may run
/// on (the same CPU twice on a one-CPU machine).
fn two_cpus() -> (usize, usize) {
    let set = rustix::thread::sched_getaffinity(None).unwrap();
    let cpus: Vec<usize> = (0..rustix::thread::CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect();
    (cpus[0], *cpus.get(1).unwrap_or(&cpus[0]))
}

/// A two-node topology injected as plain data, run for real: node 0 holds guest
/// [0, 24 MiB) and has the first CPU, node 1 holds the rest and has the second. Each node's
/// memory is zeroed by workers pinned to that node's CPU, and the result is the one-thread one.
#[test]
fn an_injected_two_node_topology_pins_each_nodes_workers() {
    let (c0, c1) = (two_cpus().0, two_cpus().1);
    let topo = Topology::new(
        vec![HostNode { id: 0, cpus: vec![c0] }, HostNode { id: 1, cpus: vec![c1] }],
        MemoryNodes::Guest(vec![
            GuestNodeRange { addr: GuestAddress(0), len: 24 << 20, node: 0 },
            GuestNodeRange { addr: GuestAddress(24 << 20), len: 40 << 20, node: 1 },
        ]),
    );
    // Two regions, the node boundary inside the second.
    let regions = [(0u64, 16 * MIB), (16 << 20, 32 * MIB)];
    let (mem, one) = (anon(&regions, 0xee), anon(&regions, 0xee));
    let workers = Workers::new(Threads::Fixed(4)).with_placement(Placement::Topology(Arc::new(topo)));
    let calling_thread = rustix::thread::sched_getaffinity(None).unwrap();
    let r = zero_parallel(&mem, GuestAddress(0x10), 48 * MIB - 0x20, &workers).unwrap();
    zero(&one, GuestAddress(0x10), 48 * MIB - 0x20).unwrap();
    assert!(bytes(&mem) == bytes(&one));
    assert_eq!(dirty(&mem), dirty(&one));
    assert_eq!(r.groups.len(), 2, "{r:?}");
    assert_eq!((r.groups[0].node, r.groups[0].bytes), (Some(0), (24 << 20) - 0x10));
    assert_eq!((r.groups[1].node, r.groups[1].bytes), (Some(1), (24 << 20) - 0x10));
    assert_eq!(r.groups[0].cpus.as_deref(), Some(&[c0][..]));
    assert_eq!(r.groups[1].cpus.as_deref(), Some(&[c1][..]));
    assert_eq!(r.threads, 4);
    for c in &r.chunks {
        let node = if c.addr.0 < 24 << 20 { 0 } else { 1 };
        assert_eq!(c.node, Some(node), "{c:?}");
        assert!(c.pinned, "{c:?}");
        assert_eq!(
            c.cpu,
            Some(if node == 0 { c0 } else { c1 }),
            "a worker of node {node} ran elsewhere: {c:?}"
        );
        // Split at 2 MiB boundaries of the host mapping, at the node boundary, at the end of the
        // first region, or at the range's end.
        let end = c.addr.0 + c.len;
        assert!(
            [(48 << 20) - 0x10, 24 << 20, 16 << 20].contains(&end)
                || (host(&mem, end - 1) + 1) % (2 << 20) == 0,
            "{c:?}"
        );
    }
    // The calling thread's own affinity is untouched.
    assert_eq!(rustix::thread::sched_getaffinity(None).unwrap(), calling_thread);
}

/// The host's own topology with the kernel as the source of memory nodes, forced even on a
/// one-node machine: the lookups (move_pages, get_mempolicy) and the pinning run for real.
#[test]
fn the_hosts_topology_and_the_kernels_memory_nodes() {
    let Ok(topo) = Topology::host() else {
        println!("skipped: no /sys/devices/system/node here");
        return;
    };
    let mem = anon(&[(0, 32 * MIB)], 0x11);
    let workers = Workers::new(Threads::Fixed(2)).with_placement(Placement::Topology(Arc::new(topo.clone())));
    let r = zero_parallel(&mem, GuestAddress(0), 32 * MIB, &workers).unwrap();
    assert!(bytes(&mem).iter().all(|&b| b == 0));
    let known: Vec<u32> = r.groups.iter().filter_map(|g| g.node).collect();
    if known.is_empty() {
        println!("no node answers from this kernel (no NUMA, or an emulator): {r:?}");
    }
    for g in &r.groups {
        if let (Some(n), Some(cpus)) = (g.node, &g.cpus) {
            assert!(topo.cpus_of(n).is_some_and(|c| cpus.iter().all(|x| c.contains(x))), "{g:?}");
        }
    }
    for c in r.chunks.iter().filter(|c| c.pinned) {
        let node_cpus = topo.cpus_of(c.node.unwrap()).unwrap();
        assert!(c.cpu.is_some_and(|cpu| node_cpus.contains(&cpu)), "{c:?}");
    }
}

proptest! {
    #![proptest_config(common::proptest_config(12))]

    /// Any range of the odd regions, any fill, any thread count: byte-identical to one thread,
    /// same dirty bits.
    #[test]
    fn parallel_equals_one_thread(
        start in 0x1001u64..0x1001 + (4 * MIB) as u64,
        len in 0usize..20 * MIB,
        threads in 1usize..5,
        pattern in proptest::collection::vec(any::<u8>(), 1..20),
    ) {
        let end_of_second = 0x1001u64 + (20 * MIB + 0x123 - 7) as u64;
        let len = len.min((end_of_second - start) as usize);
        let (par, one) = (odd_memory(), odd_memory());
        let w = Workers::new(Threads::Fixed(threads)).with_placement(Placement::Unpinned);
        fill_pattern_parallel(&par, GuestAddress(start), len, &pattern, &w).unwrap();
        fill_pattern(&one, GuestAddress(start), len, &pattern).unwrap();
        prop_assert!(bytes(&par) == bytes(&one));
        prop_assert_eq!(dirty(&par), dirty_model(&layout(&par), &[(start, len as u64)]));
        prop_assert_eq!(dirty(&par), dirty(&one));
    }
}
