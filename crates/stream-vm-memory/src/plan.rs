//! The plan of a parallel call, as pure functions: the range's pieces cut into NUMA lookup
//! units, consecutive units of one node joined into runs, the runs grouped by node (each group
//! one padata job pinned to its node's CPUs), the workers shared between the groups.

use vm_memory::GuestAddress;

use crate::numa::Topology;

/// Chunks are split at multiples of this in the host mapping, or of the region's page size if
/// larger: 2 MiB, so that no two workers share a transparent huge page.
pub(crate) const CHUNK_ALIGN: u64 = 2 << 20;

/// The smallest NUMA lookup unit: 2 MiB.
const UNIT_MIN: u64 = 2 << 20;

/// At most about this many NUMA lookups per call (units grow with the range).
const MAX_UNITS: u64 = 4096;

/// What the planner needs of a piece.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) host: usize,
    pub(crate) len: usize,
    pub(crate) guest: GuestAddress,
    pub(crate) page: usize,
}

/// A NUMA lookup unit: `len` bytes at `off` in span `span`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unit {
    pub(crate) span: usize,
    pub(crate) off: usize,
    pub(crate) len: usize,
}

/// Bytes `off..off + len` of piece `piece`, on `node`, at `lin` in its group's job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) piece: usize,
    pub(crate) off: usize,
    pub(crate) len: usize,
    pub(crate) node: Option<u32>,
    pub(crate) lin: u64,
}

/// One padata job: the runs of one node (or the unpinned rest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Group {
    pub(crate) node: Option<u32>,
    pub(crate) cpus: Option<Vec<usize>>,
    pub(crate) threads: usize,
    pub(crate) runs: Vec<Run>,
    /// The job's size: runs laid out with gaps so that `lin ≡ host (mod align)`.
    pub(crate) lin_len: u64,
    pub(crate) align: u64,
    pub(crate) bytes: u64,
}

/// The lookup unit for a range of `total` bytes: 2 MiB, doubled until there are at most about
/// [`MAX_UNITS`], and never smaller than the largest page.
pub(crate) fn unit_size(total: u64, max_page: usize) -> u64 {
    let mut u = UNIT_MIN.max(max_page as u64);
    while total / u > MAX_UNITS {
        u *= 2;
    }
    u
}

/// Cuts the spans into units at multiples of `unit` in host address space.
pub(crate) fn units(spans: &[Span], unit: u64) -> Vec<Unit> {
    let unit = unit as usize;
    let mut v = Vec::new();
    for (i, s) in spans.iter().enumerate() {
        let mut off = 0;
        while off < s.len {
            let host = s.host + off;
            let next = (host / unit + 1) * unit;
            let n = (next - host).min(s.len - off);
            v.push(Unit { span: i, off, len: n });
            off += n;
        }
    }
    v
}

/// Splits every unit that a guest address of `cuts` falls inside, so that given node ranges
/// (which need not be aligned in host space) are followed exactly.
pub(crate) fn split_units(spans: &[Span], units: &[Unit], cuts: &[u64]) -> Vec<Unit> {
    let mut out = Vec::with_capacity(units.len());
    for u in units {
        let g0 = spans[u.span].guest.0 + u.off as u64;
        let g1 = g0 + u.len as u64;
        let mut inner: Vec<u64> = cuts.iter().copied().filter(|&c| c > g0 && c < g1).collect();
        inner.sort_unstable();
        inner.dedup();
        let mut at = g0;
        for c in inner.into_iter().chain([g1]) {
            out.push(Unit { span: u.span, off: u.off + (at - g0) as usize, len: (c - at) as usize });
            at = c;
        }
    }
    out
}

