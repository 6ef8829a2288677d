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

/// Hostile `boot.json`s built from every boot extract (every architecture): each is refused
/// with an error, never a panic or an allocation of the size it claims.
#[test]
fn hostile_boot_extracts_are_refused_without_allocating_what_they_claim() {
    let dirs = kernel_oracle::compare::golden::boot_dirs(&golden_dir()).expect("golden directory");
    for d in &dirs {
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.join("boot.json")).unwrap()).unwrap();
        let gz = std::fs::read(d.join("pages.bin.gz")).unwrap();
        let refused = |what: &str, edit: &dyn Fn(&mut serde_json::Value)| {
            let mut j = json.clone();
            edit(&mut j);
            let e = boot_golden::parse(d, &serde_json::to_vec(&j).unwrap(), &gz)
                .err()
                .unwrap_or_else(|| panic!("{}: {what}: accepted", d.display()));
            format!("{e:#}")
        };
        // A one-page zone up to 2^30 pfns past the last one (inside the vmemmap) and a taken
        // range across the gap: inside the node's span, not inside its zones (it once expanded
        // pfn by pfn: 8 GiB).
        let vmemmap_pages = json["vmemmap_size"].as_u64().unwrap() / 64;
        let e = refused("a taken range across a gap", &|j| {
            let zones = j["nodes"][0]["zones"].as_array_mut().unwrap();
            let last = zones.last().unwrap().clone();
            let end = last["start_pfn"].as_u64().unwrap() + last["nr_pages"].as_u64().unwrap();
            let gap = (vmemmap_pages - end - 2).min(1 << 30);
            let mut far = last.clone();
            far["start_pfn"] = (end + gap).into();
            far["nr_pages"] = 1.into();
            far["pageblocks"] = "".into();
            far["samples"] = serde_json::json!([]);
            zones.push(far);
            j["nodes"][0]["taken"].as_array_mut().unwrap().push(serde_json::json!([end - 1, end + gap + 1]));
        });
        assert!(e.contains("taken pages"), "{e}");
        for (what, blocks) in [("non-ASCII pageblocks", "é0"), ("odd pageblocks", "0"), ("non-hex", "zz")] {
            let e = refused(what, &|j| {
                let z = &mut j["nodes"][0]["zones"][0]["pageblocks"];
                *z = format!("{blocks}{}", z.as_str().unwrap()).into();
            });
            assert!(e.contains("hex digits"), "{what}: {e}");
        }
        for size in [0, u64::MAX, 64] {
            refused("vmemmap_size", &|j| j["vmemmap_size"] = size.into());
        }
    }
}
