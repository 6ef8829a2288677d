//! The committed golden extracts of real kernel dumps parse, agree with their facts, and pass
//! the class checks; and the facts record what the kernels are known to do.

use std::path::PathBuf;

use kernel_oracle::compare::golden::{self, Golden};

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden")
}

fn load_all() -> Vec<Golden> {
    let dirs = golden::dirs(&golden_dir()).expect("golden directory");
    assert!(!dirs.is_empty(), "no golden extracts under {}", golden_dir().display());
    dirs.iter().map(|d| Golden::load(d).unwrap_or_else(|e| panic!("{}: {e:#}", d.display()))).collect()
}

fn word(p: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(p[off..off + 8].try_into().expect("8 bytes"))
}

#[test]
fn every_extract_passes_the_class_checks() {
    for g in load_all() {
        let checks = g.checks();
        assert!(checks.len() >= 2, "{}: too few checks", g.dir.display());
        for c in checks {
            assert!(c.failure.is_none(), "{}: {}: {:?}", g.dir.display(), c.name, c.failure);
        }
    }
}

#[test]
fn extracts_cover_both_kernels_and_record_their_config() {
    let all = load_all();
    for id in ["7.2-amd64", "6.12-amd64", "6.1-amd64"] {
        let of_kernel: Vec<&Golden> = all.iter().filter(|g| g.facts.kernel.id == id).collect();
        assert!(!of_kernel.is_empty(), "no extract of {id}");
        for g in of_kernel {
            assert_eq!(g.facts.kernel.kconfig.get("CONFIG_NODES_SHIFT").map(String::as_str), Some("10"));
            assert_eq!(g.facts.kernel.kconfig.get("CONFIG_SPARSEMEM_VMEMMAP").map(String::as_str), Some("y"));
            assert!(g.facts.kernel.release.starts_with(&id[..id.find('-').unwrap_or(id.len())]));
        }
    }
}

/// A hugetlb folio's order counts its kernel's base pages, and its size is one of the huge
/// page sizes the model gives that kernel's architecture and page size (2 MiB is order 9 of 4
/// KiB, 7 of 16 KiB, 5 of 64 KiB): the order the oracle found (a head whose page\[1\] carries
/// it) is the model's `Hstate::order` and page\[1\]'s flags hold it.
#[test]
fn hugetlb_folios_count_the_kernels_base_pages() {
    let mut page_shifts = std::collections::BTreeSet::new();
    for g in load_all() {
        let Ok((cfg, _)) = kernel_oracle::compare::model::kernel_config(&g.facts) else { continue };
        for (i, r) in g.facts.regions.iter().enumerate() {
            let (Some(f), Some(name)) = (r.folio, r.hstate.as_deref()) else { continue };
            let h = hugetlb_init::Hstate::from_name(&cfg, name)
                .unwrap_or_else(|| panic!("{}: {name} is not a size of {}", g.dir.display(), cfg.name));
            assert_eq!((h.order(), h.page_shift()), (f.order, cfg.page_shift), "{}", g.dir.display());
            assert_eq!(h.size(), r.nr_pages << cfg.page_shift, "{}", g.dir.display());
            let pages = g.pages(i);
            let (_, p1) = pages.iter().find(|(pfn, _)| *pfn == r.start_pfn + 1).expect("page[1]");
            // 6.1 keeps the order in page[1]'s `_folio_order` byte (+17), later releases in its flags.
            let order = if cfg.behaviour().folio_layout == memmap_core::FolioLayout::FolioDtor {
                u64::from(p1[17])
            } else {
                word(p1, 0) & 0xff
            };
            assert_eq!(order, u64::from(f.order), "{}: page[1] order", g.dir.display());
            page_shifts.insert(cfg.page_shift);
        }
    }
    assert_eq!(page_shifts.into_iter().collect::<Vec<_>>(), [12, 14, 16], "4, 16 and 64 KiB kernels");
}

