//! riscv64 on QEMU's `virt` machine in M-mode: UART, exit device, and `kmain`, which passes
//! Zicboz from the device tree to stream-hal and runs the checks (CI boots with and without
//! Zicboz).

use core::arch::asm;

use crate::arena::Arena;
use crate::checks::{self, Plan};
use crate::fdt;
use crate::report::{Report, Status};

mod boot;

/// The `virt` machine's 16550 UART: transmit holding register, and line status at +5 (bit 5:
/// transmitter holding register empty).
const UART: usize = 0x1000_0000;
const UART_LSR: usize = UART + 5;
const LSR_THRE: u8 = 1 << 5;
/// The SiFive test device ("sifive,test1"): `0x5555` powers off with status 0, `code << 16 |
/// 0x3333` with status `code`.
const TEST_DEVICE: usize = 0x10_0000;
const TEST_PASS: u32 = 0x5555;
const TEST_FAIL: u32 = (1 << 16) | 0x3333;
/// The CLINT's `mtime` register, counting at the device tree's `timebase-frequency` (10 MHz on
/// `virt`).
const MTIME: usize = 0x0200_bff8;
const MTIME_HZ: u64 = 10_000_000;
/// Largest device tree accepted.
const DTB_MAX: usize = 1 << 20;

unsafe extern "C" {
    /// First byte of the kernel image (linker script).
    static __kernel_start: u8;
    /// First byte after the kernel image and stack.
    static __kernel_end: u8;
}

/// Sends one byte on the UART, waiting for the transmitter holding register to be empty.
pub(crate) fn serial_write_byte(b: u8) {
    // SAFETY: the 16550's registers on the `virt` machine (M-mode, no MMU: physical addresses,
    // device memory by the machine's PMAs); byte accesses that only affect the UART.
    unsafe {
        while (UART_LSR as *const u8).read_volatile() & LSR_THRE == 0 {
            core::hint::spin_loop();
        }
        (UART as *mut u8).write_volatile(b);
    }
}

/// Ends the QEMU run through the SiFive test device (exit status 0 for a pass, 1 for a
/// failure).
pub(crate) fn exit(status: Status) -> ! {
    let value = if status == Status::Pass { TEST_PASS } else { TEST_FAIL };
    // SAFETY: a 32-bit write to the test device's register powers the machine off; it touches
    // no memory the program uses.
    unsafe { (TEST_DEVICE as *mut u32).write_volatile(value) };
    loop {
        // SAFETY: `wfi` only waits.
        unsafe { asm!("wfi", options(nomem, nostack, preserves_flags)) };
    }
}

/// Nanoseconds of the CLINT's `mtime`.
pub(crate) fn now_ns() -> Option<u64> {
    // SAFETY: an aligned 64-bit read of the CLINT's `mtime` register has no side effects.
    let ticks = unsafe { (MTIME as *const u64).read_volatile() };
    Some((u128::from(ticks) * 1_000_000_000 / u128::from(MTIME_HZ)) as u64)
}

/// Called by the trap vector (boot.rs) for every trap: reports it and fails the run.
#[unsafe(no_mangle)]
extern "C" fn trap_report(mcause: u64, mepc: u64, mtval: u64) -> ! {
    let what = match mcause {
        0 => "instruction address misaligned",
        1 => "instruction access fault",
        2 => "illegal instruction",
        4 => "load address misaligned",
        5 => "load access fault",
        6 => "store address misaligned",
        7 => "store access fault",
        _ => "other",
    };
    println!("trap: mcause {mcause:#x} ({what}), mepc {mepc:#x}, mtval {mtval:#x}");
    println!("result: FAIL");
    exit(Status::Fail)
}

/// Zicboz and its block size as the device tree describes the first hart:
/// `riscv,isa-extensions` (a list of NUL-terminated names) containing `zicboz`, or the older
/// `riscv,isa` string containing `_zicboz`; and `riscv,cboz-block-size`.
fn zicboz_from_device_tree(blob: &[u8]) -> Result<Option<u32>, fdt::FdtError> {
    let cpu: &[&[u8]] = &[b"cpus", b"cpu@"];
    let in_list = fdt::property(blob, cpu, b"riscv,isa-extensions")?
        .is_some_and(|list| list.split(|&b| b == 0).any(|name| name == b"zicboz"));
    let in_string = fdt::property(blob, cpu, b"riscv,isa")?
        .is_some_and(|isa| isa.split(|&b| b == b'_' || b == 0).any(|name| name == b"zicboz"));
    if !in_list && !in_string {
        return Ok(None);
    }
    let block = fdt::property(blob, cpu, b"riscv,cboz-block-size")?
        .and_then(|v| v.get(..4))
        .map(|v| u32::from_be_bytes([v[0], v[1], v[2], v[3]]));
    Ok(block)
}

