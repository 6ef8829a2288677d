//! x86-64: PVH boot (`boot.rs`), COM1 serial, QEMU's `isa-debug-exit` device, CPUID, the
//! PVH memory map, and `kmain`.

use core::arch::asm;

use crate::arena::Arena;
use crate::checks::{self, Plan};
use crate::report::{Report, Status};

mod boot;

/// COM1's I/O base.
const COM1: u16 = 0x3f8;
/// I/O port of QEMU's `-device isa-debug-exit,iobase=0xf4,iosize=0x04`: writing `v` makes
/// QEMU exit with status `(v << 1) | 1`.
const DEBUG_EXIT_PORT: u16 = 0xf4;
/// Written to [`DEBUG_EXIT_PORT`] on success: QEMU exits with 33.
const EXIT_PASS: u32 = 0x10;
/// Written on failure: QEMU exits with 35.
const EXIT_FAIL: u32 = 0x11;
/// `hvm_start_info.magic`.
const HVM_START_MAGIC: u32 = 0x336e_c578;
/// `hvm_memmap_table_entry.type` of usable RAM (the E820 type).
const MEMMAP_RAM: u32 = 1;
/// More memory map entries than any PC firmware produces: a corrupt start info.
const MEMMAP_MAX_ENTRIES: usize = 128;
/// The entry code identity-maps this much (the arena must stay below it).
const MAPPED_END: u64 = 4 << 30;
/// 512 MiB, the `clear_pages` size from which the x86-64 backend uses `rep stosb` again on
/// AMD CPUs without `CLZERO` (`stream_hal::CLEAR_REP_LARGE_MIN`).
const BIG_CLEAR_PAGES: usize = (512 << 20) / crate::hal::PAGE_SIZE;

unsafe extern "C" {
    /// First byte of the kernel image (linker script).
    static __kernel_start: u8;
    /// First byte after the kernel image, stack and page tables (linker script).
    static __kernel_end: u8;
    /// Addresses of the 32 exception entry stubs (boot.rs).
    static exception_stubs: [u64; 32];
}

/// Writes `value` to I/O port `port`.
///
/// # Safety
///
/// The write must have no effect on memory the program uses (true of the UART and the
/// debug-exit port this kernel writes to).
unsafe fn outb(port: u16, value: u8) {
    // SAFETY: the caller guarantees the port write is harmless to the program; `out` touches
    // no memory and no flags.
    unsafe { asm!("out dx, al", in("dx") port, in("al") value, options(nomem, nostack, preserves_flags)) };
}

/// Reads I/O port `port`.
///
/// # Safety
///
/// Reading the port must have no side effect the program relies on (true of the UART's line
/// status register).
unsafe fn inb(port: u16) -> u8 {
    let value: u8;
    // SAFETY: as the caller guarantees; `in` touches no memory and no flags.
    unsafe { asm!("in al, dx", in("dx") port, out("al") value, options(nomem, nostack, preserves_flags)) };
    value
}

/// Programs COM1 for 115200 baud, 8N1, FIFOs on, interrupts off.
fn serial_init() {
    // SAFETY: these are the 16550 UART's own registers at COM1; programming them affects only
    // the UART.
    unsafe {
        outb(COM1 + 1, 0x00); // no interrupts
        outb(COM1 + 3, 0x80); // DLAB: divisor follows
        outb(COM1, 0x01); // divisor 1: 115200 baud
        outb(COM1 + 1, 0x00);
        outb(COM1 + 3, 0x03); // 8 bits, no parity, one stop bit
        outb(COM1 + 2, 0xc7); // FIFOs on and cleared
        outb(COM1 + 4, 0x03); // DTR, RTS
    }
}

/// Sends one byte on COM1, waiting for the transmitter holding register to be empty.
pub(crate) fn serial_write_byte(b: u8) {
    // SAFETY: reading the line status register and writing the data register of COM1 only
    // affect the UART.
    unsafe {
        while inb(COM1 + 5) & 0x20 == 0 {
            core::hint::spin_loop();
        }
        outb(COM1, b);
    }
}

/// Ends the QEMU run through `isa-debug-exit`; halts if the device is missing (the runner's
/// timeout then fails the run).
pub(crate) fn exit(status: Status) -> ! {
    let value = if status == Status::Pass { EXIT_PASS } else { EXIT_FAIL };
    // SAFETY: `out` to the debug-exit port only stops the virtual machine; it touches no memory.
    unsafe {
        asm!("out dx, eax", in("dx") DEBUG_EXIT_PORT, in("eax") value, options(nomem, nostack, preserves_flags))
    };
    loop {
        // SAFETY: `cli; hlt` stops this CPU; nothing follows.
        unsafe { asm!("cli", "hlt", options(nomem, nostack)) };
    }
}

