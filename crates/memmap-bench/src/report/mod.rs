//! The report: what a run measured, as text ([`text`]), as the `--json` document ([`Report`];
//! its schema, `schema/report.schema.json`, is derived from these types) and as the `--plot` SVG
//! ([`plot`]). A scenario hands it a [`ScenarioReport`]; the report knows no scenario. A
//! bandwidth above [`MEASUREMENT_ERROR_RATIO`] of its limit is flagged as a measurement error.

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
