//! aarch64 on QEMU's `virt` machine: entry at EL2 (`boot.rs`), the PL011 UART, semihosting
//! exit, the device tree's memory node, an EL1 identity map, and `kmain`, which runs the checks
//! once with `dc zva` permitted and once with it prohibited from EL2.

use core::arch::asm;
use core::sync::atomic::{AtomicBool, Ordering};

use crate::arena::Arena;
use crate::checks::{self, Plan};
use crate::report::{Report, Status};

mod boot;
mod mmu;

use crate::fdt;

/// The `virt` machine's PL011: data register, and flag register at +0x18 (bit 5: transmit
/// FIFO full).
const PL011: usize = 0x0900_0000;
const PL011_FR: usize = PL011 + 0x18;
const PL011_TXFF: u32 = 1 << 5;
/// Where QEMU puts the device tree for an ELF kernel that leaves room at the start of RAM.
const DTB: usize = 0x4000_0000;
/// The room the linker script leaves for it (the kernel starts at RAM + 2 MiB).
const DTB_MAX: usize = 2 << 20;
/// Semihosting `SYS_EXIT` and its `ADP_Stopped_ApplicationExit` reason.
const SYS_EXIT: u64 = 0x18;
const ADP_STOPPED_APPLICATION_EXIT: u64 = 0x20026;
/// `DCZID_EL0.DZP`.
const DZP: u64 = 1 << 4;

unsafe extern "C" {
    /// First byte of the kernel image (linker script).
    static __kernel_start: u8;
    /// First byte after the kernel image and stacks.
    static __kernel_end: u8;
}

/// Sends one byte on the PL011, waiting while its transmit FIFO is full.
pub(crate) fn serial_write_byte(b: u8) {
    // SAFETY: PL011 registers of the `virt` machine, mapped as Device memory (or accessed with
    // the MMU off, also Device); 32-bit aligned accesses; they only affect the UART.
    unsafe {
        while (PL011_FR as *const u32).read_volatile() & PL011_TXFF != 0 {
            core::hint::spin_loop();
        }
        (PL011 as *mut u32).write_volatile(u32::from(b));
    }
}

/// Ends the QEMU run with semihosting `SYS_EXIT` (exit status 0 for a pass, 1 for a failure;
/// needs `-semihosting`). Without semihosting the `hlt` is an undefined instruction: the
/// exception report calls `exit` again, which then waits for the runner's timeout.
pub(crate) fn exit(status: Status) -> ! {
    static EXITING: AtomicBool = AtomicBool::new(false);
    if !EXITING.load(Ordering::Relaxed) {
        EXITING.store(true, Ordering::Relaxed);
        let block: [u64; 2] = [ADP_STOPPED_APPLICATION_EXIT, if status == Status::Pass { 0 } else { 1 }];
        // SAFETY: the semihosting call reads the two-word parameter block at x1 (alive for the
        // call) and stops the machine; it writes no memory the program uses.
        unsafe {
            asm!("hlt #0xf000", in("x0") SYS_EXIT, in("x1") block.as_ptr(), options(nostack, readonly))
        };
    }
    loop {
        // SAFETY: `wfe` only waits.
        unsafe { asm!("wfe", options(nomem, nostack, preserves_flags)) };
    }
}

/// Nanoseconds of the virtual counter (`CNTVCT_EL0` at `CNTFRQ_EL0` Hz; `CNTVOFF_EL2` is 0).
pub(crate) fn now_ns() -> Option<u64> {
    let (count, freq): (u64, u64);
    // SAFETY: reading the generic timer's counter and frequency at EL1 has no side effects.
    unsafe {
        asm!("isb", "mrs {}, cntvct_el0", out(reg) count, options(nomem, nostack, preserves_flags));
        asm!("mrs {}, cntfrq_el0", out(reg) freq, options(nomem, nostack, preserves_flags));
    }
    if freq == 0 {
        return None;
    }
    Some((u128::from(count) * 1_000_000_000 / u128::from(freq)) as u64)
}

