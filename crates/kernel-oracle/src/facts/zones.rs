//! The boot memmap of ordinary RAM as a booted guest left it: its zones (`/proc/zoneinfo`) and
//! each struct page's class, which says what of it a comparison may compare.

use anyhow::{Result, bail};
use memmap_core::KernelConfig;

use crate::facts::STRUCT_PAGE;

/// One zone of one node, as `/proc/zoneinfo` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    /// Node id.
    pub nid: u32,
    /// Zone index in `enum zone_type` order (`/proc/zoneinfo` prints every zone of a node).
    pub index: u32,
    /// `DMA`, `DMA32`, `Normal`, `Movable`, `Device`.
    pub name: String,
    /// `start_pfn` (`zone_start_pfn`).
    pub start_pfn: u64,
    /// `spanned` pages.
    pub spanned: u64,
    /// `present` pages.
    pub present: u64,
    /// `managed` pages.
    pub managed: u64,
    /// `pages free`.
    pub free: u64,
}

/// The most zones `/proc/zoneinfo` may list before it is refused (nodes times zones).
pub const MAX_ZONES: usize = 1 << 12;

/// The zones of the full `/proc/zoneinfo` text.
///
/// # Errors
///
/// A zone heading without its counts, a number that does not parse, a span past the end of
/// the pfn space, or more than [`MAX_ZONES`] zones.
pub fn zones(text: &str) -> Result<Vec<Zone>> {
    let mut out: Vec<Zone> = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("Node ") {
            let Some((nid, name)) = rest.split_once(", zone") else {
                bail!("zoneinfo: {line:?}: expected \"Node N, zone NAME\"");
            };
            let nid: u32 = nid.trim().parse().map_err(|_| anyhow::anyhow!("zoneinfo: {line:?}: node id"))?;
            let index = out.iter().filter(|z| z.nid == nid).count() as u32;
            if out.len() >= MAX_ZONES {
                bail!("zoneinfo lists more than {MAX_ZONES} zones");
            }
            out.push(Zone {
                nid,
                index,
                name: name.trim().into(),
                start_pfn: 0,
                spanned: 0,
                present: 0,
                managed: 0,
                free: 0,
            });
            continue;
        }
        let Some(z) = out.last_mut() else { continue };
        let mut words = l.split_whitespace();
        let (Some(key), Some(value)) = (words.next(), words.next()) else { continue };
        let field = match (key, value) {
            ("pages", "free") => {
                let Some(v) = words.next() else { continue };
                z.free = number(line, v)?;
                continue;
            }
            ("spanned", v) => (&mut z.spanned, v),
            ("present", v) => (&mut z.present, v),
            ("managed", v) => (&mut z.managed, v),
            ("start_pfn:", v) => (&mut z.start_pfn, v),
            _ => continue,
        };
        *field.0 = number(line, field.1)?;
    }
    for z in &out {
        if z.start_pfn.checked_add(z.spanned).is_none_or(|end| end > 1 << 52) || z.present > z.spanned {
            bail!(
                "zoneinfo: node {} zone {}: start_pfn {:#x}, {} spanned, {} present: expected a span \
                 inside the 52-bit pfn space holding its present pages",
                z.nid,
                z.name,
                z.start_pfn,
                z.spanned,
                z.present
            );
        }
    }
    Ok(out)
}

fn number(line: &str, v: &str) -> Result<u64> {
    v.parse().map_err(|_| anyhow::anyhow!("zoneinfo: {line:?}: {v:?} is not a number"))
}

/// What a struct page of a booted zone is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// The head of a free buddy block (`PageBuddy`, the order in `private`).
    FreeHead,
    /// A page inside a free buddy block, after its head.
    FreeTail,
    /// `PG_reserved`: memblock kept it (or it is a hole inside a present section).
    Reserved,
    /// Neither free nor reserved: the guest allocated it after boot (also the pages on the
    /// per-CPU lists, which the buddy allocator counts as allocated).
    Allocated,
    /// All 64 bytes zero and no frame behind its vmemmap page: no struct page (a section the
    /// zone spans but that holds no memory).
    Absent,
}

impl Class {
    /// Every class, in report order.
    pub const ALL: [Class; 5] =
        [Class::FreeHead, Class::FreeTail, Class::Reserved, Class::Allocated, Class::Absent];

    /// The name in reports.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Class::FreeHead => "free (head)",
            Class::FreeTail => "free (in a block)",
            Class::Reserved => "reserved",
            Class::Allocated => "allocated after boot",
            Class::Absent => "no struct page",
        }
    }
}

