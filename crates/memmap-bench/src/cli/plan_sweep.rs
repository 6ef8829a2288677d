//! `sweep`'s command line as a [`Sweep`]: the sizes checked and fitted to the memory budget,
//! the plot path checked, before anything is measured.

use memmap_core::{Node, Page64};
use memmap_dump::NewFile;

use super::CliError;
use super::args::{GlobalArgs, SweepArgs};
use crate::budget::Budget;
use crate::memory::{MemInfo, MemoryNeed};
use crate::progress::ProgressMode;
use crate::scenarios::{deferred, zone_device};
use crate::size::Bytes;
use crate::sweep::{self, MIN_SIZE, Skip, Sweep};

/// What one size needs at once: its memmap, the node's pageblock states and the cold runs'
/// flush buffer (the two initializers run one after the other, each on its own memmap).
fn need(memmap_bytes: u64, flush: u64, cfg: &memmap_core::KernelConfig) -> MemoryNeed {
    let nr = memmap_bytes / 64;
    let (zones, memory) = deferred::zone_layout(nr);
    let layout = memmap_core::NodeLayout { nid: 0, zones: &zones, memory: &memory, reserved: &[] };
    let states = Node::<Page64>::states_needed(cfg, layout.span()) as u64;
    MemoryNeed::resident(memmap_bytes.saturating_add(states).saturating_add(flush))
}

/// Checks `memmap_bytes` against the modelled pfn space of both initializers.
fn pfn_check(memmap_bytes: u64, cfg: &memmap_core::KernelConfig) -> Result<(), String> {
    let nr = memmap_bytes / 64;
    for (base, who) in [(zone_device::DEVICE_START_PFN, "the device"), (deferred::BASE, "the node")] {
        if base.checked_add(nr).is_none_or(|e| e > cfg.max_pfn()) {
            return Err(format!(
                "{who} of {} of memmap ends past config {}'s last pfn",
                Bytes(memmap_bytes),
                cfg.name
            ));
        }
    }
    Ok(())
}

/// Validates `a` into a [`Sweep`].
pub(super) fn plan(a: &SweepArgs, g: &GlobalArgs, info: &MemInfo) -> Result<Sweep, CliError> {
    let usage = CliError::Usage;
    if a.min_size < MIN_SIZE || a.min_size % MIN_SIZE != 0 {
        return Err(usage(format!(
            "--min-size {} is not a whole number of 64 KiB of memmap (1024 struct pages)",
            Bytes(a.min_size)
        )));
    }
    if a.max_size < a.min_size {
        return Err(usage(format!(
            "--max-size {} is below --min-size {}",
            Bytes(a.max_size),
            Bytes(a.min_size)
        )));
    }
    let budget = Budget::new(a.memory_budget, info).map_err(usage)?;
    let flush_bytes = sweep::flush_bytes(sweep::llc_bytes());
    let (mut sizes, mut skipped) = (Vec::new(), Vec::new());
    for bytes in sweep::sizes(a.min_size, a.max_size, a.step) {
        pfn_check(bytes, &a.config).map_err(usage)?;
        match budget.check(&format!("sweep at {}", Bytes(bytes)), &need(bytes, flush_bytes, &a.config), info)
        {
            Ok(()) => sizes.push(bytes),
            Err(e) => skipped.push(Skip { memmap_bytes: bytes, reason: e.to_string() }),
        }
    }
    if sizes.is_empty() {
        let why = skipped.first().map_or_else(String::new, |k| format!(": {}", k.reason));
        return Err(usage(format!("sweep: no size fits{why}")));
    }
    let plot = match &a.plot {
        Some(p) => Some(NewFile::prepare(p, a.force).map_err(|e| usage(format!("--plot: {e}")))?),
        None => None,
    };
    Ok(Sweep {
        sizes,
        skipped,
        rounds: a.rounds.map(|r| r as usize),
        quick: g.quick,
        config: a.config,
        flush_bytes,
        json: g.json,
        verbose: g.verbose,
        progress: ProgressMode { enabled: !g.no_progress },
        plot,
    })
}
