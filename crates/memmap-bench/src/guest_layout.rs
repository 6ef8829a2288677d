//! A real machine's node for the boot scenario (`--node-layout`).

use memmap_core::{NodeLayout, PfnRange, ZoneSpan};

/// A real machine's node for the boot scenario (`--node-layout`): its zones, memory and
/// reserved ranges, from a `layout.json` that `kernel-oracle` writes beside a boot run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestLayout {
    /// Where it came from (the file and its source line).
    pub source: String,
    /// The zones.
    pub zones: Vec<ZoneSpan>,
    /// `memblock.memory`.
    pub memory: Vec<PfnRange>,
    /// `memblock.reserved`.
    pub reserved: Vec<memmap_core::ReservedRange>,
}

impl GuestLayout {
    /// The first node of `file` (read from `path`).
    ///
    /// # Errors
    ///
    /// A file without a node with zones.
    pub fn of(file: &memmap_dump::LayoutFile, path: &std::path::Path) -> Result<GuestLayout, String> {
        let n = file.nodes.first().ok_or_else(|| format!("{}: no node", path.display()))?;
        if n.zones.is_empty() {
            return Err(format!("{}: node {} has no zones", path.display(), n.nid));
        }
        Ok(GuestLayout {
            source: format!("{} ({}, node {})", path.display(), file.source, n.nid),
            zones: n.zones.iter().map(|&(z, s, e)| ZoneSpan::new(z, s, e)).collect(),
            memory: n.memory.iter().map(|&(s, e)| PfnRange::new(s, e)).collect(),
            reserved: n.reserved.iter().map(|&(s, e)| memmap_core::ReservedRange::new(s, e)).collect(),
        })
    }

    /// The node layout (node 0).
    #[must_use]
    pub fn layout(&self) -> NodeLayout<'_> {
        NodeLayout { nid: 0, zones: &self.zones, memory: &self.memory, reserved: &self.reserved }
    }
}
