//! # example-kernel: stream-hal and memmap-core in a `no_std` kernel, in one file to copy
//!
//! What a Rust kernel does with the two crates at boot, without an allocator and with one
//! `unsafe` block per hardware fact: [`boot_cpu_features`], [`BOOT_STORAGE`],
//! [`init_device_memmap`], [`init_frame_table`], [`zero_free_pages`], [`copy_boot_module`],
//! and [`self_test`], which checks every result.
//!
//! Build it for any kernel target (`.cargo/config.toml` sets `STREAM_HAL_NO_CPUID = "1"`):
//!
//! ```sh
//! cargo build --release --target x86_64-unknown-none        # or aarch64-unknown-none,
//! cargo build --release --target riscv64gc-unknown-none-elf # ...
//! cargo +nightly build --release -Zbuild-std=core -Zbuild-std-features=compiler-builtins-mem \
//!     --target loongarch64-unknown-none                     # (no prebuilt core there)
//! cargo test                                                # the checks, on the host
//! ```
//!
//! The kernel supplies the parts these crates cannot know: [`Platform`] and the
//! [`KernelConfig`] of the memmap it models.
#![no_std]

#[cfg(test)]
extern crate std;

use core::cell::UnsafeCell;
use core::fmt;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicBool, Ordering};

use memmap_core::{
    DevPagemap, InitError, InitOptions, InitReport, KernelConfig, Memmap, MemoryType, NoHooks, Page64,
    Strategy, StructPage, ZoneDeviceRange, memmap_init_zone_device, pageblocks_needed,
};
use stream_hal::{BlockSize, CpuFeatures, PageSize, SliceError};

// `CPUID` must not run implicitly (a confidential guest's #VC handler is not up yet): refuse
// to build an image whose stream-hal would.
const _: () = assert!(
    stream_hal::build_config().no_cpuid,
    "stream-hal was built without STREAM_HAL_NO_CPUID=1 (or --cfg stream_hal_no_cpuid) and would \
     run CPUID by itself: set STREAM_HAL_NO_CPUID = \"1\" in [env] of .cargo/config.toml"
);

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
pub fn zero_free_pages(platform: &impl Platform, pages: &mut [u8]) -> Result<(), SliceError> {
    platform.without_preemption(|| stream_hal::clear_pages_in(pages, PageSize::Size4K))
}

/// Copies a boot module (an initrd, a firmware blob) into its final, uninitialized place with
/// streaming stores (the kernel will not read it soon, so it should not evict the caches) and
/// returns the copy, drained. Preemption is off for the call, as for [`zero_free_pages`].
///
/// # Errors
///
/// `dst` and `module` differ in length: nothing is written.
pub fn copy_boot_module<'a>(
    platform: &impl Platform,
    dst: &'a mut [MaybeUninit<u8>],
    module: &[u8],
) -> Result<&'a mut [u8], SliceError> {
    platform.without_preemption(|| stream_hal::copy_to_uninit(dst, module))
}

/// The pmem (FS_DAX) range [`init_device_memmap`] models, as the kernel's `dev_pagemap`.
pub const DEVICE_PGMAP: DevPagemap = DevPagemap::new(MemoryType::FsDax);

/// Initializes the struct pages of the `pages.len()` device pages from `base_pfn` on, in
/// uninitialized storage, as the kernel's `memmap_init_zone_device()` does for a pmem range:
/// the storage is first poisoned (streamed), then every struct page is written through the
/// streaming template path, and the memmap comes back with the report.
///
/// # Errors
///
/// memmap-core's: an invalid configuration, too few `pageblocks` bytes
/// ([`pageblocks_needed`]), a range past the configuration's last PFN.
pub fn init_device_memmap<'a>(
    cfg: KernelConfig,
    base_pfn: u64,
    pages: &'a mut [MaybeUninit<Page64>],
    pageblocks: &'a mut [u8],
) -> Result<(Memmap<'a, Page64>, InitReport), InitError> {
    let nr_pages = pages.len() as u64;
    let mut memmap = Memmap::from_uninit(cfg, base_pfn, pages, pageblocks)?;
    let range = ZoneDeviceRange::new(cfg.zone_device(), 0, base_pfn, nr_pages);
    let opts = InitOptions::new(Strategy::Streaming);
    let report = memmap_init_zone_device(&mut memmap, &range, &DEVICE_PGMAP, &opts, &mut NoHooks)?;
    Ok((memmap, report))
}