/// The class of every struct page of `bytes` (pfns `start_pfn..`) in the release of `cfg`;
/// `mapped(pfn)` says whether its vmemmap page had a frame. A buddy head whose order or block
/// does not fit is classified by its flags like any page.
#[must_use]
pub fn classify(
    bytes: &[u8],
    start_pfn: u64,
    cfg: &KernelConfig,
    mapped: impl Fn(u64) -> bool,
) -> Vec<Class> {
    let sp = STRUCT_PAGE as usize;
    let nr = bytes.len() / sp;
    let buddy = memmap_core::buddy_page_type(cfg);
    let reserved = 1u64 << cfg.behaviour().page_flags.reserved;
    let mut out = Vec::with_capacity(nr);
    let mut i = 0;
    while i < nr {
        let page = &bytes[i * sp..(i + 1) * sp];
        let page_type = u32::from_le_bytes([page[48], page[49], page[50], page[51]]);
        let order = u64::from_le_bytes(page[40..48].try_into().unwrap_or_default());
        let pfn = start_pfn + i as u64;
        if page_type == buddy
            && order <= u64::from(cfg.max_page_order)
            && pfn.trailing_zeros() >= order as u32
            && i + (1 << order) <= nr
        {
            out.push(Class::FreeHead);
            out.extend(std::iter::repeat_n(Class::FreeTail, (1 << order) - 1));
            i += 1 << order;
            continue;
        }
        let flags = u64::from_le_bytes(page[..8].try_into().unwrap_or_default());
        out.push(if flags & reserved != 0 {
            Class::Reserved
        } else if !mapped(pfn) && page.iter().all(|&b| b == 0) {
            Class::Absent
        } else {
            Class::Allocated
        });
        i += 1;
    }
    out
}

/// How many pages of each class, in [`Class::ALL`] order.
#[must_use]
pub fn counts(classes: &[Class]) -> [u64; 5] {
    let mut c = [0u64; 5];
    for class in classes {
        c[Class::ALL.iter().position(|k| k == class).unwrap_or(0)] += 1;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZONEINFO: &str = "Node 0, zone      DMA
  per-node stats
      nr_inactive_anon 0
  pages free     3840
        boost    0
        spanned  4095
        present  3998
        managed  3840
        cma      0
        protection: (0, 2918, 2918, 2918, 2918)
      nr_free_pages 3840
  start_pfn:           1
Node 0, zone    DMA32
  pages free     731000
        spanned  782304
        present  782304
        managed  760000
  start_pfn:           4096
Node 0, zone   Normal
  pages free     0
        spanned  0
        present  0
        managed  0
  start_pfn:           0
";

    #[test]
    fn zoneinfo_gives_each_zone_its_index_span_and_counts() {
        let z = zones(ZONEINFO).unwrap();
        assert_eq!(z.len(), 3);
        assert_eq!(
            z[0],
            Zone {
                nid: 0,
                index: 0,
                name: "DMA".into(),
                start_pfn: 1,
                spanned: 4095,
                present: 3998,
                managed: 3840,
                free: 3840
            }
        );
        assert_eq!((z[1].index, z[1].start_pfn, z[1].spanned, z[1].managed), (1, 4096, 782_304, 760_000));
        assert_eq!((z[2].index, z[2].name.as_str(), z[2].spanned), (2, "Normal", 0));
    }

    #[test]
    fn hostile_zoneinfo_is_an_error() {
        assert!(zones("Node x, zone DMA\n").is_err());
        assert!(zones("Node 0 zone DMA\n").is_err());
        assert!(zones("Node 0, zone DMA\n spanned 10\n present 11\n start_pfn: 0\n").is_err());
        let past = format!("Node 0, zone DMA\n spanned 2\n start_pfn: {}\n", u64::MAX);
        assert!(zones(&past).is_err());
        assert!(zones("Node 0, zone DMA\n spanned 99999999999999999999999\n").is_err());
    }

    fn page(flags: u64, private: u64, page_type: u32) -> [u8; 64] {
        let mut p = [0u8; 64];
        p[..8].copy_from_slice(&flags.to_le_bytes());
        p[40..48].copy_from_slice(&private.to_le_bytes());
        p[48..52].copy_from_slice(&page_type.to_le_bytes());
        p
    }

    #[test]
    fn pages_are_classified_by_buddy_block_reserved_bit_and_frame() {
        let v = KernelConfig::X86_64.with_version(memmap_core::KernelVersion::V7_2);
        let zone_bits = 1u64 << 62;
        let mut bytes = Vec::new();
        // pfn 8: an order-2 free block; 12: reserved; 13: allocated; 14: no struct page;
        // 15: a "buddy" head of order 1 misaligned for pfn 15, so classified by its flags.
        bytes.extend(page(zone_bits, 2, 0xf000_0000));
        for _ in 0..3 {
            bytes.extend(page(zone_bits, 0, 0xffff_ffff));
        }
        bytes.extend(page(zone_bits | 1 << 13, 0, 0xffff_ffff));
        bytes.extend(page(zone_bits, 0, 0xffff_ffff));
        bytes.extend([0u8; 64]);
        bytes.extend(page(zone_bits, 1, 0xf000_0000));
        let c = classify(&bytes, 8, &v, |pfn| pfn != 14);
        assert_eq!(
            c,
            [
                Class::FreeHead,
                Class::FreeTail,
                Class::FreeTail,
                Class::FreeTail,
                Class::Reserved,
                Class::Allocated,
                Class::Absent,
                Class::Allocated
            ]
        );
        assert_eq!(counts(&c), [1, 3, 1, 2, 1]);
        // 6.1 encodes the buddy type as ~PG_buddy and PG_reserved as bit 12.
        let v61 = KernelConfig::X86_64.with_version(memmap_core::KernelVersion::parse("6.1").unwrap());
        let old = [page(0, 0, 0xffff_ff7f), page(1 << 12, 0, 0xffff_ffff)].concat();
        assert_eq!(classify(&old, 0, &v61, |_| true), [Class::FreeHead, Class::Reserved]);
    }
}
