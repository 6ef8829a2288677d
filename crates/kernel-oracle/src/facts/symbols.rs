//! Kernel symbols: `System.map` or the guest's `/proc/kallsyms`, for naming kernel-image
//! pointers found in struct pages.

use std::path::Path;

use anyhow::Result;

/// Largest `System.map` read.
pub const MAX_SYSTEM_MAP_BYTES: u64 = 64 << 20;

/// `System.map`: symbol addresses, for naming kernel-image pointers found in struct pages.
#[derive(Debug, Clone, Default)]
pub struct SystemMap {
    syms: Vec<(u64, String)>,
}

impl SystemMap {
    /// Parses a `System.map`.
    ///
    /// # Errors
    ///
    /// The file cannot be read.
    pub fn load(path: &Path) -> Result<Self> {
        let text = memmap_dump::read_user_file(path, MAX_SYSTEM_MAP_BYTES)?.text;
        Ok(Self::parse(&text))
    }

    /// Parses `System.map` or `/proc/kallsyms` text (`ADDR TYPE NAME` lines).
    #[must_use]
    pub fn parse(text: &str) -> Self {
        let mut syms: Vec<(u64, String)> = text
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                let addr = u64::from_str_radix(it.next()?, 16).ok()?;
                let kind = it.next()?;
                let name = it.next()?;
                matches!(kind, "d" | "D" | "b" | "B" | "r" | "R" | "t" | "T")
                    .then(|| (addr, name.to_string()))
            })
            .collect();
        syms.sort();
        syms.dedup();
        SystemMap { syms }
    }

    /// Number of symbols (Debian's packaged `System.map` is a one-line stub that points at the
    /// `-dbg` package; the oracle then uses the guest's `/proc/kallsyms` for a few symbols).
    #[must_use]
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// Whether there are no symbols.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The address of `name`.
    #[must_use]
    pub fn addr(&self, name: &str) -> Option<u64> {
        self.syms.iter().find(|(_, n)| n == name).map(|(a, _)| *a)
    }

    /// `symbol+0xoff` for an address between `_text` and `_end`, else `None`.
    #[must_use]
    pub fn name(&self, addr: u64) -> Option<String> {
        let (lo, hi) = (self.addr("_text")?, self.addr("_end")?);
        if addr < lo || addr >= hi {
            return None;
        }
        let i = self.syms.partition_point(|(a, _)| *a <= addr).checked_sub(1)?;
        let (a, n) = &self.syms[i];
        Some(if *a == addr { n.clone() } else { format!("{n}+{:#x}", addr - a) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kallsyms_names_addresses_in_the_image() {
        let m = SystemMap::parse(
            "ffffffff81000000 T _text\nffffffff83e00000 D hstates\nffffffff84000000 B _end\n",
        );
        assert_eq!(m.name(0xffff_ffff_83e0_0058).as_deref(), Some("hstates+0x58"));
        assert_eq!(m.name(0xffff_ffff_ffff_8001), None);
    }
}
