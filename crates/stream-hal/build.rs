//! Chooses, once per build, which backend `stream-hal` compiles.
//!
//! The decision is made here and nowhere else (DESIGN.md rule 3):
//!
//! 1. the `force-generic` feature selects the generic backend;
//! 2. Miri (`CARGO_CFG_MIRI`) selects it, because Miri cannot run inline assembly;
//! 3. any sanitizer selects it, so that the sanitizer sees every store as a plain,
//!    instrumented store (the Linux series disables its x86 override under KASAN/KMSAN for
//!    the same reason). Sanitizers are read from `CARGO_CFG_SANITIZE` (nightly
//!    `-Zsanitizer=...`) and from the sanitizer targets such as
//!    `x86_64-unknown-linux-gnuasan`;
//! 4. a target architecture without a streaming backend selects it.
//!
//! Otherwise the backend is the target architecture's (`x86_64` or `aarch64`).
//!
//! The result is passed to the crate as `cfg(stream_hal_backend = "...")` and, for
//! `backend()`, as the environment variables `STREAM_HAL_GENERIC_REASON` and
//! `STREAM_HAL_GENERIC_DETAIL`.

use std::env;
use std::str::FromStr;

use target_lexicon::{Architecture, Triple};

/// Target-name suffixes of the sanitizer targets (`x86_64-unknown-linux-gnuasan`, ...) and the
/// sanitizer each one implies (longest suffix first: `hwasan` also ends in `asan`).
const SANITIZER_TARGET_SUFFIXES: &[(&str, &str)] =
    &[("hwasan", "hwaddress"), ("asan", "address"), ("msan", "memory"), ("tsan", "thread")];

fn main() {
    println!("cargo::rustc-check-cfg=cfg(stream_hal_backend, values(\"x86_64\", \"aarch64\", \"generic\"))");
    println!("cargo::rerun-if-changed=build.rs");

    let target = env::var("TARGET").expect("cargo sets TARGET for build scripts");
    let (triple_text, target_sanitizer) = split_sanitizer_target(&target);

    let mut sanitizers: Vec<String> = env::var("CARGO_CFG_SANITIZE")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    if let Some(s) = target_sanitizer {
        if !sanitizers.iter().any(|x| x == s) {
            sanitizers.push(s.to_owned());
        }
    }
    sanitizers.sort();

    let miri = env::var_os("CARGO_CFG_MIRI").is_some();
    let force = env::var_os("CARGO_FEATURE_FORCE_GENERIC").is_some();

    // target-lexicon knows every target rustc ships; a custom JSON target it cannot parse is
    // treated as "unsupported" by name.
    let arch = match Triple::from_str(triple_text) {
        Ok(triple) => triple.architecture,
        Err(_) => Architecture::Unknown,
    };
    let arch_name = match arch {
        Architecture::X86_64 => Some("x86_64"),
        Architecture::Aarch64(_) => Some("aarch64"),
        _ => None,
    };

    let (backend, reason, detail) = if force {
        ("generic", "force-generic", String::new())
    } else if miri {
        ("generic", "miri", String::new())
    } else if !sanitizers.is_empty() {
        ("generic", "sanitizer", sanitizers.join(","))
    } else if let Some(name) = arch_name {
        (name, "none", String::new())
    } else {
        let described = match arch {
            Architecture::Unknown => triple_text.split('-').next().unwrap_or(triple_text).to_owned(),
            other => other.to_string(),
        };
        ("generic", "unsupported-target", described)
    };

    println!("cargo::rustc-cfg=stream_hal_backend=\"{backend}\"");
    println!("cargo::rustc-env=STREAM_HAL_GENERIC_REASON={reason}");
    println!("cargo::rustc-env=STREAM_HAL_GENERIC_DETAIL={detail}");
    let target_arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    println!("cargo::rustc-env=STREAM_HAL_TARGET_ARCH={target_arch}");
}

/// Splits `x86_64-unknown-linux-gnuasan` into `x86_64-unknown-linux-gnu` and `Some("address")`.
fn split_sanitizer_target(target: &str) -> (&str, Option<&'static str>) {
    for &(suffix, sanitizer) in SANITIZER_TARGET_SUFFIXES {
        if let Some(stripped) = target.strip_suffix(suffix) {
            // Only an environment component can carry the suffix (`...-gnuasan`), never a whole
            // component, so the stripped name must still end in a letter.
            if stripped.ends_with(|c: char| c.is_ascii_alphabetic()) {
                return (stripped, Some(sanitizer));
            }
        }
    }
    (target, None)
}
