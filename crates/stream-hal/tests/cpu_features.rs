//! Safe code cannot make the crate execute an instruction the CPU lacks.
//!
//! `restrict_cpu_features` is the safe way to change the features: whatever it is asked for,
//! the result is contained in what was in effect (detected, or vouched for with the `unsafe`
//! `set_cpu_features`). CI runs this binary on CPU models without the features: under
//! `qemu-x86_64 -cpu Skylake-Client` (no `CLZERO`), `qemu-riscv64 -cpu rv64,zicboz=false` and
//! `qemu-aarch64 -cpu neoverse-n1` (no FEAT_MOPS), where claiming `CLZERO` (or Zicboz) and
//! clearing 1 MiB or more used to end in SIGILL.
//!
//! There, a child process makes the same claim with the `unsafe` setter and must die of
//! SIGILL: the proof that the CPU model really lacks the instructions the safe path refused.
//!
//! Under `--cfg stream_hal_emulate` it also shows which clear method ran, with the emulation's
//! count of block-zeroing instructions. Everything is in one test function because the
//! features and the counter are process-wide.

use stream_hal::{BlockSize, CpuFeatures, cpu_features, restrict_cpu_features};

/// Everything any backend could use, with typical block sizes.
fn everything() -> CpuFeatures {
    CpuFeatures::NONE
        .with_clzero(true)
        .with_zicboz(BlockSize::new(64))
        .with_dcbz(BlockSize::new(128))
        .with_mops(true)
}

/// Clears `len` bytes (at an offset that is not block-aligned) through the safe API and checks
/// them and the guard bytes around them.
fn clear_and_check(len: usize) {
    let mut buf = vec![0xa5u8; len + 256];
    stream_hal::clear_slice(&mut buf[100..100 + len]);
    assert!(buf[..100].iter().all(|&b| b == 0xa5), "guard before");
    assert!(buf[100..100 + len].iter().all(|&b| b == 0), "cleared range ({len} bytes)");
    assert!(buf[100 + len..].iter().all(|&b| b == 0xa5), "guard after");
}

/// Clears 2 MiB of whole pages through the safe page API.
fn clear_pages_and_check() {
    let mut pages = vec![0x5au8; 2 << 20];
    stream_hal::clear_pages_in(&mut pages, stream_hal::PageSize::Size4K).unwrap();
    assert!(pages.iter().all(|&b| b == 0));
}

/// Lengths that reach every clear method (x86-64 uses `CLZERO` from 1 MiB); Miri gets small
/// ones (it interprets every byte check).
fn lens() -> &'static [usize] {
    if cfg!(miri) { &[4096, 64 << 10] } else { &[4096, 1 << 20, (2 << 20) + 4099] }
}

/// Set in the child process that claims everything with the `unsafe` setter.
const CHILD_ENV: &str = "STREAM_HAL_UNSAFE_CLAIM_CHILD";

#[test]
fn the_safe_api_only_removes_features() {
    if std::env::var_os(CHILD_ENV).is_some() {
        // SAFETY: none, deliberately: this child runs only on a CPU model without the claimed
        // instructions, and the parent asserts that it dies of SIGILL on the clear below.
        unsafe { stream_hal::set_cpu_features(everything()) };
        clear_and_check(2 << 20);
        return;
    }
    let before = cpu_features();
    let detected = CpuFeatures::detect();
    eprintln!("backend {}: detected {detected:?}, in effect {before:?}", stream_hal::backend());
    if let Some(d) = detected {
        assert_eq!(before, d, "nothing was set: the detected features are in effect");
    }

    // Claiming everything through the safe function adds nothing.
    let after = restrict_cpu_features(everything());
    assert_eq!(after, before.intersection(everything()));
    assert_eq!(after.intersection(before), after, "{after:?} is not contained in {before:?}");
    assert_eq!(cpu_features(), after);
    if std::env::var_os("STREAM_HAL_EXPECT_NO_OPTIONAL_FEATURES").is_some() {
        // CI: a CPU model without CLZERO/Zicboz/MOPS; the claim must have been refused.
        assert_eq!(after, CpuFeatures::NONE, "claimed features survived on a CPU without them");
        unsafe_claim_dies_of_sigill();
    }
    // The clears of 1 MiB and more are the ones that use CLZERO (x86-64); riscv64 uses
    // cbo.zero and aarch64 MOPS at every size. They must run without an illegal instruction.
    for &len in lens() {
        clear_and_check(len);
    }
    if !cfg!(miri) {
        clear_pages_and_check();
    }
    eprintln!("streaming clear method after the claim: {}", stream_hal::streaming_clear_method());

    // Removing works, and once removed a feature cannot come back through the safe function.
    assert_eq!(restrict_cpu_features(CpuFeatures::NONE), CpuFeatures::NONE);
    assert_eq!(restrict_cpu_features(everything()), CpuFeatures::NONE);
    for &len in lens() {
        clear_and_check(len);
    }

    #[cfg(stream_hal_emulate)]
    emulated_block_zeroing_follows_the_features();

    // SAFETY: `before` was in effect when the test started: detected by the crate (or NONE).
    unsafe { stream_hal::set_cpu_features(before) };
}

