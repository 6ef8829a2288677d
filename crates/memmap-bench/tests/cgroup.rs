//! The memory budget inside a real memory cgroup: the program run in a cgroup with a 1 GiB limit
//! on a larger machine must size itself to the cgroup, not to `/proc/meminfo`.
//!
//! Needs root and a writable memory controller (cgroup v1's `/sys/fs/cgroup/memory`, or v2's
//! `/sys/fs/cgroup` with `memory` in its `cgroup.subtree_control`); elsewhere it says why and
//! passes, unless `MEMMAP_BENCH_REQUIRE_CGROUP=1` (set in CI) makes that a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const LIMIT: u64 = 1 << 30;

/// A memory cgroup of this test's own, removed on drop.
struct TestCgroup {
    dir: PathBuf,
}

impl TestCgroup {
    fn create() -> Result<TestCgroup, String> {
        let v1 = Path::new("/sys/fs/cgroup/memory");
        let v2 = Path::new("/sys/fs/cgroup");
        let (parent, limit_file) = if v1.join("memory.limit_in_bytes").exists() {
            (v1, "memory.limit_in_bytes")
        } else if std::fs::read_to_string(v2.join("cgroup.subtree_control"))
            .is_ok_and(|s| s.contains("memory"))
        {
            (v2, "memory.max")
        } else {
            return Err("no memory cgroup controller to create a cgroup under".into());
        };
        let dir = parent.join(format!("memmap-bench-test-{}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let cg = TestCgroup { dir };
        std::fs::write(cg.dir.join(limit_file), LIMIT.to_string())
            .map_err(|e| format!("set {limit_file}: {e}"))?;
        Ok(cg)
    }

    /// Runs memmap-bench with `args` inside the cgroup (a shell moves itself in, then execs).
    fn run(&self, args: &[&str]) -> Output {
        let procs = self.dir.join("cgroup.procs");
        Command::new("sh")
            .arg("-c")
            .arg(r#"echo $$ > "$0" && exec "$@""#)
            .arg(&procs)
            .arg(env!("CARGO_BIN_EXE_memmap-bench"))
            .args(args)
            .output()
            .expect("run sh")
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // The child has exited: the cgroup is empty and can go.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn machine_available() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:")?.trim().strip_suffix(" kB")?.trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

#[test]
fn the_budget_follows_a_memory_cgroup_limit() {
    let cg = match TestCgroup::create() {
        Ok(cg) => cg,
        Err(why) => {
            assert!(
                std::env::var("MEMMAP_BENCH_REQUIRE_CGROUP").as_deref() != Ok("1"),
                "MEMMAP_BENCH_REQUIRE_CGROUP=1 but no test cgroup: {why}"
            );
            eprintln!("skipped: {why}");
            return;
        }
    };
    // The machine has more than the cgroup allows (else the test shows nothing).
    assert!(machine_available() > 2 * LIMIT, "MemAvailable below 2 GiB: the cgroup is not the tighter limit");

    // A budget above what the cgroup leaves is refused, and the message says it is the cgroup.
    let out = cg.run(&["--memory-budget", "2G", "--quick"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("left under the memory cgroup's 1 GiB limit"), "{err}");
    assert!(err.contains(&*cg.dir.to_string_lossy()), "{err}");

    // A scenario size that needs more than the default budget (two thirds of that room) is
    // refused before any work, and the message says where the budget came from.
    let out = cg.run(&["--quick", "deferred", "--size", "64G"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("more than the memory budget"), "{err}");
    assert!(err.contains("left under the memory cgroup's 1 GiB limit"), "{err}");
}
