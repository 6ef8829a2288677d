//! The command-line interface from the outside: dump, diff, argument errors, the JSON report.

use memmap_core::Named;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::program as bin;

/// The words of `line`: a command line written as one string (no word has a space).
fn words(line: &str) -> Vec<&str> {
    line.split(' ').collect()
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memmap-bench-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run memmap-bench")
}

fn dump(dir: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["dump", "zone-device", "--out", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(out.status.success(), "dump failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap()
}

fn u64_at(bytes: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(bytes[off..off + 8].try_into().unwrap())
}

#[test]
fn dump_writes_the_documented_format() {
    let dir = tmp("format");
    let meta = dump(
        &dir,
        &words("--memory-type generic --pages 2048 --vmemmap-shift 9 --strategy streaming --nid 3")[..],
    );
    for key in [
        "start_pfn",
        "nr_pages",
        "struct_page_size",
        "page_addr_base",
        "pgmap_addr",
        "memory_type",
        "vmemmap_shift",
        "altmap",
        "nid",
        "zone",
        "flags_layout",
        "pg_bits",
        "movable_pageblock_pfns",
        "resched_pfns",
        "page_ref_events",
        "strategy",
    ] {
        assert!(meta.get(key).is_some(), "meta.json lacks {key}: {meta}");
    }
    assert_eq!(meta["strategy"], "streaming");
    assert_eq!(meta["struct_page_size"], 64);
    assert_eq!(meta["memory_type"], "generic");
    assert!(meta["altmap"].is_null());
    let start = meta["start_pfn"].as_u64().unwrap();
    let base = meta["page_addr_base"].as_u64().unwrap();
    let bytes = std::fs::read(dir.join("memmap.bin")).unwrap();
    assert_eq!(bytes.len(), 2048 * 64);
    // Tail 5 of the second compound page leads to its head through page_addr_base: Linux 7.2
    // (the default preset) stores the mask GENMASK(63, 9 + 6) | 1, and the tail's own address
    // masked with it is the head's.
    let head = start + 512;
    let tail = head + 5;
    let off = ((tail - start) * 64) as usize;
    let word = u64_at(&bytes, off + 8);
    assert_eq!(word, 0xffff_ffff_ffff_8001);
    assert_eq!((base + (tail - start) * 64) & (word & !1), base + (head - start) * 64);
    // The head holds the pgmap address, and the node is in the flags.
    let hoff = ((head - start) * 64) as usize;
    assert_eq!(u64_at(&bytes, hoff + 8), meta["pgmap_addr"].as_u64().unwrap());
    let fl = &meta["flags_layout"];
    let flags = u64_at(&bytes, hoff);
    let nodes =
        (flags >> fl["nodes_pgshift"].as_u64().unwrap()) & ((1 << fl["nodes_width"].as_u64().unwrap()) - 1);
    assert_eq!(nodes, 3);
    assert_eq!(meta["movable_pageblock_pfns"].as_array().unwrap().len(), 4);
    // Linux 7.2: cond_resched after the section-aligned head in the loop and after the
    // section-aligned pageblock in the pageblock pass.
    assert_eq!(meta["resched_pfns"], 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn slow_and_streaming_dumps_are_identical_and_diff_says_so() {
    let (a, b) = (tmp("slow"), tmp("streaming"));
    let common = [
        "--memory-type",
        "fsdax",
        "--pages",
        "3072",
        "--layout",
        "72",
        "--altmap-reserve",
        "2",
        "--altmap-free",
        "30",
    ];
    dump(&a, &[&common[..], &["--strategy", "slow"]].concat());
    dump(&b, &[&common[..], &["--strategy", "streaming", "--config", "x86_64"]].concat());
    let out = run(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("identical"));
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

#[test]
fn diff_names_the_first_differing_pfn_and_field() {
    let (a, b) = (tmp("fsdax"), tmp("generic"));
    dump(&a, &["--memory-type", "fsdax", "--pages", "512", "--start-pfn", "4096"]);
    dump(&b, &["--memory-type", "generic", "--pages", "512", "--start-pfn", "4096"]);
    let out = run(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("first difference at pfn 0x1000, field _refcount"), "{text}");
    assert!(text.contains("512 struct page(s) differ"), "{text}");
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

#[test]
fn tracepoint_dump_uses_the_slow_path_and_counts_events() {
    let dir = tmp("trace");
    let meta = dump(
        &dir,
        &["--memory-type", "private", "--pages", "512", "--strategy", "streaming", "--page-ref-trace"],
    );
    assert_eq!(meta["strategy"], "slow");
    assert_eq!(meta["strategy_requested"], "streaming");
    assert_eq!(meta["page_ref_events"], 1024, "init_page_count + set_page_count(0) per page");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_arguments_exit_with_status_2_before_any_work() {
    let dir = tmp("bad");
    for args in [
        vec!["zone-device", "--rounds", "0"],
        vec!["zone-device", "--size", "100T"],
        vec!["zone-device", "--size", "12X"],
        vec!["clear", "--size", "1000000G"],
        vec!["--threads", "0", "limits"],
        vec!["--config", "sparc64", "limits"],
        vec!["dump", "zone-device", "--memory-type", "floppy", "--pages", "8", "--out", "/tmp/x"],
        [
            words("dump zone-device --memory-type fsdax --pages 8 --vmemmap-shift 2 --start-pfn 3 --out"),
            vec![dir.to_str().unwrap()],
        ]
        .concat(),
        vec!["diff", "/nonexistent/a", "/nonexistent/b"],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(!String::from_utf8_lossy(&out.stderr).is_empty());
    }
    assert!(!dir.exists(), "a rejected dump must not create its directory");
}

#[test]
fn json_report_follows_the_schema() {
    let svg = tmp("plot").with_extension("svg");
    let out = run(&[
        "zone-device",
        "--size",
        "64M",
        "--rounds",
        "2",
        "--threads",
        "2",
        "--json",
        "--no-progress",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert!(v["machine"].is_object());
    assert_eq!(v["format"], 4);
    assert!(!v["machine"]["backend_name"].as_str().unwrap().is_empty());
    assert!(v["limits"]["fill_zero_gbps"].as_f64().unwrap() > 0.0);
    assert!(v["limits"]["fill_nonzero_gbps"].as_f64().unwrap() > 0.0);
    let names: Vec<&str> =
        v["scenarios"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    // Each scenario: the one-thread run, then the all-core run (`--threads 2`).
    assert_eq!(
        names,
        ["zone-device-fsdax", "zone-device-fsdax", "zone-device-devdax-2m", "zone-device-devdax-2m"]
    );
    let threads: Vec<u64> =
        v["scenarios"].as_array().unwrap().iter().map(|s| s["threads"].as_u64().unwrap()).collect();
    assert_eq!(threads, [1, 2, 1, 2]);
    assert_eq!(v["all_core_threads"], 2);
    assert_eq!(v["limits"]["per_threads"][0]["threads"], 1);
    for sc in v["scenarios"].as_array().unwrap() {
        assert!(sc["struct_pages"].as_u64().unwrap() > 0);
        assert!(sc["bytes"].as_u64().unwrap() > 0);
        let strategies: Vec<&str> =
            sc["results"].as_array().unwrap().iter().map(|r| r["strategy"].as_str().unwrap()).collect();
        assert_eq!(strategies, ["slow", "template", "streaming"]);
        for r in sc["results"].as_array().unwrap() {
            for k in ["first_ms", "rebind_avg_ms", "median_ms", "gbps", "x_limit"] {
                assert!(r[k].as_f64().unwrap() > 0.0, "{k} in {r}");
            }
        }
        assert_eq!(sc["identical_to_slow"], true);
    }
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.contains("<svg") && plot.contains("zone-device-fsdax"));
    let _ = std::fs::remove_file(&svg);
    // Provenance: when, which build, which kernel and CPU.
    let p = &v["provenance"];
    let at = p["generated_at"].as_str().unwrap();
    assert!(at.len() == 20 && at.ends_with('Z') && at.as_bytes()[10] == b'T', "RFC 3339 UTC: {at}");
    assert_eq!(p["version"], env!("CARGO_PKG_VERSION"));
    assert!(p["rustc"].as_str().unwrap().starts_with("rustc "));
    assert!(p["git_commit"].is_null() || p["git_commit"].as_str().unwrap().len() == 40);
    #[cfg(target_os = "linux")]
    assert!(!p["kernel"].as_str().unwrap().is_empty());
    for k in ["name", "vendor", "family", "model", "stepping", "flags"] {
        assert!(p["cpu_model"].get(k).is_some(), "cpu_model.{k}: {p}");
    }
    assert!(v["memory"]["budget_bytes"].as_u64().is_some());
}

/// What a person reads: no line over 120 columns, a verdict per scenario and thread count,
/// times without GB/s where the figure is not a bandwidth, a summary; `--quick` before the
/// subcommand.
#[test]
fn the_text_report_fits_120_columns_with_a_verdict_per_scenario() {
    let runs: [&[&str]; 2] = [
        &["--quick", "--no-progress", "zone-device", "--size", "16M", "--rounds", "2", "--threads", "2"],
        &words("--quick --verbose --no-progress deferred --size 256M --rounds 2 --threads 1")[..],
    ];
    for (args, verdicts) in runs.iter().zip([4, 1]) {
        let out = run(args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.lines().all(|l| l.chars().count() <= 120), "{text}");
        assert_eq!(text.matches("  verdict: ").count(), verdicts, "{text}");
        assert!(text.contains("summary (") && text.contains("memory budget"), "{text}");
    }
    let out = run(runs[1]);
    let text = String::from_utf8(out.stdout).unwrap();
    // deferred: boot times, not a bandwidth; --threads 1 is one thread; --verbose shows rounds.
    assert!(text.contains("deferred [1 thread]"), "{text}");
    assert!(text.contains("full ms") && text.contains("rounds of eager, ms"), "{text}");
    let table: String = text.lines().skip_while(|l| !l.starts_with("deferred")).take(6).collect();
    assert!(!table.contains("GB/s") && !table.contains("x limit"), "{table}");
}

/// A refusal: the expected status, a message on stderr, and no panic.
fn assert_refused(args: &[&str], code: i32, needle: &str) {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    assert!(err.contains(needle), "{args:?}: expected {needle:?} in: {err}");
}

/// Sizes that used to panic (exit 101), wrap or run on a silently rounded size are refused
/// before any work, with a message naming the problem.
#[test]
fn hostile_sizes_are_refused_before_any_work() {
    let cases: &[(&[&str], &str)] = &[
        // Used to panic: the pre-check left these scenarios out.
        (&["clear", "--alloc", "--size", "100G"], "alloc-init-on-alloc"),
        (&["deferred", "--size", "100T"], "deferred"),
        // Used to wrap and pass the check, then panic.
        (&["hugetlb", "--hvo", "off", "--count", "1099511627776"], "overflows"),
        (&["hugetlb", "--hvo", "on", "--count", "1099511627776"], "overflows"),
        (&["all", "--deferred-size", "100T"], "deferred"),
        // Used to fail with a bare "Cannot allocate memory".
        (
            &words("dump zone-device --memory-type fsdax --pages 1099511627776 --out /nonexistent/x")[..],
            "the dump",
        ),
        (
            &["dump", "hugetlb", "--hstate", "1G", "--count", "1099511627776", "--out", "/nonexistent/x"],
            "overflows",
        ),
        (
            &words("dump hugetlb --hstate 2M --count 4 --nodes 4294967295 --out /nonexistent/x")[..],
            "address space",
        ),
        // Used to run on 2 MiB.
        (&["clear", "--size", "3M"], "not a whole number of 2 MiB pages"),
        (&["zone-device", "--size", "3M"], "not a whole number of 2 MiB pages"),
        (&["deferred", "--size", "4097"], "not a whole number of 4 KiB pages"),
        (&["zone-device", "--size", "0"], "smaller than one 2 MiB page"),
        (&["zone-device", "--size", "16E"], "larger than 2^64 - 1 bytes"),
        (&["zone-device", "--size", "18446744073709551615"], "not a whole number"),
        (&["--rounds", "0"], "not in 1..=100000"),
        (&["--threads", "100000"], "not in 1..=1024"),
        // Flags a command does not use.
        (&["--quick", "diff", "a", "b"], "cannot be used with '--quick'"),
        (&words("dump zone-device --memory-type fsdax --pages 8 --out x --plot p.svg")[..], "--plot"),
        (&["limits", "--rounds", "3"], "--rounds"),
        // Parameters the initializers refuse with a typed error.
        (
            &words(
                "dump zone-device --memory-type fsdax --pages 8 --start-pfn 0xffffffffffffffff --out /nonexistent/x",
            )[..],
            "overflows",
        ),
        (
            &words("dump zone-device --memory-type fsdax --pages 8 --nid 4294967295 --out /nonexistent/x")[..],
            "node",
        ),
    ];
    for (args, needle) in cases {
        assert_refused(args, 2, needle);
    }
}

/// A memmap that ends past the configuration's last pfn (here at the top of the pfn space)
/// is a typed error, not a panic (it was exit 101 after the storage was mapped).
#[test]
fn a_memmap_past_the_last_pfn_is_refused() {
    let out = tmp("top-pfn");
    let out = out.to_str().expect("utf-8 temp path");
    let args = [
        "dump",
        "zone-device",
        "--memory-type",
        "generic",
        "--pages",
        "16",
        "--start-pfn",
        "18446744073709551599",
        "--out",
        out,
    ];
    assert_refused(&args, 2, "past the configuration's last pfn");
    let _ = std::fs::remove_dir_all(out);
}

#[test]
fn dump_refuses_to_overwrite_and_never_follows_a_symlink() {
    let dir = tmp("overwrite");
    let d = dir.to_str().unwrap();
    let args = ["dump", "zone-device", "--memory-type", "fsdax", "--pages", "512", "--out", d];
    dump(&dir, &["--memory-type", "fsdax", "--pages", "512"]);
    let before = std::fs::read(dir.join("memmap.bin")).unwrap();
    assert_refused(&args, 2, "memmap.bin: exists");
    assert_eq!(std::fs::read(dir.join("memmap.bin")).unwrap(), before);
    let out = run(&[&args[..], &["--force", "--layout", "72"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::metadata(dir.join("memmap.bin")).unwrap().len(), 512 * 72);
    #[cfg(unix)]
    {
        // A 7-byte victim behind a link named memmap.bin keeps its bytes, with or without --force.
        let victim = dir.with_extension("victim");
        std::fs::write(&victim, "victim!").unwrap();
        let linked = tmp("linked");
        std::fs::create_dir_all(&linked).unwrap();
        std::os::unix::fs::symlink(&victim, linked.join("memmap.bin")).unwrap();
        let l = linked.to_str().unwrap();
        assert_refused(
            &["dump", "zone-device", "--memory-type", "fsdax", "--pages", "512", "--out", l],
            2,
            "exists",
        );
        let out =
            run(&["dump", "zone-device", "--memory-type", "fsdax", "--pages", "512", "--out", l, "--force"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "victim!");
        assert!(!std::fs::symlink_metadata(linked.join("memmap.bin")).unwrap().file_type().is_symlink());
        assert_refused(
            &[
                words("dump zone-device --memory-type fsdax --pages 512 --out"),
                vec![victim.to_str().unwrap()],
            ]
            .concat(),
            2,
            "not a directory",
        );
        let _ = std::fs::remove_file(&victim);
        let _ = std::fs::remove_dir_all(&linked);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Rewrites one field of a dump's meta.json.
fn set_meta(dir: &Path, key: &str, value: serde_json::Value) {
    let path = dir.join("meta.json");
    let mut meta: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    meta[key] = value;
    std::fs::write(&path, serde_json::to_vec(&meta).unwrap()).unwrap();
}

fn copy_dump(from: &Path, name: &str) -> PathBuf {
    // A prefix of its own: tests run in parallel and `tmp` removes what is there.
    let to = tmp(&format!("copy-{name}"));
    std::fs::create_dir_all(&to).unwrap();
    for f in ["meta.json", "memmap.bin"] {
        std::fs::copy(from.join(f), to.join(f)).unwrap();
    }
    to
}

#[test]
fn diff_refuses_malformed_and_incomparable_dumps() {
    let a = tmp("diff-a");
    dump(&a, &["--memory-type", "fsdax", "--pages", "512"]);
    let sa = a.to_str().unwrap();
    let mut made = Vec::new();
    let mut check = |name: &str, edit: &dyn Fn(&Path), needle: &str| {
        let b = copy_dump(&a, name);
        edit(&b);
        assert_refused(&["diff", sa, b.to_str().unwrap()], 2, needle);
        made.push(b);
    };
    // A meta.json claiming 2^58 pages over a 4 KiB file used to wrap and compare "identical".
    check(
        "wrap",
        &|d| {
            set_meta(d, "nr_pages", (1u64 << 58).into());
            std::fs::write(d.join("memmap.bin"), vec![0u8; 4096]).unwrap();
        },
        "overflow",
    );
    check("short", &|d| set_meta(d, "nr_pages", 511.into()), "32768 bytes, but meta.json says 511");
    check("format", &|d| set_meta(d, "format", 2.into()), "field format: version 2");
    check("kind", &|d| set_meta(d, "kind", "floppy".into()), "field kind");
    check("endian", &|d| set_meta(d, "endianness", "middle".into()), "field endianness");
    check("size", &|d| set_meta(d, "struct_page_size", 0.into()), "field struct_page_size");
    check(
        "layout",
        &|d| {
            set_meta(d, "struct_page_size", 72.into());
            std::fs::write(d.join("memmap.bin"), vec![0u8; 512 * 72]).unwrap();
        },
        "struct_page_size differs",
    );
    check("big", &|d| set_meta(d, "endianness", "big".into()), "endianness differs");
    check("start", &|d| set_meta(d, "start_pfn", 0.into()), "start_pfn differs");
    check("json", &|d| std::fs::write(d.join("meta.json"), "{").unwrap(), "meta.json");
    check("nometa", &|d| std::fs::remove_file(d.join("meta.json")).unwrap(), "meta.json: does not exist");
    #[cfg(unix)]
    check(
        "zero",
        &|d| {
            // memmap.bin linked to /dev/zero used to be read until memory ran out.
            std::fs::remove_file(d.join("memmap.bin")).unwrap();
            std::os::unix::fs::symlink("/dev/zero", d.join("memmap.bin")).unwrap();
        },
        "character device",
    );
    for d in made {
        let _ = std::fs::remove_dir_all(d);
    }
    // Still a real diff when only the bytes differ.
    let b = copy_dump(&a, "diff-b");
    let mut bytes = std::fs::read(b.join("memmap.bin")).unwrap();
    bytes[5 * 64 + 24] ^= 1;
    std::fs::write(b.join("memmap.bin"), bytes).unwrap();
    let out = run(&["diff", sa, b.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("pfn 0x100005, field mapping") && text.contains("1 struct page(s) differ"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

/// `--kconfig` reads only a regular file, bounded, plain or gzip'd, and says which file it read.
#[test]
fn kconfig_files_are_read_bounded_plain_or_gzip() {
    let dir = tmp("kconfig");
    std::fs::create_dir_all(&dir).unwrap();
    let zone = |extra: &[&str]| {
        let out = dir.join("out");
        let _ = std::fs::remove_dir_all(&out);
        let mut a = vec!["dump", "zone-device", "--memory-type", "fsdax", "--pages", "512"];
        a.extend_from_slice(extra);
        a.extend(["--out", out.to_str().unwrap()]);
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let text = "CONFIG_NODES_SHIFT=6\n# CONFIG_NUMA_BALANCING is not set\n";
    let plain = dir.join("config");
    std::fs::write(&plain, text).unwrap();
    let gz = dir.join("config.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut enc, text.as_bytes()).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let mut shifts = Vec::new();
    for (path, gzip) in [(&plain, false), (&gz, true)] {
        let args = zone(&["--kconfig", path.to_str().unwrap()]);
        let out = bin().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {err}");
        assert!(err.contains(&format!("kconfig: read {}", path.display())), "{err}");
        assert_eq!(err.contains(", gzip)"), gzip, "{err}");
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("out/meta.json")).unwrap()).unwrap();
        shifts.push(meta["flags_layout"]["nodes_width"].clone());
    }
    assert_eq!(shifts[0], 6, "the .config's NODES_SHIFT is applied");
    assert_eq!(shifts[0], shifts[1], "plain and gzip'd read the same");
    let refused = |path: &str, code: i32, needle: &str| {
        let args = zone(&["--kconfig", path]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_refused(&args, code, needle);
    };
    refused("/dev/zero", 2, "not a regular file");
    refused(dir.to_str().unwrap(), 2, "a directory, not a regular file");
    refused(dir.join("missing").to_str().unwrap(), 2, "missing");
    let bin_file = dir.join("binary");
    std::fs::write(&bin_file, [0xffu8, 0xfe, 0, 1]).unwrap();
    refused(bin_file.to_str().unwrap(), 2, "not a text file");
    let bad_gz = dir.join("bad.gz");
    std::fs::write(&bad_gz, [0x1f, 0x8b, 8, 0, 0, 0]).unwrap();
    refused(bad_gz.to_str().unwrap(), 2, "gzip data");
    #[cfg(unix)]
    {
        // A FIFO with no writer would block an open for reading forever: refused before opening.
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: `c` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        refused(fifo.to_str().unwrap(), 2, "a FIFO, not a regular file");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fresh directory `name` holding a user's `chart.svg`.
fn dir_with_chart(name: &str) -> (PathBuf, PathBuf) {
    let dir = tmp(name);
    std::fs::create_dir_all(&dir).unwrap();
    let chart = dir.join("chart.svg");
    std::fs::write(&chart, "a user's chart").unwrap();
    (dir, chart)
}

/// `--plot FILE` never replaces a file without `--force`, and an unusable path is refused
/// before anything is measured.
#[test]
fn plot_files_are_checked_before_the_run_and_never_replaced_silently() {
    let (dir, existing) = dir_with_chart("plot");
    let e = existing.to_str().unwrap();
    let t = std::time::Instant::now();
    assert_refused(&["zone-device", "--quick", "--plot", e], 2, "chart.svg: exists");
    assert_refused(
        &["zone-device", "--quick", "--plot", dir.join("no/such/dir/p.svg").to_str().unwrap()],
        2,
        "no/such/dir does not exist",
    );
    assert_refused(&["zone-device", "--quick", "--plot", dir.to_str().unwrap()], 2, "--plot");
    assert!(t.elapsed() < std::time::Duration::from_secs(20), "refused only after measuring");
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "a user's chart");
    let out = fast_plot(&existing, true);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read_to_string(&existing).unwrap().contains("<svg"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn diff_compares_content_not_preset_names_and_reports_json() {
    let (a, b) = (tmp("preset-6.12"), tmp("kernel-6.12"));
    let common = ["--memory-type", "generic", "--pages", "1024", "--vmemmap-shift", "9"];
    dump(&a, &[&common[..], &["--config", "x86_64-6.12"]].concat());
    dump(&b, &[&common[..], &["--config", "x86_64", "--kernel", "6.12"]].concat());
    let out = run(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.starts_with("identical") && text.contains("note: presets x86_64-6.12"), "{text}");
    // Order-0 pages where A has order-9 compound pages.
    let c = tmp("generic-order0");
    dump(&c, &["--memory-type", "generic", "--pages", "1024", "--config", "x86_64-6.12"]);
    let out = run(&["diff", "--json", a.to_str().unwrap(), c.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(j["identical"], false);
    assert!(j["differing_pages"].as_u64().unwrap() > 0);
    assert!(j["roles"].as_array().unwrap().iter().any(|r| r["role"] == "head"), "{j}");
    for d in [a, b, c] {
        let _ = std::fs::remove_dir_all(&d);
    }
}

/// A timing run small enough to finish in a second or two (when nothing refuses it).
const FAST: [&str; 13] = [
    "zone-device",
    "--quick",
    "--align",
    "4K",
    "--size",
    "2M",
    "--rounds",
    "1",
    "--threads",
    "1",
    "--no-progress",
    "--memory-budget",
    "200M",
];

fn fast_plot(path: &Path, force: bool) -> Output {
    let mut args: Vec<&str> = FAST.to_vec();
    args.extend(["--plot", path.to_str().expect("utf-8 temp path")]);
    if force {
        args.push("--force");
    }
    run(&args)
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

fn file_type(path: &Path) -> std::fs::FileType {
    std::fs::symlink_metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).file_type()
}

/// `--plot F --force` used to replace a FIFO, a socket, a character device or a link to one
/// with a plain file (as root, /dev/null itself), and the refusal without --force recommended
/// adding it. Neither with nor without --force is one replaced now, and the message does not
/// suggest --force.
#[test]
fn plot_never_replaces_a_device_fifo_socket_or_directory() {
    let dir = tmp("plot-special");
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let sock = dir.join("sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let mut specials = vec![fifo, sock, sub];
    if is_root() {
        // A /dev/null of the test's own: character device 1:3.
        let chr = dir.join("null");
        let made = Command::new("mknod").arg(&chr).args(["c", "1", "3"]).status().unwrap();
        assert!(made.success(), "mknod as root");
        specials.push(chr);
    } else {
        eprintln!("skipped the character device: not root (mknod needs CAP_MKNOD)");
    }
    for s in specials.clone() {
        let link = dir.join(format!("link-to-{}", s.file_name().unwrap().to_string_lossy()));
        std::os::unix::fs::symlink(&s, &link).unwrap();
        specials.push(link);
    }
    for path in &specials {
        let before = file_type(path);
        for force in [false, true] {
            let out = fast_plot(path, force);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{} force {force}: {err}", path.display());
            assert!(err.contains(&*path.to_string_lossy()), "{err}");
            assert!(err.contains("never replaced") || err.contains("a directory"), "{err}");
            assert!(!err.contains("--force"), "suggests --force for {}: {err}", path.display());
            assert!(out.stdout.is_empty(), "refused only after the run started");
            assert_eq!(file_type(path), before, "{} was replaced", path.display());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A regular file and a link are replaced only with --force, and the refusal says which it is;
/// a link is replaced itself, what it points to keeps its bytes.
#[test]
fn plot_force_replaces_a_regular_file_or_a_link_itself() {
    let (dir, file) = dir_with_chart("plot-replace");
    let out = fast_plot(&file, false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.ends_with("chart.svg: exists; add --force to replace it\n"), "{err}");
    let victim = dir.join("victim");
    std::fs::write(&victim, "victim!").unwrap();
    let link = dir.join("link.svg");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let out = fast_plot(&link, false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("link.svg: exists, a symbolic link to"), "{err}");
    assert!(err.contains("add --force to replace the link itself"), "{err}");
    let out = fast_plot(&link, true);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(file_type(&link).is_file(), "the link itself is replaced");
    assert!(std::fs::read_to_string(&link).unwrap().contains("<svg"));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "victim!");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A 250-character `--plot` name used to fail only after the whole run (its temporary name
/// was too long); names up to NAME_MAX work, and what cannot work is refused before the run.
#[test]
fn plot_paths_are_checked_against_name_max_and_path_max_before_the_run() {
    let dir = tmp("plot-names");
    std::fs::create_dir_all(&dir).unwrap();
    let long = dir.join("a".repeat(246) + ".svg");
    let out = fast_plot(&long, false);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read_to_string(&long).unwrap().contains("<svg"));
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    let refusals: Vec<(PathBuf, &str)> = vec![
        (
            dir.join("b".repeat(256)),
            "the file name is 256 bytes, more than the 255 its file system allows (NAME_MAX)",
        ),
        (dir.join("c".repeat(300)), "the file name is 300 bytes"),
        (
            dir.join(vec!["d".repeat(250); 17].join("/")).join("x.svg"),
            "more than the 4095 a path may have (PATH_MAX)",
        ),
        (dir.join("missing/x.svg"), "missing does not exist (the directory is not created)"),
        (long.join("x.svg"), "is not a directory"),
        (PathBuf::from(format!("{}/", dir.display())), "names no file"),
        (dir.join("."), "names no file"),
        // The kernel refuses to create files here: found when the run starts, before measuring.
        (PathBuf::from("/proc/memmap-bench-plot.svg"), "/proc: create a file in the directory"),
    ];
    for (path, needle) in refusals {
        let out = fast_plot(&path, true);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", path.display());
        assert!(err.contains(needle), "{}: expected {needle:?} in {err}", path.display());
        assert!(out.stdout.is_empty(), "{}: measured before refusing", path.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A named command whose every scenario the budget leaves out used to measure the limits and
/// exit 0 having run nothing; it is refused (exit status 2, as every refusal before work),
/// with the budget each scenario would need.
#[test]
fn a_command_with_nothing_to_run_is_refused_with_the_budget_it_needs() {
    let out = run(&["clear", "--memory-budget", "200M", "--no-progress"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.starts_with("error: clear: nothing would run"), "{err}");
    assert!(err.contains("it needs 256 MiB of memory, 320 MiB with the bench's own 64 MiB"), "{err}");
    assert!(err.contains("--memory-budget 320 MiB or more would hold it"), "{err}");
    assert!(out.stdout.is_empty());
    let out = run(&["guest-memory", "--memory-budget", "200M", "--no-progress"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `limits` suggested `--memory-budget`, which it did not take; it takes it now.
#[test]
fn limits_takes_the_memory_budget_it_suggests() {
    assert_refused(&["limits", "--memory-budget", "64M"], 2, "--memory-budget 128 MiB or more would hold it");
    let out = run(&["limits", "--quick", "--no-progress", "--memory-budget", "128M"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains("memory budget 128 MiB (--memory-budget)") && text.contains("2 x 32 MiB"),
        "{text}"
    );
}

/// Messages that were wrong or misleading, and what they say now: each must contain the first
/// text and none of the second.
#[test]
fn refusals_say_what_is_wrong_and_what_would_be_accepted() {
    let cases: &[(&[&str], &str, &[&str])] = &[
        // 128 MiB "more than" a budget of 100 MiB, and no size to make smaller.
        (
            &["--memory-budget", "100M"],
            "needs 64 MiB of memory, 128 MiB with the bench's own 64 MiB: more than the memory budget 100 MiB",
            &["the bench itself 64 MiB more", "use a smaller size"],
        ),
        (&["hugetlb", "--count", "0"], "the count must be at least 1", &["18446744073709551615"]),
        (
            &["dump", "hugetlb", "--hstate", "2M", "--count", "1", "--nodes", "0", "--out", "x"],
            "at least 1",
            &["4294967295"],
        ),
        (
            &["hugetlb", "--count", "18446744073709551615"],
            "overflows a 64-bit byte count: use a smaller --count",
            &[],
        ),
        // A huge page size the configuration's architecture and page size lack, and no size.
        (
            &["dump", "hugetlb", "--hstate", "64K", "--config", "arm64-16k", "--count", "1", "--out", "x"],
            "--hstate 64K: unsupported huge page size 0x10000 (the configuration has 1G, 32M, 2M) (--config arm64-16k)",
            &[],
        ),
        (
            &["dump", "hugetlb", "--hstate", "2MB", "--count", "1", "--out", "x"],
            "--hstate 2MB: not a size (the configuration x86_64 has 1G, 2M)",
            &[],
        ),
        (&["all", "--hugetlb-count", "18446744073709551615"], "use a smaller --hugetlb-count", &[]),
        (
            &["zone-device", "--size", "100G", "--memory-budget", "4G"],
            "; use a smaller --size or a --memory-budget of ",
            &[],
        ),
        // A size two decimals would round to 16.00 EiB, and a "last pfn" that was one past it.
        (
            &["zone-device", "--size", "18446744073707454464"],
            "a 16 EiB - 2 MiB device from pfn 0x1000000 ends past config x86_64's pfns (below 0x400000000): at most",
            &["16.00 EiB", "last pfn"],
        ),
        (
            &["sweep", "--min-size", "18446744073709551615"],
            "--min-size 16 EiB - 1 B is not a whole number",
            &["16 EiB is"],
        ),
        (&["sweep", "--max-size", "1E"], "of memmap fits (--max-size)", &["last pfn"]),
        (
            &["sweep", "--min-size", "1G", "--memory-budget", "512M"],
            "or more would hold it",
            &["use a smaller size"],
        ),
        (
            &["hotplug", "--size", "4K"],
            "hotplug: size 4 KiB is not a whole number of 128 MiB memory blocks (config x86_64's sections; nearest: 128 MiB)",
            &["hotplug size"],
        ),
    ];
    for (args, want, never) in cases {
        let out = run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: expected {want:?} in {err}");
        for n in *never {
            assert!(!err.contains(n), "{args:?}: {n:?} in {err}");
        }
    }
}

/// Accepted but extreme values (a thousand threads, one round, the smallest sizes) run to the
/// end of every timing command: no panic (exit 101), no signal.
#[test]
fn every_timing_command_runs_with_extreme_accepted_values() {
    // 700 MiB: deferred's allocator check needs 512 MiB at any zone size.
    let common =
        ["--quick", "--no-progress", "--rounds", "1", "--threads", "1024", "--memory-budget", "700M"];
    for cmd in [
        &["zone-device", "--size", "2M"][..],
        &["hugetlb", "--count", "1"],
        &["clear", "--alloc", "--size", "2M"],
        &["deferred", "--size", "4K"],
        &["hotplug", "--size", "128M"],
        &["guest-memory", "--size", "4M"],
    ] {
        let out = run(&[cmd, &common[..]].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("this host ignores MADV_POPULATE_WRITE") {
            // An emulator that answers madvise without doing it (qemu-user): the guest-memory
            // scenario has nothing to measure, says so and fails the run.
            assert_eq!((cmd[0], out.status.code()), ("guest-memory", Some(1)), "{err}");
            continue;
        }
        assert_eq!(out.status.code(), Some(0), "{cmd:?}: {err}");
        assert!(!err.contains("panicked"), "{cmd:?}: {err}");
    }
    // The sweep's flush buffer is twice the last-level cache: 960 MiB on a Xeon guest with
    // 480 MiB of L3.
    let out = run(&words("sweep --quick --no-progress --max-size 64K --rounds 1 --memory-budget 2G")[..]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Scenario names and struct page counts a command reports.
type Expected = Vec<(&'static str, u64)>;

/// `hugetlb` and `zone-device` run on every preset, each page size and architecture with its
/// own hstate and struct page counts, and report a ratio to the limit for every strategy.
/// `hugetlb`'s 1 GiB pages are the configuration's (a PUD on x86-64, riscv64, ppc64el and arm64
/// 4K; a contiguous PMD run on arm64 16K; 16,384 base pages on ppc64el 64K); its HVO case runs
/// where the configuration builds HVO and is left out with the reason elsewhere.
#[test]
fn every_preset_runs_hugetlb_and_zone_device_with_ratios_to_the_limit() {
    let common = ["--quick", "--no-progress", "--json", "--rounds", "1", "--threads", "1"];
    for &cfg in memmap_core::KernelConfig::ALL {
        let h = hugetlb_init::Hstate::new(&cfg, 1 << 30).expect("every preset has 1 GiB pages");
        let tails = h.nr_pages() - h.vmemmap_reserve_pages::<memmap_core::Page64>();
        let hvo = hugetlb_init::hvo_availability::<memmap_core::Page64>(
            &cfg,
            &hugetlb_init::HvoMode::On.params(),
            h,
        );
        // 16 MiB of the configuration's base pages; devdax's 2 MiB compound pages write two
        // vmemmap pages of struct pages each where the DAX vmemmap is deduplicated (more than
        // two vmemmap pages per compound page: 4 KiB pages only), every struct page elsewhere.
        let pages = (16u64 << 20) >> cfg.page_shift;
        let per = (2u64 << 20) >> cfg.page_shift;
        let dedup = cfg.optimize_dax_vmemmap && per * 64 / cfg.page_size() > 2;
        let devdax = if dedup { pages / per * (2 * cfg.page_size() / 64) } else { pages };
        let runs: [(&[&str], Expected); 2] = [
            (
                &["hugetlb", "--count", "1"],
                if hvo.is_ok() {
                    vec![
                        ("hugetlb-1g-nohvo", tails),
                        ("hugetlb-1g-hvo", h.vmemmap_reserve_pages::<memmap_core::Page64>()),
                    ]
                } else {
                    vec![("hugetlb-1g-nohvo", tails)]
                },
            ),
            (
                &["zone-device", "--size", "16M"],
                vec![("zone-device-fsdax", pages), ("zone-device-devdax-2m", devdax)],
            ),
        ];
        for (cmd, want) in runs {
            let args = [cmd, &common[..], &["--config", cfg.name]].concat();
            let out = run(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
            let got: Vec<(&str, u64)> = v["scenarios"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| (s["name"].as_str().unwrap(), s["struct_pages"].as_u64().unwrap()))
                .collect();
            assert_eq!(got, want, "{args:?}");
            for sc in v["scenarios"].as_array().unwrap() {
                for r in sc["results"].as_array().unwrap() {
                    assert!(r["x_limit"].as_f64().is_some_and(|x| x > 0.0), "{args:?}: {r}");
                }
            }
            let skipped = v["skipped"].as_array().unwrap();
            if cmd[0] == "hugetlb" && hvo.is_err() {
                assert_eq!(skipped.len(), 1, "{args:?}: {skipped:?}");
                assert!(skipped[0]["reason"].as_str().unwrap().contains("no HVO"), "{skipped:?}");
            } else {
                assert!(skipped.is_empty(), "{args:?}: {skipped:?}");
            }
        }
    }
}