/// Struct pages in [`BOOT_STORAGE`]: 512, one 2 MiB pageblock of 4 KiB pages (32 KiB).
pub const BOOT_STRUCT_PAGES: usize = 512;
/// First PFN of the device range the boot memmap covers (4 GiB, pageblock-aligned).
pub const BOOT_DEVICE_PFN: u64 = 0x10_0000;
/// Pageblock bytes in [`BOOT_STORAGE`]: what the x86-64 and arm64 presets need for the range.
pub const BOOT_PAGEBLOCKS: usize = {
    let x86 = pageblocks_needed(&KernelConfig::X86_64, BOOT_DEVICE_PFN, BOOT_STRUCT_PAGES as u64);
    let arm = pageblocks_needed(&KernelConfig::ARM64, BOOT_DEVICE_PFN, BOOT_STRUCT_PAGES as u64);
    if x86 > arm { x86 } else { arm }
};
/// Frames in the boot frame table.
pub const BOOT_FRAMES: usize = 64;
/// Free pages zeroed at boot.
pub const BOOT_FREE_PAGES: usize = 4;
/// Bytes of the boot module copied at boot (not a multiple of 16: the copy's edges are tested).
pub const BOOT_MODULE_BYTES: usize = 3 * 4096 + 37;

/// Page-aligned bytes.
#[repr(C, align(4096))]
struct PageAligned<const N: usize>([u8; N]);

/// The kernel's boot memory, in a `static`: uninitialized until [`BootStorage::take`] hands it
/// out, once, as exclusive borrows.
pub struct BootStorage {
    taken: AtomicBool,
    memory: UnsafeCell<BootArrays>,
}

/// The arrays of [`BootStorage`].
struct BootArrays {
    struct_pages: [MaybeUninit<Page64>; BOOT_STRUCT_PAGES],
    pageblocks: [u8; BOOT_PAGEBLOCKS],
    frames: [MaybeUninit<FrameMeta>; BOOT_FRAMES],
    free_pages: PageAligned<{ BOOT_FREE_PAGES * 4096 }>,
    module: [MaybeUninit<u8>; BOOT_MODULE_BYTES],
}

// SAFETY: the only shared access is `take`, whose atomic swap lets exactly one caller (on any
// CPU) get the arrays, as exclusive borrows; nothing else touches them.
unsafe impl Sync for BootStorage {}

/// The boot memory, taken: every array exclusive to the taker for `'a`.
pub struct BootMemory<'a> {
    /// Storage for the device range's struct pages.
    pub struct_pages: &'a mut [MaybeUninit<Page64>],
    /// Pageblock bytes of that memmap.
    pub pageblocks: &'a mut [u8],
    /// The frame-metadata table.
    pub frames: &'a mut [MaybeUninit<FrameMeta>],
    /// Free pages (page-aligned, any content) to zero.
    pub free_pages: &'a mut [u8],
    /// Where the boot module goes.
    pub module: &'a mut [MaybeUninit<u8>],
}

impl BootStorage {
    /// Storage not yet taken (a `const fn`: it goes into `.bss`).
    #[must_use]
    pub const fn new() -> Self {
        BootStorage {
            taken: AtomicBool::new(false),
            memory: UnsafeCell::new(BootArrays {
                struct_pages: [const { MaybeUninit::uninit() }; BOOT_STRUCT_PAGES],
                pageblocks: [0; BOOT_PAGEBLOCKS],
                frames: [const { MaybeUninit::uninit() }; BOOT_FRAMES],
                free_pages: PageAligned([0; BOOT_FREE_PAGES * 4096]),
                module: [const { MaybeUninit::uninit() }; BOOT_MODULE_BYTES],
            }),
        }
    }