/// Linux 7.x keeps `compound_info = GENMASK(63, order + 6) | 1` in every tail when
/// `compound_info_has_mask()` (`CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP` and a power-of-two struct
/// page: Debian's amd64, not its arm64); otherwise, and in 6.12, tails keep `head | 1`.
#[test]
fn tails_hold_the_compound_word_of_their_kernel() {
    for g in load_all() {
        for (i, r) in g.facts.regions.iter().enumerate() {
            let order = match (r.folio, r.vmemmap_shift) {
                (Some(f), _) => f.order,
                (None, Some(s)) if s > 0 => s,
                _ => continue,
            };
            let init = r.init_start_pfn.unwrap_or(r.start_pfn);
            let pages = g.pages(i);
            let (pfn, p) =
                pages.iter().find(|(pfn, _)| *pfn == init + 1).expect("page[1] is in every extract");
            let head = g.facts.vmemmap_base + (pfn - 1) * 64;
            let hvo =
                g.facts.kernel.kconfig.get("CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP").is_some_and(|v| v == "y");
            let mask = g.facts.kernel.id.starts_with("7.") && hvo;
            let expect = if mask { (!0u64 << (order + 6)) | 1 } else { head | 1 };
            assert_eq!(word(p, 8), expect, "{}: page[1] of region {i}", g.dir.display());
        }
    }
}

/// The node and zone fields sit where the kernel's `NODES_SHIFT` and zones put them (10 and 5
/// on Debian's amd64: the zone in bits 53..51; 4 and 5 on arm64: 59..57; 2 and 4 on riscv64:
/// 61..60; 8 and 3 on ppc64el: 55..54).
#[test]
fn flags_carry_zone_and_node_at_the_debian_layout() {
    for g in load_all() {
        let layout =
            kernel_oracle::compare::model::kernel_config(&g.facts).unwrap().0.flags_layout().unwrap();
        let (nshift, zshift, zwidth) = (layout.nodes_pgshift, layout.zones_pgshift, layout.zones_width);
        let expect = match g.facts.kernel.arch.as_str() {
            "arm64" => (60, 57, 3),
            "riscv64" => (62, 60, 2),
            "ppc64el" => (56, 54, 2),
            _ => (54, 51, 3),
        };
        assert_eq!((nshift, zshift, zwidth), expect, "{}", g.dir.display());
        for (i, r) in g.facts.regions.iter().enumerate() {
            let init = r.init_start_pfn.unwrap_or(r.start_pfn);
            let pages = g.pages(i);
            let (_, p) = pages.iter().find(|(pfn, _)| *pfn == init).expect("the first initialized page");
            let flags = word(p, 0);
            assert_eq!((flags >> zshift) & ((1 << zwidth) - 1), u64::from(r.zone), "{}", g.dir.display());
            assert_eq!(flags >> nshift, u64::from(r.nid), "{}", g.dir.display());
        }
    }
}

/// Linux 6.12.95 and 6.1.176 leave tails 128.. of compound devdax pages in an early section as
/// they were (stale struct pages of the earlier fsdax mapping); 7.2 initializes them
/// ("mm/mm_init: fix uninitialized struct pages for ZONE_DEVICE"). The two early-section
/// configurations (the section shared with boot RAM below the namespace, and above its end) are the
/// only ones with stale tails; every other extract has none.
#[test]
fn only_6_x_leaves_early_section_tails_stale() {
    for g in load_all() {
        let checks = g.checks();
        let tails = checks.iter().find(|c| c.name.contains("tails resolve")).map(|c| c.name.clone());
        let Some(name) = tails else { continue };
        let stale_zero = name.contains("; 0 stale");
        let expect_stale = ["6.12-amd64", "6.1-amd64"].contains(&g.facts.kernel.id.as_str())
            && ["devdax-2m-mem-early-section", "devdax-2m-mem-trailing-early-section"]
                .contains(&g.facts.config.as_str());
        assert_eq!(!stale_zero, expect_stale, "{}: {name}", g.dir.display());
    }
}

