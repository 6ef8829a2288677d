//! Reset under a real KVM guest: the guest's view of memory, not only the host's.
//!
//! A VM with two RAM memslots over one two-region `GuestMemoryMmap<AtomicBitmap>` (GPA
//! `[0, 256 KiB)` and `[512 KiB, 768 KiB)`, a hole between, both with `KVM_MEM_LOG_DIRTY_PAGES`,
//! registered for the whole test) and a third slot, a 4 KiB "ROM" at `0xF0000` outside the guest
//! memory, with two tiny real-mode programs:
//!
//! * the writer fills a chosen set of pages of both regions with a non-zero dword, then reports
//!   the dword on port `0x10` and halts;
//! * the reader ORs every byte of both regions together, one 64 KiB segment at a time, reports
//!   each segment's OR on port `0x11` and halts: the guest tells whether it sees zeros.
//!
//! For every [`ResetPolicy`], with the memslots in place: the writer runs, [`reset`] zeroes both
//! regions, the reader must report zero and the host must read zero. A discard whose KVM stage-2
//! mapping still pointed at the old pages (an MMU notifier missed), or zeroing left undrained,
//! shows up as a non-zero report. KVM's dirty log (per slot) merged with vm-memory's bitmap
//! must equal, page by page, the pages the guest wrote (after the writer) and the pages the
//! reset wrote or discarded (after the reset). Two more tests show that these checks fail when
//! one dirty page is dropped and when one byte is left non-zero.
//!
//! Where `/dev/kvm` cannot be opened or `KVM_CREATE_VM` fails, the tests say why on stderr and
//! pass. x86-64 Linux only: the guest programs are x86 machine code (like the bare-metal test
//! kernels' boot code, guest code is the one kind of architecture code outside
//! `stream-hal/src/arch/`).

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use kvm_bindings::{KVM_MEM_LOG_DIRTY_PAGES, kvm_regs, kvm_userspace_memory_region};
use kvm_ioctls::{Kvm, VcpuExit, VcpuFd, VmFd};
use stream_par::Threads;
use stream_vm_memory::{Placement, ResetPolicy, ResetReport, Workers, reset};
use vm_memory::bitmap::{AtomicBitmap, Bitmap};
use vm_memory::{
    Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion, MemoryRegionAddress,
    MmapRegion,
};
use vmm_sys_util::signal::{Killable, SIGRTMIN, register_signal_handler};

type Mem = GuestMemoryMmap<AtomicBitmap>;

const KIB: u64 = 1 << 10;
/// The page of KVM's dirty log (the host's base page) and of vm-memory's `AtomicBitmap`.
const PAGE: u64 = 4096;
/// The guest's RAM: `(GPA, bytes)`, memslots 0 and 1, with a hole between them.
const REGIONS: [(u64, u64); 2] = [(0, 256 * KIB), (512 * KIB, 256 * KIB)];
/// The code and the page table of the programs: memslot 2, not dirty-logged, not reset.
const ROM_GPA: u64 = 0xF_0000;
const ROM_LEN: usize = 4096;
const ROM_SLOT: u32 = 2;
/// Offsets in the ROM (and in its real-mode segment `0xF000`).
const WRITER_AT: u16 = 0x000;
const READER_AT: u16 = 0x100;
const TABLE_AT: u16 = 0x200;
/// The real-mode segments (64 KiB each, 16 pages) that cover the RAM, four per region, in the
/// order of the table: segment `s` starts at GPA `SEGMENTS[s] * 16`.
const SEGMENTS: [u16; 8] = [0x0000, 0x1000, 0x2000, 0x3000, 0x8000, 0x9000, 0xA000, 0xB000];
const PAGES_PER_SEGMENT: u64 = 16;
const PORT_WRITER_DONE: u16 = 0x10;
const PORT_READER_OR: u16 = 0x11;
/// Exits one guest run may take (the writer takes 2, the reader 9) before it is an error.
const MAX_EXITS: usize = 64;
/// Wall-clock bound of one guest run: past it the vCPU is kicked out of `KVM_RUN` by a signal.
const GUEST_DEADLINE: Duration = Duration::from_secs(60);

