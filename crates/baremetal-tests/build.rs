//! Passes the linker script of the target architecture to the kernel's link.

use std::env;
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    println!("cargo::rerun-if-changed=build.rs");
    if os != "none" {
        // src/main.rs stops such a build with a message naming the supported targets.
        return;
    }
    let script = match arch.as_str() {
        "x86_64" => "x86_64.ld",
        "aarch64" => "aarch64.ld",
        "riscv64" => "riscv64.ld",
        // loongarch64 runs as a Linux user-mode program: the linker's default layout.
        _ => return,
    };
    let path = dir.join("link").join(script);
    println!("cargo::rerun-if-changed={}", path.display());
    println!("cargo::rustc-link-arg-bins=-T{}", path.display());
}
