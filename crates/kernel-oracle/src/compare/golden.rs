//! Golden extracts: small compressed pieces of real kernel dumps committed to the repository,
//! so that `cargo test` checks real kernel bytes offline.
//!
//! `golden/<kernel>/<config>/` holds `facts.json` (the [`Facts`], frames emptied, host paths as
//! `$CACHE`), `extract.json` (per region the pfn runs extracted and their vmemmap frames) and
//! `pages.bin.gz` (the runs' struct pages). The runs are the region's first struct pages, its first
//! compound page (at most 130 struct pages), the boundary to the next, a pageblock boundary, the
//! last compound page and the region's end.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};

use crate::compare::{Check, Geometry, PageSet, class_checks};
use crate::facts::{Facts, JSON_LIMITS, MAX_JSON_BYTES, MAX_PAGES_BYTES, Region};

const SP: u64 = 64;
/// Struct pages kept from the start of a compound page.
const HEAD_RUN: u64 = 130;

/// A run of consecutive pfns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    /// First pfn.
    pub start_pfn: u64,
    /// Struct pages.
    pub nr_pages: u64,
}

/// The extract of one region.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionExtract {
    /// Runs, ascending and disjoint.
    pub runs: Vec<Run>,
    /// Vmemmap page number (`pfn * 64 / 4096`) to guest-physical frame, for the runs' pages.
    pub gpa: BTreeMap<u64, u64>,
}

/// `extract.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extract {
    /// Per region of the facts, in order.
    pub regions: Vec<RegionExtract>,
}

/// The runs kept for region `r` with `MAX_PAGE_ORDER` `max_order` and `pageblock_order` `pb_order`.
#[must_use]
pub fn runs_for(r: &Region, max_order: u32, pb_order: u32) -> Vec<Run> {
    let geo = Geometry::of(r);
    let (start, end) = (r.start_pfn, r.start_pfn + r.nr_pages);
    let init = geo.init_start;
    let c = geo.compound;
    let mut v: Vec<(u64, u64)> = vec![(start, start + 4)];
    if init > start + 2 {
        v.push((init - 2, init));
    }
    v.push((init, init + c.min(HEAD_RUN)));
    if c > HEAD_RUN {
        v.push((init + c - 2, init + c + 2));
    }
    let pb = (init + HEAD_RUN).next_multiple_of(512);
    v.push((pb - 2, pb + 2));
    if end > init {
        let last_head = init + (end - 1 - init) / c * c;
        v.push((last_head, last_head + c.min(HEAD_RUN)));
    }
    v.push((end.saturating_sub(4), end));
    if r.kind == "hotplug" {
        // The first and the last free MAX_PAGE_ORDER block: head (with its free-list links) and
        // the struct page one pageblock in (the list poison), and a head the guest allocated.
        let (block, pb) = (1u64 << max_order, 1u64 << pb_order);
        let blocks = (start.next_multiple_of(block)..end).step_by(block as usize);
        let free: Vec<u64> = blocks.filter(|b| !r.allocated_blocks.contains(b)).collect();
        for b in [free.first(), free.last()].into_iter().flatten() {
            v.push((b.saturating_sub(2), b + 4));
            v.push((b + pb - 2, b + pb + 2));
        }
        if let Some(&a) = r.allocated_blocks.last() {
            v.push((a, a + 2));
        }
    }
    let mut v: Vec<(u64, u64)> =
        v.into_iter().map(|(a, b)| (a.max(start), b.min(end))).filter(|(a, b)| a < b).collect();
    v.sort();
    let mut out: Vec<Run> = Vec::new();
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.start_pfn + last.nr_pages => {
                let e = (last.start_pfn + last.nr_pages).max(b);
                last.nr_pages = e - last.start_pfn;
            }
            _ => out.push(Run { start_pfn: a, nr_pages: b - a }),
        }
    }
    out
}