    /// The arrays, the first time on any CPU; `None` afterwards.
    pub fn take(&'static self) -> Option<BootMemory<'static>> {
        // AcqRel: one swap sees `false`; nothing else is published through the flag.
        if self.taken.swap(true, Ordering::AcqRel) {
            return None;
        }
        // SAFETY: the swap above returned `false` to this caller only, so no other reference to
        // the arrays exists or will be made; the storage is `'static`.
        let arrays = unsafe { &mut *self.memory.get() };
        Some(BootMemory {
            struct_pages: &mut arrays.struct_pages,
            pageblocks: &mut arrays.pageblocks,
            frames: &mut arrays.frames,
            free_pages: &mut arrays.free_pages.0,
            module: &mut arrays.module,
        })
    }
}

impl Default for BootStorage {
    fn default() -> Self {
        Self::new()
    }
}

/// The kernel's boot memory (about 60 KiB of `.bss`).
pub static BOOT_STORAGE: BootStorage = BootStorage::new();

/// The boot module [`self_test`] copies: a byte pattern computed at compile time.
pub static BOOT_MODULE: [u8; BOOT_MODULE_BYTES] = module_pattern();

/// Byte `i` of [`BOOT_MODULE`].
const fn module_byte(i: usize) -> u8 {
    (i.wrapping_mul(131) ^ (i >> 8)) as u8
}

const fn module_pattern() -> [u8; BOOT_MODULE_BYTES] {
    let mut out = [0; BOOT_MODULE_BYTES];
    let mut i = 0;
    while i < BOOT_MODULE_BYTES {
        out[i] = module_byte(i);
        i += 1;
    }
    out
}

/// What [`self_test`] did, for the boot log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SelfTest {
    /// stream-hal's backend in this image.
    pub backend: stream_hal::Backend,
    /// Struct pages initialized and read back.
    pub struct_pages: u64,
    /// memmap-core's drains for them.
    pub memmap_drains: u64,
    /// Frames in the table, read back.
    pub frames: usize,
    /// Bytes zeroed, read back.
    pub zeroed: usize,
    /// Bytes copied, read back.
    pub copied: usize,
}

/// Why [`self_test`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SelfTestError {
    /// [`BootStorage::take`] was called before: the boot memory is someone else's.
    StorageTaken,
    /// memmap-core refused the memmap.
    Memmap(InitError),
    /// stream-hal refused a buffer.
    Buffer(SliceError),
    /// A result read back differs from what was written.
    Mismatch {
        /// Which check (`struct page`, `frame`, `zeroed page`, `module`).
        check: &'static str,
        /// Index of the first wrong element (PFN offset, frame, byte).
        index: usize,
    },
}

impl fmt::Display for SelfTestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SelfTestError::StorageTaken => f.write_str("the boot storage was already taken"),
            SelfTestError::Memmap(e) => write!(f, "memmap: {e}"),
            SelfTestError::Buffer(e) => write!(f, "buffer: {e}"),
            SelfTestError::Mismatch { check, index } => write!(f, "{check} {index} reads back wrong"),
        }
    }
}

/// Runs the boot steps on `storage` (normally [`BOOT_STORAGE`]) and checks every result: the
/// struct pages of the device range (zone, refcount and mapcount of FS_DAX pages,
/// `folio->pgmap`), the frame table's addresses and free list, the zeroed pages, the copied
/// module.
///
/// # Errors
///
/// [`SelfTestError`]: the storage was taken before, a crate refused its input, or a result
/// reads back wrong (the first one found).
pub fn self_test(
    platform: &impl Platform,
    cfg: KernelConfig,
    storage: &'static BootStorage,
) -> Result<SelfTest, SelfTestError> {
    let mem = storage.take().ok_or(SelfTestError::StorageTaken)?;

    let (memmap, report) = init_device_memmap(cfg, BOOT_DEVICE_PFN, mem.struct_pages, mem.pageblocks)
        .map_err(SelfTestError::Memmap)?;
    check_struct_pages(&cfg, &memmap)?;

    let frames = init_frame_table(mem.frames, 1 << 30);
    check_frames(frames, 1 << 30)?;

    // The free pages hold stale data before they are zeroed.
    mem.free_pages.fill(0xa5);
    zero_free_pages(platform, mem.free_pages).map_err(SelfTestError::Buffer)?;
    first_mismatch(mem.free_pages.iter().map(|&b| b == 0), "zeroed page")?;

    let module = copy_boot_module(platform, mem.module, &BOOT_MODULE).map_err(SelfTestError::Buffer)?;
    first_mismatch(module.iter().enumerate().map(|(i, &b)| b == module_byte(i)), "module")?;

    Ok(SelfTest {
        backend: stream_hal::backend(),
        struct_pages: report.pages_initialized,
        memmap_drains: report.drains,
        frames: frames.len(),
        zeroed: mem.free_pages.len(),
        copied: module.len(),
    })
}

