//! Entry and trap vector.
//!
//! M-mode entry with `a0` = the hart id and `a1` = the device tree: stack, `.bss`, FPU on (the
//! target's code may use FP registers), trap vector, then `kmain(hartid, dtb)`. Every trap
//! calls `trap_report`, which fails the run.

core::arch::global_asm!(
    r#"
    .section .text.boot, "ax"
    .global _start
_start:
    la sp, __stack_top
    mv s0, a0
    mv s1, a1

    la t0, __bss_start
    la t1, __bss_end
1:
    bgeu t0, t1, 2f
    sd zero, 0(t0)
    addi t0, t0, 8
    j 1b
2:
    li t0, (1 << 13)                /* mstatus.FS = Initial */
    csrs mstatus, t0
    la t0, trap_entry
    csrw mtvec, t0
    mv a0, s0
    mv a1, s1
    call kmain
3:
    wfi
    j 3b

    .balign 4
trap_entry:
    la sp, __stack_top
    csrr a0, mcause
    csrr a1, mepc
    csrr a2, mtval
    call trap_report
4:
    wfi
    j 4b
"#
);
