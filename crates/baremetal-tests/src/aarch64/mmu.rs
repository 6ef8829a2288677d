//! An identity map for EL1 with one level of 1 GiB blocks (4 KiB granule, 39-bit addresses):
//! the first GiB (the `virt` machine's devices, the PL011 among them) as Device-nGnRnE, the
//! RAM's GiBs as Normal write-back cacheable, inner shareable; nothing else is mapped.
//! With the MMU off every access is a Device access (no cache, `dc zva` faults), not how a
//! kernel runs the clears.

use core::arch::asm;

/// `MAIR_EL1` attribute 0: Device-nGnRnE; attribute 1: Normal, inner and outer write-back
/// non-transient, read- and write-allocate.
const MAIR: u64 = 0xff << 8;
/// Level-1 block descriptor bits: valid block, AF, and for RAM attribute 1 + inner shareable,
/// for devices attribute 0 + never executable (PXN, UXN).
const BLOCK: u64 = 0b01 | (1 << 10);
const NORMAL: u64 = BLOCK | (1 << 2) | (0b11 << 8);
const DEVICE: u64 = BLOCK | (1 << 53) | (1 << 54);
/// `TCR_EL1`: T0SZ = 25 (39-bit VA, walks start at level 1), IRGN0/ORGN0 write-back
/// write-allocate, SH0 inner shareable, TG0 4 KiB; T1SZ = 25, EPD1 (no TTBR1 walks), TG1 4 KiB;
/// IPS 40 bits.
const TCR: u64 =
    25 | (0b01 << 8) | (0b01 << 10) | (0b11 << 12) | (25 << 16) | (1 << 23) | (0b10 << 30) | (0b010 << 32);
/// `SCTLR_EL1` bits set on top of the boot value: M (MMU), C (data cache), I (instruction
/// cache).
const SCTLR_ON: u64 = (1 << 0) | (1 << 2) | (1 << 12);
/// 1 GiB.
const GIB: u64 = 1 << 30;

/// The level-1 table: 512 entries of 1 GiB.
#[repr(C, align(4096))]
struct Table([u64; 512]);

static mut LEVEL1: Table = Table([0; 512]);

/// Why the map could not be built.
#[derive(Debug)]
pub(crate) struct Unmappable;

/// Builds the map for RAM `[ram_base, ram_end)` and turns the MMU and caches on at EL1.
///
/// # Safety
///
/// Must run once, at EL1, with the MMU off, before anything relies on memory attributes; the
/// kernel image, its stack and the PL011 must lie in the mapped ranges (they do: the image and
/// stack are in RAM, the PL011 in the first GiB), so execution continues at the same addresses.
pub(crate) unsafe fn enable(ram_base: u64, ram_end: u64) -> Result<(), Unmappable> {
    let first = ram_base / GIB;
    let last = ram_end.div_ceil(GIB);
    if first == 0 || last > 512 || first >= last {
        return Err(Unmappable);
    }
    let table = &raw mut LEVEL1;
    // SAFETY: single CPU, MMU off: nothing else reads or writes the table yet. Indices are
    // below 512 (checked above).
    unsafe {
        (*table).0[0] = DEVICE;
        for i in first..last {
            (*table).0[i as usize] = NORMAL | (i * GIB);
        }
    }
    // SAFETY: the registers describe the table just written (4 KiB aligned, as TTBR0 needs);
    // the TLB invalidation and barriers make the new translation regime the only one the
    // following accesses see; enabling M/C/I with an identity map keeps every address the
    // program uses (see the function's contract) at the same place, now with the attributes
    // above.
    unsafe {
        asm!(
            "dsb ish",
            "msr mair_el1, {mair}",
            "msr tcr_el1, {tcr}",
            "msr ttbr0_el1, {table}",
            "isb",
            "tlbi vmalle1",
            "dsb ish",
            "isb",
            "mrs {tmp}, sctlr_el1",
            "orr {tmp}, {tmp}, {on}",
            "msr sctlr_el1, {tmp}",
            "isb",
            mair = in(reg) MAIR,
            tcr = in(reg) TCR,
            table = in(reg) table,
            on = in(reg) SCTLR_ON,
            tmp = out(reg) _,
            options(nostack),
        );
    }
    Ok(())
}
