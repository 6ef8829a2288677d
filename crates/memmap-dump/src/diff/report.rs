//! A diff's report: the differing struct pages and fields counted by role, the pageblocks and
//! the hooks, shown as text or JSON.

use std::fmt;

use serde::Serialize;

use super::DiffResult;

/// One differing field of one struct page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldDiff {
    /// Field name.
    pub field: &'static str,
    /// Byte offset in the struct page.
    pub offset: usize,
    /// Its value in A.
    pub a: u64,
    /// Its value in B.
    pub b: u64,
}

/// A differing struct page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PageDiff {
    /// Its pfn.
    pub pfn: u64,
    /// Its role ([module documentation](super)).
    pub role: &'static str,
    /// The fields that differ.
    pub fields: Vec<FieldDiff>,
}

/// Differing struct pages of one role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoleCount {
    /// The role.
    pub role: &'static str,
    /// Differing struct pages in it.
    pub pages: u64,
    /// The first [`EXAMPLES_PER_ROLE`](super::EXAMPLES_PER_ROLE) of them.
    pub examples: Vec<PageDiff>,
}

/// Struct pages in which one field differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldCount {
    /// Field name.
    pub field: &'static str,
    /// Byte offset.
    pub offset: usize,
    /// Struct pages.
    pub pages: u64,
}

/// Pageblocks whose MOVABLE state differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PageblockDiff {
    /// First pfns of the pageblocks MOVABLE only in A.
    pub only_a: Vec<u64>,
    /// First pfns of the pageblocks MOVABLE only in B.
    pub only_b: Vec<u64>,
}

/// Hook counts of the two dumps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HookCounts {
    /// `cond_resched` calls in A and B.
    pub cond_resched: (u64, u64),
    /// `page_ref_set` events in A and B.
    pub page_ref_set: (u64, u64),
}

/// Everything two dumps differ in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiffReport {
    /// The one-line summary (first difference, or identical).
    #[serde(skip)]
    pub summary: DiffResult,
    /// Struct pages compared.
    pub pages: u64,
    /// Struct pages that differ.
    pub differing_pages: u64,
    /// The first differing struct page.
    pub first: Option<PageDiff>,
    /// Differing struct pages per field (a page counts once per field that differs).
    pub fields: Vec<FieldCount>,
    /// Differing struct pages per role, with examples.
    pub roles: Vec<RoleCount>,
    /// Pageblock differences (`None`: identical).
    pub pageblocks: Option<PageblockDiff>,
    /// Hook counts, when they differ.
    pub hooks: Option<HookCounts>,
    /// Preset names, when they differ (the dumps compared by content).
    pub configs: Option<(String, String)>,
}

impl DiffReport {
    /// Exit status: 0 identical (struct pages, pageblocks, hooks), 1 different.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        self.summary.exit_code()
    }

    /// The report as JSON (what `memmap-bench diff --json` prints).
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        if let Some(o) = v.as_object_mut() {
            o.insert("identical".into(), (self.exit_code() == 0).into());
        }
        v
    }
}

impl fmt::Display for DiffReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.summary)?;
        if let Some((a, b)) = &self.configs {
            writeln!(
                f,
                "note: presets {a} (A) and {b} (B) differ by name; compared by what the dumps contain"
            )?;
        }
        if self.differing_pages > 0 {
            let fields: Vec<String> =
                self.fields.iter().map(|c| format!("{} {}", c.field, c.pages)).collect();
            writeln!(f, "by field: {}", fields.join(", "))?;
            for r in &self.roles {
                writeln!(f, "role {}: {} struct page(s)", r.role, r.pages)?;
                for e in &r.examples {
                    write!(f, "  pfn {:#x}:", e.pfn)?;
                    for d in &e.fields {
                        write!(f, " {} A = {:#x} B = {:#x};", d.field, d.a, d.b)?;
                    }
                    writeln!(f)?;
                }
            }
        }
        if let Some(p) = &self.pageblocks {
            let show = |v: &[u64]| v.iter().take(8).map(|x| format!("{x:#x}")).collect::<Vec<_>>().join(" ");
            writeln!(
                f,
                "pageblocks: {} MOVABLE only in A ({}), {} only in B ({})",
                p.only_a.len(),
                show(&p.only_a),
                p.only_b.len(),
                show(&p.only_b)
            )?;
        }
        if let Some(h) = &self.hooks {
            writeln!(
                f,
                "hooks: cond_resched {} (A) vs {} (B), page_ref_set {} vs {}",
                h.cond_resched.0, h.cond_resched.1, h.page_ref_set.0, h.page_ref_set.1
            )?;
        }
        Ok(())
    }
}
