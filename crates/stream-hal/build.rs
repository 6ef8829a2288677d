//! Tells the crate when a sanitizer is on, the one backend input `cfg` cannot express, and
//! takes the two user switches from the environment as well as from `--cfg` (and passes the
//! target architecture's name on, for the generic backend's reason).
//!
//! The backend is chosen in `src/arch/mod.rs` from what rustc already knows: `target_arch`,
//! `target_feature` (SSE2 or not), `cfg(miri)`, and the user's `--cfg stream_hal_force_generic`,
//! `--cfg stream_hal_no_cpuid` and test-only `--cfg stream_hal_emulate` switches (declared here
//! for `unexpected_cfgs`). Those work for every target, custom target JSON files built with
//! `-Zbuild-std` included, because they come from the target specification rather than from its
//! name. The one thing stable `cfg` cannot see is a sanitizer (`cfg(sanitize = "...")` is
//! unstable), so this script reads `CARGO_CFG_SANITIZE` (nightly `-Zsanitizer=...`) and the
//! sanitizer targets' names (`x86_64-unknown-linux-gnuasan`, ...) and emits the opt-out
//! `cfg(stream_hal_sanitizer)` plus the sanitizer's name for `backend()`.
//!
//! The user switches also come from the environment: `STREAM_HAL_NO_CPUID=1` and
//! `STREAM_HAL_FORCE_GENERIC=1` emit the same `cfg`s as `--cfg stream_hal_no_cpuid` and
//! `--cfg stream_hal_force_generic`. A `RUSTFLAGS` in the environment replaces every
//! `rustflags` of `.cargo/config.toml`, so a switch kept there is lost silently; the `[env]`
//! table of `.cargo/config.toml` is not replaced by it, which makes the variables the robust
//! place for a kernel's choice.
//!
//! Like crossbeam-utils' build script, it only ever turns the streaming backends (or the
//! implicit CPU feature detection) *off*: a build that skips the script (a build system that
//! does not run build scripts) still compiles the normal path, and there the switches must be
//! `--cfg` flags.

use std::env;

/// The environment variables that turn a switch on, and the `cfg` each emits.
const ENV_SWITCHES: &[(&str, &str)] = &[
    ("STREAM_HAL_NO_CPUID", "stream_hal_no_cpuid"),
    ("STREAM_HAL_FORCE_GENERIC", "stream_hal_force_generic"),
];

/// Target-name suffixes of the sanitizer targets and the sanitizer each implies (longest suffix
/// first: `hwasan` also ends in `asan`).
const SANITIZER_TARGET_SUFFIXES: &[(&str, &str)] =
    &[("hwasan", "hwaddress"), ("asan", "address"), ("msan", "memory"), ("tsan", "thread")];

fn main() {
    println!("cargo::rustc-check-cfg=cfg(stream_hal_sanitizer)");
    println!("cargo::rustc-check-cfg=cfg(stream_hal_emulate)");
    println!("cargo::rustc-check-cfg=cfg(stream_hal_force_generic)");
    println!("cargo::rustc-check-cfg=cfg(stream_hal_no_cpuid)");
    // Read by Cargo.toml only (it drops the benchmarks' dev-dependency), declared so that the
    // flag in RUSTFLAGS is a known cfg.
    println!("cargo::rustc-check-cfg=cfg(stream_hal_no_bench_deps)");
    println!("cargo::rerun-if-changed=build.rs");
    env_switches();

    let target = env::var("TARGET").unwrap_or_default();
    let mut sanitizers: Vec<String> = env::var("CARGO_CFG_SANITIZE")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    if let Some(s) = sanitizer_of_target(&target) {
        if !sanitizers.iter().any(|x| x == s) {
            sanitizers.push(s.to_owned());
        }
    }
    sanitizers.sort();
    if !sanitizers.is_empty() {
        println!("cargo::rustc-cfg=stream_hal_sanitizer");
    }
    println!("cargo::rustc-env=STREAM_HAL_SANITIZERS={}", sanitizers.join(","));
    // The architecture's name for `GenericReason::UnsupportedTarget`.
    println!(
        "cargo::rustc-env=STREAM_HAL_TARGET_ARCH={}",
        env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default()
    );
}

/// Emits the `cfg` of each switch variable that is set to on ([`ENV_SWITCHES`]).
fn env_switches() {
    for &(var, cfg) in ENV_SWITCHES {
        println!("cargo::rerun-if-env-changed={var}");
        match env::var(var) {
            Err(env::VarError::NotPresent) => {}
            Ok(value) => match switch_value(&value) {
                Some(true) => println!("cargo::rustc-cfg={cfg}"),
                Some(false) => {}
                None => refuse(&format!(
                    "{var}={value:?} is not a switch value: use 1 or true to turn `{cfg}` on, \
                     0, false or an empty value to leave it off"
                )),
            },
            Err(env::VarError::NotUnicode(value)) => refuse(&format!(
                "{var}={value:?} is not UTF-8: use 1 or true to turn `{cfg}` on, 0 or false to leave it off"
            )),
        }
    }
}

/// Whether a switch variable's value turns the switch on (`None` for a value that is not a
/// switch value, so that a typo such as `STREAM_HAL_NO_CPUID=yes` cannot leave detection on
/// silently).
fn switch_value(value: &str) -> Option<bool> {
    match value.trim() {
        "1" | "true" => Some(true),
        "0" | "false" | "" => Some(false),
        _ => None,
    }
}

/// Fails the build with `message` (Cargo prints the script's standard error).
fn refuse(message: &str) -> ! {
    eprintln!("error: stream-hal: {message}");
    std::process::exit(1);
}

/// `Some("address")` for `x86_64-unknown-linux-gnuasan` and the other sanitizer targets.
fn sanitizer_of_target(target: &str) -> Option<&'static str> {
    SANITIZER_TARGET_SUFFIXES.iter().find_map(|&(suffix, sanitizer)| {
        // Only an environment component carries the suffix (`...-gnuasan`), never a whole
        // component, so what precedes it must still be a letter.
        let stripped = target.strip_suffix(suffix)?;
        stripped.ends_with(|c: char| c.is_ascii_alphabetic()).then_some(sanitizer)
    })
}