/// The writer, 16-bit real mode, at `WRITER_AT`. In: `EAX` the fill dword, `DS:SI` the table
/// (`SEGMENTS.len()` entries of `(segment: u16, page mask: u16)`, bit `k` = page `k` of the
/// segment). Fills every selected 4 KiB page with `EAX`, skips the others, then `out 0x10, eax`
/// and `hlt`. Touches no other memory (no stack).
#[rustfmt::skip]
const WRITER: [u8; 40] = [
    0xBD, 0x08, 0x00,       // 00: mov bp, 8           ; table entries left
    0x8E, 0x04,             // 03: mov es, [si]        ; next_seg: the segment of this entry
    0x8B, 0x54, 0x02,       // 05: mov dx, [si+2]      ; its page mask
    0x31, 0xFF,             // 08: xor di, di          ; page 0 of the segment
    0xB9, 0x00, 0x04,       // 0a: mov cx, 1024        ; next_page: dwords in a page
    0xD1, 0xEA,             // 0d: shr dx, 1           ; CF = this page's bit
    0x73, 0x05,             // 0f: jnc 0x16            ; not selected: skip it
    0xF3, 0x66, 0xAB,       // 11: rep stosd           ; es:[di..di+4096] = eax, di += 4096
    0xEB, 0x04,             // 14: jmp 0x1a
    0x81, 0xC7, 0x00, 0x10, // 16: add di, 0x1000      ; skip the page
    0x85, 0xFF,             // 1a: test di, di         ; di wraps to 0 after page 15
    0x75, 0xEC,             // 1c: jnz 0x0a            ; next_page
    0x83, 0xC6, 0x04,       // 1e: add si, 4           ; next table entry
    0x4D,                   // 21: dec bp
    0x75, 0xDF,             // 22: jnz 0x03            ; next_seg
    0x66, 0xE7, 0x10,       // 24: out 0x10, eax       ; report: done, with the dword written
    0xF4,                   // 27: hlt
];

/// The reader, 16-bit real mode, at `READER_AT`. In: `DS:SI` the table (masks ignored). For
/// each entry's 64 KiB segment, ORs all its dwords into `EBX` and reports it with
/// `out 0x11, eax`; then `hlt`. Reads every byte of both regions, writes none.
#[rustfmt::skip]
const READER: [u8; 32] = [
    0xBD, 0x08, 0x00,       // 00: mov bp, 8           ; table entries left
    0x8E, 0x04,             // 03: mov es, [si]        ; next_seg
    0x31, 0xFF,             // 05: xor di, di
    0x66, 0x31, 0xDB,       // 07: xor ebx, ebx        ; the segment's OR
    0x26, 0x66, 0x0B, 0x1D, // 0a: or ebx, es:[di]     ; next_dword
    0x83, 0xC7, 0x04,       // 0e: add di, 4           ; ZF when di wraps: segment done
    0x75, 0xF7,             // 11: jnz 0x0a            ; next_dword
    0x66, 0x89, 0xD8,       // 13: mov eax, ebx
    0x66, 0xE7, 0x11,       // 16: out 0x11, eax       ; report the segment's OR
    0x83, 0xC6, 0x04,       // 19: add si, 4           ; next table entry
    0x4D,                   // 1c: dec bp
    0x75, 0xE4,             // 1d: jnz 0x03            ; next_seg
    0xF4,                   // 1f: hlt
];

/// One `out` of a guest: the port and the value (little-endian, zero-extended).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Out {
    port: u16,
    value: u32,
}

/// Guest pages by GPA page number (`gpa / PAGE`).
type Pages = BTreeSet<u64>;

/// The dirty pages since the last fetch, by source.
#[derive(Debug, Default)]
struct Dirty {
    /// `KVM_GET_DIRTY_LOG` of slots 0 and 1: pages the guest wrote.
    kvm: Pages,
    /// vm-memory's `AtomicBitmap`: pages the host wrote (here: the reset).
    bitmap: Pages,
}

impl Dirty {
    fn merged(&self) -> Pages {
        self.kvm.union(&self.bitmap).copied().collect()
    }
}

