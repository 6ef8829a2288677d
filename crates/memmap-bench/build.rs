//! Build provenance for the report: the rustc that compiles the bench and, when it is built from
//! a git checkout, the commit. Missing tools or a tarball without `.git` leave the values unset;
//! the build never fails for want of them.

use std::path::Path;
use std::process::Command;

fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    if let Some(v) = output(Command::new(rustc).arg("--version")) {
        println!("cargo:rustc-env=MEMMAP_BENCH_RUSTC={v}");
    }
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default();
    let git = |args: &[&str]| output(Command::new("git").arg("-C").arg(&dir).args(args));
    if let Some(commit) = git(&["rev-parse", "HEAD"]) {
        println!("cargo:rustc-env=MEMMAP_BENCH_GIT_COMMIT={commit}");
        // Rebuild when HEAD moves: HEAD itself, the branch it names, and packed refs.
        let mut watch = vec!["HEAD".to_string(), "packed-refs".to_string()];
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch.push(r);
        }
        for w in watch {
            if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", &w]) {
                if Path::new(&p).exists() {
                    println!("cargo:rerun-if-changed={p}");
                }
            }
        }
    }
}
