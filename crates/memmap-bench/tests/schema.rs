//! The checked-in JSON Schema of the `--json` report is the one derived from the report types.

use std::path::Path;

/// Regenerate with `MEMMAP_BENCH_BLESS_SCHEMA=1 cargo test -p memmap-bench --test schema`.
#[test]
fn checked_in_schema_matches_the_report_types() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/report.schema.json");
    // The checked-in text: pretty JSON with a final newline.
    let derived = serde_json::to_string_pretty(&memmap_bench::scenarios::report_schema()).unwrap() + "\n";
    if std::env::var_os("MEMMAP_BENCH_BLESS_SCHEMA").is_some() {
        std::fs::write(&path, &derived).expect("write the schema");
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == derived,
        "{} differs from the schema derived from the report types (memmap_bench::scenarios::report_schema); \
         regenerate it with `MEMMAP_BENCH_BLESS_SCHEMA=1 cargo test -p memmap-bench --test schema` \
         and commit it",
        path.display()
    );
}

fn required(v: &serde_json::Value) -> Vec<String> {
    v["required"].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect()
}

/// The derived schema keeps what CI's validation relies on.
#[test]
fn schema_requires_the_documented_fields() {
    let s = memmap_bench::scenarios::report_schema();
    let top = required(&s);
    for k in
        ["format", "provenance", "machine", "memory", "limits", "scenarios", "skipped", "command", "quick"]
    {
        assert!(top.contains(&k.to_string()), "{k} not required: {top:?}");
    }
    let defs = &s["$defs"];
    assert!(required(&defs["Machine"]).contains(&"backend_name".to_string()));
    let names = &defs["ScenarioReport"]["properties"]["name"]["enum"];
    assert_eq!(names.as_array().unwrap().len(), memmap_bench::scenarios::CATALOG.len());
    assert_eq!(defs["Limits"]["properties"]["fill_zero_gbps"]["exclusiveMinimum"], 0);
    assert!(required(&defs["ScenarioReport"]).contains(&"verdict".to_string()));
    assert!(required(&defs["ScenarioReport"]).contains(&"figure".to_string()));
}

/// Every provenance field is in the schema, and the ones every build knows are required.
#[test]
fn schema_carries_the_provenance() {
    let s = memmap_bench::scenarios::report_schema();
    let p = &s["$defs"]["Provenance"];
    let props: Vec<&String> = p["properties"].as_object().unwrap().keys().collect();
    for k in ["generated_at", "version", "git_commit", "rustc", "kernel", "thp", "cpu_model"] {
        assert!(props.iter().any(|p| *p == k), "{k} missing: {props:?}");
    }
    assert_eq!(p["properties"]["generated_at"]["format"], "date-time");
    let cpu = required(&s["$defs"]["CpuModel"]);
    for k in ["name", "vendor", "family", "model", "stepping", "flags"] {
        assert!(cpu.contains(&k.to_string()), "cpu_model.{k} not required: {cpu:?}");
    }
}