/// A VM whose two RAM memslots map `mem` and whose third maps `rom`.
struct Machine {
    // Fields drop in declaration order: the vCPU and the VM are closed (and with them every
    // memslot) before the memory the memslots map is unmapped.
    vcpu: Option<VcpuFd>,
    vm: VmFd,
    _kvm: Kvm,
    mem: Mem,
    rom: GuestMemoryMmap<()>,
}

/// Why a machine could not be made: `Skip` where this host has no usable KVM.
enum Unavailable {
    Skip(String),
    Fail(String),
}

impl Machine {
    /// A machine, or `None` after saying on stderr why `test` skips (no `/dev/kvm`, or
    /// `KVM_CREATE_VM` refused). Panics on any other failure.
    fn new_or_skip(test: &str) -> Option<Self> {
        match Self::new() {
            Ok(m) => Some(m),
            Err(Unavailable::Skip(why)) => {
                eprintln!("{test}: skipped: {why}");
                None
            }
            Err(Unavailable::Fail(why)) => panic!("{test}: {why}"),
        }
    }

    fn new() -> Result<Self, Unavailable> {
        let fail = |what: &str| {
            let what = what.to_owned();
            move |e: String| Unavailable::Fail(format!("{what}: {e}"))
        };
        // The memory first: locals drop in reverse order, so on every early return below the VM
        // (and its memslots) is closed before the memory is unmapped.
        let ranges = REGIONS.map(|(gpa, len)| (GuestAddress(gpa), len as usize));
        let mem = Mem::from_ranges(&ranges).map_err(|e| fail("guest memory")(e.to_string()))?;
        let rom = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(ROM_GPA), ROM_LEN)])
            .map_err(|e| fail("ROM")(e.to_string()))?;
        rom.write_slice(&WRITER, GuestAddress(ROM_GPA + u64::from(WRITER_AT)))
            .and_then(|()| rom.write_slice(&READER, GuestAddress(ROM_GPA + u64::from(READER_AT))))
            .map_err(|e| fail("loading the programs")(e.to_string()))?;
        let kvm = Kvm::new().map_err(|e| Unavailable::Skip(format!("cannot open /dev/kvm: {e}")))?;
        let vm = kvm.create_vm().map_err(|e| Unavailable::Skip(format!("KVM_CREATE_VM failed: {e}")))?;
        // Real mode without unrestricted guest (Intel) runs in vm86 under KVM, which needs a TSS
        // address: three pages below 4 GiB, far from every memslot.
        vm.set_tss_address(0xfffb_d000).map_err(|e| fail("KVM_SET_TSS_ADDR")(e.to_string()))?;
        for (slot, r) in (0u32..).zip(mem.iter()) {
            map_slot(&vm, slot, r.start_addr().0, r, KVM_MEM_LOG_DIRTY_PAGES)
                .map_err(fail(&format!("memslot {slot}")))?;
        }
        let rom_region = rom.iter().next().ok_or_else(|| fail("ROM")("no region".into()))?;
        map_slot(&vm, ROM_SLOT, ROM_GPA, rom_region, 0).map_err(fail("the ROM memslot"))?;
        let vcpu = vm.create_vcpu(0).map_err(|e| fail("KVM_CREATE_VCPU")(e.to_string()))?;
        kick_handler().map_err(fail("the vCPU kick signal handler"))?;
        let mut m = Machine { vcpu: Some(vcpu), vm, _kvm: kvm, mem, rom };
        // Slots start clean: pages are dirty-logged from here on.
        m.fetch_dirty().map_err(fail("the first dirty log"))?;
        Ok(m)
    }

    /// Writes the table (segments and, for the writer, page masks) into the ROM.
    fn load_table(&self, masks: &[u16; SEGMENTS.len()]) -> Result<(), String> {
        let mut table = Vec::with_capacity(4 * SEGMENTS.len());
        for (seg, mask) in SEGMENTS.iter().zip(masks) {
            table.extend(seg.to_le_bytes());
            table.extend(mask.to_le_bytes());
        }
        self.rom
            .write_slice(&table, GuestAddress(ROM_GPA + u64::from(TABLE_AT)))
            .map_err(|e| format!("writing the table: {e}"))
    }

    /// Runs the writer: fills the pages of `masks` with `fill` (all bytes non-zero). Returns
    /// the pages it was asked to write.
    fn run_writer(&mut self, masks: &[u16; SEGMENTS.len()], fill: u32) -> Result<Pages, String> {
        self.load_table(masks)?;
        let outs = self.run_guest(WRITER_AT, fill)?;
        let want = [Out { port: PORT_WRITER_DONE, value: fill }];
        if outs != want {
            return Err(format!("the writer reported {outs:x?}, not {want:x?}"));
        }
        Ok(selected_pages(masks))
    }

    /// Runs the reader: one OR per segment, in table order.
    fn run_reader(&mut self) -> Result<Vec<Out>, String> {
        self.load_table(&[0; SEGMENTS.len()])?;
        self.run_guest(READER_AT, 0)
    }

    /// Runs the vCPU from `ROM:entry` with `EAX = eax` and `DS:SI` at the table until it
    /// halts, at most `MAX_EXITS` exits and `GUEST_DEADLINE`, and returns its `out`s.
    fn run_guest(&mut self, entry: u16, eax: u32) -> Result<Vec<Out>, String> {
        let mut vcpu = self.vcpu.take().ok_or("the vCPU was lost by an earlier run")?;
        enter_real_mode(&vcpu, entry, eax).map_err(|e| format!("setting the vCPU's registers: {e}"))?;
        let expired = Arc::new(AtomicBool::new(false));
        let (done, finished) = mpsc::channel::<()>();
        let flag = Arc::clone(&expired);
        let runner = std::thread::spawn(move || {
            let r = run_loop(&mut vcpu, &flag);
            let _ = done.send(());
            (vcpu, r)
        });
        let mut wait = GUEST_DEADLINE;
        while let Err(RecvTimeoutError::Timeout) = finished.recv_timeout(wait) {
            // Release pairs with the Acquire load before each `KVM_RUN` in `run_loop`: a run
            // that starts after the kick sees the flag and stops.
            expired.store(true, Ordering::Release);
            let _ = runner.kill(kick_signal());
            // The signal may land between two runs: kick again until the runner is out.
            wait = Duration::from_millis(100);
        }
        let (vcpu, r) = runner.join().map_err(|_| "the vCPU thread panicked")?;
        self.vcpu = Some(vcpu);
        r
    }

    /// KVM's dirty log of both RAM slots and vm-memory's dirty bitmap, each cleared by the
    /// fetch (`KVM_GET_DIRTY_LOG` without manual protect clears and write-protects again).
    fn fetch_dirty(&mut self) -> Result<Dirty, String> {
        let mut d = Dirty::default();
        for (slot, r) in (0u32..).zip(self.mem.iter()) {
            let log = self
                .vm
                .get_dirty_log(slot, r.len() as usize)
                .map_err(|e| format!("KVM_GET_DIRTY_LOG of slot {slot}: {e}"))?;
            for (w, word) in (0u64..).zip(&log) {
                for b in (0..64).filter(|b| word & (1 << b) != 0) {
                    d.kvm.insert(r.start_addr().0 / PAGE + w * 64 + b);
                }
            }
            for k in (0..r.len() / PAGE).filter(|k| r.bitmap().dirty_at((k * PAGE) as usize)) {
                d.bitmap.insert(r.start_addr().0 / PAGE + k);
            }
            MmapRegion::bitmap(r).reset();
        }
        Ok(d)
    }

    /// [`reset`] of both regions (one call per region: the hole is not guest memory).
    fn reset_all(&self, policy: ResetPolicy) -> Result<Vec<ResetReport>, String> {
        let workers = Workers::new(Threads::Fixed(2)).with_placement(Placement::Unpinned);
        self.mem
            .iter()
            .map(|r| {
                reset(&self.mem, r.start_addr(), r.len() as usize, policy, &workers)
                    .map_err(|e| format!("reset {policy:?} of {:#x}: {e}", r.start_addr().0))
            })
            .collect()
    }
}

