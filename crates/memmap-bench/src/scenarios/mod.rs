//! The timing scenarios, as data: each is a [`Scenario`] (name, what it needs from memory, the
//! one parameter the suite may scale to fit the memory budget, how it runs, the report it
//! returns), and [`CATALOG`] lists every one the program knows in run order. `all`, the memory
//! budget, `--json` and `--plot` iterate that one list; a subcommand runs the entries of its
//! [`CatalogEntry::command`].
//!
//! Adding a scenario: a file here with its struct implementing [`Scenario`] (its sizes,
//! memory need, checks and report rows), its [`CommandSpec`] (the subcommand, its size flag
//! with the default and `--quick` values, a flag that picks among its scenarios) and its
//! [`CatalogEntry`] (name, strategies, rounds, how to build it); then its `mod` line and its
//! row in [`CATALOG`]. The subcommand, its help, the size flag of `all`, the memory budget,
//! `--json`, `--plot` and the schema's names all follow from the catalog.
//!
//! Each scenario builds its storage, runs its strategies interleaved with
//! [`crate::measure::interleaved`], and returns [`crate::report::ScenarioReport`]s: the zone-device, hugetlb
//! (without HVO) and clear scenarios return two, the kernel-faithful one-thread run and the
//! all-core run ([`Context::threads`] workers, through the libraries' parallel runners), whose
//! strategies run interleaved in the same rounds. Those three (and alloc-init-on-alloc) also
//! pair every round of every strategy with a run of the limit method of its thread count on
//! the strategy's own storage, right before it ([`crate::measure::interleaved_paired`],
//! [`paired`]), so each round is judged against what that memory allows at that moment.
//!
//! ## What "first" measures
//!
//! Round 0 ("first") of every strategy starts from the same memory state: each strategy's
//! storage is mapped and faulted in (`MADV_POPULATE_WRITE`) before any round runs, so no
//! strategy pays for page faults, THP compaction or reclaim that another did not. The first
//! round is then the first initialization of resident memory with cold caches (in the paired
//! scenarios the limit run has just filled it with a non-initialized pattern, with streaming
//! stores or a large `memset`, so at most a last-level cache's worth of it is cached); the
//! cost of faulting the storage in is measured separately (`fault_ms` in the scenario's JSON
//! and its description line), once per strategy's storage, outside the rounds.

pub mod alloc;
pub mod clear;
pub mod deferred;
pub mod guest_host;
pub mod guest_memory;
pub mod guest_populate;
pub mod guest_reset;
pub mod hotplug;
pub mod hugetlb;
pub mod paired;
pub mod scenario;
pub mod spec;
pub mod zone_device;

pub use paired::{calibrate, limit_run, prefault};
pub use scenario::{CatalogEntry, Common, Context, RunError, Scenario, Setup, past_the_pfns};
pub use spec::{CommandSpec, PickKind, PickSpec, Rounds, SizeSpec, SizeUnit};

/// Every scenario, in run order: one row each, defined in the scenario's file.
pub const CATALOG: &[&CatalogEntry] = &[
    &zone_device::FSDAX,
    &zone_device::DEVDAX_2M,
    &hugetlb::NO_HVO,
    &hugetlb::HVO,
    &clear::ENTRY,
    &alloc::ENTRY,
    &deferred::ENTRY,
    &hotplug::ENTRY,
    &guest_memory::POPULATE_ENTRY,
    &guest_memory::RESET_ENTRY,
];

/// The timing subcommands: each command of [`CATALOG`] once, in the order of its first row.
#[must_use]
pub fn commands() -> Vec<&'static CommandSpec> {
    let mut v: Vec<&'static CommandSpec> = Vec::new();
    for e in CATALOG {
        if !v.iter().any(|c| c.name == e.command.name) {
            v.push(e.command);
        }
    }
    v
}

/// The rows of the command named `command`, in run order.
#[must_use]
pub fn rows_of(command: &str) -> Vec<&'static CatalogEntry> {
    CATALOG.iter().copied().filter(|e| e.command.name == command).collect()
}

/// The report's JSON Schema with the catalog's scenario and strategy names
/// ([`crate::report::schema::json_schema`]): the content of
/// `crates/memmap-bench/schema/report.schema.json`.
#[must_use]
pub fn report_schema() -> serde_json::Value {
    let names: Vec<&str> = CATALOG.iter().map(|e| e.name).collect();
    let mut strategies: Vec<&str> = Vec::new();
    for s in CATALOG.iter().flat_map(|e| e.strategies) {
        if !strategies.contains(s) {
            strategies.push(s);
        }
    }
    crate::report::schema::json_schema(&names, &strategies)
}

/// [`report_schema`] as the checked-in text.
#[must_use]
pub fn report_schema_text() -> String {
    crate::report::schema::schema_text(&report_schema())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_named_once_and_picked_by_its_command() {
        let names: Vec<&str> = CATALOG.iter().map(|e| e.name).collect();
        for (i, n) in names.iter().enumerate() {
            assert!(!names[..i].contains(n), "{n} twice");
        }
        for c in commands() {
            let rows = rows_of(c.name);
            match c.pick {
                None => assert!(rows.iter().all(|e| e.pick.is_none()), "{}", c.name),
                Some(p) => {
                    // Every row runs under some value of the flag, and not given the flag
                    // picks some row.
                    assert!(rows.iter().any(|e| p.picks(e.pick, None)), "{}", c.name);
                    assert!(rows.iter().all(|e| p.picks(e.pick, e.pick)), "{}", c.name);
                }
            }
        }
        assert_eq!(
            commands().iter().map(|c| c.name).collect::<Vec<_>>(),
            ["zone-device", "hugetlb", "clear", "deferred", "hotplug", "guest-memory"]
        );
    }
}
