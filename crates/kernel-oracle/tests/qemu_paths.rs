//! QEMU started with its scratch files in a directory whose name holds a comma and a space
//! (`-chardev file,path=` and `-qmp unix:` are comma-separated options): the serial file and
//! the QMP socket must land where the oracle reads them. No kernel is booted (`-machine none`).
//!
//! Skipped with a message where `qemu-system-x86_64` is not installed, unless
//! `KERNEL_ORACLE_REQUIRE_QEMU=1` (the CI oracle step), which makes its absence a failure.

use std::path::Path;

use kernel_oracle::files::WorkDir;
use kernel_oracle::guest::qemu::Guest;

#[test]
fn qemu_finds_its_files_under_a_path_with_a_comma_and_a_space() {
    let qemu = "qemu-system-x86_64";
    if !kernel_oracle::cmd::on_path(qemu) {
        assert!(
            std::env::var_os("KERNEL_ORACLE_REQUIRE_QEMU").is_none(),
            "{qemu} is not installed and KERNEL_ORACLE_REQUIRE_QEMU is set"
        );
        eprintln!("skipped: {qemu} is not installed");
        return;
    }
    let root = tempfile::Builder::new().prefix("oracle qemu,paths ").tempdir().unwrap();
    let cache = root.path().join("cache, with a comma");
    let work = WorkDir::new(&cache, "a,b c").unwrap();
    assert!(work.path().to_str().unwrap().contains(", "));
    let args: Vec<String> = ["-machine", "none", "-nodefaults", "-accel", "tcg"].map(String::from).to_vec();
    let mut guest = Guest::start(qemu, &args, work.path()).expect("QEMU starts and its QMP socket is found");
    let status = guest.qmp().execute("query-status", serde_json::json!({})).unwrap();
    assert!(status.get("status").is_some(), "{status}");
    assert!(
        Path::new(&work.path().join("console.log")).is_file(),
        "the serial log is where the oracle reads it"
    );
    assert!(work.path().join("qmp.sock").exists());
    guest.quit();
}
