//! What the model's `meta.json` says beyond the struct pages: its kernel symbols, the struct
//! pages and fields it declares history-dependent, and its MOVABLE pageblocks (compared with
//! the kernel's).

use std::collections::BTreeMap;

use memmap_dump::DumpMeta;

use super::SP;
use crate::facts::Region;

/// The model's `kernel_symbols` (`"0x..."` address to name) from its `meta.json`.
pub(super) fn model_symbols(meta: &DumpMeta) -> BTreeMap<u64, String> {
    meta.detail
        .get("kernel_symbols")
        .and_then(serde_json::Value::as_object)
        .map(|o| {
            o.iter()
                .filter_map(|(a, n)| {
                    let a = u64::from_str_radix(a.strip_prefix("0x")?, 16).ok()?;
                    Some((a, n.as_str()?.to_string()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The model's `stale_pfn_ranges` (`[start, end)` pairs) from its `meta.json`.
pub(super) fn stale_ranges(meta: &DumpMeta) -> Vec<(u64, u64)> {
    meta.detail.get("stale_pfn_ranges").map(stale_ranges_in).unwrap_or_default()
}

/// A struct page field the model declares history-dependent (`meta.json`'s `stale_fields`): in
/// the listed struct pages the word at `offset` may hold one of `history_values` instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StaleField {
    pub(super) field: String,
    pub(super) offset: usize,
    pub(super) len: usize,
    pub(super) ranges: Vec<(u64, u64)>,
    pub(super) values: Vec<u64>,
}

/// The model's `stale_fields` from its `meta.json`.
pub(super) fn stale_fields(meta: &DumpMeta) -> Vec<StaleField> {
    meta.detail
        .get("stale_fields")
        .and_then(serde_json::Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| {
                    let offset = usize::try_from(f.get("offset")?.as_u64()?).ok()?;
                    let len = usize::try_from(f.get("len")?.as_u64()?).ok()?;
                    (offset + len <= SP && len == 8).then_some(())?;
                    Some(StaleField {
                        field: f.get("field")?.as_str()?.to_string(),
                        offset,
                        len,
                        ranges: stale_ranges_in(f.get("pfn_ranges")?),
                        values: f
                            .get("history_values")?
                            .as_array()?
                            .iter()
                            .filter_map(|v| u64::from_str_radix(v.as_str()?.strip_prefix("0x")?, 16).ok())
                            .collect(),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `[start, end)` pairs.
fn stale_ranges_in(v: &serde_json::Value) -> Vec<(u64, u64)> {
    v.as_array()
        .map(|a| a.iter().filter_map(|r| Some((r.get(0)?.as_u64()?, r.get(1)?.as_u64()?))).collect())
        .unwrap_or_default()
}

/// Compares the kernel's MOVABLE pageblocks with the model's but those `skip` names.
pub(super) fn compare_pageblocks(
    r: &Region,
    pb_order: u32,
    model_meta: &DumpMeta,
    skip: impl Fn(u64) -> bool,
) -> Option<Vec<String>> {
    let first = r.pageblock_first_pfn?;
    let model: std::collections::BTreeSet<u64> = model_meta.movable_pageblock_pfns.iter().copied().collect();
    let mut out = Vec::new();
    for (i, &mt) in r.pageblock_migratetypes.iter().enumerate() {
        let pfn = first + ((i as u64) << pb_order);
        if skip(pfn) {
            continue;
        }
        let k_movable = mt == 1;
        if k_movable != model.contains(&pfn) {
            out.push(format!(
                "pageblock {pfn:#x}: kernel migratetype {mt}, model {}",
                if model.contains(&pfn) { "MOVABLE" } else { "not MOVABLE" }
            ));
        }
    }
    Some(out)
}
