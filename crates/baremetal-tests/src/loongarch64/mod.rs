//! loongarch64 as a Linux user-mode program under `qemu-loongarch64`, with raw system calls
//! (there is no loongarch64 cross C library or standard library here). The backend is the
//! generic one: LoongArch has no streaming store.

use core::arch::asm;

use crate::arena::Arena;
use crate::checks::{self, Plan};
use crate::report::{Report, Status};

/// Generic Linux system call numbers (include/uapi/asm-generic/unistd.h), which LoongArch uses.
const SYS_WRITE: usize = 64;
const SYS_EXIT_GROUP: usize = 94;
const SYS_CLOCK_GETTIME: usize = 113;
const SYS_MMAP: usize = 222;
/// `CLOCK_MONOTONIC`.
const CLOCK_MONOTONIC: usize = 1;
/// `PROT_READ | PROT_WRITE`, `MAP_PRIVATE | MAP_ANONYMOUS`.
const PROT_RW: usize = 3;
const MAP_PRIVATE_ANONYMOUS: usize = 0x22;
/// The test arena: enough for the largest check (16 MiB clears with guards, 4 MiB copies).
const ARENA_BYTES: usize = 128 << 20;

core::arch::global_asm!(
    r#"
    .section .text.boot, "ax"
    .global _start
_start:
    /* Linux starts a static program with sp at argc, 16-byte aligned; nothing else is needed. */
    bl lmain
1:
    b 1b
"#
);

/// A Linux system call with up to six arguments.
///
/// # Safety
///
/// The call with these arguments must not violate memory safety (the callers below pass
/// valid buffers, or ask for fresh anonymous memory).
unsafe fn syscall6(nr: usize, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the caller guarantees the call is harmless; `syscall 0` clobbers only a0 (the
    // result) and the temporaries t0-t8 in the LoongArch Linux ABI, all declared.
    unsafe {
        asm!(
            "syscall 0",
            inlateout("$a0") a[0] => ret,
            in("$a1") a[1],
            in("$a2") a[2],
            in("$a3") a[3],
            in("$a4") a[4],
            in("$a5") a[5],
            in("$a7") nr,
            out("$t0") _, out("$t1") _, out("$t2") _, out("$t3") _, out("$t4") _,
            out("$t5") _, out("$t6") _, out("$t7") _, out("$t8") _,
            options(nostack),
        );
    }
    ret
}

/// Writes one byte to standard output.
pub(crate) fn serial_write_byte(b: u8) {
    // SAFETY: `write` reads the one byte of `b`, which lives for the call.
    unsafe { syscall6(SYS_WRITE, [1, (&raw const b) as usize, 1, 0, 0, 0]) };
}

/// Ends the program: exit status 0 for a pass, 1 for a failure.
pub(crate) fn exit(status: Status) -> ! {
    let code = if status == Status::Pass { 0 } else { 1 };
    loop {
        // SAFETY: `exit_group` ends the process; it touches no memory of the program.
        unsafe { syscall6(SYS_EXIT_GROUP, [code, 0, 0, 0, 0, 0]) };
    }
}

/// Nanoseconds of `CLOCK_MONOTONIC` (host time: qemu-user forwards the call).
pub(crate) fn now_ns() -> Option<u64> {
    let mut ts = [0i64; 2];
    // SAFETY: `clock_gettime` writes one `struct timespec` (two 64-bit words) to `ts`.
    let r = unsafe { syscall6(SYS_CLOCK_GETTIME, [CLOCK_MONOTONIC, (&raw mut ts) as usize, 0, 0, 0, 0]) };
    (r == 0).then(|| ts[0] as u64 * 1_000_000_000 + ts[1] as u64)
}

/// The entry, called by `_start`.
#[unsafe(no_mangle)]
extern "C" fn lmain() -> ! {
    println!("baremetal-tests: loongarch64 (loongarch64-unknown-none, Linux user mode), stream-hal checks");
    let mut report = Report::new(now_ns);
    crate::check_backend(&mut report, "generic");
    println!("stream-hal backend reason: {}", crate::hal::backend());
    // SAFETY: a fresh private anonymous mapping: no existing memory is affected.
    let base = unsafe { syscall6(SYS_MMAP, [0, ARENA_BYTES, PROT_RW, MAP_PRIVATE_ANONYMOUS, usize::MAX, 0]) };
    if base < 0 {
        report.fail(format_args!("mmap of {ARENA_BYTES} bytes (errno {})", -base));
        exit(report.finish());
    }
    println!(
        "test arena {base:#x}..{:#x} ({} MiB, anonymous mmap)",
        base as usize + ARENA_BYTES,
        ARENA_BYTES >> 20
    );
    // SAFETY: `[base, base + ARENA_BYTES)` is a fresh read-write private mapping that nothing
    // else in this single-threaded program uses.
    let mut arena = unsafe { Arena::new(base as usize, ARENA_BYTES) };
    checks::run_all(&mut arena, &mut report, &Plan { big_clear_pages: None });
    exit(report.finish())
}