/// No clock of known frequency here (the TSC's rate under TCG is the host's): check lines carry
/// no times on x86-64; the runner reports the wall time of the whole run.
pub(crate) fn now_ns() -> Option<u64> {
    None
}

/// What CPUID says about the features the x86-64 backend looks at.
#[derive(Clone, Copy)]
pub(crate) struct CpuFeatures {
    /// `CPUID.1:EDX[26]`: `movnti`, `sfence` (and SSE2 proper, which this kernel never enables).
    pub(crate) sse2: bool,
    /// `CPUID.7.0:EBX[9]`: enhanced `rep movsb`/`rep stosb`.
    pub(crate) erms: bool,
    /// `CPUID.8000_0008h:EBX[0]`: `clzero` (AMD).
    pub(crate) clzero: bool,
    /// Highest basic leaf.
    pub(crate) max_leaf: u32,
    /// Highest extended leaf.
    pub(crate) max_extended: u32,
    /// The 12-byte vendor string.
    pub(crate) vendor: [u8; 12],
}

/// Reads the features once (CPUID is cheap, but the result is printed and used per check).
pub(crate) fn cpu_features() -> CpuFeatures {
    use core::arch::x86_64::{__cpuid, __cpuid_count};
    // `cpuid` exists on every x86-64 CPU and only reads identification registers. (`__cpuid`
    // is an `unsafe fn` on older toolchains, a safe one on newer.)
    #[allow(unused_unsafe)]
    // SAFETY: see above; leaf 0 always exists.
    let leaf0 = unsafe { __cpuid(0) };
    #[allow(unused_unsafe)]
    // SAFETY: leaf 1 always exists on x86-64.
    let leaf1 = unsafe { __cpuid(1) };
    #[allow(unused_unsafe)]
    // SAFETY: leaf 7 is read only when leaf 0 says it exists.
    let leaf7 = if leaf0.eax >= 7 { Some(unsafe { __cpuid_count(7, 0) }) } else { None };
    #[allow(unused_unsafe)]
    // SAFETY: leaf 0x8000_0000 always exists on x86-64.
    let max_extended = unsafe { __cpuid(0x8000_0000) }.eax;
    #[allow(unused_unsafe)]
    // SAFETY: read only when the extended maximum says it exists.
    let ext8 = if max_extended >= 0x8000_0008 { Some(unsafe { __cpuid(0x8000_0008) }) } else { None };
    let mut vendor = [0u8; 12];
    vendor[..4].copy_from_slice(&leaf0.ebx.to_le_bytes());
    vendor[4..8].copy_from_slice(&leaf0.edx.to_le_bytes());
    vendor[8..].copy_from_slice(&leaf0.ecx.to_le_bytes());
    CpuFeatures {
        sse2: leaf1.edx & (1 << 26) != 0,
        erms: leaf7.is_some_and(|l| l.ebx & (1 << 9) != 0),
        clzero: ext8.is_some_and(|l| l.ebx & 1 != 0),
        max_leaf: leaf0.eax,
        max_extended,
        vendor,
    }
}

/// `yes`/`no`.
fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// A usable RAM range from the PVH memory map.
#[derive(Clone, Copy)]
struct Range {
    start: u64,
    end: u64,
}

/// `struct hvm_start_info` of the PVH boot ABI, up to version 1 (which added the memory
/// map).
#[derive(Clone, Copy)]
#[repr(C)]
struct HvmStartInfo {
    magic: u32,
    version: u32,
    flags: u32,
    nr_modules: u32,
    modlist_paddr: u64,
    cmdline_paddr: u64,
    rsdp_paddr: u64,
    /// Version 1: the memory map.
    memmap_paddr: u64,
    memmap_entries: u32,
}

/// `struct hvm_memmap_table_entry`: an E820-style range.
#[derive(Clone, Copy)]
#[repr(C)]
struct HvmMemmapEntry {
    addr: u64,
    size: u64,
    kind: u32,
    _reserved: u32,
}

