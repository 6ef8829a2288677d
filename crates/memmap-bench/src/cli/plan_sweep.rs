//! `sweep`'s command line as a [`Sweep`]: the sizes checked and fitted to the memory budget,
//! the plot path checked, before anything is measured.

use memmap_core::{Node, Page64};

use super::args::{GlobalArgs, SweepArgs};
use super::error::CliError;
use crate::budget::Budget;
use crate::memory::{MemInfo, MemoryError, MemoryNeed};
use crate::progress::ProgressMode;
use crate::scenarios::{deferred, zone_device};
use crate::size::Bytes;
use crate::sweep::plan::{self as sweep, MIN_SIZE, Skip, Sweep};

/// What one size needs at once: its memmap, the node's pageblock states and the flush buffer.
fn need(memmap_bytes: u64, flush: u64, cfg: &memmap_core::KernelConfig) -> MemoryNeed {
    let nr = memmap_bytes / 64;
    let (zones, memory) = deferred::zone_layout(cfg, nr);
    let layout = memmap_core::NodeLayout { nid: 0, zones: &zones, memory: &memory, reserved: &[] };
    let states = Node::<Page64>::states_needed(cfg, layout.span()) as u64;
    MemoryNeed::resident(memmap_bytes.saturating_add(states).saturating_add(flush))
}

/// Checks `memmap_bytes` against the modelled pfn space of both initializers.
fn pfn_check(memmap_bytes: u64, cfg: &memmap_core::KernelConfig) -> Result<(), String> {
    let nr = memmap_bytes / 64;
    for (base, who) in [(zone_device::DEVICE_START_PFN, "device"), (deferred::BASE, "node")] {
        if base.checked_add(nr).is_none_or(|e| e > cfg.max_pfn()) {
            let largest = cfg.max_pfn().saturating_sub(base).saturating_mul(64) / MIN_SIZE * MIN_SIZE;
            return Err(format!(
                "sweep size {} of memmap: the {who} of {} struct pages from pfn {base:#x} ends past config \
                 {}'s pfns (below {:#x}): at most {} of memmap fits (--max-size)",
                Bytes(memmap_bytes),
                nr,
                cfg.name,
                cfg.max_pfn(),
                Bytes(largest)
            ));
        }
    }
    Ok(())
}

/// Validates `a` into a [`Sweep`].
pub(super) fn plan(a: &SweepArgs, g: &GlobalArgs, info: &MemInfo) -> Result<Sweep, CliError> {
    let usage = CliError::Usage;
    if a.min_size < MIN_SIZE || a.min_size % MIN_SIZE != 0 {
        let down = a.min_size / MIN_SIZE * MIN_SIZE;
        let up = down.checked_add(MIN_SIZE).map(|u| Bytes(u).to_string());
        let nearest: Vec<String> =
            [(down > 0).then(|| Bytes(down).to_string()), up].into_iter().flatten().collect();
        return Err(usage(format!(
            "--min-size {} is not a whole number of 64 KiB of memmap (1024 struct pages; nearest: {})",
            Bytes(a.min_size),
            nearest.join(" or ")
        )));
    }
    if a.max_size < a.min_size {
        let (max, min) = Bytes::distinct(a.max_size, a.min_size);
        return Err(usage(format!("--max-size {max} is below --min-size {min}")));
    }
    let budget = Budget::new(a.memory_budget, info).map_err(usage)?;
    let flush_bytes = sweep::flush_bytes(sweep::llc_bytes());
    let (mut sizes, mut skipped, mut first_error) = (Vec::new(), Vec::new(), None);
    for bytes in sweep::sizes(a.min_size, a.max_size, a.step) {
        pfn_check(bytes, &a.config).map_err(usage)?;
        match budget.check(&format!("sweep at {}", Bytes(bytes)), &need(bytes, flush_bytes, &a.config), info)
        {
            Ok(()) => sizes.push(bytes),
            Err(e) => {
                skipped.push(Skip { memmap_bytes: bytes, reason: e.to_string() });
                first_error.get_or_insert(e);
            }
        }
    }
    if let (true, Some(e)) = (sizes.is_empty(), first_error) {
        let advice = match &e {
            MemoryError::Budget { need, own, .. } => {
                format!("; {}", budget.advice(need.saturating_add(*own)).unwrap_or_else(|m| m))
            }
            _ => String::new(),
        };
        return Err(usage(format!("sweep: no size fits: {e}{advice}")));
    }
    let plot = match &a.plot {
        Some(p) => {
            Some(memmap_dump::OutputFile::prepare(p, a.force).map_err(|e| usage(format!("--plot: {e}")))?)
        }
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