/// Registers `region` (a mapping `mem` or `rom` owns) as memslot `slot` at `gpa`.
fn map_slot<R: GuestMemoryRegion>(
    vm: &VmFd,
    slot: u32,
    gpa: u64,
    region: &R,
    flags: u32,
) -> Result<(), String> {
    let host = region.get_host_address(MemoryRegionAddress(0)).map_err(|e| e.to_string())?;
    let slot_desc = kvm_userspace_memory_region {
        slot,
        flags,
        guest_phys_addr: gpa,
        memory_size: region.len(),
        userspace_addr: host as u64,
    };
    // SAFETY: KVM_SET_USER_MEMORY_REGION lets the guest read and write
    // `[userspace_addr, userspace_addr + memory_size)` for as long as the slot exists; that is
    // sound when:
    // - the range is mapped and valid for reads and writes: it is the whole of `region`, a
    //   vm-memory mmap region (read-write anonymous, from `from_ranges`), which
    //   `get_host_address(0)` and `len()` describe;
    // - it stays mapped while the slot exists: `region` belongs to `Machine::mem` or
    //   `Machine::rom`, which the machine owns with the VM, and `Machine`'s fields drop the
    //   vCPU and the VM (every slot with them) before either memory (in `Machine::new`, before
    //   the machine exists, the memory is a local declared before the VM, so it too outlives
    //   it); no slot is deleted or moved before;
    // - guest accesses break no Rust aliasing rule: nothing forms a reference into guest
    //   memory (vm-memory and stream-vm-memory access it through raw pointers and volatile
    //   slices only), and the guest runs only inside `KVM_RUN` while the host makes no
    //   conflicting access (each run is joined before the host touches the memory again);
    // - the slot neither overlaps another nor reuses a number: slots 0 and 1 are `REGIONS`,
    //   disjoint, slot 2 is the ROM at `ROM_GPA`, past both (KVM refuses overlaps with EEXIST
    //   anyway, and page-misaligned ranges with EINVAL, reported here).
    unsafe { vm.set_user_memory_region(slot_desc) }.map_err(|e| e.to_string())
}