/// Prints the PVH start info and memory map and returns the largest RAM range.
///
/// # Safety
///
/// `start_info` is the address the PVH entry received in `ebx` (so it points at an
/// `hvm_start_info` the firmware wrote, and from version 1 at its memory map, all in the
/// identity-mapped low 4 GiB).
unsafe fn memory_map(start_info: u32) -> Option<Range> {
    let base = start_info as usize;
    // SAFETY: by the PVH boot ABI the address holds an `hvm_start_info`, which starts with its
    // magic and version in every version; `read_unaligned` makes no alignment assumption.
    let [magic, version] = unsafe { (base as *const [u32; 2]).read_unaligned() };
    println!("pvh start info at {start_info:#x}: magic {magic:#x}, version {version}");
    if magic != HVM_START_MAGIC || version < 1 {
        println!("pvh: no memory map (need magic {HVM_START_MAGIC:#x}, version >= 1)");
        return None;
    }
    // SAFETY: the structure is at least version 1 (checked), so it has all the fields of
    // `HvmStartInfo`.
    let info = unsafe { (base as *const HvmStartInfo).read_unaligned() };
    println!(
        "pvh: flags {:#x}, {} modules at {:#x}, cmdline at {:#x}, rsdp at {:#x}, memory map at {:#x}",
        info.flags,
        info.nr_modules,
        info.modlist_paddr,
        info.cmdline_paddr,
        info.rsdp_paddr,
        info.memmap_paddr
    );
    let entries = info.memmap_entries as usize;
    if entries > MEMMAP_MAX_ENTRIES {
        println!("pvh: implausible memory map of {entries} entries");
        return None;
    }
    let table = info.memmap_paddr as usize as *const HvmMemmapEntry;
    let mut best: Option<Range> = None;
    for i in 0..entries {
        // SAFETY: version >= 1, so `memmap_paddr` points at `memmap_entries` entries written by
        // the firmware in identity-mapped memory; `i` is below that count.
        let e = unsafe { table.add(i).read_unaligned() };
        let ram = e.kind == MEMMAP_RAM;
        println!(
            "  memmap[{i}]: {:#012x}..{:#012x} type {}{}",
            e.addr,
            e.addr + e.size,
            e.kind,
            if ram { " (RAM)" } else { "" }
        );
        if ram && best.is_none_or(|b| e.size > b.end - b.start) {
            best = Some(Range { start: e.addr, end: e.addr + e.size });
        }
    }
    best
}

/// Installs an IDT whose 32 exception vectors report and fail the run.
fn install_idt() {
    /// A 64-bit interrupt gate.
    #[derive(Clone, Copy)]
    #[repr(C)]
    struct Gate {
        offset_low: u16,
        selector: u16,
        ist: u8,
        attributes: u8,
        offset_mid: u16,
        offset_high: u32,
        reserved: u32,
    }
    /// The operand of `lidt`.
    #[repr(C, packed)]
    struct Pointer {
        limit: u16,
        base: u64,
    }
    static mut IDT: [Gate; 32] = [Gate {
        offset_low: 0,
        selector: 0,
        ist: 0,
        attributes: 0,
        offset_mid: 0,
        offset_high: 0,
        reserved: 0,
    }; 32];
    let idt = &raw mut IDT;
    // SAFETY: `exception_stubs` is a read-only table of 32 addresses emitted by boot.rs.
    let stubs = unsafe { exception_stubs };
    for (vector, &handler) in stubs.iter().enumerate() {
        let gate = Gate {
            offset_low: handler as u16,
            selector: 0x08, // the 64-bit code segment of boot.rs's GDT
            ist: 0,
            attributes: 0x8e, // present, ring 0, 64-bit interrupt gate
            offset_mid: (handler >> 16) as u16,
            offset_high: (handler >> 32) as u32,
            reserved: 0,
        };
        // SAFETY: single CPU, interrupts off, and the IDT is not loaded yet: nothing else
        // reads or writes `IDT`; `vector < 32` is in bounds.
        unsafe { (*idt)[vector] = gate };
    }
    let pointer = Pointer { limit: (size_of::<[Gate; 32]>() - 1) as u16, base: idt as u64 };
    // SAFETY: `pointer` describes the fully initialized static IDT above, whose gates point at
    // the stubs in boot.rs with the kernel's code segment; `lidt` only reads the operand.
    unsafe { asm!("lidt [{}]", in(reg) &raw const pointer, options(readonly, nostack, preserves_flags)) };
}

/// Called by the exception stubs (boot.rs): reports the exception and fails the run.
#[unsafe(no_mangle)]
extern "C" fn x86_exception(vector: u64, error_code: u64, rip: u64, cr2: u64) -> ! {
    let name = match vector {
        0 => "#DE divide error",
        6 => "#UD invalid opcode",
        7 => "#NM device not available",
        8 => "#DF double fault",
        13 => "#GP general protection",
        14 => "#PF page fault",
        19 => "#XM SIMD floating-point",
        _ => "exception",
    };
    println!("cpu exception {vector} ({name}): error code {error_code:#x}, rip {rip:#x}, cr2 {cr2:#x}");
    println!("result: FAIL");
    exit(Status::Fail)
}

