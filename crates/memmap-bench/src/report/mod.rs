//! The report: what a run measured, as tables and verdicts for a person ([`text`]), as the
//! `--json` document ([`Report`] serialized) and as the `--plot` SVG ([`plot`]).
//!
//! Data flows one way: a scenario hands the report a [`ScenarioReport`] that carries
//! everything the report shows of it (its [`Figure`]: a bandwidth, or a time that is not one),
//! and the program hands it the names its scenarios and strategies report under for the
//! schema ([`schema::json_schema`]). The report knows no scenario.
//!
//! The `--json` document, format 2 (shape below; every scenario may add fields of its own).
//! Its JSON Schema, `crates/memmap-bench/schema/report.schema.json`, is derived from these
//! types; a test fails when the checked-in file differs, and CI validates the quick suite's
//! report against it.
//!
//! ```text
//! {"format": 2,
//!  "provenance": {"generated_at": s, "version": s, "git_commit": s|null, "rustc": s|null,
//!                 "kernel": s|null, "thp": s|null,
//!                 "cpu_model": {"name": s, "vendor": s, "family": s, "model": s,
//!                               "stepping": s, "flags": [s, ...]}},
//!  "machine": {"cpu": s, "backend": s, "backend_name": s, ...},
//!  "memory": {"budget_bytes": n|null, "budget_source": s, "scaled": [{"name": s, "from": s, "to": s}]},
//!  "limits": {"fill_zero_gbps": f, "fill_nonzero_gbps": f, ..., "all_cores": n,
//!             "per_threads": [{"threads": n, "fill_zero_gbps": f, "fill_zero_method": s, ...,
//!                              "methods": [{"method": s, "kind": s, "gbps": f}, ...]}, ...]},
//!  "scenarios": [{"name": s, "figure": "bandwidth"|"time", "threads": n, "struct_pages": n,
//!                 "bytes": n, "limit": s, "limit_gbps": f, "limit_method": s,
//!                 "measurement_errors": n, "verdict": s,
//!                 "results": [{"strategy": s, "first_ms": f, "rebind_avg_ms": f,
//!                              "median_ms": f, "quartiles_ms": [f, f], "gbps": f, "x_limit": f,
//!                              "measurement_error": b, "rounds_ms": [f, ...], ...}], ...}],
//!  "skipped": [{"name": s, "reason": s}],
//!  "wall_s": f, "command": s, "quick": b}
//! ```
//!
//! A scenario reports one entry per thread count: the kernel-faithful one-thread run
//! (`threads` 1) and the all-core run, each against the limit measured at its own thread
//! count ([`crate::limits::Limits::at`]). A bandwidth above [`MEASUREMENT_ERROR_RATIO`] of its limit cannot be
//! (the limit is the best any method reached on this machine in this run): it is flagged as a
//! measurement error in the table, the summary and the JSON.

pub mod document;
pub mod plot;
pub mod provenance;
pub mod scenario;
pub mod schema;
pub mod text;
pub mod verdict;

pub use document::{MemoryPlan, REPORT_FORMAT, Report, Scaled, Skipped};
pub use provenance::{CpuModel, Provenance};
pub use scenario::{
    Column, Figure, LimitKind, MEASUREMENT_ERROR_RATIO, ScenarioReport, ScenarioSpec, StrategyResult,
    is_measurement_error,
};
