//! The timing scenarios, as data: each is a [`Scenario`], and [`CATALOG`] lists them in run
//! order; `all`, the memory budget, `--json`, `--plot` and the subcommands follow from it. Adding
//! a scenario is a file here, its [`CommandSpec`], its [`CatalogEntry`] and its row in [`CATALOG`].
//!
//! Storage is faulted in before the rounds, so round 0 ("first") is the first initialization of
//! resident memory with cold caches; most scenarios pair every round with a limit run ([`paired`]).

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

pub use paired::prefault;
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

/// The report's JSON Schema with the catalog's names: the content of
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