/// Sets real mode at `0xF000:entry` (the ROM), `DS = 0xF000`, `SI` at the table, `EAX`,
/// interrupts off.
fn enter_real_mode(vcpu: &VcpuFd, entry: u16, eax: u32) -> Result<(), kvm_ioctls::Error> {
    let mut sregs = vcpu.get_sregs()?;
    for seg in [&mut sregs.cs, &mut sregs.ds] {
        seg.base = ROM_GPA;
        seg.selector = (ROM_GPA >> 4) as u16;
    }
    vcpu.set_sregs(&sregs)?;
    let regs = kvm_regs {
        rip: u64::from(entry),
        rsi: u64::from(TABLE_AT),
        rax: u64::from(eax),
        // Bit 1 is reserved and set; IF = 0, DF = 0 (string stores go up).
        rflags: 0x2,
        ..Default::default()
    };
    vcpu.set_regs(&regs)
}

/// The vCPU run loop: `out`s collected, `hlt` ends the run; any other exit, `MAX_EXITS`
/// exits, or the deadline (`expired`, set by the watchdog) is an error.
fn run_loop(vcpu: &mut VcpuFd, expired: &AtomicBool) -> Result<Vec<Out>, String> {
    let mut outs = Vec::new();
    for _ in 0..MAX_EXITS {
        // Acquire pairs with the watchdog's Release store in `run_guest`.
        if expired.load(Ordering::Acquire) {
            return Err(format!("the guest ran past {GUEST_DEADLINE:?}{}", at(vcpu)));
        }
        let why = match vcpu.run() {
            Ok(VcpuExit::IoOut(port, data)) => {
                let mut v = [0u8; 4];
                let n = data.len().min(4);
                v[..n].copy_from_slice(&data[..n]);
                outs.push(Out { port, value: u32::from_le_bytes(v) });
                continue;
            }
            Ok(VcpuExit::Hlt) => return Ok(outs),
            // A kick (or another signal): the deadline check above decides.
            Err(e) if e.errno() == libc::EINTR => continue,
            Ok(exit) => format!("unexpected exit {exit:?}"),
            Err(e) => format!("KVM_RUN: {e}"),
        };
        return Err(format!("{why}{}", at(vcpu)));
    }
    Err(format!("no hlt after {MAX_EXITS} exits{}", at(vcpu)))
}

/// Where the guest is, for error messages.
fn at(vcpu: &VcpuFd) -> String {
    match vcpu.get_regs() {
        Ok(r) => format!(" (rip {:#x}, rsi {:#x}, rdi {:#x}, rcx {:#x})", r.rip, r.rsi, r.rdi, r.rcx),
        Err(e) => format!(" (registers unreadable: {e})"),
    }
}

