//! Host NUMA: which CPUs each node has, and which node holds each part of guest memory. A
//! [`Topology`] is plain data: [`Topology::host`] reads it from the kernel, a VMM that knows how
//! it bound its memory zones (or a test) builds one with [`Topology::new`] and passes it in
//! [`Placement::Topology`](crate::Placement::Topology). How the parallel functions use it: the
//! crate documentation's "Threads and NUMA".

use std::io;
use std::path::Path;
use std::sync::OnceLock;

use vm_memory::GuestAddress;

/// One NUMA node of the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostNode {
    /// Its id (the `N` of `nodeN`).
    pub id: u32,
    /// Its CPUs (empty for a memory-only node).
    pub cpus: Vec<usize>,
}

/// A guest range placed on a node, for [`MemoryNodes::Guest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestNodeRange {
    /// First guest address.
    pub addr: GuestAddress,
    /// Bytes.
    pub len: u64,
    /// The host node the range is on.
    pub node: u32,
}

/// Where the node of each part of guest memory comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryNodes {
    /// Asked of the kernel on the first page of each unit (`move_pages`, else the memory
    /// policy).
    Kernel,
    /// Given: guest ranges and their nodes (what a VMM that `mbind`s its memory zones knows).
    /// Guest memory outside every range has no known node.
    Guest(Vec<GuestNodeRange>),
}

/// The host's nodes and where memory's nodes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    nodes: Vec<HostNode>,
    memory: MemoryNodes,
}

/// Parses a kernel CPU list (`0-3,8-11`, `5`, or empty), sorted and without duplicates; an
/// error for anything else (a reversed range, a non-number, more than 2^20 CPUs).
fn parse_cpulist(s: &str) -> io::Result<Vec<usize>> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, format!("bad cpulist {s:?}"));
    let mut cpus = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let a: usize = a.trim().parse().map_err(|_| bad())?;
        let b: usize = b.trim().parse().map_err(|_| bad())?;
        if a > b || b >= 1 << 20 {
            return Err(bad());
        }
        cpus.extend(a..=b);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

impl Topology {
    /// A topology of `nodes` (sorted by id) whose memory nodes come from `memory`.
    #[must_use]
    pub fn new(mut nodes: Vec<HostNode>, memory: MemoryNodes) -> Topology {
        nodes.sort_by_key(|n| n.id);
        Topology { nodes, memory }
    }

    /// The host's topology: `/sys/devices/system/node`, memory nodes from the kernel.
    ///
    /// # Errors
    ///
    /// The directory cannot be read (no NUMA in the kernel, not Linux) or a `cpulist` does not
    /// parse.
    pub fn host() -> io::Result<Topology> {
        Topology::from_sysfs(Path::new("/sys/devices/system/node"))
    }

    /// The topology under a `/sys/devices/system/node`-like directory: every `nodeN` with its
    /// `cpulist`; memory nodes from the kernel.
    ///
    /// # Errors
    ///
    /// As for [`Topology::host`].
    pub(crate) fn from_sysfs(dir: &Path) -> io::Result<Topology> {
        let mut nodes = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_prefix("node")).and_then(|n| n.parse().ok())
            else {
                continue;
            };
            let list = std::fs::read_to_string(entry.path().join("cpulist"))?;
            let cpus = parse_cpulist(&list)?;
            nodes.push(HostNode { id, cpus });
        }
        if nodes.is_empty() {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("no nodeN in {}", dir.display())));
        }
        Ok(Topology::new(nodes, MemoryNodes::Kernel))
    }

    /// [`Topology::host`], read once per process (`None` if it could not be read).
    pub(crate) fn host_cached() -> Option<&'static Topology> {
        static HOST: OnceLock<Option<Topology>> = OnceLock::new();
        HOST.get_or_init(|| Topology::host().ok()).as_ref()
    }

    /// The nodes, by id.
    #[must_use]
    pub fn nodes(&self) -> &[HostNode] {
        &self.nodes
    }

    /// Where memory nodes come from.
    #[must_use]
    pub fn memory(&self) -> &MemoryNodes {
        &self.memory
    }

    /// The CPUs of node `id` (`None` for an unknown node).
    #[must_use]
    pub fn cpus_of(&self, id: u32) -> Option<&[usize]> {
        self.nodes.iter().find(|n| n.id == id).map(|n| n.cpus.as_slice())
    }

    /// Nodes that have CPUs: where workers can be pinned. [`Placement::Auto`](crate::Placement::Auto)
    /// pins when there are two or more.
    #[must_use]
    pub(crate) fn nodes_with_cpus(&self) -> usize {
        self.nodes.iter().filter(|n| !n.cpus.is_empty()).count()
    }

    /// The node of the guest address `addr` under [`MemoryNodes::Guest`] (`None` for
    /// [`MemoryNodes::Kernel`] and for addresses outside every range).
    #[must_use]
    pub(crate) fn guest_node(&self, addr: GuestAddress) -> Option<u32> {
        match &self.memory {
            MemoryNodes::Kernel => None,
            MemoryNodes::Guest(ranges) => {
                ranges.iter().find(|r| addr.0 >= r.addr.0 && addr.0 - r.addr.0 < r.len).map(|r| r.node)
            }
        }
    }
}

