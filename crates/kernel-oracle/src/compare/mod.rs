//! The normalizing comparator: kernel struct pages against the model's, every byte, after
//! mapping pointers to symbols by class.
//!
//! Each 8-byte word becomes a [`Sym`]: a vmemmap pointer `page(+d)+off|tag` relative to the page
//! holding it, the region's pgmap `PGMAP`, a kernel-image pointer its `System.map` name, anything
//! else its raw value. Two regions match when every word's symbol is equal; the class checks
//! ([`class_checks`]) verify what the symbols assume (pgmap words equal, aliased vmemmap pages
//! identical, self pointers at their own list head, every tail resolving to its head).

use std::path::Path;

use anyhow::Result;

use crate::facts::Facts;

mod alias;
pub mod boot;
pub mod boot_golden;
pub mod boot_input;
pub mod boot_report;
mod checks;
mod geometry;
pub mod golden;
mod meta;
pub mod model;
mod pages;
mod regions;
mod report;
mod sym;

pub use alias::{aliased_vmemmap_pages, content_aliased};
pub use checks::{Check, PageSet, class_checks};
pub use geometry::{Geometry, field_name};
pub use pages::{FirstDiff, Group, compare_pages};
pub use regions::{KernelRegion, RegionResult, compare_regions};
pub use report::{differs, render, verdict};
pub use sym::{Normalizer, Sym, classify, kernel_normalizer};

/// Bytes per struct page.
const SP: usize = crate::facts::STRUCT_PAGE as usize;

use crate::facts::read::word;

/// Comparison of one configuration.
#[derive(Debug, Clone)]
pub struct DirResult {
    /// `kernel/config`.
    pub label: String,
    /// Per region.
    pub regions: Vec<RegionResult>,
    /// Kernel-side class checks.
    pub checks: Vec<Check>,
    /// Kernel warnings seen in the guest.
    pub warnings: Vec<String>,
}

/// Runs the model for every region of a dump directory and compares. Memory: every region's
/// struct pages once (at most [`crate::facts::MAX_TOTAL_PAGES`]) and the model's of one region.
///
/// # Errors
///
/// The dumps cannot be read or the model fails.
pub fn compare_dir(dir: &Path, facts: &Facts) -> Result<DirResult> {
    let mut all_bytes: Vec<Vec<u8>> = Vec::new();
    for i in 0..facts.regions.len() {
        all_bytes.push(facts.region_bytes(dir, i)?);
    }
    let sets: Vec<PageSet<'_>> =
        facts.regions.iter().zip(&all_bytes).map(|(r, b)| PageSet::whole(r, b)).collect();
    let checks = class_checks(facts, &sets);
    drop(sets);
    // Each region's bytes move into its comparison, which blanks them in place.
    let results = compare_regions(facts, |i| Ok((std::mem::take(&mut all_bytes[i]), None)))?;
    Ok(DirResult {
        label: format!("{}/{}", facts.kernel.id, facts.config),
        regions: results,
        checks,
        warnings: facts.warnings.clone(),
    })
}