/// The signal that kicks a vCPU thread out of `KVM_RUN` (`EINTR`).
fn kick_signal() -> libc::c_int {
    SIGRTMIN()
}

/// Installs the kick signal's handler (which does nothing: the signal only interrupts
/// `KVM_RUN`) once per process, so that the kick does not end the process.
fn kick_handler() -> Result<(), String> {
    extern "C" fn nothing(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {}
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| register_signal_handler(kick_signal(), nothing).map_err(|e| e.to_string())).clone()
}

/// The GPA page numbers the writer writes for `masks`.
fn selected_pages(masks: &[u16; SEGMENTS.len()]) -> Pages {
    let mut pages = Pages::new();
    for (&seg, &mask) in SEGMENTS.iter().zip(masks) {
        for k in (0..PAGES_PER_SEGMENT).filter(|k| mask & (1 << k) != 0) {
            pages.insert(u64::from(seg) * 16 / PAGE + k);
        }
    }
    pages
}

/// Every page of both regions.
fn all_pages() -> Pages {
    REGIONS.iter().flat_map(|&(gpa, len)| gpa / PAGE..(gpa + len) / PAGE).collect()
}

/// A round's page masks, per segment: all pages, first and last, none, a few scattered; each
/// region gets each kind, and the kinds move from segment to segment with the round.
fn page_masks(round: usize) -> [u16; SEGMENTS.len()] {
    std::array::from_fn(|s| match (s + round) % 4 {
        0 => 0xFFFF,
        1 => 0x8001,
        2 => 0x0000,
        _ => 0x1248u16.rotate_left(round as u32),
    })
}

/// A round's fill dword: no zero byte.
fn fill_word(round: usize) -> u32 {
    let r = (round % 64) as u8;
    u32::from_le_bytes([0xA1 + r, 0x5A, 0xC3, 0x01 + r])
}

/// The check of the dirty tracking: `merged` (KVM's log and vm-memory's bitmap) is exactly
/// `expected`, page by page.
fn check_dirty(merged: &Pages, expected: &Pages) -> Result<(), String> {
    let missing: Vec<u64> = expected.difference(merged).map(|p| p * PAGE).collect();
    let extra: Vec<u64> = merged.difference(expected).map(|p| p * PAGE).collect();
    if missing.is_empty() && extra.is_empty() {
        return Ok(());
    }
    Err(format!(
        "dirty pages differ: {} written but not dirty (GPAs {missing:#x?}), {} dirty but not written \
         (GPAs {extra:#x?})",
        missing.len(),
        extra.len()
    ))
}

/// The guest's zero check: the reader reported one OR per segment, in order, each zero.
fn check_guest_reads_zero(outs: &[Out]) -> Result<(), String> {
    if outs.len() != SEGMENTS.len() || outs.iter().any(|o| o.port != PORT_READER_OR) {
        return Err(format!("the reader reported {outs:x?}, not one OR per segment"));
    }
    let bad: Vec<String> = SEGMENTS
        .iter()
        .zip(outs)
        .filter(|(_, o)| o.value != 0)
        .map(|(seg, o)| format!("GPA {:#x}..+64 KiB ORs to {:#010x}", u64::from(*seg) * 16, o.value))
        .collect();
    if bad.is_empty() { Ok(()) } else { Err(format!("the guest reads non-zero memory: {}", bad.join("; "))) }
}

/// The host's zero check: every byte of both regions, read through vm-memory, is zero.
fn check_host_reads_zero(mem: &Mem) -> Result<(), String> {
    for r in mem.iter() {
        let mut buf = vec![0xFFu8; r.len() as usize];
        mem.read_slice(&mut buf, r.start_addr()).map_err(|e| e.to_string())?;
        if let Some(i) = buf.iter().position(|&b| b != 0) {
            let n = buf.iter().filter(|&&b| b != 0).count();
            return Err(format!(
                "the host reads {n} non-zero bytes from {:#x}, the first at GPA {:#x} ({:#04x})",
                r.start_addr().0,
                r.start_addr().0 + i as u64,
                buf[i]
            ));
        }
    }
    Ok(())
}

