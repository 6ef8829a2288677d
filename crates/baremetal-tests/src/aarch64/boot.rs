//! Entry and exception vectors.
//!
//! The entry starts at EL2 with the MMU off, zeroes `.bss` with aligned 16-byte stores (Device
//! memory faults on misaligned ones), sets up EL1 and calls `kmain(boot_el)` there (the steps:
//! `docs/baremetal.md`).
//!
//! EL2 then serves one call from EL1: `hvc #0` with `x0 = 1` sets `HCR_EL2.TDZ` (EL1's
//! `dc zva` traps to EL2 and `DCZID_EL0.DZP` reads 1 at EL1), with `x0 = 0` clears it; the new
//! `HCR_EL2` comes back in `x0` (`x1` is clobbered). Every other exception calls
//! `exception_report`, which prints the syndrome and fails the run.

core::arch::global_asm!(
    r#"
    .section .text.boot, "ax"
    .global _start
_start:
    mrs x19, CurrentEL
    ubfx x19, x19, #2, #2

    adrp x1, __bss_start
    add x1, x1, :lo12:__bss_start
    adrp x2, __bss_end
    add x2, x2, :lo12:__bss_end
1:
    cmp x1, x2
    b.hs 2f
    stp xzr, xzr, [x1], #16
    b 1b
2:
    adrp x1, __stack_top
    add x1, x1, :lo12:__stack_top
    cmp x19, #2
    b.ne 3f

    adrp x2, __el2_stack_top
    add x2, x2, :lo12:__el2_stack_top
    mov sp, x2
    adrp x2, el2_vectors
    add x2, x2, :lo12:el2_vectors
    msr vbar_el2, x2
    mov x2, #(1 << 31)              /* HCR_EL2: RW (EL1 is AArch64); TDZ clear */
    msr hcr_el2, x2
    mov x2, #0x33ff                 /* CPTR_EL2: RES1 bits; TFP clear */
    msr cptr_el2, x2
    mov x2, #3                      /* CNTHCTL_EL2: EL1PCTEN | EL1PCEN */
    msr cnthctl_el2, x2
    msr cntvoff_el2, xzr
    mov x2, #0x0800                 /* SCTLR_EL1: RES1 bits only (MMU and caches off) */
    movk x2, #0x30d0, lsl #16
    msr sctlr_el1, x2
    msr sp_el1, x1
    adrp x2, el1_entry
    add x2, x2, :lo12:el1_entry
    msr elr_el2, x2
    mov x2, #0x3c5                  /* SPSR_EL2: EL1h, D, A, I, F masked */
    msr spsr_el2, x2
    mov x0, x19
    isb
    eret
3:
    mov sp, x1                      /* started below or above EL2: kmain reports it */
    mov x0, x19
el1_entry:
    mov x2, #(3 << 20)              /* CPACR_EL1.FPEN: no FP/SIMD traps */
    msr cpacr_el1, x2
    adrp x2, el1_vectors
    add x2, x2, :lo12:el1_vectors
    msr vbar_el1, x2
    isb
    bl kmain
4:
    wfe
    b 4b

    .section .text.vectors, "ax"
    .balign 2048
el2_vectors:
    .irp slot, 0,1,2,3,4,5,6,7
    .balign 0x80
    mov x3, #\slot
    b el2_unexpected
    .endr
    .balign 0x80
    b el2_sync_lower                /* slot 8: synchronous from EL1 (AArch64) */
    .irp slot, 9,10,11,12,13,14,15
    .balign 0x80
    mov x3, #\slot
    b el2_unexpected
    .endr

el2_sync_lower:
    mrs x1, esr_el2
    lsr x1, x1, #26
    cmp x1, #0x16                   /* EC: HVC from AArch64 */
    b.ne 5f
    mrs x1, hcr_el2
    bic x1, x1, #(1 << 28)          /* TDZ */
    cbz x0, 6f
    orr x1, x1, #(1 << 28)
6:
    msr hcr_el2, x1
    isb
    mov x0, x1
    eret
5:
    mov x3, #8
el2_unexpected:
    mrs x0, esr_el2
    mrs x1, elr_el2
    mrs x2, far_el2
    mov x4, #2
    bl exception_report
    b .

    .balign 2048
el1_vectors:
    .irp slot, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
    .balign 0x80
    mov x3, #\slot
    b el1_unexpected
    .endr
el1_unexpected:
    mrs x0, esr_el1
    mrs x1, elr_el1
    mrs x2, far_el1
    mov x4, #1
    bl exception_report
    b .
"#
);