/// Splits `threads` workers between groups of `bytes` bytes in proportion (largest
/// remainder), at least one each: the total is `max(threads, groups)`.
pub(crate) fn shares(bytes: &[u64], threads: usize) -> Vec<usize> {
    let k = bytes.len();
    if k == 0 {
        return Vec::new();
    }
    let total: u128 = bytes.iter().map(|&b| u128::from(b)).sum::<u128>().max(1);
    let t = threads.max(k);
    let extra = (t - k) as u128;
    // One each, then the rest in proportion.
    let exact: Vec<u128> = bytes.iter().map(|&b| u128::from(b) * extra).collect();
    let mut out: Vec<usize> = exact.iter().map(|&e| 1 + (e / total) as usize).collect();
    let mut left = t - out.iter().sum::<usize>();
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by(|&a, &b| (exact[b] % total).cmp(&(exact[a] % total)).then(a.cmp(&b)));
    for &i in order.iter().cycle() {
        if left == 0 {
            break;
        }
        out[i] += 1;
        left -= 1;
    }
    out
}

/// The plan of a call: which runs each group has, its CPUs and workers.
///
/// `nodes` is the node of each of `units` (or `None` without lookups: one run per span).
/// With `pin` (a topology and more than one worker) runs are grouped by node, each group
/// pinned to its node's CPUs intersected with `allowed` (the calling thread's CPUs, if known);
/// runs without a node, or whose node has no CPU left, form one unpinned group, last.
/// Without `pin` there is one unpinned group.
pub(crate) fn plan(
    spans: &[Span],
    nodes: Option<(&[Unit], &[Option<u32>])>,
    pin: Option<&Topology>,
    allowed: Option<&[usize]>,
    threads: usize,
) -> Vec<Group> {
    // Runs: consecutive units of one node within a span.
    let mut runs: Vec<Run> = Vec::new();
    match nodes {
        Some((units, nodes)) => {
            for (u, &node) in units.iter().zip(nodes) {
                match runs.last_mut() {
                    Some(r) if r.piece == u.span && r.node == node && r.off + r.len == u.off => {
                        r.len += u.len
                    }
                    _ => runs.push(Run { piece: u.span, off: u.off, len: u.len, node, lin: 0 }),
                }
            }
        }
        None => runs.extend(spans.iter().enumerate().map(|(i, s)| Run {
            piece: i,
            off: 0,
            len: s.len,
            node: None,
            lin: 0,
        })),
    }
    // Groups.
    let mut groups: Vec<Group> = Vec::new();
    let new_group = |node, cpus| Group {
        node,
        cpus,
        threads: 0,
        runs: Vec::new(),
        lin_len: 0,
        align: CHUNK_ALIGN,
        bytes: 0,
    };
    let mut unpinned = new_group(None, None);
    for r in runs {
        let cpus: Option<Vec<usize>> = match (pin, r.node) {
            (Some(t), Some(n)) if threads > 1 => t
                .cpus_of(n)
                .map(|c| {
                    c.iter().copied().filter(|c| allowed.is_none_or(|a| a.contains(c))).collect::<Vec<_>>()
                })
                .filter(|c| !c.is_empty()),
            _ => None,
        };
        let g = match cpus {
            Some(cpus) => match groups.iter_mut().position(|g| g.node == r.node) {
                Some(i) => &mut groups[i],
                None => {
                    groups.push(new_group(r.node, Some(cpus)));
                    groups.last_mut().expect("just pushed")
                }
            },
            None => &mut unpinned,
        };
        g.bytes += r.len as u64;
        g.runs.push(r);
    }
    groups.sort_by_key(|g| g.node);
    if !unpinned.runs.is_empty() {
        // A group of several nodes reports none; one node, that node.
        let first = unpinned.runs[0].node;
        if unpinned.runs.iter().all(|r| r.node == first) {
            unpinned.node = first;
        }
        groups.push(unpinned);
    }
    // Workers and layout.
    let bytes: Vec<u64> = groups.iter().map(|g| g.bytes).collect();
    for (g, t) in groups.iter_mut().zip(shares(&bytes, threads)) {
        g.threads = t;
        g.align = g.runs.iter().map(|r| spans[r.piece].page as u64).fold(CHUNK_ALIGN, u64::max);
        let mut cursor = 0u64;
        for r in &mut g.runs {
            let host = (spans[r.piece].host + r.off) as u64;
            r.lin = cursor + (host % g.align + g.align - cursor % g.align) % g.align;
            cursor = r.lin + r.len as u64;
        }
        g.lin_len = cursor;
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backing::BASE_PAGE;
    use crate::numa::{GuestNodeRange, HostNode, MemoryNodes};

    const MIB: usize = 1 << 20;

    fn span(host: usize, len: usize, guest: u64) -> Span {
        Span { host, len, guest: GuestAddress(guest), page: BASE_PAGE }
    }

    #[test]
    fn shares_are_proportional_with_one_each() {
        assert_eq!(shares(&[100, 100], 2), [1, 1]);
        assert_eq!(shares(&[100, 100], 4), [2, 2]);
        assert_eq!(shares(&[300, 100], 4), [3, 1]);
        assert_eq!(shares(&[1, 1_000_000], 2), [1, 1]);
        // More groups than threads: one each all the same.
        assert_eq!(shares(&[5, 5, 5], 1), [1, 1, 1]);
        assert_eq!(shares(&[10], 7), [7]);
        assert_eq!(shares(&[], 3), Vec::<usize>::new());
        assert_eq!(shares(&[2, 1], 6).iter().sum::<usize>(), 6);
    }

    #[test]
    fn units_follow_host_alignment_and_grow_with_the_range() {
        let s = [span(0x10_0000, 5 * MIB, 0), span(0x4000_0000, 1000, 0x50_0000)];
        let u = units(&s, 2 << 20);
        // 1 MiB up to the 2 MiB boundary, then 2 MiB, 2 MiB, and the last 0 ... of span 0.
        assert_eq!(
            u.iter().map(|u| (u.span, u.off, u.len)).collect::<Vec<_>>(),
            [(0, 0, MIB), (0, MIB, 2 * MIB), (0, 3 * MIB, 2 * MIB), (1, 0, 1000)]
        );
        assert_eq!(unit_size(1 << 30, BASE_PAGE), 2 << 20);
        assert_eq!(unit_size(1 << 40, BASE_PAGE), 256 << 20);
        assert_eq!(unit_size(1 << 20, 1 << 30), 1 << 30);
    }

    #[test]
    fn without_a_topology_one_unpinned_group_keeps_host_alignment() {
        // Two regions with host addresses 1 MiB and 0x1234 past a 2 MiB boundary.
        let s = [span(0x20_0000 + MIB, 3 * MIB, 0), span(0x80_0000 + 0x1234, 7 * MIB, 3 * MIB as u64)];
        let g = plan(&s, None, None, None, 2);
        assert_eq!(g.len(), 1);
        assert_eq!((g[0].node, g[0].cpus.as_ref(), g[0].threads), (None, None, 2));
        for r in &g[0].runs {
            assert_eq!(r.lin % CHUNK_ALIGN, ((s[r.piece].host + r.off) as u64) % CHUNK_ALIGN);
        }
        assert_eq!(g[0].bytes, 10 * MIB as u64);
        assert!(g[0].lin_len >= g[0].bytes && g[0].lin_len < g[0].bytes + 2 * CHUNK_ALIGN);
    }

    /// The two-node split: node 0 holds guest [0, 6 MiB), node 1 the rest, the CPUs are
    /// {0, 1} and {2, 3}, and the calling thread may use 0, 1 and 3.
    #[test]
    fn two_nodes_split_by_memory_and_pin_to_allowed_cpus() {
        let topo = Topology::new(
            vec![HostNode { id: 0, cpus: vec![0, 1] }, HostNode { id: 1, cpus: vec![2, 3] }],
            MemoryNodes::Guest(vec![
                GuestNodeRange { addr: GuestAddress(0), len: 6 * MIB as u64, node: 0 },
                GuestNodeRange { addr: GuestAddress(6 * MIB as u64), len: 10 * MIB as u64, node: 1 },
            ]),
        );
        // Two regions: guest [0, 8 MiB) and [8 MiB, 16 MiB), the second with a gap in host
        // space; the node boundary is inside the first.
        let s = [span(0x4000_0000, 8 * MIB, 0), span(0x9000_0000, 8 * MIB, 8 * MIB as u64)];
        let u = units(&s, 2 << 20);
        let nodes: Vec<Option<u32>> =
            u.iter().map(|u| topo.guest_node(GuestAddress(s[u.span].guest.0 + u.off as u64))).collect();
        let g = plan(&s, Some((&u, &nodes)), Some(&topo), Some(&[0, 1, 3]), 4);
        assert_eq!(g.len(), 2);
        assert_eq!(
            (g[0].node, g[0].cpus.as_deref(), g[0].bytes),
            (Some(0), Some(&[0, 1][..]), 6 * MIB as u64)
        );
        assert_eq!((g[1].node, g[1].cpus.as_deref(), g[1].bytes), (Some(1), Some(&[3][..]), 10 * MIB as u64));
        // Threads in proportion: 6:10 of 4 is 1.5:2.5, one each first, then the remainders.
        assert_eq!(g[0].threads + g[1].threads, 4);
        assert!(g[1].threads >= g[0].threads);
        // Node 1 has the tail of region 0 and all of region 1, as two runs.
        assert_eq!(
            g[1].runs.iter().map(|r| (r.piece, r.off, r.len)).collect::<Vec<_>>(),
            [(0, 6 * MIB, 2 * MIB), (1, 0, 8 * MIB)]
        );
        assert_eq!(g[0].runs.iter().map(|r| (r.piece, r.off, r.len)).collect::<Vec<_>>(), [(0, 0, 6 * MIB)]);
        // One worker: nothing is pinned, one group keeps the node runs.
        let one = plan(&s, Some((&u, &nodes)), Some(&topo), None, 1);
        assert_eq!(one.len(), 1);
        assert_eq!((one[0].cpus.as_ref(), one[0].node, one[0].runs.len()), (None, None, 3));
    }

    #[test]
    fn memory_of_unknown_nodes_and_cpu_less_nodes_is_unpinned() {
        let topo = Topology::new(
            vec![HostNode { id: 0, cpus: vec![0] }, HostNode { id: 1, cpus: vec![] }],
            MemoryNodes::Guest(vec![
                GuestNodeRange { addr: GuestAddress(0), len: 4 * MIB as u64, node: 0 },
                GuestNodeRange { addr: GuestAddress(4 * MIB as u64), len: 4 * MIB as u64, node: 1 },
            ]),
        );
        let s = [span(0x4000_0000, 12 * MIB, 0)];
        let u = units(&s, 2 << 20);
        let nodes: Vec<Option<u32>> = u.iter().map(|u| topo.guest_node(GuestAddress(u.off as u64))).collect();
        assert_eq!(nodes, [Some(0), Some(0), Some(1), Some(1), None, None]);
        let g = plan(&s, Some((&u, &nodes)), Some(&topo), None, 2);
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].node, g[0].cpus.as_deref()), (Some(0), Some(&[0][..])));
        // Node 1 (no CPUs) and the unknown rest: one unpinned group, reported without a node.
        assert_eq!((g[1].node, g[1].cpus.as_ref(), g[1].bytes), (None, None, 8 * MIB as u64));
        assert_eq!(g[1].runs.len(), 2);
    }

    #[test]
    fn guest_node_boundaries_cut_units_off_host_alignment() {
        // Host 0x1234 past a 2 MiB boundary: the unit boundaries are off guest alignment, and a
        // node boundary at guest 3 MiB falls inside a unit.
        let s = [span(0x4000_0000 + 0x1234, 6 * MIB, 0)];
        let u = split_units(&s, &units(&s, 2 << 20), &[3 * MIB as u64, 100 << 20]);
        let ends: Vec<u64> = u.iter().map(|u| (u.off + u.len) as u64).collect();
        assert!(ends.contains(&(3 * MIB as u64)), "{u:?}");
        assert_eq!(u.iter().map(|u| u.len).sum::<usize>(), 6 * MIB);
        assert!(u.windows(2).all(|w| w[0].off + w[0].len == w[1].off));
    }

    #[test]
    fn huge_pages_raise_the_alignment() {
        let s = [Span { host: 0x4000_0000, len: 3 << 30, guest: GuestAddress(0), page: 1 << 30 }];
        let g = plan(&s, None, None, None, 2);
        assert_eq!(g[0].align, 1 << 30);
    }
}