/// Writes the extract of dump directory `dump` into `golden/<kernel>/<config>/`.
///
/// # Errors
///
/// I/O errors or dumps that disagree with their facts.
pub fn write(dump: &Path, facts: &Facts, golden: &Path) -> Result<()> {
    // Both names come from the facts: one plain component each, so the extract lands where
    // `check` looks (`golden/<kernel>/<config>`).
    let kernel = crate::files::name("the facts' kernel id", &facts.kernel.id)?;
    let config = crate::files::name("the facts' configuration", &facts.config)?;
    let out = crate::files::create_dirs_below(golden, &Path::new(kernel).join(config))?;
    let mut pages = Vec::new();
    let mut regions = Vec::new();
    let max_order = crate::compare::model::kernel_config(facts)?.0.max_page_order;
    for (i, r) in facts.regions.iter().enumerate() {
        let bytes = facts.region_bytes(dump, i)?;
        let runs = runs_for(r, max_order, facts.pageblock_order);
        let first_vpage = r.start_pfn * SP / 4096;
        let mut gpa = BTreeMap::new();
        for run in &runs {
            let lo = (run.start_pfn - r.start_pfn) as usize * SP as usize;
            pages.extend_from_slice(&bytes[lo..lo + run.nr_pages as usize * SP as usize]);
            for pfn in run.start_pfn..run.start_pfn + run.nr_pages {
                let vp = pfn * SP / 4096;
                if let Some(Some(g)) = r.vmemmap_gpa.get((vp - first_vpage) as usize) {
                    gpa.insert(vp, *g);
                }
            }
        }
        regions.push(RegionExtract { runs, gpa });
    }
    let mut reduced = facts.clone();
    for r in &mut reduced.regions {
        r.vmemmap_gpa.clear();
    }
    let cache_prefix = reduced
        .qemu_argv
        .iter()
        .find_map(|a| a.find("/kernels/").map(|i| a[..i].to_string()))
        .unwrap_or_default();
    if !cache_prefix.is_empty() {
        for a in &mut reduced.qemu_argv {
            *a = a.replace(&cache_prefix, "$CACHE");
        }
    }
    reduced.save(&out)?;
    let extract = serde_json::to_string_pretty(&Extract { regions })? + "\n";
    crate::files::write_file(&out.join("extract.json"), extract.as_bytes())?;
    let mut gz = GzEncoder::new(Vec::new(), Compression::best());
    gz.write_all(&pages)?;
    crate::files::write_file(&out.join("pages.bin.gz"), &gz.finish()?)?;
    eprintln!("  golden: {} ({} struct pages)", out.display(), pages.len() / SP as usize);
    Ok(())
}

/// A golden extract read back.
#[derive(Debug, Clone)]
pub struct Golden {
    /// Its directory.
    pub dir: PathBuf,
    /// The reduced facts.
    pub facts: Facts,
    /// The runs.
    pub extract: Extract,
    /// Per region, per run, the struct page bytes.
    pub bytes: Vec<Vec<Vec<u8>>>,
}

impl Golden {
    /// Reads `dir` (`facts.json`, `extract.json`, `pages.bin.gz`, each a regular file within
    /// its limit) and checks it with [`Golden::parse`].
    ///
    /// # Errors
    ///
    /// Missing, oversized or malformed files, or contents that disagree.
    pub fn load(dir: &Path) -> Result<Golden> {
        let read = |name: &str, max| memmap_dump::read_file(&dir.join(name), max, memmap_dump::Links::Follow);
        let facts = read("facts.json", MAX_JSON_BYTES)?;
        let extract = read("extract.json", MAX_JSON_BYTES)?;
        let pages = read("pages.bin.gz", MAX_PAGES_BYTES)?;
        Golden::parse(dir, &facts, &extract, &pages)
    }

    /// A golden extract from the contents of its three files (`dir` names it in errors), what
    /// `kernel-oracle check` reads. Any bytes give either an extract whose methods cannot panic and
    /// allocate within the limits of [`crate::facts`], or an error: sizes and geometry are checked
    /// before anything is allocated from them.
    ///
    /// # Errors
    ///
    /// Malformed, oversized or inconsistent contents.
    pub fn parse(dir: &Path, facts: &[u8], extract: &[u8], pages_gz: &[u8]) -> Result<Golden> {
        let invalid = |what: String| anyhow!("{}: {what}", dir.display());
        let too_large =
            |name: &str, limit: u64| anyhow!("{}: larger than {limit} bytes", dir.join(name).display());
        for (name, bytes, limit) in [
            ("facts.json", facts, MAX_JSON_BYTES),
            ("extract.json", extract, MAX_JSON_BYTES),
            ("pages.bin.gz", pages_gz, MAX_PAGES_BYTES),
        ] {
            if bytes.len() as u64 > limit {
                return Err(too_large(name, limit));
            }
        }
        for (name, bytes) in [("facts.json", facts), ("extract.json", extract)] {
            memmap_dump::check_json(bytes, &JSON_LIMITS, &dir.join(name))?;
        }
        let json_error = |name: &str, e| anyhow!("parsing {}: {e}", dir.join(name).display());
        let facts: Facts = serde_json::from_slice(facts).map_err(|e| json_error("facts.json", e))?;
        if facts.format != crate::facts::FORMAT {
            return Err(invalid(format!(
                "facts format {} (expected {})",
                facts.format,
                crate::facts::FORMAT
            )));
        }
        let extract: Extract = serde_json::from_slice(extract).map_err(|e| json_error("extract.json", e))?;
        validate(&facts, &extract).map_err(invalid)?;
        let raw = memmap_dump::read_capped(GzDecoder::new(pages_gz), MAX_PAGES_BYTES, pages_gz.len() as u64)
            .map_err(|e| anyhow!("decompressing {}: {e}", dir.join("pages.bin.gz").display()))?
            .ok_or_else(|| too_large("pages.bin.gz", MAX_PAGES_BYTES))?;
        let mut off = 0usize;
        let mut bytes = Vec::new();
        for e in &extract.regions {
            let mut per_run = Vec::new();
            for run in &e.runs {
                // Bounded by the region (validated), so no overflow.
                let n = run.nr_pages as usize * SP as usize;
                let chunk =
                    raw.get(off..off + n).ok_or_else(|| invalid("pages.bin.gz too short".to_string()))?;
                per_run.push(chunk.to_vec());
                off += n;
            }
            bytes.push(per_run);
        }
        if off != raw.len() {
            return Err(invalid(format!("pages.bin.gz has {} bytes, the runs {off}", raw.len())));
        }
        Ok(Golden { dir: dir.to_path_buf(), facts, extract, bytes })
    }