/// Linux 6.1's `enum pageflags` and folio: a ZONE_DEVICE page is `PG_reserved` at bit 12, a
/// compound head has `PG_head` at bit 16 (6.12 and 7.2: 13 and 6), and page\[1\] holds
/// `_folio_dtor` 1 and `_folio_order` at +16/+17, `_total_mapcount` -1 at +20, `_pincount` 0
/// at +24 and `_folio_nr_pages` at +28, with no order in its flags.
#[test]
fn linux_6_1_has_its_own_flag_bits_and_folio_fields() {
    let mut seen = 0;
    for g in load_all() {
        let (reserved, head) = if g.facts.kernel.id == "6.1-amd64" { (12, 16) } else { (13, 6) };
        for (i, r) in g.facts.regions.iter().enumerate() {
            if r.kind != "zone-device" {
                continue;
            }
            let init = r.init_start_pfn.unwrap_or(r.start_pfn);
            let pages = g.pages(i);
            let (_, p) = pages.iter().find(|(pfn, _)| *pfn == init).expect("the first initialized page");
            // Below the last_cpupid field (bits 50..30).
            let low = word(p, 0) & 0x3fff_ffff;
            let order = r.vmemmap_shift.unwrap_or(0);
            let expect = 1 << reserved | if order > 0 { 1 << head } else { 0 };
            assert_eq!(low, expect, "{}: flags of the first page", g.dir.display());
            if order == 0 || g.facts.kernel.id != "6.1-amd64" {
                continue;
            }
            let (_, p1) =
                pages.iter().find(|(pfn, _)| *pfn == init + 1).expect("page[1] is in every extract");
            assert_eq!(word(p1, 0) & 0x3fff_ffff, 1 << reserved, "{}: page[1] flags", g.dir.display());
            assert_eq!(word(p1, 16), 0xffff_ffff_0000_0001 | u64::from(order) << 8, "{}", g.dir.display());
            assert_eq!(word(p1, 24), (1u64 << order) << 32, "{}", g.dir.display());
            seen += 1;
        }
    }
    assert!(seen >= 5, "6.1 compound extracts: {seen}");
}

