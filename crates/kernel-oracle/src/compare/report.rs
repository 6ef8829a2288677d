//! The text report of a configuration's comparison: whether it differs, the one-line verdict
//! and the full rendering.

use std::fmt::Write as _;

use super::DirResult;

/// Whether any struct page or pageblock differs from the model.
#[must_use]
pub fn differs(r: &DirResult) -> bool {
    r.regions.iter().any(|x| x.differing_pages > 0 || x.pageblocks.as_ref().is_some_and(|d| !d.is_empty()))
}

/// One-line verdict.
#[must_use]
pub fn verdict(r: &DirResult) -> String {
    let diff: u64 = r.regions.iter().map(|x| x.differing_pages).sum();
    let pb: usize = r.regions.iter().filter_map(|x| x.pageblocks.as_ref()).map(Vec::len).sum();
    let pages: u64 = r.regions.iter().map(|x| x.pages).sum();
    let checks_ok = r.checks.iter().all(|c| c.failure.is_none());
    let groups: usize = r.regions.iter().map(|x| x.groups.len()).sum();
    format!(
        "{} of {pages} struct pages differ ({groups} difference groups), {pb} pageblock types differ; class checks {}",
        diff,
        if checks_ok { "pass" } else { "FAIL" }
    )
}

/// The report of one configuration.
#[must_use]
pub fn render(r: &DirResult, verbose: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "### {}", r.label);
    for w in &r.warnings {
        let _ = writeln!(s, "kernel warning: {w}");
    }
    for c in &r.checks {
        let _ = writeln!(s, "check {}: {}", c.name, c.failure.as_deref().unwrap_or("ok"));
    }
    // One model run covers every folio of a hugetlb configuration: its command once.
    let mut shown: Option<&[String]> = None;
    for reg in &r.regions {
        let _ = writeln!(s, "- {}: {} of {} struct pages differ", reg.label, reg.differing_pages, reg.pages);
        if shown != Some(reg.model_argv.as_slice()) {
            let _ = writeln!(s, "  model: memmap-bench {}", reg.model_argv.join(" "));
            shown = Some(&reg.model_argv);
        }
        if reg.stale_pages > 0 {
            let _ = writeln!(
                s,
                "  {} struct pages the kernel leaves as they were (not compared: they hold what the memory held before)",
                reg.stale_pages
            );
        }
        if reg.allocated_pages > 0 {
            let _ = writeln!(
                s,
                "  {} struct pages of blocks the guest allocated from after onlining (their heads are no free MAX_PAGE_ORDER block; not compared, the model takes the blocks off its free list)",
                reg.allocated_pages
            );
        }
        for (field, n) in &reg.stale_fields {
            let _ = writeln!(
                s,
                "  {field} of {n} struct pages holds a value the allocator left there (declared by the model, not compared)"
            );
        }
        match &reg.pageblocks {
            Some(d) if d.is_empty() => {
                let _ = writeln!(s, "  pageblock migrate types: identical");
            }
            Some(d) => {
                let _ = writeln!(s, "  pageblock migrate types: {} differ; first: {}", d.len(), d[0]);
            }
            None => {}
        }
        if let Some(f) = &reg.first {
            let _ = writeln!(
                s,
                "  first difference at pfn {:#x} ({}), field {} (byte {}): kernel = {:#018x}, model = {:#018x}",
                f.pfn, f.role, f.field, f.offset, f.kernel, f.model
            );
        }
        let limit = if verbose { usize::MAX } else { 12 };
        for g in reg.groups.iter().take(limit) {
            let _ = writeln!(
                s,
                "  | {} | {} | kernel {} | model {} | {} pages, pfns {:#x}..={:#x} |",
                g.role, g.field, g.kernel, g.model, g.count, g.first_pfn, g.last_pfn
            );
        }
        if reg.groups.len() > limit {
            let _ = writeln!(s, "  ... {} more groups (--verbose)", reg.groups.len() - limit);
        }
    }
    s
}
