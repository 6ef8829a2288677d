//! PVH entry (`docs/baremetal.md`): from 32-bit protected mode with `ebx` holding the
//! `hvm_start_info` address, to long mode with the first 4 GiB identity-mapped and
//! `kmain(start_info)`. SSE stays off, so an SSE instruction raises `#UD` (`movnti` and
//! `sfence` need only CPUID's SSE2 bit); the exception stubs call `x86_exception`, which fails
//! the run.

core::arch::global_asm!(
    r#"
    .section .note.pvh, "a", @note
    .balign 4
    .long 4                     /* n_namesz: "Xen\0" */
    .long 8                     /* n_descsz: QEMU reads a 64-bit entry address */
    .long 18                    /* n_type: XEN_ELFNOTE_PHYS32_ENTRY */
    .asciz "Xen"
    .balign 4
    .quad pvh_start32
    .balign 4

    .section .bss.pagetables, "aw", @nobits
    .balign 4096
pml4:
    .skip 4096
pdpt:
    .skip 4096
pd:
    .skip 4 * 4096              /* 4 x 512 entries of 2 MiB: 4 GiB */

    .section .rodata.gdt, "a"
    .balign 16
gdt64:
    .quad 0
    .quad 0x00af9a000000ffff    /* 0x08: 64-bit code, present, ring 0 */
    .quad 0x00cf92000000ffff    /* 0x10: data, present, writable */
gdt64_end:
gdt64_ptr:
    .word gdt64_end - gdt64 - 1
    .long gdt64

    .section .text.boot, "ax"
    .code32
    .global pvh_start32
pvh_start32:
    cli
    cld
    mov %ebx, %esi              /* hvm_start_info, kept in esi until kmain */

    /* Zero .bss (page tables included). */
    mov $__bss_start, %edi
    mov $__bss_end, %ecx
    sub %edi, %ecx
    xor %eax, %eax
    rep stosb
    mov $__stack_top, %esp

    /* PML4[0] -> PDPT; PDPT[0..4] -> PD[0..4]; PD[i] = i * 2 MiB, present | writable | PS. */
    mov $pdpt, %eax
    or $0x3, %eax
    mov %eax, pml4
    mov $pd, %eax
    or $0x3, %eax
    mov $pdpt, %edi
    mov $4, %ecx
1:
    mov %eax, (%edi)
    add $4096, %eax
    add $8, %edi
    loop 1b
    mov $pd, %edi
    mov $0x83, %eax
    mov $2048, %ecx
2:
    mov %eax, (%edi)
    add $0x200000, %eax
    add $8, %edi
    loop 2b

    mov %cr4, %eax
    or $0x20, %eax              /* PAE */
    mov %eax, %cr4
    mov $pml4, %eax
    mov %eax, %cr3
    mov $0xC0000080, %ecx       /* EFER */
    rdmsr
    or $0x100, %eax             /* LME */
    wrmsr
    mov %cr0, %eax
    or $0x80000001, %eax        /* PG | PE */
    mov %eax, %cr0
    lgdt gdt64_ptr
    ljmp $0x08, $long_mode_start

    .code64
long_mode_start:
    mov $0x10, %eax
    mov %eax, %ds
    mov %eax, %es
    mov %eax, %ss
    xor %eax, %eax
    mov %eax, %fs
    mov %eax, %gs
    mov $__stack_top, %rsp
    xor %ebp, %ebp
    mov %esi, %edi              /* kmain(start_info) */
    call kmain
3:
    cli
    hlt
    jmp 3b

    .section .text.exceptions, "ax"
    .irp v, 0,1,2,3,4,5,6,7,9,15,16,18,19,20,22,23,24,25,26,27,28,31
exception_stub_\v:
    push $0
    push $\v
    jmp exception_common
    .endr
    .irp v, 8,10,11,12,13,14,17,21,29,30
exception_stub_\v:
    push $\v
    jmp exception_common
    .endr
exception_common:
    mov (%rsp), %rdi            /* vector */
    mov 8(%rsp), %rsi           /* error code */
    mov 16(%rsp), %rdx          /* rip */
    mov %cr2, %rcx              /* faulting address of a page fault */
    and $-16, %rsp
    call x86_exception
    ud2

    .section .rodata.exception_stubs, "a"
    .balign 8
    .global exception_stubs
exception_stubs:
    .irp v, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    .quad exception_stub_\v
    .endr
"#,
    options(att_syntax)
);
