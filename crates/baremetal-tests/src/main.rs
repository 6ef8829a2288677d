//! # baremetal-tests: stream-hal on bare metal, under QEMU
//!
//! A small test kernel for `x86_64-unknown-none` and for `aarch64-unknown-none` that boots
//! under QEMU (`qemu-system-x86_64` as a PVH ELF; `qemu-system-aarch64 -machine
//! virt,virtualization=on`), runs `stream-hal`'s checks on the guest's RAM, prints one line
//! per check and a summary on the serial port, and exits QEMU with a status that says pass or
//! fail:
//!
//! * `memcpy_nontemporal` against the generic reference over every destination offset 0..64,
//!   13 source offsets and every length 0..=256, and over lengths from 4095 bytes to 4 MiB,
//!   with guard bytes around every destination;
//! * `clear_pages`, `clear_cached` and `clear_streaming` from 1 page to 16 MiB at
//!   aligned and misaligned addresses, a page of guard bytes on each side (x86-64 also one
//!   512 MiB `clear_pages`);
//! * `store_words`, and the safe writer (`fill_with`, `scope`) filling 64- and 56-byte records
//!   patched per index, as the memmap template fill does.
//!
//! On aarch64 the checks run twice: with `dc zva` permitted, and with `HCR_EL2.TDZ` set from
//! EL2 so that `DCZID_EL0.DZP` reads 1 at EL1 and `clear_pages` must take its `stnp` path (a
//! `dc zva` executed anyway traps to EL2, which reports it and fails the run).
//!
//! Build and run it with `ci/baremetal.sh`; the architecture code is in `src/x86_64` and
//! `src/aarch64`, every `stream-hal` call in `src/hal.rs`.
#![no_std]
#![no_main]
#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(not(all(target_os = "none", any(target_arch = "x86_64", target_arch = "aarch64"))))]
compile_error!(
    "baremetal-tests is a kernel for x86_64-unknown-none and aarch64-unknown-none: run ci/baremetal.sh, \
     or `cargo build --release --target x86_64-unknown-none` (or aarch64-unknown-none) in its directory"
);

#[macro_use]
mod console;
mod arena;
mod checks;
mod hal;
mod report;

#[cfg_attr(target_arch = "x86_64", path = "x86_64/mod.rs")]
#[cfg_attr(target_arch = "aarch64", path = "aarch64/mod.rs")]
mod arch;

/// How the kernel ends the QEMU run.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Every check passed.
    Pass,
    /// A check failed, the kernel panicked or took an unexpected exception.
    Fail,
}

/// Prints the backend lines and checks that the build selected `expected`.
fn check_backend(report: &mut report::Report, expected: &str) {
    println!("stream-hal backend: {} ({})", hal::backend_name(), hal::backend());
    println!("stream-hal streaming clear method: {}", hal::streaming_clear_method());
    if hal::backend_name() == expected {
        report.pass(format_args!("backend is {expected}"));
    } else {
        report.fail(format_args!("backend is {expected} (found {})", hal::backend_name()));
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    println!("panic: {info}");
    println!("result: FAIL");
    arch::exit(Status::Fail)
}