/// The oracle itself: every committed kernel extract equals the model byte for byte (after
/// pointer normalization), struct page for struct page and pageblock for pageblock. Only the
/// fields the model declares history-dependent (the `lru.prev` that the buddy allocator leaves
/// in the tails of gigantic pages allocated at run time) and the struct pages it declares stale
/// are left out, and those are bounded here so that the exclusions cannot grow unseen.
#[test]
fn every_extract_equals_the_model() {
    let mut failures = Vec::new();
    let mut compared = 0u64;
    for g in load_all() {
        let res =
            g.compare_with_model().unwrap_or_else(|e| panic!("{}: the model failed: {e:#}", g.dir.display()));
        if kernel_oracle::compare::differs(&res) {
            failures.push(kernel_oracle::compare::render(&res, false));
        }
        // Run-time pages, and boot-time 2 MiB pages, come from the buddy allocator.
        let runtime =
            g.facts.regions.iter().any(|r| r.boot == Some(false) || r.hstate.as_deref() == Some("2M"));
        for reg in &res.regions {
            compared += reg.pages;
            assert!(
                reg.stale_fields.is_empty() || runtime,
                "{}: {}: fields left out of a boot-time configuration: {:?}",
                g.dir.display(),
                reg.label,
                reg.stale_fields
            );
            for (field, n) in &reg.stale_fields {
                assert_eq!(field, "lru.prev", "{}", g.dir.display());
                assert!(*n < reg.pages, "{}: {}: every struct page left out", g.dir.display(), reg.label);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} extracts differ from the model:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(compared > 5_000, "only {compared} struct pages compared");
}

/// `compare DIR` writes nothing: the model runs in memory. A `DIR/model` that is a link to a
/// user's directory (where older versions put the model's dumps, removing what was there) is
/// left alone, and so is everything it points to.
#[cfg(unix)]
#[test]
fn comparing_a_dump_directory_writes_and_deletes_nothing() {
    let g = load_all().into_iter().find(|g| g.facts.config == "fsdax-mem").expect("fsdax-mem extract");
    let dump = tempfile::Builder::new().prefix("oracle-compare-").tempdir().unwrap();
    let victim = tempfile::Builder::new().prefix("oracle-victim-").tempdir().unwrap();
    std::fs::write(victim.path().join("region-0"), "a user's file").unwrap();
    g.facts.save(dump.path()).unwrap();
    for (i, r) in g.facts.regions.iter().enumerate() {
        let mut bytes = vec![0u8; (r.nr_pages * g.facts.struct_page_size) as usize];
        for (pfn, p) in g.pages(i) {
            let k = ((pfn - r.start_pfn) * g.facts.struct_page_size) as usize;
            bytes[k..k + p.len()].copy_from_slice(p);
        }
        std::fs::write(dump.path().join(&r.file), bytes).unwrap();
    }
    std::os::unix::fs::symlink(victim.path(), dump.path().join("model")).unwrap();
    let listing = |p: &std::path::Path| {
        let mut v: Vec<_> = std::fs::read_dir(p).unwrap().map(|e| e.unwrap().file_name()).collect();
        v.sort();
        v
    };
    let before = listing(dump.path());
    let res = kernel_oracle::compare::compare_dir(dump.path(), &g.facts).expect("the comparison runs");
    assert!(!res.regions.is_empty());
    assert_eq!(listing(dump.path()), before, "compare wrote into the dump directory");
    assert_eq!(listing(victim.path()), [std::ffi::OsString::from("region-0")]);
    assert_eq!(std::fs::read_to_string(victim.path().join("region-0")).unwrap(), "a user's file");
}

/// A dump directory's facts cannot make `compare` read outside the directory, nor read more
/// than the region's size.
#[test]
fn region_files_stay_inside_the_dump_directory() {
    let g = load_all().into_iter().find(|g| g.facts.config == "fsdax-mem").expect("fsdax-mem extract");
    let dump = tempfile::Builder::new().prefix("oracle-facts-").tempdir().unwrap();
    let mut facts = g.facts.clone();
    for name in ["../outside.bin", "/etc/hostname", "a/b.bin"] {
        facts.regions[0].file = name.into();
        let e = facts.region_bytes(dump.path(), 0).unwrap_err();
        assert!(e.to_string().contains("cannot name a file or directory"), "{name}: {e}");
    }
    // A link in the dump directory is not followed: the name came from the facts.
    let outside = tempfile::NamedTempFile::new().unwrap();
    std::os::unix::fs::symlink(outside.path(), dump.path().join("linked.bin")).unwrap();
    facts.regions[0].file = "linked.bin".into();
    let e = facts.region_bytes(dump.path(), 0).unwrap_err();
    assert!(e.to_string().contains("is a symbolic link, not a regular file"), "{e}");
    facts.regions[0].file = "region-0.bin".into();
    let size = (facts.regions[0].nr_pages * facts.struct_page_size) as usize;
    std::fs::write(dump.path().join("region-0.bin"), vec![0u8; size + 1]).unwrap();
    let e = facts.region_bytes(dump.path(), 0).unwrap_err();
    assert!(format!("{e:#}").contains("larger than"), "{e:#}");
}

/// Memory hotplug on 6.10+ kernels (7.2 and 6.12): the struct page one pageblock into every
/// free `MAX_PAGE_ORDER` block of a hot-added range holds `LIST_POISON1`/`LIST_POISON2` from
/// `__isolate_free_page()` (6.1: its own `lru` self pointers), the block heads are free buddies linked in ascending pfn order, and
/// the blocks the guest allocated from after onlining (left out of the comparison) are few: the
/// guest stops right after onlining.
#[test]
fn hot_added_blocks_hold_the_isolation_poison_and_few_are_allocated() {
    let mut seen = 0;
    for g in load_all() {
        for (i, r) in g.facts.regions.iter().enumerate().filter(|(_, r)| r.kind == "hotplug") {
            seen += 1;
            assert!(r.allocated_blocks.len() <= 4, "{}: {:?}", g.dir.display(), r.allocated_blocks);
            let pages: std::collections::BTreeMap<u64, &[u8]> = g.pages(i).into_iter().collect();
            let max_order = kernel_oracle::compare::model::kernel_config(&g.facts).unwrap().0.max_page_order;
            let (block, pb) = (1u64 << max_order, 1u64 << g.facts.pageblock_order);
            let first = (r.start_pfn..r.start_pfn + r.nr_pages)
                .step_by(block as usize)
                .find(|b| !r.allocated_blocks.contains(b))
                .expect("a free block");
            let head = pages[&first];
            assert!(kernel_oracle::facts::read::is_free_block_head(head, max_order), "{}", g.dir.display());
            // Linked to the block above it: as its `lru.next` where a block holds two pageblocks
            // (ascending pfn order on the list), as its `lru.prev` where it holds eight (ppc64el,
            // 4 and 64 KiB pages: descending), as the model does.
            let next = g.facts.vmemmap_base + (first + block) * 64 + 8;
            let at = if block / pb > 2 { 16 } else { 8 };
            assert_eq!(word(head, at), next, "{}: the neighbour block on the list", g.dir.display());
            // From 6.10 (7.2, 6.12) the isolation poison; 6.1 leaves the self pointers. A block
            // of one pageblock (arm64 16K: both orders 11) is never split, so has none.
            if pb == block {
                continue;
            }
            let second = pages[&(first + pb)];
            let own = g.facts.vmemmap_base + (first + pb) * 64 + 8;
            let expect = if g.facts.kernel.id.starts_with("6.1-") {
                (own, own)
            } else {
                kernel_oracle::compare::model::kernel_config(&g.facts).unwrap().0.list_poison()
            };
            assert_eq!((word(second, 8), word(second, 16)), expect, "{}", g.dir.display());
        }
    }
    assert!(seen >= 8, "{seen} hotplug extracts");
}

/// The oracle catches a wrong model: the same kernel bytes compared with a model told the
/// wrong release (6.1's hotplug free path and page_type encoding for a 7.2 guest), and with a
/// corrupted extract (one word of one free block's head), differ.
#[test]
fn a_wrong_model_expectation_or_a_corrupted_extract_is_caught() {
    let g = load_all()
        .into_iter()
        .find(|g| g.facts.kernel.id == "7.2-amd64" && g.facts.config == "hotplug-256m-normal")
        .expect("the 7.2 hotplug extract");
    assert!(!kernel_oracle::compare::differs(&g.compare_with_model().unwrap()));
    let mut wrong = g.clone();
    wrong.facts.kernel.release = "6.1.0-50-amd64".into();
    let res = wrong.compare_with_model().unwrap();
    assert!(kernel_oracle::compare::differs(&res), "{}", kernel_oracle::compare::render(&res, false));
    let mut corrupt = g.clone();
    let run =
        corrupt.extract.regions[0].runs.iter().position(|r| r.nr_pages == 6).expect("a free block's run");
    corrupt.bytes[0][run][2 * 64 + 16] ^= 0x40; // the block head's `lru.prev`: one struct page off
    let res = corrupt.compare_with_model().unwrap();
    assert!(kernel_oracle::compare::differs(&res));
}

/// Facts a user edited: values near `u64::MAX`, regions larger than `compare` holds, names that
/// would leave their directory. Each is an error naming what is wrong, from `Facts::load`
/// before any region file is read, never a panic (nor an overflow, nor an allocation of the
/// size the facts claim).
#[test]
fn hostile_facts_are_refused_before_the_regions_are_read() {
    use kernel_oracle::facts::{Facts, MAX_REGION_PAGES, MAX_TOTAL_PAGES};
    let g = load_all().into_iter().find(|g| g.facts.config == "fsdax-mem").expect("fsdax-mem extract");
    type Edit = (&'static str, fn(&mut Facts));
    let edits: [Edit; 11] = [
        ("start_pfn", |f| f.regions[0].start_pfn = u64::MAX - f.regions[0].nr_pages + 1),
        ("nr_pages", |f| f.regions[0].nr_pages = MAX_REGION_PAGES + 1),
        ("total", |f| {
            let r = f.regions[0].clone();
            f.regions = vec![r; (MAX_TOTAL_PAGES / f.regions[0].nr_pages + 1) as usize];
        }),
        ("kernel id", |f| f.kernel.id = "a/b".into()),
        ("config", |f| f.config = "../../x".into()),
        ("kind", |f| f.regions[0].kind = "other".into()),
        ("init_start_pfn", |f| f.regions[0].init_start_pfn = Some(u64::MAX)),
        ("struct_page_size", |f| f.struct_page_size = 72),
        ("vmemmap", |f| (f.vmemmap_base, f.vmemmap_size) = (1, u64::MAX)),
        ("vmemmap_gpa", |f| f.regions[0].vmemmap_gpa = vec![Some(0); 1 << 20]),
        ("allocated_blocks", |f| f.regions[0].allocated_blocks = vec![u64::MAX]),
    ];
    for (what, edit) in edits {
        let dump = tempfile::Builder::new().prefix("oracle-hostile-facts-").tempdir().unwrap();
        let mut facts = g.facts.clone();
        edit(&mut facts);
        facts.save(dump.path()).unwrap();
        for r in facts.regions.iter().filter(|r| r.nr_pages <= 1 << 20).take(1) {
            std::fs::write(dump.path().join(&r.file), vec![0u8; r.nr_pages as usize * 64]).unwrap();
        }
        let got = std::panic::catch_unwind(|| {
            let f = Facts::load(dump.path())?;
            kernel_oracle::compare::compare_dir(dump.path(), &f).map(drop)
        });
        let e = match got {
            Ok(Err(e)) => format!("{e:#}"),
            Ok(Ok(())) => panic!("{what}: accepted"),
            Err(_) => panic!("{what}: panicked"),
        };
        assert!(e.starts_with(&dump.path().join("facts.json").display().to_string()), "{what}: {e}");
    }
}

/// `check` of a directory without extracts fails: an empty or mistyped `--golden` must not
/// pass as "0 extracts checked"; nor does a configuration directory without its facts.
#[test]
fn checking_no_golden_extract_is_an_error() {
    let empty = tempfile::Builder::new().prefix("oracle-golden-empty-").tempdir().unwrap();
    let e = kernel_oracle::compare::golden::check_all(empty.path(), |_| {}).unwrap_err().to_string();
    assert!(e.contains("no golden extracts (expected"), "{e}");
    let e = kernel_oracle::compare::golden::check_all(&empty.path().join("nope"), |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.ends_with("nope: does not exist"), "{e}");
    std::fs::create_dir_all(empty.path().join("7.2-amd64/fsdax-mem")).unwrap();
    let e = kernel_oracle::compare::golden::check_all(empty.path(), |_| {}).unwrap_err().to_string();
    assert!(e.contains("fsdax-mem: holds no facts.json"), "{e}");
}

/// Without the guest's placement (`dump hugetlb --count`, the folios where memblock's top-down
/// allocation puts them), the model links the boot-time folios on each node's free list in
/// the kernel's order: on 6.1 in descending pfn order (each folio enqueued as it was gathered),
/// on 6.12 and 7.2 in ascending (`prep_and_add_bootmem_folios()`), from 7.3 descending again
/// (`huge_boot_pages` built with `list_add_tail()`).
#[test]
fn counted_boot_folios_are_linked_in_the_kernels_order() {
    use kernel_oracle::compare::model::{ModelDump, What, hugetlb_spec};
    let mut checked = 0;
    for g in load_all() {
        // Gigantic pages: memblock's (2 MiB boot-time pages come from the buddy allocator, in
        // its order, which only the guest's placement gives).
        let gigantic =
            |r: &&kernel_oracle::facts::Region| r.boot == Some(true) && r.hstate.as_deref() == Some("1G");
        let folios: Vec<_> = g.facts.regions.iter().filter(gigantic).filter_map(|r| r.folio).collect();
        if folios.len() < 2 || folios.iter().any(|f| f.list_pos.is_none()) {
            continue;
        }
        let mut kernel: Vec<(u32, u32, u64)> =
            folios.iter().map(|f| (f.nid, f.list_pos.unwrap_or(0), f.head_pfn)).collect();
        kernel.sort_unstable();
        let mut spec = hugetlb_spec(&g.facts).expect("spec");
        let What::Hugetlb(h) = &mut spec.what else { panic!("a hugetlb spec") };
        h.placed.clear();
        let md = ModelDump::run(&spec).expect("model");
        let page = |pfn: u64| {
            let i = (pfn - md.start_pfn) as usize * 64;
            (word(&md.bytes[i..], 8), word(&md.bytes[i..], 16))
        };
        let node_of = |pfn: u64| md.vmemmap_base + pfn * 64 + 8;
        let model_folios: Vec<(u64, u64)> = md.meta.detail["folios"]
            .as_array()
            .expect("folios")
            .iter()
            .map(|f| (f["nid"].as_u64().unwrap_or(0), f["head_pfn"].as_u64().unwrap_or(0)))
            .collect();
        // Each node's list as ranks by pfn (the model puts the folios where its own layout
        // does, so the pfns differ; the order is what the release decides).
        let ranks = |order: &[u64]| {
            let mut sorted = order.to_vec();
            sorted.sort_unstable();
            order.iter().map(|p| sorted.iter().position(|s| s == p).unwrap_or(0)).collect::<Vec<_>>()
        };
        for nid in 0..=kernel.iter().map(|k| k.0).max().unwrap_or(0) {
            let kernel_heads: Vec<u64> = kernel.iter().filter(|k| k.0 == nid).map(|k| k.2).collect();
            let heads: Vec<u64> =
                model_folios.iter().filter(|f| f.0 == u64::from(nid)).map(|f| f.1).collect();
            let is_head_node = |v: u64| heads.iter().any(|&h| node_of(h) == v);
            // The first folio: the one whose prev is the list head; then follow next.
            let mut cur = heads.iter().copied().find(|&h| !is_head_node(page(h).1));
            let mut model = Vec::new();
            while let Some(h) = cur {
                model.push(h);
                let next = page(h).0;
                cur =
                    heads.iter().copied().find(|&x| node_of(x) == next).filter(|_| model.len() < heads.len());
            }
            assert_eq!(ranks(&model), ranks(&kernel_heads), "{}: node {nid}", g.dir.display());
        }
        checked += 1;
    }
    assert!(checked > 0, "no extract with boot-time folios and their list positions");
}

/// 6.12's HVO maps the tail vmemmap pages of a 2 MiB folio onto the folio's first frame, so a
/// tail whose `lru.prev` holds the `LIST_POISON2` of an earlier `list_del()` (boot-time 2 MiB
/// pages come from the buddy allocator) shows it through every alias of that slot too: the model
/// declares the word history-dependent in the aliases as well, and an alias that disagrees with
/// the slot it is read through is still a difference.
#[test]
fn a_tails_buddy_history_shows_through_its_aliases() {
    let g = load_all()
        .into_iter()
        .find(|g| g.facts.kernel.id == "6.12-amd64" && g.facts.config == "hugetlb-2m-boot-hvo-on")
        .expect("the 6.12 boot-time 2 MiB HVO extract");
    let region = g.facts.regions.iter().position(|r| r.folio.is_some()).expect("a folio region");
    let head = g.facts.regions[region].start_pfn;
    let run = g.extract.regions[region]
        .runs
        .iter()
        .position(|r| r.start_pfn == head && r.nr_pages > 69)
        .expect("the folio's first struct pages");
    let poison = |g: &mut kernel_oracle::compare::golden::Golden, idx: usize| {
        let at = idx * 64 + 16;
        g.bytes[region][run][at..at + 8].copy_from_slice(&0xdead_0000_0000_0122u64.to_le_bytes());
    };
    // Tail 5 and its alias 69 (the second vmemmap page maps the first frame).
    let mut history = g.clone();
    poison(&mut history, 5);
    poison(&mut history, 69);
    let res = history.compare_with_model().unwrap();
    assert!(!kernel_oracle::compare::differs(&res), "{}", kernel_oracle::compare::render(&res, false));
    let left_out: u64 = res.regions.iter().flat_map(|r| &r.stale_fields).map(|(_, n)| n).sum();
    assert_eq!(left_out, 2, "{:?}", res.regions.iter().map(|r| &r.stale_fields).collect::<Vec<_>>());
    // The alias alone: not what one frame read twice can hold.
    let mut torn = g.clone();
    poison(&mut torn, 69);
    let res = torn.compare_with_model().unwrap();
    let failed = torn.checks().iter().any(|c| c.failure.is_some());
    assert!(kernel_oracle::compare::differs(&res) || failed, "an alias unlike its frame passed");
}

/// ZONE_DEVICE vmemmap dedup is the architecture's choice on 7.x: with
/// `ARCH_WANT_OPTIMIZE_DAX_VMEMMAP` (x86-64, riscv64) vmemmap pages 2.. of a 2 MiB compound page
/// mapped with struct pages in RAM share vmemmap page 1's frame; arm64 does not select it, so
/// every vmemmap page has its own frame and all 512 struct pages are written.
#[test]
fn dax_vmemmap_dedup_follows_the_architecture_option() {
    let mut seen = std::collections::BTreeSet::new();
    for g in load_all().into_iter().filter(|g| g.facts.kernel.id.starts_with("7.")) {
        for (i, r) in g.facts.regions.iter().enumerate() {
            let c = r.vmemmap_shift.map_or(1, |s| 1u64 << s);
            if r.kind != "zone-device"
                || c != 512
                || r.altmap.is_some()
                || g.facts.config.contains("early-section")
            {
                continue;
            }
            let init = r.init_start_pfn.unwrap_or(r.start_pfn);
            let last_head = init + (r.start_pfn + r.nr_pages - 1 - init) / c * c;
            let vpage = last_head * 64 / 4096;
            let frames = &g.extract.regions[i].gpa;
            let (one, two) = (frames[&(vpage + 1)], frames[&(vpage + 2)]);
            let option =
                g.facts.kernel.kconfig.get("CONFIG_ARCH_WANT_OPTIMIZE_DAX_VMEMMAP").is_some_and(|v| v == "y");
            assert_eq!(one == two, option, "{}: frames {one:#x} {two:#x}", g.dir.display());
            seen.insert((g.facts.kernel.arch.clone(), option));
        }
    }
    for want in [("amd64", true), ("riscv64", true), ("arm64", false)] {
        assert!(
            seen.contains(&(want.0.to_string(), want.1)),
            "no 2 MiB map=mem extract of {want:?}: {seen:?}"
        );
    }
}
