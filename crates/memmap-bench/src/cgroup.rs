//! The memory a process's cgroup leaves it (in a container `/proc/meminfo` shows the host's):
//! [`read`] finds the tightest limit from the process's cgroup up to its hierarchy's root, and
//! the room under it.

use std::path::{Path, PathBuf};

use procfs::ProcessCGroup;
use procfs::process::MountInfo;

/// The tightest memory limit over the process's cgroups and the room left under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMemory {
    /// The cgroup directory of that limit.
    pub dir: PathBuf,
    /// The limit, bytes.
    pub limit: u64,
    /// The limit minus what the cgroup holds (inactive file cache not counted), bytes.
    pub room: u64,
}

/// The process's tightest memory-cgroup limit, `None` where no cgroup of it has one (or the
/// files cannot be read).
#[must_use]
pub fn read() -> Option<CgroupMemory> {
    let me = procfs::process::Process::myself().ok()?;
    let groups = me.cgroups().ok()?;
    let mounts = me.mountinfo().ok()?;
    tightest(&groups.0, &mounts.0)
}

/// The cgroup with the least room over `groups` (`/proc/self/cgroup`), from the process's
/// cgroup up to each hierarchy's mount point in `mounts` (`/proc/self/mountinfo`).
#[must_use]
pub fn tightest(groups: &[ProcessCGroup], mounts: &[MountInfo]) -> Option<CgroupMemory> {
    let mut best: Option<CgroupMemory> = None;
    for g in groups {
        let version = if g.hierarchy == 0 && g.controllers.is_empty() {
            Version::V2
        } else if g.controllers.iter().any(|c| c == "memory") {
            Version::V1
        } else {
            continue;
        };
        for m in mounts.iter().filter(|m| version.mounted_by(m)) {
            // The process's cgroup below this mount: its path relative to the mount's root
            // (`/` without a cgroup namespace or bind mount of a subtree).
            let Ok(rel) = Path::new(&g.pathname).strip_prefix(&m.root) else { continue };
            let mut dir = m.mount_point.join(rel);
            loop {
                if let Some(c) = version.read_dir(&dir) {
                    if best.as_ref().is_none_or(|b| c.room < b.room) {
                        best = Some(c);
                    }
                }
                if dir == m.mount_point || !dir.pop() {
                    break;
                }
            }
        }
    }
    best
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

impl Version {
    fn mounted_by(self, m: &MountInfo) -> bool {
        match self {
            Version::V2 => m.fs_type == "cgroup2",
            Version::V1 => m.fs_type == "cgroup" && m.super_options.contains_key("memory"),
        }
    }

    /// The limit and room of the cgroup at `dir`, `None` without a limit or its files.
    fn read_dir(self, dir: &Path) -> Option<CgroupMemory> {
        let (limit, usage, inactive) = match self {
            Version::V2 => {
                let max = limit_file(&dir.join("memory.max"));
                let high = limit_file(&dir.join("memory.high"));
                let limit = match (max, high) {
                    (Some(a), Some(b)) => a.min(b),
                    (a, b) => a.or(b)?,
                };
                (limit, number_file(&dir.join("memory.current"))?, stat(dir, "inactive_file"))
            }
            Version::V1 => (
                limit_file(&dir.join("memory.limit_in_bytes"))?,
                number_file(&dir.join("memory.usage_in_bytes"))?,
                stat(dir, "total_inactive_file").or_else(|| stat(dir, "inactive_file")),
            ),
        };
        let held = usage.saturating_sub(inactive.unwrap_or(0));
        Some(CgroupMemory { dir: dir.to_path_buf(), limit, room: limit.saturating_sub(held) })
    }
}

/// A cgroup limit file: a byte count, `None` for `max` (v2) or v1's "unlimited" (a value of
/// 2^62 or more: the page-rounded `LONG_MAX`), or an unreadable file.
fn limit_file(path: &Path) -> Option<u64> {
    number_file(path).filter(|&v| v < 1 << 62)
}

fn number_file(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The value of `key` in the cgroup's `memory.stat`.
fn stat(dir: &Path, key: &str) -> Option<u64> {
    let s = std::fs::read_to_string(dir.join("memory.stat")).ok()?;
    s.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use procfs::FromBufRead as _;

    fn groups(text: &str) -> Vec<ProcessCGroup> {
        procfs::ProcessCGroups::from_buf_read(text.as_bytes()).unwrap().0
    }

    fn mount(line: &str) -> MountInfo {
        MountInfo::from_line(line).unwrap()
    }

    fn write(dir: &Path, files: &[(&str, &str)]) {
        std::fs::create_dir_all(dir).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
    }

    #[test]
    fn v2_takes_the_tightest_of_max_and_high_up_the_path() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        // The root has no limit files; the slice 8 GiB max; the process's cgroup 6 GiB high.
        write(&r.join("ci.slice"), &[("memory.max", "8589934592\n"), ("memory.current", "1073741824\n")]);
        write(
            &r.join("ci.slice/job"),
            &[
                ("memory.max", "max\n"),
                ("memory.high", "6442450944\n"),
                ("memory.current", "2147483648\n"),
                ("memory.stat", "anon 1073741824\nfile 1073741824\ninactive_file 536870912\n"),
            ],
        );
        let g = groups("0::/ci.slice/job\n");
        let m = mount(&format!("41 31 0:38 / {} rw,relatime - cgroup2 cgroup2 rw", r.display()));
        let c = tightest(&g, &[m]).unwrap();
        assert_eq!(c.limit, 6 << 30);
        // 6 GiB minus 2 GiB held plus 0.5 GiB of inactive file cache.
        assert_eq!(c.room, (6 << 30) - (2 << 30) + (512 << 20));
        assert_eq!(c.dir, r.join("ci.slice/job"));
    }

    #[test]
    fn v1_memory_hierarchy_with_a_namespaced_root() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        // The mount's root is the container's cgroup (`/docker/abc`): the process's path maps
        // to the mount point itself. An unlimited v1 value is no limit.
        write(
            r,
            &[
                ("memory.limit_in_bytes", "4294967296\n"),
                ("memory.usage_in_bytes", "1073741824\n"),
                ("memory.stat", "cache 0\ninactive_file 1\ntotal_inactive_file 268435456\n"),
            ],
        );
        write(
            &r.join("inner"),
            &[("memory.limit_in_bytes", "9223372036854771712\n"), ("memory.usage_in_bytes", "0\n")],
        );
        let g = groups("4:memory:/docker/abc/inner\n3:cpu,cpuacct:/docker/abc\n0::/\n");
        let mounts = [
            mount(&format!("35 31 0:32 /docker/abc {} rw,relatime - cgroup cgroup rw,memory", r.display())),
            mount("32 31 0:29 / /nonexistent/cpu rw,relatime - cgroup cgroup rw,cpu,cpuacct"),
        ];
        let c = tightest(&g, &mounts).unwrap();
        assert_eq!((c.limit, c.room), (4 << 30, (3 << 30) + (256 << 20)));
        assert_eq!(c.dir, r);
    }

    #[test]
    fn no_limit_anywhere_is_none() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write(r, &[("memory.max", "max\n"), ("memory.current", "5\n")]);
        let g = groups("0::/\n");
        let m = mount(&format!("41 31 0:38 / {} rw,relatime - cgroup2 cgroup2 rw", r.display()));
        assert_eq!(tightest(&g, &[m]), None);
        // A path outside the mount's root, and no mounts at all: nothing to read.
        let m = mount(&format!("41 31 0:38 /other {} rw,relatime - cgroup2 cgroup2 rw", r.display()));
        assert_eq!(tightest(&groups("0::/ci\n"), &[m]), None);
        assert_eq!(tightest(&g, &[]), None);
    }

    #[test]
    fn usage_above_the_limit_leaves_no_room() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write(r, &[("memory.max", "1048576\n"), ("memory.current", "2097152\n")]);
        let m = mount(&format!("41 31 0:38 / {} rw,relatime - cgroup2 cgroup2 rw", r.display()));
        assert_eq!(tightest(&groups("0::/\n"), &[m]).map(|c| c.room), Some(0));
    }
}