/// The host's check of a writer run: the written pages hold `fill`. (Only those are read: the
/// others stay untouched, not resident, for `ResetPolicy::Auto` to discard.)
fn check_host_reads_fill(mem: &Mem, written: &Pages, fill: u32) -> Result<(), String> {
    let want: Vec<u8> = fill.to_le_bytes().iter().copied().cycle().take(PAGE as usize).collect();
    let mut buf = vec![0u8; PAGE as usize];
    for &p in written {
        mem.read_slice(&mut buf, GuestAddress(p * PAGE)).map_err(|e| e.to_string())?;
        if buf != want {
            return Err(format!("the page at GPA {:#x} does not hold the writer's {fill:#010x}", p * PAGE));
        }
    }
    Ok(())
}

/// `r`'s value, or a panic that says what failed.
fn must<T>(r: Result<T, String>, what: &str) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// One round: the writer, its dirty pages, the reset, the reader, the reset's dirty pages.
fn round(m: &mut Machine, n: usize, policy: ResetPolicy) -> Vec<ResetReport> {
    let ctx = |what: &str| format!("round {n} ({policy:?}): {what}");
    let (masks, fill) = (page_masks(n), fill_word(n));
    let t = Instant::now();
    let written = must(m.run_writer(&masks, fill), &ctx("the writer"));
    let t_writer = t.elapsed();
    must(check_host_reads_fill(&m.mem, &written, fill), &ctx("after the writer"));
    let d = must(m.fetch_dirty(), &ctx("the dirty log"));
    must(check_dirty(&d.merged(), &written), &ctx(&format!("after the writer ({d:?})")));
    let reports = must(m.reset_all(policy), &ctx("the reset"));
    let t = Instant::now();
    let outs = must(m.run_reader(), &ctx("the reader"));
    let t_reader = t.elapsed();
    must(check_guest_reads_zero(&outs), &ctx("after the reset"));
    must(check_host_reads_zero(&m.mem), &ctx("after the reset"));
    let d = must(m.fetch_dirty(), &ctx("the dirty log"));
    must(check_dirty(&d.merged(), &all_pages()), &ctx(&format!("after the reset ({d:?})")));
    let (in_place, discarded) = reports.iter().fold((0, 0), |(i, d), r| (i + r.in_place, d + r.discarded));
    eprintln!(
        "round {n} {policy:?}: wrote {} pages; reset {in_place} bytes in place, {discarded} discarded; \
         writer {t_writer:.2?}, reader {t_reader:.2?}",
        written.len()
    );
    reports
}

#[test]
fn every_reset_policy_zeroes_what_a_kvm_guest_wrote_and_the_dirty_log_shows_both() {
    let Some(mut m) =
        Machine::new_or_skip("every_reset_policy_zeroes_what_a_kvm_guest_wrote_and_the_dirty_log_shows_both")
    else {
        return;
    };
    let policies = [
        // First, on fresh memory: the written pages are resident (zeroed in place), the others
        // never were (discarded).
        ResetPolicy::Auto,
        ResetPolicy::InPlace,
        ResetPolicy::Discard { repopulate: false },
        // After a discard and the reader's read faults (zero pages mapped through KVM).
        ResetPolicy::Auto,
        ResetPolicy::Discard { repopulate: true },
    ];
    for (r, policy) in policies.into_iter().enumerate() {
        let reports = round(&mut m, r, policy);
        let written = selected_pages(&page_masks(r));
        for ((gpa, len), rep) in REGIONS.iter().zip(&reports) {
            let ctx = format!("round {r} ({policy:?}), region {gpa:#x}: {rep:?}");
            assert_eq!(rep.in_place + rep.discarded, *len, "{ctx}");
            match policy {
                ResetPolicy::InPlace => assert_eq!(rep.discarded, 0, "{ctx}"),
                ResetPolicy::Discard { repopulate } => {
                    assert_eq!(rep.discarded, *len, "{ctx}");
                    assert_eq!(rep.repopulated, if repopulate { *len } else { 0 }, "{ctx}");
                }
                ResetPolicy::Auto if r == 0 => {
                    let mine = written.iter().filter(|&&p| (gpa / PAGE..(gpa + len) / PAGE).contains(&p));
                    assert_eq!(rep.in_place, mine.count() as u64 * PAGE, "{ctx}: the written pages in place");
                }
                ResetPolicy::Auto => {}
            }
        }
    }
}

