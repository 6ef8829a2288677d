//! # example-kernel: stream-hal in a `no_std` kernel, in one file to copy
//!
//! What a Rust kernel does with stream-hal at boot, without an allocator and with one
//! `unsafe` block per hardware fact:
//!
//! 1. hand over the CPU features its own CPU setup found ([`boot_cpu_features`]);
//! 2. fill its frame-metadata table (one 64-byte record per 4 KiB frame, as Asterinas'
//!    `MetaSlot`) with write-once streaming stores ([`init_frame_table`]): the record type
//!    derives `bytemuck::NoUninit`, so no `unsafe impl Record` is written;
//! 3. zero free pages in bulk before handing them out ([`zero_free_pages`]), with preemption
//!    off so that the drain runs on the CPU that issued the stores.
//!
//! Build it for any kernel target (`.cargo/config.toml` sets `--cfg stream_hal_no_cpuid`):
//!
//! ```sh
//! cargo build --release --target x86_64-unknown-none        # or aarch64-unknown-none,
//! cargo build --release --target riscv64gc-unknown-none-elf # ...
//! cargo +nightly build --release -Zbuild-std=core -Zbuild-std-features=compiler-builtins-mem \
//!     --target loongarch64-unknown-none                     # (no prebuilt core there)
//! ```
//!
//! The kernel supplies the parts stream-hal cannot know: [`Platform`].
#![no_std]

use core::mem::MaybeUninit;

use stream_hal::{BlockSize, CpuFeatures, PageSize};

/// What the kernel tells this module about the machine and its scheduler.
pub trait Platform {
    /// Runs `f` with preemption (or at least migration to another CPU) disabled: streaming
    /// stores are ordered by a drain on the CPU that issued them.
    fn without_preemption<R>(&self, f: impl FnOnce() -> R) -> R;
}

/// What the kernel's CPU setup found (CPUID on x86-64, the device tree on riscv64 and
/// powerpc64).
#[derive(Clone, Copy, Debug, Default)]
pub struct DetectedCpu {
    /// x86-64 `CLZERO` (CPUID 0x8000_0008 EBX bit 0) on every CPU.
    pub clzero: bool,
    /// riscv64: `riscv,cboz-block-size` of the harts, if every hart lists `zicboz` and the
    /// firmware enabled `cbo.zero` for S-mode (`menvcfg.CBZE`).
    pub zicboz_block: Option<usize>,
    /// powerpc64: the device tree's `d-cache-block-size`.
    pub dcache_block: Option<usize>,
}

/// Passes the detected features to stream-hal, once, before the first clear on any CPU.
///
/// # Safety
///
/// `cpu` describes every CPU the kernel will run stream-hal's clears on, exactly (a wrong block
/// size makes `cbo.zero`/`dcbz` zero memory outside the range).
pub unsafe fn boot_cpu_features(cpu: DetectedCpu) {
    let features = CpuFeatures::NONE
        .with_clzero(cpu.clzero)
        .with_zicboz(cpu.zicboz_block.and_then(BlockSize::new))
        .with_dcbz(cpu.dcache_block.and_then(BlockSize::new));
    // SAFETY: the caller guarantees that `cpu` is what every CPU has; a block size that is not
    // a power of two in 8..=4096 was dropped by `BlockSize::new` (the feature is then unused).
    unsafe { stream_hal::set_cpu_features(features) };
}

/// Turns features off again (for example after finding that a CPU brought up later lacks
/// one): the safe function can only remove.
pub fn drop_cpu_features(keep: CpuFeatures) -> CpuFeatures {
    stream_hal::restrict_cpu_features(keep)
}

/// One frame's metadata: 64 bytes, no padding (the derive checks it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::NoUninit)]
#[repr(C, align(64))]
pub struct FrameMeta {
    /// Physical address of the frame.
    pub paddr: u64,
    /// Reference count; 0 for a free frame.
    pub refcount: u32,
    /// What the frame is used for (0: free).
    pub usage: u32,
    /// Next free frame's index, `u64::MAX` at the end of the list.
    pub next_free: u64,
    /// Space for the user of the frame.
    pub storage: [u64; 5],
}
stream_hal::bytemuck_record!(FrameMeta);

/// Fills `table` with the metadata of the frames from `base_paddr` on, all free and linked in
/// order, and returns it initialized. Streams when the table is large (the caches would not
/// keep it anyway), drains before returning.
pub fn init_frame_table(table: &mut [MaybeUninit<FrameMeta>], base_paddr: u64) -> &mut [FrameMeta] {
    let n = table.len() as u64;
    let free = FrameMeta { paddr: 0, refcount: 0, usage: 0, next_free: 0, storage: [0; 5] };
    stream_hal::template_fill_with(table, &free, stream_hal::FillMode::AUTO, |i, m| {
        let i = i as u64;
        m.paddr = base_paddr + i * 4096;
        m.next_free = if i + 1 < n { i + 1 } else { u64::MAX };
    })
}

/// Zeroes whole 4 KiB pages (a free list's worth, mapped at `pages`) with `cbo.zero`, `dc zva`,
/// `clzero` or streaming stores, as the CPU allows. The drain runs before the pages are handed
/// back, on the same CPU (preemption is off for the call).
///
/// # Errors
///
/// `pages` is not a whole number of pages: nothing is written.
pub fn zero_free_pages(platform: &impl Platform, pages: &mut [u8]) -> Result<(), stream_hal::SliceError> {
    platform.without_preemption(|| stream_hal::clear_pages_in(pages, PageSize::Size4K))
}

/// The backend this kernel image was built with, for its boot log.
#[must_use]
pub fn stream_backend() -> stream_hal::Backend {
    stream_hal::backend()
}