/// Each struct page of the range is a free FS_DAX page of the device zone: refcount 0,
/// mapcount -1, `folio->pgmap` pointing at [`DEVICE_PGMAP`].
fn check_struct_pages(cfg: &KernelConfig, memmap: &Memmap<'_, Page64>) -> Result<(), SelfTestError> {
    let base = memmap.base_pfn();
    first_mismatch(
        (0..BOOT_STRUCT_PAGES as u64).map(|i| {
            let page = memmap.read(base + i);
            page.refcount() == 0
                && page.mapcount() == -1
                && page.pgmap() == DEVICE_PGMAP.addr
                && memmap.layout().zone(page.flags()) == cfg.zone_device()
        }),
        "struct page",
    )
}

/// Frame `i` is at `base + i * 4096`, free, and links to `i + 1` (the last to `u64::MAX`).
fn check_frames(frames: &[FrameMeta], base: u64) -> Result<(), SelfTestError> {
    let n = frames.len() as u64;
    first_mismatch(
        frames.iter().zip(0u64..).map(|(f, i)| {
            let next = if i + 1 < n { i + 1 } else { u64::MAX };
            f.paddr == base + i * 4096 && f.refcount == 0 && f.usage == 0 && f.next_free == next
        }),
        "frame",
    )
}

/// `Err(Mismatch)` at the first `false` of `checks`.
fn first_mismatch(mut checks: impl Iterator<Item = bool>, check: &'static str) -> Result<(), SelfTestError> {
    match checks.position(|ok| !ok) {
        Some(index) => Err(SelfTestError::Mismatch { check, index }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::boxed::Box;

    /// A host "kernel" whose preemption is never on.
    struct Host;
    impl Platform for Host {
        fn without_preemption<R>(&self, f: impl FnOnce() -> R) -> R {
            f()
        }
    }

    fn fresh_storage() -> &'static BootStorage {
        Box::leak(Box::new(BootStorage::new()))
    }

    #[test]
    fn the_boot_steps_produce_what_they_promise() {
        for cfg in [KernelConfig::X86_64, KernelConfig::ARM64] {
            let report = self_test(&Host, cfg, fresh_storage()).unwrap();
            assert_eq!(report.struct_pages, BOOT_STRUCT_PAGES as u64, "{}", cfg.name);
            assert_eq!(report.frames, BOOT_FRAMES);
            assert_eq!(report.zeroed, BOOT_FREE_PAGES * 4096);
            assert_eq!(report.copied, BOOT_MODULE_BYTES);
            assert!(report.memmap_drains >= 1, "the streamed memmap was drained");
        }
    }

    #[test]
    fn the_storage_is_handed_out_once() {
        let storage = fresh_storage();
        assert!(storage.take().is_some());
        assert!(storage.take().is_none());
        assert_eq!(self_test(&Host, KernelConfig::X86_64, storage), Err(SelfTestError::StorageTaken));
    }

    #[test]
    fn wrong_buffers_are_refused_before_anything_is_written() {
        let mut dst = [MaybeUninit::new(7u8); 16];
        assert_eq!(
            copy_boot_module(&Host, &mut dst, &[1; 15]),
            Err(SliceError::LengthMismatch { dst: 16, src: 15 })
        );
        // SAFETY: initialized above; the refused copy wrote nothing.
        assert!(dst.iter().all(|b| unsafe { b.assume_init() } == 7));
        let mut pages = [0xffu8; 4097];
        assert_eq!(
            zero_free_pages(&Host, &mut pages),
            Err(SliceError::NotWholePages { len: 4097, page_size: 4096 })
        );
        assert!(pages.iter().all(|&b| b == 0xff));
        let mut few = [0u8; 0];
        let mut slots = [const { MaybeUninit::uninit() }; 8];
        assert!(matches!(
            init_device_memmap(KernelConfig::X86_64, BOOT_DEVICE_PFN, &mut slots, &mut few),
            Err(InitError::PageblocksTooShort { needed: 1, got: 0 })
        ));
    }
}
