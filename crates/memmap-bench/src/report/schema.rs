//! The `--json` report's JSON Schema (draft 2020-12), derived from [`Report`] with `schemars`;
//! the caller hands in the scenario and strategy names ([`crate::scenarios::report_schema`]).

use super::document::Report;

/// The report's schema, with `scenario_names` as the enum of `scenarios[].name` and
/// `strategy_names` as the enum of `scenarios[].results[].strategy` (both left open when
/// empty).
#[must_use]
pub fn json_schema(scenario_names: &[&str], strategy_names: &[&str]) -> serde_json::Value {
    let mut schema = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<Report>();
    schema.insert(
        "$id".into(),
        "https://github.com/memmap-stream/memmap-stream/crates/memmap-bench/schema/report.schema.json".into(),
    );
    let mut v = schema.to_value();
    let mut restrict = |def: &str, field: &str, names: &[&str]| {
        if names.is_empty() {
            return;
        }
        if let Some(p) = v.pointer_mut(&format!("/$defs/{def}/properties/{field}")) {
            if let Some(o) = p.as_object_mut() {
                o.insert("enum".into(), names.iter().map(|&n| serde_json::Value::from(n)).collect());
            }
        }
    };
    restrict("ScenarioReport", "name", scenario_names);
    restrict("StrategyResult", "strategy", strategy_names);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_enums_and_nothing_else_changes() {
        let open = json_schema(&[], &[]);
        let named = json_schema(&["a", "b"], &["s"]);
        assert_eq!(
            named["$defs"]["ScenarioReport"]["properties"]["name"]["enum"],
            serde_json::json!(["a", "b"])
        );
        assert_eq!(
            named["$defs"]["StrategyResult"]["properties"]["strategy"]["enum"],
            serde_json::json!(["s"])
        );
        assert!(open["$defs"]["ScenarioReport"]["properties"]["name"].get("enum").is_none());
        assert_eq!(open["required"], named["required"]);
    }
}
