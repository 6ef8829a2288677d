//! What the bench's tests share: starting the program under test.
#![allow(dead_code, unreachable_pub)]

use std::process::Command;

/// The command line that starts `memmap-bench`: the program itself, or, when the tests run
/// under an emulator, the emulator and the program. The emulator is cargo's runner for this
/// architecture, from the environment (`CARGO_TARGET_<TRIPLE>_RUNNER`, as the cross image and CI
/// set it for qemu-user): cargo wraps only the test binary in it, not the programs a test starts.
pub fn program_words() -> Vec<String> {
    let arch = format!("CARGO_TARGET_{}", std::env::consts::ARCH.to_ascii_uppercase());
    let runner = std::env::vars()
        .find(|(k, v)| {
            k.starts_with(&arch) && k.contains("_LINUX_") && k.ends_with("_RUNNER") && !v.trim().is_empty()
        })
        .map(|(_, v)| v)
        .unwrap_or_default();
    let mut words: Vec<String> = runner.split_whitespace().map(str::to_owned).collect();
    words.push(env!("CARGO_BIN_EXE_memmap-bench").to_owned());
    words
}

/// `memmap-bench` as a [`Command`] (see [`program_words`]).
pub fn program() -> Command {
    let words = program_words();
    let mut cmd = Command::new(&words[0]);
    cmd.args(&words[1..]);
    cmd
}
