//! # baremetal-tests: stream-hal on bare metal, under QEMU
//!
//! A test kernel that boots under QEMU (x86-64, aarch64, riscv64; loongarch64 as a user-mode
//! binary), runs stream-hal's [`checks`] on the guest's RAM and exits with pass or fail. Run
//! it with `ci/baremetal.sh` (`docs/baremetal.md`); every `stream-hal` call is in `src/hal.rs`.
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
