//! The page-by-page comparison of two sides' struct pages after normalization
//! ([`compare_pages`]), its differences grouped ([`Group`]) and the first one named
//! ([`FirstDiff`]).

use std::collections::BTreeMap;

use super::{Geometry, Normalizer, SP, Sym, classify, field_name, word};

/// One group of identical differences.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Page role (`head`, `tail (aliased vmemmap)`, ...).
    pub role: String,
    /// Field name.
    pub field: String,
    /// Kernel symbol.
    pub kernel: String,
    /// Model symbol.
    pub model: String,
    /// Struct pages in the group.
    pub count: u64,
    /// First pfn (kernel numbering).
    pub first_pfn: u64,
    /// Last pfn.
    pub last_pfn: u64,
}

/// The first difference, `memmap-bench diff` style.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstDiff {
    /// Kernel pfn.
    pub pfn: u64,
    /// Role.
    pub role: String,
    /// Field.
    pub field: String,
    /// Byte offset.
    pub offset: usize,
    /// Kernel raw word.
    pub kernel: u64,
    /// Model raw word.
    pub model: u64,
}

/// Compares kernel struct pages `k` (pfns `geo.start_pfn..`) with model struct pages `m` (pfns
/// `m_start..`) after normalization; `aliased[i]` marks kernel vmemmap page `i` as aliased.
/// Kernel-image pointers are matched by consistent renaming in `renames`, since the model's
/// addresses of kernel data are modelled, not the build's.
#[must_use]
#[allow(clippy::too_many_arguments)]
pub fn compare_pages(
    geo: Geometry,
    k: &[u8],
    kn: &Normalizer,
    m: &[u8],
    m_start: u64,
    mn: &Normalizer,
    aliased: &[bool],
    m_aliased: &[bool],
    renames: &mut BTreeMap<String, String>,
) -> (u64, Option<FirstDiff>, Vec<Group>) {
    let m_first_vpage = m_start * SP as u64 / 4096;
    let n = (k.len() / SP).min(m.len() / SP);
    let first_vpage = geo.start_pfn * SP as u64 / 4096;
    let mut groups: BTreeMap<(String, String, String, String), Group> = BTreeMap::new();
    let mut first = None;
    let mut differing = 0;
    for i in 0..n {
        let kpfn = geo.start_pfn + i as u64;
        let mpfn = m_start + i as u64;
        let kp = &k[i * SP..(i + 1) * SP];
        let mp = &m[i * SP..(i + 1) * SP];
        let vpage = (kpfn * SP as u64 / 4096 - first_vpage) as usize;
        let mut role = geo.role(kpfn).to_string();
        if aliased.get(vpage).copied().unwrap_or(false) {
            role.push_str(" (aliased vmemmap)");
        }
        let mut page_differs = false;
        for w in 0..SP / 8 {
            let (kv, mv) = (word(kp, w * 8), word(mp, w * 8));
            let k_alias = aliased.get(vpage).copied().unwrap_or(false);
            let m_alias =
                m_aliased.get((mpfn * SP as u64 / 4096 - m_first_vpage) as usize).copied().unwrap_or(false);
            let (ks, ms) = (
                classify(geo, kpfn, kn.sym(kpfn, kv), k_alias),
                classify(geo, kpfn, mn.sym(mpfn, mv), m_alias),
            );
            if ks == ms {
                continue;
            }
            let renamed = match (&ks, &ms) {
                (Sym::Kimage(_), Sym::Kimage(_)) | (Sym::Direct(_), Sym::Direct(_)) => {
                    Some((ks.to_string(), ms.to_string()))
                }
                _ => None,
            };
            if let Some((kname, mname)) = renamed {
                let taken = renames.iter().any(|(kk, mm)| *mm == mname && *kk != kname);
                match renames.get(&kname) {
                    Some(partner) if *partner == mname => continue,
                    None if !taken => {
                        renames.insert(kname, mname);
                        continue;
                    }
                    _ => {}
                }
            }
            page_differs = true;
            // Name the 4-byte half that differs in the _mapcount/_refcount word.
            let off = if w == 6 && (kv & 0xffff_ffff) == (mv & 0xffff_ffff) { 52 } else { w * 8 };
            let field = field_name(geo.role(kpfn), off).to_string();
            if first.is_none() {
                first = Some(FirstDiff {
                    pfn: kpfn,
                    role: role.clone(),
                    field: field.clone(),
                    offset: off,
                    kernel: kv,
                    model: mv,
                });
            }
            let key = (role.clone(), field.clone(), ks.to_string(), ms.to_string());
            let g = groups.entry(key).or_insert_with(|| Group {
                role: role.clone(),
                field,
                kernel: ks.to_string(),
                model: ms.to_string(),
                count: 0,
                first_pfn: kpfn,
                last_pfn: kpfn,
            });
            g.count += 1;
            g.last_pfn = kpfn;
        }
        if page_differs {
            differing += 1;
        }
    }
    let mut groups: Vec<Group> = groups.into_values().collect();
    groups.sort_by_key(|g| (g.first_pfn, g.role.clone(), g.field.clone()));
    (differing, first, groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_are_grouped_and_the_first_is_named() {
        let n = Normalizer::default();
        let g = Geometry { start_pfn: 10, init_start: 10, compound: 1 };
        let k = vec![0u8; 64 * 3];
        let mut m = k.clone();
        m[64 + 52] = 1; // _refcount of the second page
        m[128 + 52] = 1;
        let (differing, first, groups) = compare_pages(g, &k, &n, &m, 10, &n, &[], &[], &mut BTreeMap::new());
        assert_eq!(differing, 2);
        let f = first.expect("a difference");
        assert_eq!((f.pfn, f.field.as_str(), f.offset), (11, "_refcount", 52));
        assert_eq!(groups.len(), 1);
        assert_eq!((groups[0].count, groups[0].first_pfn, groups[0].last_pfn), (2, 11, 12));
    }
}
