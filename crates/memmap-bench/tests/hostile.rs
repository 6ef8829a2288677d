//! Every flag of every subcommand, each with hostile values (empty, zero, one, negative, 2^64 - 1
//! and 2^64, sizes written both ways, junk, non-ASCII, a 300-character word, special files),
//! through the command line's validation: an error with exit status 2 (0 for `--help`) or a
//! validated invocation, never a panic. The values are validated only, nothing runs; what the
//! accepted extremes do when run is `tests/cli.rs`.

use memmap_bench::cli::{CliError, command, parse};
use memmap_bench::memory::MemInfo;

/// This project's machine: 24 GiB, 20 available.
const MACHINE: MemInfo = MemInfo::with_available(20 << 30, 24 << 30);

fn hostile_values() -> Vec<String> {
    let mut v: Vec<String> = [
        "",
        "0",
        "1",
        "-1",
        "-0",
        "18446744073709551615",
        "18446744073709551616",
        "4294967296",
        "16MiB",
        "16.00 MiB",
        "16 MiB",
        "1e3",
        "0x",
        "0xffffffffffffffff",
        "1.5",
        "junk",
        "auto",
        "\u{221e}",
        "/dev/zero",
        "/dev/null",
        ".",
        "/",
        "/nonexistent-memmap-bench-test/x",
    ]
    .map(String::from)
    .to_vec();
    v.push("a".repeat(300));
    v
}

/// The arguments every run of `path` needs besides the flag under test, `skip` (left out when
/// it is one of them, with `--count` when it is `--place`, which excludes it).
fn base(path: &[&str], out: &str, skip: &str) -> Vec<String> {
    let required: &[(&str, &str)] = match path {
        ["dump", "zone-device"] => &[("--memory-type", "fsdax"), ("--pages", "64"), ("--out", out)],
        ["dump", "hugetlb"] => &[("--hstate", "2M"), ("--count", "1"), ("--out", out)],
        ["dump", "hotplug"] => &[("--pages", "32768"), ("--out", out)],
        _ => &[],
    };
    let mut v: Vec<String> = path.iter().map(|s| s.to_string()).collect();
    for (flag, value) in required {
        if *flag != skip && !(skip == "--place" && *flag == "--count") {
            v.extend([flag.to_string(), value.to_string()]);
        }
    }
    if path == ["diff"] {
        v.extend(["/nonexistent-memmap-bench-test/a".into(), "/nonexistent-memmap-bench-test/b".into()]);
    }
    v
}

/// Parses `args`: no panic; a clap error exits 0 (help) or 2.
fn check(args: &[String]) {
    let argv = std::iter::once("memmap-bench".to_string()).chain(args.iter().cloned());
    match parse(argv, &MACHINE) {
        Ok(_) => {}
        Err(CliError::Clap(e)) => assert!(matches!(e.exit_code(), 0 | 2), "{args:?}: {e}"),
        Err(CliError::Usage(m)) => assert!(!m.is_empty(), "{args:?}: an empty message"),
    }
}

#[test]
fn every_flag_with_hostile_values_is_refused_or_validated_without_a_panic() {
    let out = std::env::temp_dir().join(format!("memmap-bench-hostile-{}", std::process::id()));
    let out = out.to_str().expect("utf-8 temp path").to_string();
    let mut root = command();
    root.build();
    let mut paths: Vec<Vec<&str>> = vec![vec![]];
    for sub in root.get_subcommands() {
        paths.push(vec![sub.get_name()]);
        for inner in sub.get_subcommands() {
            paths.push(vec![sub.get_name(), inner.get_name()]);
        }
    }
    let values = hostile_values();
    let mut runs = 0;
    for path in &paths {
        let mut cmd = &root;
        for p in path {
            cmd = cmd.find_subcommand(p).expect("listed above");
        }
        if cmd.has_subcommands() && !path.is_empty() {
            continue;
        }
        for arg in cmd.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            let flag = format!("--{long}");
            let args = base(path, &out, &flag);
            if arg.get_num_args().is_some_and(|n| n.takes_values()) {
                for v in &values {
                    check(&[args.clone(), vec![flag.clone(), v.clone()]].concat());
                    check(&[args.clone(), vec![format!("{flag}={v}")]].concat());
                    runs += 2;
                }
            } else {
                check(&[args.clone(), vec![flag.clone()]].concat());
                check(&[args.clone(), vec![flag.clone(), flag.clone()]].concat());
                runs += 2;
            }
        }
        if path == &["diff"] {
            for v in &values {
                check(&["diff".into(), v.clone(), v.clone()]);
                runs += 1;
            }
        }
    }
    assert!(runs > 1000, "{runs} command lines");
    let _ = std::fs::remove_dir_all(&out);
}