/// The node of the host memory at each of `addrs`: where the page is (`move_pages`), or where
/// the single-node memory policy of its mapping or thread will put it; `None` where neither
/// says. Addresses are never dereferenced, so any value is allowed.
pub(crate) fn memory_nodes(addrs: &[usize]) -> Vec<Option<u32>> {
    match crate::sys::move_pages_status(addrs) {
        Ok(status) => status
            .iter()
            .zip(addrs)
            .map(|(&s, &a)| match s {
                s if s >= 0 => Some(s as u32),
                crate::sys::STATUS_NOT_PRESENT => crate::sys::policy_node(a),
                _ => None,
            })
            .collect(),
        // No NUMA syscalls (ENOSYS), or refused: the policy query may still answer.
        Err(_) => addrs.iter().map(|&a| crate::sys::policy_node(a)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulists_parse_as_the_kernel_writes_them() {
        assert_eq!(parse_cpulist("0-3,8-11\n").unwrap(), [0, 1, 2, 3, 8, 9, 10, 11]);
        assert_eq!(parse_cpulist("5").unwrap(), [5]);
        assert_eq!(parse_cpulist("\n").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpulist("3,1-2,2").unwrap(), [1, 2, 3]);
        assert!(parse_cpulist("3-1").is_err());
        assert!(parse_cpulist("a").is_err());
        assert!(parse_cpulist("0-99999999").is_err());
        assert!(parse_cpulist("1,,2").is_ok());
    }

    #[test]
    fn a_two_node_sysfs_tree_reads_back() {
        let dir = std::env::temp_dir().join(format!("svm-numa-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (n, list) in [(0, "0-1,4\n"), (1, "2-3\n"), (2, "\n")] {
            std::fs::create_dir_all(dir.join(format!("node{n}"))).unwrap();
            std::fs::write(dir.join(format!("node{n}/cpulist")), list).unwrap();
        }
        std::fs::write(dir.join("online"), "0-2\n").unwrap();
        let t = Topology::from_sysfs(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(t.nodes().len(), 3);
        assert_eq!(t.cpus_of(0), Some(&[0, 1, 4][..]));
        assert_eq!(t.cpus_of(1), Some(&[2, 3][..]));
        assert_eq!(t.cpus_of(2), Some(&[][..]));
        assert_eq!(t.cpus_of(3), None);
        assert_eq!(t.nodes_with_cpus(), 2);
        assert_eq!(t.memory(), &MemoryNodes::Kernel);
    }

    #[test]
    fn guest_ranges_name_nodes() {
        let t = Topology::new(
            vec![HostNode { id: 1, cpus: vec![1] }, HostNode { id: 0, cpus: vec![0] }],
            MemoryNodes::Guest(vec![
                GuestNodeRange { addr: GuestAddress(0), len: 0x1000, node: 0 },
                GuestNodeRange { addr: GuestAddress(0x1000), len: 0x1000, node: 1 },
            ]),
        );
        assert_eq!(t.nodes()[0].id, 0);
        assert_eq!(t.guest_node(GuestAddress(0xfff)), Some(0));
        assert_eq!(t.guest_node(GuestAddress(0x1000)), Some(1));
        assert_eq!(t.guest_node(GuestAddress(0x2000)), None);
    }

    #[test]
    fn the_host_answers_for_its_own_memory() {
        // This process's own memory: a page it has written is on a node of the host (where the
        // kernel has NUMA: under qemu-user or without CONFIG_NUMA the answer is None).
        let v = vec![1u8; 1 << 16];
        let nodes = memory_nodes(&[v.as_ptr() as usize, 0]);
        assert_eq!(nodes.len(), 2);
        assert_eq!(nodes[1], None, "an unmapped address has no node");
        match (Topology::host(), nodes[0]) {
            (Ok(t), Some(n)) => assert!(t.nodes().iter().any(|x| x.id == n), "{n} not in {t:?}"),
            (t, n) => println!("no NUMA answer here ({:?}, {n:?}): checked only the shape", t.err()),
        }
    }
}