    /// The struct pages of region `i` as `(pfn, bytes)`.
    #[must_use]
    pub fn pages(&self, i: usize) -> Vec<(u64, &[u8])> {
        let mut v = Vec::new();
        for (run, b) in self.extract.regions[i].runs.iter().zip(&self.bytes[i]) {
            for (k, p) in b.chunks_exact(SP as usize).enumerate() {
                v.push((run.start_pfn + k as u64, p));
            }
        }
        v
    }

    /// Runs the model for every region (its dumps written under `model_dir`) and compares the
    /// extract's struct pages with it; the pfns outside the extract's runs are not compared.
    ///
    /// # Errors
    ///
    /// The model fails.
    pub fn compare_with_model(&self) -> Result<crate::compare::DirResult> {
        // The facts with each region's vmemmap frames from the extract (for the aliasing).
        let mut facts = self.facts.clone();
        for (r, e) in facts.regions.iter_mut().zip(&self.extract.regions) {
            let first = r.start_pfn * SP / 4096;
            let n = (r.start_pfn + r.nr_pages) * SP / 4096 - first + 1;
            r.vmemmap_gpa = (0..n).map(|k| e.gpa.get(&(first + k)).copied()).collect();
        }
        let regions = crate::compare::compare_regions(&facts, |i| {
            let r = &facts.regions[i];
            let n = r.nr_pages as usize;
            let mut bytes = vec![0u8; n * SP as usize];
            let mut known = vec![false; n];
            for (pfn, p) in self.pages(i) {
                let k = (pfn - r.start_pfn) as usize;
                bytes[k * SP as usize..(k + 1) * SP as usize].copy_from_slice(p);
                known[k] = true;
            }
            Ok((bytes, Some(known)))
        })?;
        Ok(crate::compare::DirResult {
            label: format!("{}/{}", facts.kernel.id, facts.config),
            regions,
            checks: self.checks(),
            warnings: facts.warnings.clone(),
        })
    }

    /// The class checks over the extract.
    #[must_use]
    pub fn checks(&self) -> Vec<Check> {
        let sets: Vec<PageSet<'_>> = self
            .facts
            .regions
            .iter()
            .enumerate()
            .map(|(i, r)| PageSet {
                region: r,
                pages: self.pages(i),
                gpa: self.extract.regions[i].gpa.clone(),
            })
            .collect();
        class_checks(&self.facts, &sets)
    }
}

/// The geometry checks of [`Golden::parse`]: [`Facts::validate`], then the runs in their regions.
fn validate(facts: &Facts, extract: &Extract) -> Result<(), String> {
    facts.validate()?;
    if extract.regions.len() != facts.regions.len() {
        return Err(format!("{} extracts for {} regions", extract.regions.len(), facts.regions.len()));
    }
    for (i, (r, e)) in facts.regions.iter().zip(&extract.regions).enumerate() {
        let end = r.start_pfn + r.nr_pages;
        for run in &e.runs {
            let run_end = run.start_pfn.checked_add(run.nr_pages);
            if run.start_pfn < r.start_pfn || run_end.is_none_or(|x| x > end) {
                return Err(format!(
                    "region {i} (pfn {:#x}, {} pages): run {:#x}+{} outside its region",
                    r.start_pfn, r.nr_pages, run.start_pfn, run.nr_pages
                ));
            }
        }
    }
    Ok(())
}