/// The current exception level.
fn current_el() -> u64 {
    let value: u64;
    // SAFETY: CurrentEL is readable at EL1 and above; no side effects.
    unsafe { asm!("mrs {}, CurrentEL", out(reg) value, options(nomem, nostack, preserves_flags)) };
    (value >> 2) & 3
}

/// Asks EL2 to set (`true`) or clear `HCR_EL2.TDZ`; returns the new `HCR_EL2`.
fn set_tdz(prohibit: bool) -> u64 {
    let hcr: u64;
    // SAFETY: the EL2 handler in boot.rs changes only HCR_EL2.TDZ, x0 (the result) and x1
    // (declared clobbered), then returns to the next instruction. Not `nomem`: whether DC ZVA
    // traps changes what the following code may do.
    unsafe { asm!("hvc #0", inout("x0") u64::from(prohibit) => hcr, out("x1") _, options(nostack)) };
    hcr
}

/// The exception class field of an ESR, described.
fn exception_class(esr: u64) -> &'static str {
    match (esr >> 26) & 0x3f {
        0x00 => "unknown reason (an undefined instruction)",
        0x07 => "FP/SIMD access trapped",
        0x15 => "SVC",
        0x16 => "HVC",
        0x18 => "trapped system instruction or register access (a DC ZVA while HCR_EL2.TDZ = 1)",
        0x20 | 0x21 => "instruction abort",
        0x22 => "PC alignment fault",
        0x24 | 0x25 => "data abort",
        0x26 => "SP alignment fault",
        0x3c => "BRK",
        _ => "other",
    }
}

/// Called by the exception vectors (boot.rs) for every exception but the TDZ call: reports it
/// and fails the run.
#[unsafe(no_mangle)]
extern "C" fn exception_report(esr: u64, elr: u64, far: u64, slot: u64, el: u64) -> ! {
    let from = match slot / 4 {
        0 => "current EL, SP0",
        1 => "current EL, SPx",
        2 => "lower EL, AArch64",
        _ => "lower EL, AArch32",
    };
    let kind = ["synchronous", "IRQ", "FIQ", "SError"][(slot % 4) as usize];
    println!(
        "exception taken to EL{el}: {kind} from {from}: ESR {esr:#x} (EC {:#x}: {}), ELR {elr:#x}, FAR {far:#x}",
        (esr >> 26) & 0x3f,
        exception_class(esr)
    );
    println!("result: FAIL");
    exit(Status::Fail)
}

/// The RAM range from the device tree QEMU placed at the start of RAM.
fn ram_from_device_tree() -> Result<fdt::Memory, fdt::FdtError> {
    // SAFETY: `DTB` is the start of the `virt` machine's RAM, which exists whatever `-m` says
    // (at least the 2 MiB below the kernel image that the linker script leaves free and that
    // nothing in the kernel writes); reading it has no side effects.
    let header = unsafe { core::slice::from_raw_parts(DTB as *const u8, 40) };
    let size = fdt::total_size(header)?;
    if size > DTB_MAX {
        return Err(fdt::FdtError::Truncated);
    }
    // SAFETY: as above; `size <= DTB_MAX` keeps the slice below the kernel image.
    let blob = unsafe { core::slice::from_raw_parts(DTB as *const u8, size) };
    fdt::memory(blob)
}

