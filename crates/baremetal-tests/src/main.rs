//! # baremetal-tests: stream-hal on bare metal, under QEMU
//!
//! A small test kernel for `x86_64-unknown-none`, `aarch64-unknown-none` and
//! `riscv64gc-unknown-none-elf` that boots under QEMU (`qemu-system-x86_64` as a PVH ELF;
//! `qemu-system-aarch64 -machine virt,virtualization=on`; `qemu-system-riscv64 -machine virt
//! -bios none` in M-mode), runs `stream-hal`'s checks on the guest's RAM, prints one line per
//! check and a summary on the serial port, and exits QEMU with a status that says pass or fail.
//! For `loongarch64-unknown-none` the same program runs as a Linux user-mode binary under
//! `qemu-loongarch64` (no loongarch64 C library or standard library is at hand to run the
//! stream-hal test suite there). The checks:
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
//! On riscv64 the kernel reads Zicboz and `riscv,cboz-block-size` from the device tree and
//! passes them to stream-hal; CI boots it with Zicboz on and off.
//!
//! Build and run it with `ci/baremetal.sh` (loongarch64: `ci/arches.sh`); the architecture code
//! is in `src/x86_64`, `src/aarch64`, `src/riscv64` and `src/loongarch64`, every `stream-hal`
//! call in `src/hal.rs`.
#![no_std]
#![no_main]
#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(not(all(
    target_os = "none",
    any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "riscv64",
        target_arch = "loongarch64"
    )
)))]
compile_error!(
    "baremetal-tests is a kernel for x86_64-unknown-none, aarch64-unknown-none, riscv64gc-unknown-none-elf \
     (and a Linux user-mode program for loongarch64-unknown-none): run ci/baremetal.sh, or \
     `cargo build --release --target x86_64-unknown-none` (or another of them) in its directory"
);

#[macro_use]
mod console;
mod arena;
mod checks;
#[cfg(any(target_arch = "aarch64", target_arch = "riscv64"))]
mod fdt;
mod hal;
mod report;

#[cfg_attr(target_arch = "x86_64", path = "x86_64/mod.rs")]
#[cfg_attr(target_arch = "aarch64", path = "aarch64/mod.rs")]
#[cfg_attr(target_arch = "riscv64", path = "riscv64/mod.rs")]
#[cfg_attr(target_arch = "loongarch64", path = "loongarch64/mod.rs")]
mod arch;

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
    arch::exit(report::Status::Fail)
}
