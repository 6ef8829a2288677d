//! `guest-memory`: what a VMM does with guest RAM, through `stream-vm-memory`, on a
//! `GuestMemoryMmap<AtomicBitmap>` of `--size` bytes in two anonymous regions (default 4 GiB).
//!
//! * `guest-memory-populate`: faulting fresh guest memory in before a guest boots, ours against
//!   the VMMs' algorithms (`crate::vmm_prefault`). Every round of every strategy maps
//!   new regions (not timed), faults them in (timed) and unmaps them (not timed):
//!   * `ch-prefault`, `ch-numa-prefault`, `qemu-prealloc`, `madvise-once`: the VMMs' algorithms
//!     ([`crate::vmm_prefault`]); `ch-prefault` and `madvise-once` with their own thread rules
//!     (the same runs in both reports), the others at each count;
//!   * `populate`: `stream_vm_memory::populate_all` without huge-page advice, on one thread
//!     (the one-thread report) and on the all-core count (the all-core report);
//!   * the same with `-thp`: on memory advised `MADV_HUGEPAGE` (what Cloud Hypervisor's
//!     `thp=on`, its default, and QEMU do when they create a region; the advice is set before
//!     the clock starts for the baselines, and is part of `populate`'s own timed call for
//!     `populate-thp`).
//!
//!   Before each round, untimed, as much memory is faulted in with huge pages and unmapped, so
//!   that every round starts from the same free memory (without it, on a machine whose memory
//!   is mostly page cache, a THP round's time was mostly the kernel reclaiming and compacting
//!   for it: from 0.6 s to 31 s for the same strategy; and the first touch of guest-physical
//!   memory the hypervisor has not backed yet costs several times a later one).
//!
//!   Judged against the zero-fill limit of the limits phase at the report's thread count (the
//!   kernel zeroes every page it faults in; no paired limit runs, since they would fault the
//!   memory in), and against a populate limit measured in the same run: per page kind, the
//!   fastest of all implementations (ours included) given at most the report's threads (the
//!   `x pop. limit` column, the `populate_limit` field).
//! * `guest-memory-reset`: making used guest memory read as zero again (a VM reset or
//!   reboot, a pooled region handed to the next guest). The regions are advised
//!   `MADV_HUGEPAGE` and faulted in once before the rounds (the time is reported apart), and
//!   every round of every strategy writes all of them:
//!   * `write-slice`: vm-memory's `Bytes::write_slice` of a 2 MiB zero buffer, in a loop (what
//!     a VMM without a bulk zero does);
//!   * `memset`: `libc::memset` on each region's host mapping (unsafe, no dirty bits);
//!   * `zero`: `stream_vm_memory::reset` in place (streaming zero, drained, dirty-marked), on
//!     one thread and on the all-core count;
//!   * `reset-auto`: `stream_vm_memory::reset` with `ResetPolicy::Auto` (resident memory: in
//!     place, after its `mincore`);
//!   * `discard-refault`: `ResetPolicy::Discard { repopulate: true }`: `MADV_DONTNEED`, then
//!     `MADV_POPULATE_WRITE` of the same pages.
//!
//!   Each round is paired with a run of the best zero-fill method at its thread count on the
//!   same regions right before it (as the clear scenario does). The all-core report has the
//!   strategies that use the all-core count.
//!
//! The populate strategies run in two groups, the 4 KiB ones interleaved round by round, then
//! the THP ones: memory an unmapped THP round frees comes back in 2 MiB blocks, a 4 KiB round's
//! does not, so a THP round right after a 4 KiB one would also pay the kernel's compaction
//! (shuffling the order would not change that). On a host that ignores
//! the `madvise` advice measured (qemu-user before 8.1) both scenarios stop with an error.

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

/// The default guest memory: 4 GiB (the size the VMM measurements used).
pub const DEFAULT_SIZE: u64 = 4 << 30;

/// The `--quick` guest memory.
pub const QUICK_SIZE: u64 = 256 << 20;

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
        DEFAULT_SIZE,
        QUICK_SIZE,
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
