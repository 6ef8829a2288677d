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
        let mode = boot::kernel_mode(&b.golden.cmdline);
        let res = boot::compare_nodes(&b.cfg, b.golden.vmemmap_size, mode, &b.nodes)
            .unwrap_or_else(|e| panic!("{}: {e:#}", d.display()));
        let report = boot::render(&res);
        assert!(boot::equal(&res), "{}:\n{report}", d.display());
        for n in &res {
            assert_eq!(n.paths.len(), boot::PATHS.len() - 1);
            // A zone may have no free block (a 64 MiB zone the node's own memmap fills), a node
            // has.
            let head = CmpClass::ALL.iter().position(|&c| c == CmpClass::FreeHead).unwrap();
            let free: u64 = n.zones.iter().map(|z| z.classes[head].pages).sum();
            assert!(free > 0, "{}: node {} has no free block head in the sample", d.display(), n.nid);
        }
    }
}

/// The free lists are compared by membership: a kernel free head moved onto another list (its
/// `next` at another list's head) is a difference, though every link still reaches a list.
#[test]
fn a_free_head_on_another_list_differs() {
    let d = golden_dir().join("7.2-amd64/boot-3g");
    let mut b = boot_golden::load(&d).unwrap();
    let vstart = b.cfg.vmemmap_start;
    let in_vmemmap = |v: u64| v.checked_sub(vstart).is_some_and(|o| o < b.golden.vmemmap_size);
    let word = |p: &[u8; 64], w: usize| u64::from_le_bytes(p[w * 8..w * 8 + 8].try_into().unwrap());
    let mut done = false;
    for n in &mut b.nodes {
        for z in &mut n.zones {
            let boot::KernelPages::Sample(pages) = &mut z.pages else { continue };
            let heads: Vec<(u64, u64)> = pages
                .iter()
                .filter(|(_, (c, p))| {
                    *c == kernel_oracle::facts::zones::Class::FreeHead && !in_vmemmap(word(p, 1))
                })
                .map(|(&pfn, (_, p))| (pfn, word(p, 1)))
                .collect();
            // Two list ends on two lists: the first one's `next` now names the second's list.
            let Some(&(pfn, list)) = heads.first() else { continue };
            let Some(&(_, other)) = heads.iter().find(|h| h.1 != list) else { continue };
            let page = &mut pages.get_mut(&pfn).unwrap().1;
            page[8..16].copy_from_slice(&other.to_le_bytes());
            done = true;
            break;
        }
        if done {
            break;
        }
    }
    assert!(done, "no two list ends in one zone");
    let res =
        boot::compare_nodes(&b.cfg, b.golden.vmemmap_size, boot::kernel_mode(&b.golden.cmdline), &b.nodes)
            .unwrap();
    let report = boot::render(&res);
    assert!(!boot::equal(&res), "{report}");
    assert!(report.contains("on another free list than the model's"), "{report}");
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
        // pfn by pfn: 8 GiB). The last zone loses its section tail (samples past its end).
        let vmemmap_pages = json["vmemmap_size"].as_u64().unwrap() / 64;
        let e = refused("a taken range across a gap", &|j| {
            j["nodes"][0]["section_tail"] = false.into();
            for z in j["nodes"][0]["zones"].as_array_mut().unwrap() {
                let end = z["start_pfn"].as_u64().unwrap() + z["nr_pages"].as_u64().unwrap();
                let samples = z["samples"].as_array_mut().unwrap();
                samples.retain(|s| s[0].as_u64().unwrap() < end);
                for s in samples {
                    let first = s[0].as_u64().unwrap();
                    s[1] = s[1].as_u64().unwrap().min(end - first).into();
                }
            }
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
