//! `clear --alloc`: init_on_alloc through the buddy allocator. A zone of `--size` bytes (default
//! 16 GiB) with init_on_alloc on is allocated completely in order-9 (2 MiB) blocks; each
//! allocation is zeroed either page by page (`per-page`: one 4 KiB `clear_pages(page, 1)` per
//! page, the old `kernel_init_pages` loop) or with one `clear_pages(block, 512)` (`batch`, the
//! 2026 series). The arena holding the page contents is resident before measuring.

use std::time::Instant;

use memmap_core::{
    BootOptions, ClearMode, Gfp, InitMode, InitPolicy, KernelConfig, NoHooks, Node, NodeLayout, NodeParts,
    OwnedArena, OwnedMemmap, Page64, PfnRange, ZoneSpan,
};

use super::Common;
use crate::limits::Limits;
use crate::measure::{Runner, interleaved};
use crate::progress::bar;
use crate::report::{LimitKind, Scenario, ScenarioSpec};
use crate::size::Bytes;

const ZONE: u32 = 2;
const BASE: u64 = 1 << 20;

/// Memory the scenario needs: the arena and the memmap.
#[must_use]
pub fn memory_needed(size: u64) -> u64 {
    size + size / 4096 * 64
}

/// Runs the scenario over a zone of `size` bytes (whole 2 MiB blocks).
///
/// # Panics
///
/// If the arena or memmap cannot be mapped, or the boot is rejected.
pub fn run(size: u64, cfg: KernelConfig, common: &Common, limits: &Limits) -> Scenario {
    let nr = (size / (2 << 20)).max(1) * 512;
    let zones = [ZoneSpan::new(ZONE, BASE, BASE + nr)];
    let memory = [PfnRange::new(BASE, BASE + nr)];
    let layout = NodeLayout { nid: 0, zones: &zones, memory: &memory, reserved: &[] };
    let rounds = common.rounds(5, 3);
    let mut arena = OwnedArena::new(BASE, nr).expect("mmap the arena");
    arena.populate().expect("populate the arena");
    // One memmap and one arena, used by the two strategies in turn.
    let storage =
        std::cell::RefCell::new((OwnedMemmap::<Page64>::new(cfg, BASE, nr).expect("mmap the memmap"), arena));
    let nstates = Node::<Page64>::states_needed(&cfg, layout.span());
    let pb = bar(rounds as u64 * 2 * nr, "alloc-init-on-alloc", common.progress);
    let blocks = nr / 512;
    let runner = |clear: ClearMode| {
        let (pb, storage) = (pb.clone(), &storage);
        let mut states = vec![0u8; nstates];
        Runner::new(clear.name(), move |_| {
            let mut guard = storage.borrow_mut();
            let (owned, arena) = &mut *guard;
            let parts = NodeParts {
                memmap: owned.memmap(),
                layout,
                states: &mut states,
                arena: Some(arena.arena()),
                hooks: NoHooks,
            };
            let policy = InitPolicy { init_on_alloc: true, clear, ..InitPolicy::default() };
            let opts = BootOptions { policy, check_pages: false, ..BootOptions::new(InitMode::Eager) };
            let (node, _) = Node::boot(parts, &opts).expect("boot");
            let mut held = Vec::with_capacity(blocks as usize);
            let t = Instant::now();
            while let Ok(b) = node.alloc_pages(ZONE, 9, Gfp::NONE) {
                held.push(b);
            }
            let e = t.elapsed();
            assert_eq!(held.len() as u64, blocks, "every 2 MiB block allocated");
            pb.inc(nr);
            e
        })
    };
    let mut runners = vec![runner(ClearMode::PerPage), runner(ClearMode::Batch)];
    let samples = interleaved(rounds, &mut runners);
    drop(runners);
    pb.finish_and_clear();
    let zeroed = storage.borrow_mut().1.arena().bytes().iter().step_by(4093).all(|&b| b == 0);
    assert!(zeroed, "init_on_alloc left non-zero bytes");
    let spec = ScenarioSpec {
        name: "alloc-init-on-alloc".into(),
        description: format!(
            "init_on_alloc through the buddy allocator: {} allocations of order 9 ({}), {} rounds",
            blocks,
            Bytes(nr * 4096),
            rounds
        ),
        struct_pages: 0,
        bytes: nr * 4096,
        threads: 1,
        limit: LimitKind::FillZero,
    };
    let mut sc = Scenario::from_samples(spec, limits, &samples);
    sc.extra.insert("allocations".into(), blocks.into());
    sc
}
