//! The boot configurations' golden extracts: the model booted on each guest's layout, on every
//! init path, equals the guest's struct pages (the sampled ones, by class), pageblocks and zone
//! counters; and a damaged extract is refused, not trusted.

use std::path::PathBuf;

use kernel_oracle::compare::boot::{self, CmpClass};
use kernel_oracle::compare::boot_golden;

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden")
}

#[test]
fn every_boot_extract_equals_the_model_on_every_path() {
    let dirs = kernel_oracle::compare::golden::boot_dirs(&golden_dir()).expect("golden directory");
    let kernels: Vec<String> =
        dirs.iter().filter_map(|d| Some(d.parent()?.file_name()?.to_str()?.to_string())).collect();
    for k in ["7.2-amd64", "6.12-amd64", "6.1-amd64"] {
        assert!(kernels.iter().any(|x| x == k), "no boot extract of {k}");
    }
    for d in dirs {
        let b = boot_golden::load(&d).unwrap_or_else(|e| panic!("{}: {e:#}", d.display()));
        let res = boot::compare_nodes(&b.cfg, b.golden.vmemmap_size, &b.nodes)
            .unwrap_or_else(|e| panic!("{}: {e:#}", d.display()));
        let report = boot::render(&res);
        assert!(boot::equal(&res), "{}:\n{report}", d.display());
        for n in &res {
            assert_eq!(n.paths.len(), boot::PATHS.len() - 1);
            for z in &n.zones {
                let free =
                    z.classes[CmpClass::ALL.iter().position(|&c| c == CmpClass::FreeHead).unwrap()].pages;
                assert!(free > 0, "{}: zone {} has no free block head in the sample", d.display(), z.name);
            }
        }
    }
}

#[test]
fn a_damaged_boot_extract_is_refused() {
    let dirs = kernel_oracle::compare::golden::boot_dirs(&golden_dir()).expect("golden directory");
    let d = dirs.first().expect("a boot extract");
    let json = std::fs::read(d.join("boot.json")).unwrap();
    let gz = std::fs::read(d.join("pages.bin.gz")).unwrap();
    assert!(boot_golden::parse(d, &json, &gz).is_ok());
    assert!(boot_golden::parse(d, &json, &gz[..gz.len() / 2]).is_err(), "truncated pages");
    assert!(boot_golden::parse(d, &json[..json.len() / 2], &gz).is_err(), "truncated json");
    let text = String::from_utf8(json).unwrap();
    let far = text.replacen("\"nr_pages\":", "\"nr_pages\":99999999999999", 1);
    assert!(boot_golden::parse(d, far.as_bytes(), &gz).is_err(), "a zone past the limits");
    let fmt = text.replacen("\"format\":1", "\"format\":9", 1);
    assert!(boot_golden::parse(d, fmt.as_bytes(), &gz).is_err(), "another format");
}