/// The EL1 entry, called by boot.rs with the exception level the CPU started at.
#[unsafe(no_mangle)]
extern "C" fn kmain(boot_el: u64) -> ! {
    println!("baremetal-tests: aarch64-unknown-none kernel, stream-hal checks on guest RAM");
    println!("boot: entered at EL{boot_el}, kernel runs at EL{}", current_el());
    let mut report = Report::new(now_ns);
    if boot_el != 2 {
        report.fail(format_args!("entered at EL2 (run qemu-system-aarch64 -machine virt,virtualization=on)"));
        exit(report.finish());
    }

    let ram = match ram_from_device_tree() {
        Ok(ram) => ram,
        Err(e) => {
            println!("{e}");
            report.fail(format_args!("RAM found in the device tree at {DTB:#x}"));
            exit(report.finish());
        }
    };
    let ram_end = ram.base.saturating_add(ram.size);
    println!("device tree at {DTB:#x}: memory {:#x}..{ram_end:#x} ({} MiB)", ram.base, ram.size >> 20);
    let kernel_start = &raw const __kernel_start as u64;
    let kernel_end = &raw const __kernel_end as u64;
    let start = kernel_end.next_multiple_of(2 << 20);
    let end = ram_end & !(crate::hal::PAGE_SIZE as u64 - 1);
    if kernel_start < ram.base || end <= start {
        report.fail(format_args!("kernel {kernel_start:#x}..{kernel_end:#x} inside RAM, with RAM above it"));
        exit(report.finish());
    }
    // SAFETY: first call, at EL1 (checked: boot_el is 2 and boot.rs dropped to EL1), MMU off
    // (boot.rs wrote SCTLR_EL1 without M); the image and stacks are in RAM (checked just
    // above), the PL011 is in the first GiB.
    if unsafe { mmu::enable(ram.base, ram_end) }.is_err() {
        report.fail(format_args!("identity map of RAM {:#x}..{ram_end:#x}", ram.base));
        exit(report.finish());
    }
    println!("mmu: on (identity map; RAM normal write-back, first GiB device)");

    crate::check_backend(&mut report, "aarch64");
    let mut freq: u64;
    // SAFETY: reading CNTFRQ_EL0 has no side effects.
    unsafe { asm!("mrs {}, cntfrq_el0", out(reg) freq, options(nomem, nostack, preserves_flags)) };
    freq = freq.max(1);
    println!("counter: CNTFRQ_EL0 = {freq} Hz (check times below are guest virtual time)");

    println!(
        "kernel image {kernel_start:#x}..{kernel_end:#x}; test arena {start:#x}..{end:#x} ({} MiB)",
        (end - start) >> 20
    );
    // SAFETY: `[start, end)` is RAM from the device tree above the kernel image and its stacks
    // (and above the device tree, which lies below the image), identity-mapped as Normal
    // write-back memory by `mmu::enable`. This single-threaded kernel uses it for nothing else
    // and no device is set up to access it.
    let mut arena = unsafe { Arena::new(start as usize, (end - start) as usize) };

    for (pass, prohibit, prefix) in [(1, false, "[pass 1] "), (2, true, "[pass 2] ")] {
        let hcr = set_tdz(prohibit);
        let dczid = crate::hal::dczid();
        let dzp = u64::from(dczid & DZP != 0);
        println!(
            "pass {pass} of 2: HCR_EL2 = {hcr:#x} (TDZ = {}): DCZID_EL0 = {dczid:#x} (BS = {}: {}-byte blocks, DZP = {dzp}): clear_pages uses {}",
            (hcr >> 28) & 1,
            dczid & 0xf,
            4u64 << (dczid & 0xf),
            crate::hal::Clear::BySize.method(1 << 20)
        );
        report.set_prefix(prefix);
        if (dzp == 1) == prohibit {
            report.pass(format_args!(
                "DCZID_EL0.DZP = {dzp} at EL1 with HCR_EL2.TDZ = {}",
                u64::from(prohibit)
            ));
        } else {
            report.fail(format_args!(
                "DCZID_EL0.DZP = {} at EL1 with HCR_EL2.TDZ = {}",
                u64::from(prohibit),
                u64::from(prohibit)
            ));
        }
        checks::run_all(&mut arena, &mut report, &Plan { big_clear_pages: None });
    }
    set_tdz(false);
    report.set_prefix("");
    exit(report.finish())
}