/// Runs this test in a child process that claims every feature with the `unsafe` setter: on
/// this CPU model the clear must raise SIGILL. Under an emulator the child runs under it too:
/// cargo's runner for this architecture, from the environment (`CARGO_TARGET_<TRIPLE>_RUNNER`,
/// the qemu-user command line with the CPU model CI runs this binary with).
#[cfg(unix)]
fn unsafe_claim_dies_of_sigill() {
    use std::os::unix::process::ExitStatusExt;
    let exe = std::env::current_exe().unwrap();
    let arch = format!("CARGO_TARGET_{}", std::env::consts::ARCH.to_ascii_uppercase());
    let runner = std::env::vars()
        .find(|(k, v)| {
            k.starts_with(&arch) && k.contains("_LINUX_") && k.ends_with("_RUNNER") && !v.trim().is_empty()
        })
        .map(|(_, v)| v)
        .unwrap_or_default();
    let mut words = runner.split_whitespace();
    let mut cmd = match words.next() {
        Some(program) => {
            let mut c = std::process::Command::new(program);
            c.args(words).arg(&exe);
            c
        }
        None => std::process::Command::new(&exe),
    };
    let out = cmd
        .args(["--exact", "the_safe_api_only_removes_features", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    // qemu-user re-raises the guest's signal on itself, so the status is the same natively and
    // under the runner.
    assert_eq!(
        out.status.signal(),
        Some(4),
        "the unsafe claim did not end in SIGILL ({:?}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("unsafe claim in a child process: SIGILL, as expected");
}

#[cfg(not(unix))]
fn unsafe_claim_dies_of_sigill() {}

/// Under emulation: with a block-zeroing feature claimed, a 64 KiB clear executes one
/// block-zeroing instruction per whole 64-byte block (`clear` on riscv64 and powerpc64;
/// `clear_streaming` on x86-64, whose `clear` uses `CLZERO` only from 1 MiB); with it
/// removed, none. On aarch64 FEAT_MOPS claimed makes `clear` one memory-set sequence and no
/// `dc zva`; removed, no sequence and `dc zva` on the whole blocks (emulated `DCZID_EL0` 4:
/// 64-byte blocks).
#[cfg(stream_hal_emulate)]
fn emulated_block_zeroing_follows_the_features() {
    use stream_hal::emulation::{block_zeroes, memory_sets};
    const LEN: usize = 64 << 10;
    let count = |f: CpuFeatures| {
        // SAFETY: emulated build: the block-zeroing instructions are ordinary writes of the
        // 64-byte block, issued only on whole, aligned blocks of the range.
        unsafe { stream_hal::set_cpu_features(f) };
        let mut buf = vec![0xa5u8; LEN + 256];
        let (start, sets) = (block_zeroes(), memory_sets());
        let dst = buf[100..100 + LEN].as_mut_ptr();
        // SAFETY: `LEN` bytes from offset 100 are inside `buf`; drained before they are read.
        unsafe {
            if cfg!(target_arch = "x86_64") {
                stream_hal::clear_streaming(dst, LEN)
            } else {
                stream_hal::clear(dst, LEN)
            }
        }
        stream_hal::drain();
        let n = (block_zeroes() - start, memory_sets() - sets);
        assert!(buf[..100].iter().all(|&b| b == 0xa5) && buf[100 + LEN..].iter().all(|&b| b == 0xa5));
        assert!(buf[100..100 + LEN].iter().all(|&b| b == 0));
        n
    };
    let b64 = BlockSize::new(64);
    let (with, with_sets) =
        count(CpuFeatures::NONE.with_clzero(true).with_zicboz(b64).with_dcbz(b64).with_mops(true));
    let (without, without_sets) = count(CpuFeatures::NONE);
    if cfg!(target_arch = "aarch64") {
        assert_eq!((with, with_sets), (0, 1), "(dc zva, memory sets) with FEAT_MOPS");
        assert_eq!((without, without_sets), ((LEN / 64 - 1) as u64, 0), "(dc zva, memory sets) without");
    } else {
        assert_eq!(with_sets + without_sets, 0, "memory sets outside aarch64");
    }
    if cfg!(any(target_arch = "x86_64", target_arch = "riscv64", target_arch = "powerpc64")) {
        // The misaligned first and last blocks are stored normally.
        assert_eq!(with, (LEN / 64 - 1) as u64, "block zeroes with the feature");
        assert_eq!(without, 0, "a block-zeroing instruction ran without the feature");
    }
}
