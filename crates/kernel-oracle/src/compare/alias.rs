//! Aliased vmemmap pages: the kernel's known from the frames behind them
//! ([`aliased_vmemmap_pages`]), the model's from their contents ([`content_aliased`]).

use std::collections::BTreeMap;

use super::SP;
use crate::facts::Region;

/// Vmemmap pages of a region whose guest-physical address appears more than once (aliased by
/// vmemmap dedup or HVO), or that are shared with another region (`shared` gpas).
#[must_use]
pub fn aliased_vmemmap_pages(r: &Region, shared: &[u64]) -> Vec<bool> {
    let mut count: BTreeMap<u64, usize> = BTreeMap::new();
    for g in r.vmemmap_gpa.iter().flatten() {
        *count.entry(*g).or_default() += 1;
    }
    r.vmemmap_gpa.iter().map(|g| g.is_some_and(|g| count[&g] > 1 || shared.contains(&g))).collect()
}

/// Vmemmap pages (4 KiB blocks of `bytes` from pfn `start_pfn`) that read byte for byte like
/// another: aliasing in a dump without frame addresses (the model's).
#[must_use]
pub fn content_aliased(bytes: &[u8], start_pfn: u64) -> Vec<bool> {
    let first = (start_pfn * SP as u64 / 4096) * 4096 / SP as u64;
    let skip = ((start_pfn - first) as usize) * SP;
    // The 4 KiB blocks (the first one partial when the dump starts inside a vmemmap page).
    let mut blocks: Vec<&[u8]> = Vec::new();
    let rest = if skip == 0 {
        bytes
    } else {
        let cut = (4096 - skip).min(bytes.len());
        blocks.push(&bytes[..cut]);
        &bytes[cut..]
    };
    blocks.extend(rest.chunks(4096));
    // Every block that reads like another one is aliased, the first of them too: in a kernel
    // all vmemmap pages that map one frame are aliases of each other.
    let mut count: std::collections::HashMap<&[u8], usize> = std::collections::HashMap::new();
    for b in &blocks {
        *count.entry(b).or_default() += 1;
    }
    blocks.iter().map(|b| count[b] > 1).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_blocks_are_content_aliases() {
        // Every vmemmap page that reads like another is an alias, the first of them too.
        let mut b = vec![0u8; 4096 * 3];
        b[0] = 1;
        b[4096] = 2;
        b[8192] = 2;
        assert_eq!(content_aliased(&b, 0), vec![false, true, true]);
        // A dump starting inside a vmemmap page: the partial first block is a block of its own.
        let c = vec![0u8; 4096 + 64];
        assert_eq!(content_aliased(&c, 63), vec![false, false]);
        let d = vec![7u8; 64 + 4096 * 2];
        assert_eq!(content_aliased(&d, 63), vec![false, true, true]);
    }
}
