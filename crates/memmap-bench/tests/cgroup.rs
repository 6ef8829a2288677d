//! The memory budget inside a real memory cgroup: the program run in a cgroup with a 1 GiB limit
//! on a larger machine must size itself to the cgroup, not to `/proc/meminfo`; in a 256 MiB
//! one, `limits` and the suite must run by default (scaled down) without being killed.
//!
//! Needs root and a writable memory controller (cgroup v1's `/sys/fs/cgroup/memory`, or v2's
//! `/sys/fs/cgroup` with `memory` in its `cgroup.subtree_control`); the test's cgroup is made
//! below the test's own memory cgroup where that can have children, else below the root.
//! Elsewhere it says why and passes, unless `MEMMAP_BENCH_REQUIRE_CGROUP=1` (set in CI) makes
//! that a failure.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const GIB: u64 = 1 << 30;

/// A memory cgroup of this test's own, removed on drop.
struct TestCgroup {
    dir: PathBuf,
}

/// The directory of this process's own cgroup in the hierarchy mounted at `mount` (`v2`: the
/// unified one), if it is there.
fn own_cgroup(mount: &Path, v2: bool) -> Option<PathBuf> {
    let lines = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = lines.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let mine = if v2 {
            id == "0" && controllers.is_empty()
        } else {
            controllers.split(',').any(|c| c == "memory")
        };
        mine.then(|| path.trim_start_matches('/').to_string())
    })?;
    let dir = mount.join(path);
    dir.is_dir().then_some(dir)
}

impl TestCgroup {
    fn create(limit: u64) -> Result<TestCgroup, String> {
        let v1 = Path::new("/sys/fs/cgroup/memory");
        let v2 = Path::new("/sys/fs/cgroup");
        let (parent, limit_file) = if v1.join("memory.limit_in_bytes").exists() {
            (own_cgroup(v1, false).unwrap_or_else(|| v1.to_path_buf()), "memory.limit_in_bytes")
        } else if std::fs::read_to_string(v2.join("cgroup.subtree_control"))
            .is_ok_and(|s| s.contains("memory"))
        {
            // v2: a cgroup with processes cannot have children with controllers: the root then.
            let own = own_cgroup(v2, true).filter(|d| {
                std::fs::read_to_string(d.join("cgroup.subtree_control")).is_ok_and(|s| s.contains("memory"))
            });
            (own.unwrap_or_else(|| v2.to_path_buf()), "memory.max")
        } else {
            return Err("no memory cgroup controller to create a cgroup under".into());
        };
        let dir = parent.join(format!("memmap-bench-test-{}-{}", std::process::id(), limit >> 20));
        std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let cg = TestCgroup { dir };
        std::fs::write(cg.dir.join(limit_file), limit.to_string())
            .map_err(|e| format!("set {limit_file}: {e}"))?;
        Ok(cg)
    }

    /// A cgroup of `limit` bytes, or `None` (the test passes, saying why) where none can be
    /// made and `MEMMAP_BENCH_REQUIRE_CGROUP=1` is not set.
    fn or_skip(limit: u64) -> Option<TestCgroup> {
        match TestCgroup::create(limit) {
            Ok(cg) => Some(cg),
            Err(why) => {
                assert!(
                    std::env::var("MEMMAP_BENCH_REQUIRE_CGROUP").as_deref() != Ok("1"),
                    "MEMMAP_BENCH_REQUIRE_CGROUP=1 but no test cgroup: {why}"
                );
                eprintln!("skipped: {why}");
                None
            }
        }
    }

    /// Runs memmap-bench with `args` inside the cgroup (a shell moves itself in, then execs).
    fn run(&self, args: &[&str]) -> Output {
        let procs = self.dir.join("cgroup.procs");
        Command::new("sh")
            .arg("-c")
            .arg(r#"echo $$ > "$0" && exec "$@""#)
            .arg(&procs)
            .args(common::program_words())
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
    let Some(cg) = TestCgroup::or_skip(GIB) else { return };
    // The machine has more than the cgroup allows (else the test shows nothing).
    assert!(machine_available() > 2 * GIB, "MemAvailable below 2 GiB: the cgroup is not the tighter limit");

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

/// The cgroup's peak usage (v1 `memory.max_usage_in_bytes`, v2 `memory.peak`), where known.
fn peak(cg: &TestCgroup) -> Option<u64> {
    ["memory.max_usage_in_bytes", "memory.peak"]
        .iter()
        .find_map(|f| std::fs::read_to_string(cg.dir.join(f)).ok()?.trim().parse().ok())
}

/// In a 256 MiB container the suite and `limits` used to refuse by default (the limit probe's
/// smallest buffers did not fit two thirds of it) and `limits` then suggested a flag it did not
/// take; run by default they must run, scaled down, and not be killed: every buffer within the
/// budget (`--threads auto` takes one thread: the budget cannot hold stream-par's search).
#[test]
fn limits_and_the_suite_run_by_default_in_a_256_mib_cgroup() {
    let Some(cg) = TestCgroup::or_skip(256 << 20) else { return };
    for args in
        [&["limits", "--no-progress"][..], &["--quick", "--no-progress"], &["hugetlb", "--no-progress"]]
    {
        let out = cg.run(args);
        let (text, err) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{args:?} (a signal: None): {err}{text}");
        assert!(text.contains("left under the memory cgroup's 256 MiB limit"), "{args:?}: {text}");
        assert!(
            text.contains("limits 2 x")
                && text.contains("--threads auto: one thread, the memory budget cannot hold"),
            "{text}"
        );
        if args[0] == "--quick" {
            // Some scenarios ran, the others are listed with the budget they would need.
            assert!(text.contains("zone-device-fsdax") && text.contains("skipped clear-2m:"), "{text}");
        }
        assert!(peak(&cg).is_none_or(|p| p <= 256 << 20), "{args:?}: peak {peak:?}", peak = peak(&cg));
    }
    // A command with nothing that fits: refused, with what this cgroup can give at most.
    let out = cg.run(&["clear", "--no-progress"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("nothing would run") && err.contains("is more than this machine can give"), "{err}");
}
