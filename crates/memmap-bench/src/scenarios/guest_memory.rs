//! `guest-memory`: what a VMM does with guest RAM, through `stream-vm-memory`, on a
//! `GuestMemoryMmap<AtomicBitmap>` of `--size` bytes in two anonymous regions.
//!
//! * `guest-memory-populate`: faulting fresh guest memory in, ours against the VMMs' algorithms
//!   ([`crate::vmm_prefault`]), judged against the zero-fill and populate limits;
//! * `guest-memory-reset`: making used guest memory read as zero again, each round paired with
//!   the best zero-fill method.
//!
//! `crates/memmap-bench/METHODOLOGY.md` describes every strategy and each round's memory state.

use super::guest_host::{GuestMemory, Part};
use super::guest_populate::{POPULATE, POPULATE_ROUNDS, POPULATE_STRATEGIES, run_populate};
use super::guest_reset::{RESET, RESET_ROUNDS, RESET_STRATEGIES, run_reset};
use super::scenario::{CatalogEntry, Context, RunError, Scenario, Setup};
use super::spec::{CommandSpec, SizeSpec};
use crate::budget::Knob;
use crate::memory::{MemoryNeed, Overflow};
use crate::report::scenario::ScenarioReport;
use crate::size::Bytes as Size;

/// The size unit: two regions of whole 2 MiB pages.
pub const SIZE_UNIT: u64 = 4 << 20;

/// The smallest guest memory the suite scales down to.
pub const MIN_SIZE: u64 = 256 << 20;

/// The `guest-memory` subcommand.
pub const COMMAND: CommandSpec = CommandSpec::new(
    "guest-memory",
    "Guest memory for VMMs: populate (against Cloud Hypervisor's and QEMU's prefaults) and reset",
    SizeSpec::bytes(
        "guest-memory-size",
        SIZE_UNIT,
        "Guest memory, in two regions, a multiple of 4 MiB",
        4 << 30,
        256 << 20,
    ),
);

/// The catalog row of `guest-memory-populate`.
pub const POPULATE_ENTRY: CatalogEntry =
    CatalogEntry::new(POPULATE, &COMMAND, POPULATE_STRATEGIES, POPULATE_ROUNDS, |s| {
        Box::new(GuestMemory::new(s, Part::Populate))
    });

/// The catalog row of `guest-memory-reset`.
pub const RESET_ENTRY: CatalogEntry =
    CatalogEntry::new(RESET, &COMMAND, RESET_STRATEGIES, RESET_ROUNDS, |s| {
        Box::new(GuestMemory::new(s, Part::Reset))
    });

impl GuestMemory {
    /// The scenario's `part` with `setup`'s size.
    #[must_use]
    pub fn new(setup: &Setup, part: Part) -> GuestMemory {
        let (size, fixed) = setup.size(&COMMAND.size);
        GuestMemory { part, size, fixed }
    }
}

impl Scenario for GuestMemory {
    fn name(&self) -> &'static str {
        match self.part {
            Part::Populate => POPULATE,
            Part::Reset => RESET,
        }
    }

    fn description(&self) -> String {
        format!("{}: {} of guest memory in 2 regions", self.name(), Size(self.size))
    }

    /// One guest memory of `size` bytes, resident, at a time.
    fn memory_needed(&self) -> Result<MemoryNeed, Overflow> {
        Ok(MemoryNeed { resident: self.size, mapped: self.size, largest_mapping: self.size / 2 })
    }

    fn check(&self) -> Result<(), String> {
        if self.size == 0 || self.size % SIZE_UNIT != 0 {
            return Err(format!("guest memory size {} is not a whole number of 4 MiB", Size(self.size)));
        }
        usize::try_from(self.size)
            .map(|_| ())
            .map_err(|_| format!("guest memory size {} does not fit this machine", Size(self.size)))
    }

    fn knob(&self) -> Option<Knob> {
        Some(Knob::bytes(self.size, SIZE_UNIT, MIN_SIZE, self.fixed))
    }

    fn resized(&self, value: u64) -> Option<Box<dyn Scenario>> {
        Some(Box::new(GuestMemory { size: value, ..self.clone() }))
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Vec<ScenarioReport>, RunError> {
        match self.part {
            Part::Populate => run_populate(self, ctx),
            Part::Reset => run_reset(self, ctx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::guest_populate::{KIND_ROWS, OURS};
    use super::*;
    use crate::scenarios::scenario::Common;
    use crate::threads::AllCore;

    #[test]
    fn both_halves_run_and_report_every_strategy() {
        let limits = crate::limits::measure(8 << 20, 2, &[2], &crate::progress::Phase::hidden()).unwrap();
        let common = Common {
            rounds: Some(2),
            progress: crate::progress::ProgressMode { enabled: false },
            quick: true,
        };
        let ctx = Context { common: &common, threads: AllCore::given(2), limits: &limits };
        for (part, name, strategies) in
            [(Part::Populate, POPULATE, POPULATE_STRATEGIES), (Part::Reset, RESET, RESET_STRATEGIES)]
        {
            let s = GuestMemory { part, size: 32 << 20, fixed: true };
            s.check().unwrap();
            assert_eq!(s.name(), name);
            let support = stream_vm_memory::host_support();
            if !support.populate_write || !support.dontneed {
                let e = s.run(&ctx).unwrap_err();
                assert_eq!(e.source.kind(), std::io::ErrorKind::Unsupported);
                println!("skipped: {e}");
                continue;
            }
            let reports = s.run(&ctx).unwrap();
            assert_eq!(reports.len(), 2, "one thread and all cores");
            assert_eq!((reports[0].threads, reports[1].threads), (1, 2));
            let got: Vec<&str> = reports[0].results.iter().map(|r| r.strategy.as_str()).collect();
            assert_eq!(got, strategies);
            for sc in &reports {
                assert_eq!(sc.bytes, 32 << 20);
                assert!(sc.results.iter().all(|r| r.median_ms > 0.0 && r.gbps > 0.0), "{}", sc.table(false));
                assert!(crate::scenarios::CATALOG.iter().any(|e| e.name == sc.name));
                if part == Part::Populate {
                    check_populate_limit(sc);
                }
            }
        }
        assert!(GuestMemory { part: Part::Reset, size: 6 << 20, fixed: true }.check().is_err());
    }

    /// The populate limit of each page kind is its fastest eligible row: every row but an
    /// ineligible `ch-prefault` is at most 1.0 of it, and one row is exactly at it.
    fn check_populate_limit(sc: &ScenarioReport) {
        let x = &sc.columns[0];
        assert_eq!((x.header.as_str(), x.values.len()), ("x pop. limit", 2 * KIND_ROWS));
        for kind in x.values.chunks(KIND_ROWS) {
            assert!(kind[1..].iter().all(|&v| v <= 1.0 + 1e-9), "{}", sc.table(true));
            assert!(kind.iter().any(|&v| (v - 1.0).abs() < 1e-9), "{}", sc.table(true));
        }
        let limit = &sc.extra["populate_limit"];
        for kind in ["4k", "thp"] {
            assert!(limit[kind]["gbps"].as_f64().unwrap() > 0.0);
            assert!(POPULATE_STRATEGIES.contains(&limit[kind]["strategy"].as_str().unwrap()));
            assert!(limit[kind]["best_baseline"].as_str().unwrap() != OURS);
        }
        assert_eq!(sc.extra["x_populate_limit"].as_object().unwrap().len(), 2 * KIND_ROWS);
        println!("{}", sc.table(true));
    }
}
