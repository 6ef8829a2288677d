//! `Strategy::Auto` with the reuse hint and the machine's caches: the caller's hint decides
//! where the node streams, and the fused boot's read-back runs are read-soon jobs of one
//! window whatever the hint.
//!
//! Every test sets the same caches first (a 2-vCPU guest with 32 MiB of L3: the read-soon
//! threshold is 12 MiB of struct pages), so the outcome does not depend on the machine.

mod support;

use memmap_core::{
    BootOptions, BootOrder, FillOptions, InitMode, KernelConfig, NodeLayout, PfnRange, ReservedRange,
    Strategy, StrategyReason, ZoneSpan,
};
use stream_hal::Reuse;
use stream_hal::{CacheInfo, set_cache_info};
use support::Storage;

/// The caches of the tests: 32 MiB of L3 for 2 CPUs.
fn zen4_guest() {
    set_cache_info(CacheInfo::new(64, [32 << 10, 1 << 20, 32 << 20, 0], 2));
}

fn sanitizer() -> bool {
    matches!(stream_hal::backend(), stream_hal::Backend::Generic(stream_hal::GenericReason::Sanitizer(_)))
}

/// Boots one zone of `blocks` `MAX_PAGE_ORDER` blocks with `opts` and returns the report's
/// strategy and the node's (for runs after boot).
fn boot(
    blocks: u64,
    reserved: &[ReservedRange],
    opts: &BootOptions,
) -> ((Strategy, StrategyReason), (Strategy, StrategyReason)) {
    let cfg = KernelConfig::X86_64;
    let mo = cfg.max_order_nr_pages();
    let zones = [ZoneSpan::new(2, 4 * mo, 4 * mo + blocks * mo)];
    let memory = [PfnRange::new(4 * mo, 4 * mo + blocks * mo)];
    let layout = NodeLayout { nid: 0, zones: &zones, memory: &memory, reserved };
    let mut st = Storage::new(&cfg, layout.span(), false);
    let (node, report) = st.boot(cfg, layout, opts);
    ((report.strategy, report.reason), node.strategy())
}

#[test]
#[cfg_attr(miri, ignore = "boots nodes of 16 MiB of struct pages")]
fn the_hint_moves_where_the_node_streams() {
    if sanitizer() {
        return;
    }
    zen4_guest();
    let eager = |fill| BootOptions { fill, ..BootOptions::new(InitMode::Eager) };
    let (above, below) = ((StrategyReason::AboveThreshold), (StrategyReason::ReadBackSoon));
    // 64 blocks of 4 MiB: 4 MiB of struct pages. Written once: streamed.
    let write_once = FillOptions::new(Strategy::Auto);
    assert_eq!(
        boot(64, &[], &eager(write_once)),
        ((Strategy::Streaming, above), (Strategy::Streaming, above))
    );
    // Read soon: 4 MiB stays below 3/4 of the 16 MiB share, so the template stores normally.
    let read_soon = write_once.with_reuse(Reuse::ReadSoon);
    assert_eq!(boot(64, &[], &eager(read_soon)), ((Strategy::Template, below), (Strategy::Template, below)));
    // 256 blocks: 16 MiB of struct pages, above the 12 MiB threshold: streamed.
    assert_eq!(boot(256, &[], &eager(read_soon)).1, (Strategy::Streaming, above));
    // An explicit threshold wins over the hint.
    assert_eq!(boot(64, &[], &eager(read_soon.with_threshold(1 << 20))).1, (Strategy::Streaming, above));
}

#[test]
#[cfg_attr(miri, ignore = "boots nodes of 4 MiB of struct pages")]
fn the_fused_boot_reads_back_windows_it_keeps_cached() {
    if sanitizer() {
        return;
    }
    zen4_guest();
    let below = (Strategy::Template, StrategyReason::ReadBackSoon);
    let above = (Strategy::Streaming, StrategyReason::AboveThreshold);
    // On demand the boot reports the read-back runs' strategy: a window's 1024 first struct
    // pages (64 KiB) are read back by its free pass, so they are stored normally, with either
    // hint and with an explicit threshold below them.
    for fill in [
        FillOptions::new(Strategy::Auto),
        FillOptions::new(Strategy::Auto).with_reuse(Reuse::ReadSoon),
        FillOptions::new(Strategy::Auto).with_threshold(4096),
    ] {
        let opts = BootOptions { fill, ..BootOptions::new(InitMode::OnDemand) };
        let (report, node) = boot(64, &[], &opts);
        assert_eq!(report, below, "{fill:?}");
        // After boot the node expands blocks with the caller's choice.
        assert_eq!(node, if fill.reuse == Reuse::ReadSoon { below } else { above }, "{fill:?}");
    }
    // The kernel's order reads nothing back soon: the caller's hint stands.
    let kernel_order = BootOptions { order: BootOrder::Kernel, ..BootOptions::new(InitMode::OnDemand) };
    assert_eq!(boot(64, &[], &kernel_order).0, above);
}