/// Every golden directory (`golden/<kernel>/<config>`) under `golden` (symbolic links are not
/// followed).
///
/// # Errors
///
/// `golden` is missing or not a directory, a directory cannot be read, or a configuration
/// directory holds no `facts.json` (it would be skipped silently otherwise).
pub fn dirs(golden: &Path) -> Result<Vec<PathBuf>> {
    let subdirs = |d: &Path| -> Result<Vec<PathBuf>> {
        let mut v = Vec::new();
        for e in fs::read_dir(d).with_context(|| format!("{}: cannot be listed", d.display()))? {
            let e = e.with_context(|| format!("{}: cannot be listed", d.display()))?;
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                v.push(e.path());
            }
        }
        Ok(v)
    };
    match fs::metadata(golden) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => bail!("{}: not a directory (a golden directory holds <kernel>/<config>/)", golden.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!("{}: does not exist", golden.display()),
        Err(e) => bail!("{}: {e}", golden.display()),
    }
    let mut out = Vec::new();
    for k in subdirs(golden)? {
        for c in subdirs(&k)? {
            if c.join(crate::compare::boot_golden::JSON_FILE).is_file() {
                // A boot configuration's extract ([`crate::compare::boot_golden`]).
                continue;
            }
            if !c.join("facts.json").is_file() {
                bail!(
                    "{}: holds no facts.json (a golden extract is facts.json, extract.json, pages.bin.gz; \
                     a boot extract boot.json, pages.bin.gz)",
                    c.display()
                );
            }
            out.push(c);
        }
    }
    out.sort();
    Ok(out)
}

/// The boot configurations' extracts under `golden` (`<kernel>/<config>/boot.json`), sorted.
///
/// # Errors
///
/// `golden` cannot be listed.
pub fn boot_dirs(golden: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for k in fs::read_dir(golden).with_context(|| format!("{}: cannot be listed", golden.display()))? {
        let k = k?.path();
        if !k.is_dir() {
            continue;
        }
        for c in fs::read_dir(&k).with_context(|| format!("{}: cannot be listed", k.display()))? {
            let c = c?.path();
            if c.join(crate::compare::boot_golden::JSON_FILE).is_file() {
                out.push(c);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Loads, checks and compares every extract with the model, handing each report to `report`;
/// returns how many passed.
///
/// # Errors
///
/// No extract at all, a malformed extract, a failed class check, or a difference from the model.
pub fn check_all(golden: &Path, mut report: impl FnMut(&str)) -> Result<usize> {
    let ds = dirs(golden)?;
    if ds.is_empty() {
        bail!(
            "{}: no golden extracts (expected {}/<kernel>/<config>/facts.json; write them with `run --golden` \
             or `golden`)",
            golden.display(),
            golden.display()
        );
    }
    let mut failures = Vec::new();
    for d in &ds {
        let g = Golden::load(d)?;
        for c in g.checks() {
            if let Some(f) = c.failure {
                failures.push(format!("{}: {}: {f}", d.display(), c.name));
            }
        }
        match g.compare_with_model() {
            Ok(res) => {
                let text = crate::compare::render(&res, true);
                report(&text);
                if crate::compare::differs(&res) {
                    failures.push(format!("{}: differs from the model:\n{text}", d.display()));
                }
            }
            Err(e) => failures.push(format!("{}: the model failed: {e:#}", d.display())),
        }
    }
    let boot = boot_dirs(golden)?;
    for d in &boot {
        let checked = crate::compare::boot_golden::load(d).and_then(|b| {
            let mode = crate::compare::boot::kernel_mode(&b.golden.cmdline);
            crate::compare::boot::compare_nodes(&b.cfg, b.golden.vmemmap_size, mode, &b.nodes)
        });
        match checked {
            Ok(res) => {
                let text = format!("== {}\n{}", d.display(), crate::compare::boot::render(&res));
                report(&text);
                if !crate::compare::boot::equal(&res) {
                    failures.push(format!("{}: differs from the model:\n{text}", d.display()));
                }
            }
            Err(e) => failures.push(format!("{}: {e:#}", d.display())),
        }
    }
    let n = ds.len() + boot.len();
    if failures.is_empty() {
        Ok(n)
    } else {
        bail!("{} of {n} golden extracts fail:\n{}", failures.len(), failures.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::Folio;

    fn region(start: u64, nr: u64, order: u32) -> Region {
        Region {
            folio: Some(Folio { head_pfn: start, order, nid: 0, list_pos: None }),
            ..Region::new("hugetlb", String::new(), start, nr, 0, 2)
        }
    }

    #[test]
    fn runs_are_disjoint_sorted_and_inside_the_region() {
        for (nr, order) in [(512u64, 9u32), (1 << 18, 18)] {
            let r = region(0x100000, nr, order);
            let runs = runs_for(&r, 10, 9);
            assert!(runs.windows(2).all(|w| w[0].start_pfn + w[0].nr_pages < w[1].start_pfn));
            assert!(
                runs.iter()
                    .all(|x| x.start_pfn >= r.start_pfn && x.start_pfn + x.nr_pages <= r.start_pfn + nr)
            );
            assert_eq!(runs[0].start_pfn, r.start_pfn);
            let total: u64 = runs.iter().map(|x| x.nr_pages).sum();
            assert!((130..=300).contains(&total), "{total} pages for order {order}");
        }
    }
}
