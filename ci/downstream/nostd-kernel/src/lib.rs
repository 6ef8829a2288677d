//! A kernel crate that has loom tests of its own: `--cfg loom` (loom's usual switch) is set for
//! the whole build when they run, and must not change what its dependencies compile.
#![no_std]

use memmap_core::{KernelConfig, Memmap, Page64, pageblocks_needed};

/// A memmap over caller-provided storage, through memmap-core's `no_std` API.
pub fn memmap_of<'a>(pages: &'a mut [Page64], pageblocks: &'a mut [u8]) -> Option<Memmap<'a, Page64>> {
    let cfg = KernelConfig::X86_64;
    if pageblocks.len() < pageblocks_needed(&cfg, 0x1000, pages.len() as u64) {
        return None;
    }
    Memmap::new(cfg, 0x1000, pages, pageblocks).ok()
}

/// The kernel's own code under its own loom cfg.
#[cfg(loom)]
pub const LOOM_BUILD: bool = true;