/// Reads CR0 and CR4.
fn control_registers() -> (u64, u64) {
    let (cr0, cr4): (u64, u64);
    // SAFETY: reading control registers at ring 0 has no side effects.
    unsafe {
        asm!("mov {}, cr0", out(reg) cr0, options(nomem, nostack, preserves_flags));
        asm!("mov {}, cr4", out(reg) cr4, options(nomem, nostack, preserves_flags));
    }
    (cr0, cr4)
}

/// The 64-bit entry, called by boot.rs with the PVH start info address.
#[unsafe(no_mangle)]
extern "C" fn kmain(start_info: u32) -> ! {
    serial_init();
    install_idt();
    println!("baremetal-tests: x86_64-unknown-none kernel, stream-hal checks on guest RAM");
    let mut report = Report::new(now_ns);

    let cpu = cpu_features();
    let vendor = core::str::from_utf8(&cpu.vendor).unwrap_or("?");
    println!(
        "cpuid: vendor {vendor}, max leaf {:#x}, max extended leaf {:#x}, sse2 {}, erms {}, clzero {}",
        cpu.max_leaf,
        cpu.max_extended,
        yes(cpu.sse2),
        yes(cpu.erms),
        yes(cpu.clzero)
    );
    let (cr0, cr4) = control_registers();
    println!(
        "cr0 {cr0:#x}, cr4 {cr4:#x}: CR4.OSFXSR = {} (SSE never enabled: an SSE instruction would raise #UD)",
        (cr4 >> 9) & 1
    );
    // stream-hal is built with `--cfg stream_hal_no_cpuid`: the kernel passes what it detected.
    let amd = &cpu.vendor == b"AuthenticAMD" || &cpu.vendor == b"HygonGenuine";
    // SAFETY: `cpu.clzero` is CPUID 0x8000_0008 EBX bit 0 of this CPU, read just above, and
    // the kernel runs on this one CPU only (`-smp 1`, no other CPU is started).
    unsafe { crate::hal::set_cpu_features(cpu.clzero, amd) };
    if crate::hal::cpu_features().clzero != cpu.clzero {
        report.fail(format_args!("stream-hal uses the CPU features the kernel set"));
    }
    crate::check_backend(&mut report, "x86_64-movnti");
    let clear_big = if cpu.clzero {
        "clzero"
    } else if amd {
        "rep stosb"
    } else {
        crate::hal::streaming_clear_method()
    };
    println!(
        "clear_pages: rep stosb below 1 MiB; {} from 1 MiB{}; {} from 512 MiB",
        crate::hal::streaming_clear_method(),
        match (cpu.clzero, amd) {
            (true, _) => " (CPUID reports clzero)",
            (false, true) => " (CPUID reports no clzero, an AMD vendor)",
            (false, false) => " (CPUID reports no clzero, not an AMD vendor)",
        },
        clear_big
    );

    // SAFETY: `start_info` is what the PVH entry received in `ebx`.
    let Some(ram) = (unsafe { memory_map(start_info) }) else {
        report.fail(format_args!("PVH memory map present"));
        exit(report.finish());
    };
    let kernel_end = &raw const __kernel_end as u64;
    let start = kernel_end.max(ram.start).next_multiple_of(2 << 20);
    let end = ram.end.min(MAPPED_END) & !(crate::hal::PAGE_SIZE as u64 - 1);
    if end <= start {
        report.fail(format_args!("RAM above the kernel ({kernel_end:#x})"));
        exit(report.finish());
    }
    let kernel_start = &raw const __kernel_start as u64;
    println!(
        "kernel image {kernel_start:#x}..{kernel_end:#x}; test arena {start:#x}..{end:#x} ({} MiB)",
        (end - start) >> 20
    );
    // SAFETY: `[start, end)` lies in the largest RAM range of the firmware's memory map, above
    // the kernel image, its stack and page tables (`__kernel_end`), and below 4 GiB, which the
    // entry code identity-mapped writable (its memory type is the firmware's MTRR setting for
    // RAM, write-back). Nothing else in this single-threaded kernel, and no device (none is set
    // up for DMA), uses that memory.
    let mut arena = unsafe { Arena::new(start as usize, (end - start) as usize) };

    checks::run_all(&mut arena, &mut report, &Plan { big_clear_pages: Some(BIG_CLEAR_PAGES) });
    exit(report.finish())
}