/// The test of the dirty check: on a real guest's dirty log, the check passes, and fails when
/// one dirty page is dropped from the merged set (or one is added).
#[test]
fn the_dirty_check_fails_when_one_dirty_page_is_dropped() {
    let Some(mut m) = Machine::new_or_skip("the_dirty_check_fails_when_one_dirty_page_is_dropped") else {
        return;
    };
    let written = must(m.run_writer(&page_masks(1), fill_word(1)), "the writer");
    let merged = must(m.fetch_dirty(), "the dirty log").merged();
    must(check_dirty(&merged, &written), "the unaltered dirty set");
    let last = *merged.last().expect("the writer dirtied pages");
    let mut dropped = merged.clone();
    dropped.remove(&last);
    let err = check_dirty(&dropped, &written).expect_err("a dropped dirty page went unnoticed");
    assert!(err.contains(&format!("{:#x}", last * PAGE)), "{err}");
    eprintln!("dropped page {:#x}: {err}", last * PAGE);
    let mut added = merged;
    let gap = (REGIONS[1].0 / PAGE..).find(|p| !written.contains(p)).expect("a page the writer skipped");
    added.insert(gap);
    check_dirty(&added, &written).expect_err("a page dirty but not written went unnoticed");
}

/// The test of the zero checks: the reader reports what the writer wrote; after a reset, one
/// byte written behind vm-memory's back (no dirty bit) at the last byte of the second region
/// makes both the guest's and the host's zero check fail, and they name its segment and address.
#[test]
fn the_zero_checks_fail_when_one_byte_is_left_after_the_reset() {
    let Some(mut m) = Machine::new_or_skip("the_zero_checks_fail_when_one_byte_is_left_after_the_reset")
    else {
        return;
    };
    let (masks, fill) = (page_masks(0), fill_word(0));
    must(m.run_writer(&masks, fill), "the writer");
    // Before the reset the reader sees the writer's dword in exactly the segments it wrote: its
    // reports are the guest's memory, not a constant.
    let outs = must(m.run_reader(), "the reader before the reset");
    let want: Vec<Out> =
        masks.iter().map(|&k| Out { port: PORT_READER_OR, value: if k == 0 { 0 } else { fill } }).collect();
    assert_eq!(outs, want, "the reader before the reset");
    check_guest_reads_zero(&outs).expect_err("the guest's zero check passed on written memory");
    must(m.reset_all(ResetPolicy::InPlace).map(drop), "the reset");
    must(m.fetch_dirty().map(drop), "the dirty log");
    let (gpa, len) = REGIONS[1];
    let last = gpa + len - 1;
    let r = m.mem.find_region(GuestAddress(last)).expect("the last byte is guest memory");
    let host = r.get_host_address(MemoryRegionAddress(last - gpa)).expect("a host address");
    // SAFETY: `host` is inside the region's mapping (`get_host_address` checked the offset),
    // which `m.mem` keeps mapped, read-write, for this statement; a `u8` needs no alignment; no
    // Rust reference covers guest memory (vm-memory forms none, this test neither), and no
    // guest runs now (`run_guest` joins the vCPU thread before it returns).
    unsafe { std::ptr::write_volatile(host, 0x5A) };
    let outs = must(m.run_reader(), "the reader");
    let guest = check_guest_reads_zero(&outs).expect_err("the guest's zero check missed a non-zero byte");
    assert!(guest.contains("0xb0000..+64 KiB ORs to 0x5a000000"), "{guest}");
    let host_err = check_host_reads_zero(&m.mem).expect_err("the host's zero check missed a non-zero byte");
    assert!(host_err.contains(&format!("{last:#x}")), "{host_err}");
    eprintln!("one byte at {last:#x}: {guest}; {host_err}");
    // The byte bypassed the dirty tracking: only the zero checks can catch it.
    let d = must(m.fetch_dirty(), "the dirty log");
    assert!(d.merged().is_empty(), "{d:?}");
}
