//! The command line as a hostile or careless user meets it: each refusal exits 2 with a message
//! naming the input, before any work (no kernel is fetched, nothing is written).

use std::process::Command;

/// `kernel-oracle` as a command: the program itself, or, when the tests run under an emulator,
/// the emulator and the program. The emulator is cargo's runner for this architecture, from the
/// environment (`CARGO_TARGET_<TRIPLE>_RUNNER`, as the cross image and CI set it for qemu-user):
/// cargo wraps only the test binary in it, not the programs a test starts.
fn program() -> Command {
    let arch = format!("CARGO_TARGET_{}", std::env::consts::ARCH.to_ascii_uppercase());
    let runner = std::env::vars()
        .find(|(k, v)| {
            k.starts_with(&arch) && k.contains("_LINUX_") && k.ends_with("_RUNNER") && !v.trim().is_empty()
        })
        .map(|(_, v)| v)
        .unwrap_or_default();
    let mut words = runner.split_whitespace();
    match words.next() {
        Some(emulator) => {
            let mut cmd = Command::new(emulator);
            cmd.args(words).arg(env!("CARGO_BIN_EXE_kernel-oracle"));
            cmd
        }
        None => Command::new(env!("CARGO_BIN_EXE_kernel-oracle")),
    }
}

fn oracle(args: &[&str]) -> (i32, String) {
    let out = program().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    (out.status.code().unwrap_or(-1), err)
}

#[test]
fn refusals_name_the_input_and_happen_before_any_work() {
    let tmp = tempfile::Builder::new().prefix("oracle-cli-").tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let c = cache.to_str().unwrap();
    // An unknown configuration is refused before the kernels are fetched.
    let (code, err) = oracle(&["--cache", c, "run", "nosuch", "--kernel", "7.2-amd64"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown configuration \"nosuch\" (see `list`)"), "{err}");
    let (code, err) = oracle(&["--cache", c, "run", "--kernel", "7.2-amd64"]);
    assert!(code == 2 && err.contains("run needs configuration names or --all"), "{err}");
    assert!(!cache.exists(), "the cache was touched");
    // An empty golden directory is no pass.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let (code, err) = oracle(&["check", "--golden", empty.to_str().unwrap()]);
    assert!(code == 2 && err.contains("no golden extracts"), "{err}");
    // A missing directory is called missing, not "not a directory".
    let missing = tmp.path().join("missing");
    let (code, err) = oracle(&["compare", missing.to_str().unwrap()]);
    assert!(code == 2 && err.contains("missing: does not exist"), "{err}");
    // A file where a golden directory should be.
    let file = tmp.path().join("file");
    std::fs::write(&file, "").unwrap();
    let (code, err) = oracle(&["check", "--golden", file.to_str().unwrap()]);
    assert!(code == 2 && err.contains("file: not a directory"), "{err}");
    // An OS error is printed once.
    let (_, err) =
        oracle(&["run", "--all", "--kernel-image", "/nonexistent-image", "--modules", "/", "--config", "/"]);
    assert_eq!(err.trim_end(), "kernel-oracle: error: --kernel-image: /nonexistent-image: does not exist");
}

#[test]
fn build_cached_only_says_plainly_that_nothing_is_cached() {
    let tmp = tempfile::Builder::new().prefix("oracle-cli-").tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let out =
        program().args(["--cache", cache.to_str().unwrap(), "build", "--cached-only"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(!text.contains("panicked"), "{text}");
    // Status 3, not a failure: CI reports the module configurations as skipped.
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains("no cached Rust-enabled kernel build"), "{text}");
    assert!(!cache.exists(), "the cache was touched");
}