/// The entry, called by boot.rs in M-mode with the hart id and the device tree's address.
#[unsafe(no_mangle)]
extern "C" fn kmain(hartid: u64, dtb: usize) -> ! {
    println!("baremetal-tests: riscv64gc-unknown-none-elf kernel (M-mode), stream-hal checks on guest RAM");
    let mut report = Report::new(now_ns);
    // SAFETY: QEMU passes the address of the device tree it placed in RAM in a1; its header
    // (40 bytes) is readable there and nothing writes it.
    let header = unsafe { core::slice::from_raw_parts(dtb as *const u8, 40) };
    let blob = match fdt::total_size(header) {
        Ok(size) if size <= DTB_MAX => {
            // SAFETY: as above, for the whole blob the header declares (bounded by DTB_MAX).
            unsafe { core::slice::from_raw_parts(dtb as *const u8, size) }
        }
        Ok(_) => {
            report.fail(format_args!("device tree at {dtb:#x} smaller than {DTB_MAX} bytes"));
            exit(report.finish());
        }
        Err(e) => {
            println!("{e}");
            report.fail(format_args!("device tree at {dtb:#x}"));
            exit(report.finish());
        }
    };
    let ram = match fdt::memory(blob) {
        Ok(ram) => ram,
        Err(e) => {
            println!("{e}");
            report.fail(format_args!("RAM in the device tree"));
            exit(report.finish());
        }
    };
    let ram_end = ram.base.saturating_add(ram.size);
    println!(
        "hart {hartid}; device tree at {dtb:#x}: memory {:#x}..{ram_end:#x} ({} MiB)",
        ram.base,
        ram.size >> 20
    );

    let zicboz = match zicboz_from_device_tree(blob) {
        Ok(z) => z,
        Err(e) => {
            println!("{e}");
            report.fail(format_args!("CPU node in the device tree"));
            exit(report.finish());
        }
    };
    match zicboz {
        Some(bytes) => println!("device tree: hart 0 has zicboz, riscv,cboz-block-size = {bytes}"),
        None => println!("device tree: hart 0 has no zicboz"),
    }
    let block = zicboz.and_then(|b| crate::hal::BlockSize::new(b as usize));
    // SAFETY: the device tree QEMU generated for this machine describes this hart (the only one
    // running: `-smp 1`), so Zicboz is present exactly when it lists it, with the block size it
    // gives; in M-mode `cbo.zero` needs no enabling (`menvcfg` only gates the lower modes).
    unsafe { crate::hal::set_zicboz(block) };
    crate::check_backend(&mut report, "riscv64");
    let expect = if block.is_some() { "cbo.zero" } else { "write_bytes" };
    if crate::hal::Clear::Cached.method(4096) == expect {
        report.pass(format_args!("clear_cached uses {expect}"));
    } else {
        report.fail(format_args!(
            "clear_cached uses {expect} (found {})",
            crate::hal::Clear::Cached.method(4096)
        ));
    }

    let kernel_start = &raw const __kernel_start as u64;
    let kernel_end = &raw const __kernel_end as u64;
    let start = kernel_end.next_multiple_of(2 << 20);
    // The device tree sits near the end of RAM: the arena stops below it.
    let end = (dtb as u64).min(ram_end) & !(crate::hal::PAGE_SIZE as u64 - 1);
    if kernel_start < ram.base || end <= start {
        report.fail(format_args!("kernel {kernel_start:#x}..{kernel_end:#x} inside RAM, with RAM above it"));
        exit(report.finish());
    }
    println!(
        "kernel image {kernel_start:#x}..{kernel_end:#x}; test arena {start:#x}..{end:#x} ({} MiB)",
        (end - start) >> 20
    );
    // SAFETY: `[start, end)` is RAM from the device tree, above the kernel image and its stack
    // and below the device tree; M-mode without an MMU accesses it physically as cacheable
    // memory (the `virt` machine's PMAs). This single-hart kernel uses it for nothing else, and
    // no device is set up to access it.
    let mut arena = unsafe { Arena::new(start as usize, (end - start) as usize) };
    checks::run_all(&mut arena, &mut report, &Plan { big_clear_pages: None });
    exit(report.finish())
}
