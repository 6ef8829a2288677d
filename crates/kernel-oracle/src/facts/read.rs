//! The facts we read: struct pages, `mem_section[]` and pageblock bits out of the stopped
//! guest through QMP, and the text the guest printed about its namespaces, zones and memory
//! blocks.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result, bail};
use memmap_core::folio::{self, v6_1};
use memmap_core::offsets;
use memmap_core::{Arch, KernelConfig, KernelVersion, PageType, PfnRange};

use crate::facts::{NO_SECTION, Region, STRUCT_PAGE};
use crate::guest::qemu::Qmp;

/// Where the vmemmap starts and how large it is, for `arch` with KASLR off.
#[must_use]
pub fn vmemmap(arch: Arch) -> (u64, u64) {
    match arch {
        // 4 KiB pages, VA_BITS 52 (VA_BITS_MIN 48): VMEMMAP_END = -1 GiB, VMEMMAP_SIZE =
        // ((_PAGE_END(48) - PAGE_OFFSET) >> PAGE_SHIFT) * 64 = 0x3e0000000000, so VMEMMAP_START
        // = 0xffffc1ffc0000000. The struct page of pfn 0 sits `memstart_addr >> PAGE_SHIFT`
        // struct pages below it (see `arm64_vmemmap`). With 16 or 64 KiB pages the area still
        // ends at -1 GiB and pfn 0's struct page is learned from `mem_section`.
        Arch::Arm64 => (0xffff_c1ff_c000_0000, 0x3e00_0000_0000),
        // Sv39 (`no4lvl`): the 4 GiB vmemmap area at 0xffffffc500000000, which is where pfn 0's
        // struct page is (learned from `mem_section`; RAM starts at 2 GiB).
        Arch::Riscv64 => (0xffff_ffc5_0000_0000, 4 << 30),
        // Radix: the vmemmap at 0xc00c000000000000, where pfn 0's struct page is (RAM starts
        // at 0); its area is a quarter of the kernel's 2^51-byte virtual map.
        Arch::Powerpc64 => (0xc00c_0000_0000_0000, 1 << 49),
        // x86-64, 4-level paging (`no5lvl`), `nokaslr`: VMEMMAP_START, a 1 TiB area.
        _ => (0xffff_ea00_0000_0000, 1 << 40),
    }
}

/// How the kernel's `mem_section[]` (SPARSEMEM_EXTREME) is laid out: `PFN_SECTION_SHIFT`,
/// `sizeof(struct mem_section)` (section_mem_map and usage, with PAGE_EXTENSION page_ext and a
/// pad: 32 bytes, else 16), `SECTIONS_PER_ROOT` (`PAGE_SIZE` / that size) and `pageblock_order`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sections {
    pub(crate) section_shift: u32,
    size: u64,
    per_root: u64,
    pub(crate) pageblock_order: u32,
}

impl Sections {
    /// The sections of `cfg`, whose `struct mem_section` has `page_ext` with `page_extension`.
    pub(crate) fn new(cfg: &KernelConfig, page_extension: bool) -> Sections {
        let size: u64 = if page_extension { 32 } else { 16 };
        Sections {
            section_shift: cfg.pfn_section_shift(),
            size,
            per_root: cfg.page_size() / size,
            pageblock_order: cfg.pageblock_order,
        }
    }

    /// The address of section `sec`'s `struct mem_section`, 0 where its root is not allocated.
    pub(crate) fn entry(&self, qmp: &mut Qmp, mem_section: u64, sec: u64, tmp: &Path) -> Result<u64> {
        let roots = read_u64(qmp, mem_section, tmp)?;
        let root = read_u64(qmp, roots + (sec / self.per_root) * 8, tmp)?;
        Ok(if root == 0 { 0 } else { root + (sec % self.per_root) * self.size })
    }
}

/// `dev attr value` lines of the `nd` block, as `dev -> attr -> value`.
pub(crate) fn parse_nd(text: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut m: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for line in text.lines() {
        let mut it = line.splitn(3, ' ');
        if let (Some(d), Some(a), Some(v)) = (it.next(), it.next(), it.next()) {
            m.entry(d.into()).or_default().insert(a.into(), v.trim().into());
        }
    }
    m
}

pub(crate) fn parse_num(s: &str) -> Result<u64> {
    let s = s.trim();
    let v = if let Some(h) = s.strip_prefix("0x") { u64::from_str_radix(h, 16) } else { s.parse() };
    v.with_context(|| format!("not a number: {s:?}"))
}

/// Node pfn spans from the `zoneinfo` block: `(nid, start_pfn, end_pfn)` per populated zone.
pub(crate) fn node_spans(zoneinfo: &str) -> Vec<(u32, u64, u64)> {
    let mut out = Vec::new();
    let mut nid = 0u32;
    let mut spanned = 0u64;
    for line in zoneinfo.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("Node ") {
            nid = rest.split(',').next().and_then(|n| n.trim().parse().ok()).unwrap_or(0);
        } else if let Some(v) = l.strip_prefix("spanned") {
            spanned = v.trim().parse().unwrap_or(0);
        } else if let Some(v) = l.strip_prefix("start_pfn:") {
            let start: u64 = v.trim().parse().unwrap_or(0);
            match start.checked_add(spanned) {
                Some(end) if spanned > 0 => out.push((nid, start, end)),
                _ => {}
            }
        }
    }
    out
}

/// Reads the struct pages of `[start, start + nr)` through the guest's vmemmap: every 4 KiB
/// vmemmap page is translated with `gva2gpa` (unmapped pages read as zeros), and the mapped runs
/// are copied with `memsave`.
pub(crate) fn dump_pages(
    qmp: &mut Qmp,
    base: u64,
    start: u64,
    nr: u64,
    tmp: &Path,
) -> Result<(Vec<u8>, Vec<Option<u64>>)> {
    let first_va = base + start * STRUCT_PAGE;
    let end_va = base + (start + nr) * STRUCT_PAGE;
    let page_va = |va: u64| va & !4095;
    let mut gpas = Vec::new();
    let mut va = page_va(first_va);
    while va < end_va {
        gpas.push(qmp.gva2gpa(va)?);
        va += 4096;
    }
    let mut out = vec![0u8; (nr * STRUCT_PAGE) as usize];
    let mut i = 0usize;
    while i < gpas.len() {
        if gpas[i].is_none() {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < gpas.len() && gpas[j].is_some() && j - i < 512 {
            j += 1;
        }
        let lo = (page_va(first_va) + i as u64 * 4096).max(first_va);
        let hi = (page_va(first_va) + j as u64 * 4096).min(end_va);
        qmp.memsave(lo, hi - lo, tmp).with_context(|| format!("memsave {lo:#x} {}", hi - lo))?;
        let data = fs::read(tmp)?;
        let off = (lo - first_va) as usize;
        out[off..off + data.len()].copy_from_slice(&data);
        i = j;
    }
    Ok((out, gpas))
}

pub(crate) fn read_u64(qmp: &mut Qmp, addr: u64, tmp: &Path) -> Result<u64> {
    qmp.memsave(addr, 8, tmp)?;
    let b = fs::read(tmp)?;
    Ok(word(&b, 0))
}

/// Bits per pageblock in `pageblock_flags` of the kernel `release` (memmap-core's
/// [`Behaviour::pageblock_bits`](memmap_core::Behaviour::pageblock_bits); 4 for a release it
/// cannot read).
#[must_use]
pub fn pageblock_bits(release: &str) -> u32 {
    memmap_core::KernelVersion::parse(release).map_or(4, |v| v.behaviour().pageblock_bits)
}

/// Reads the migrate type of every pageblock overlapping `[start, start + nr)` from the guest's
/// `mem_section` (its geometry `geo`; `usage->pageblock_flags` at byte 24 after the rcu head and
/// the subsection map, one word for sections of up to 64 subsections). Returns the first
/// pageblock's pfn and the types; a pageblock of a section that is not present is an error, or
/// [`NO_SECTION`] with `absent_ok` (a boot zone's span covers holes such as the PCI hole).
pub(crate) fn read_pageblocks(
    qmp: &mut Qmp,
    mem_section: u64,
    bits: u32,
    (geo, start, nr): (Sections, u64, u64),
    absent_ok: bool,
    tmp: &Path,
) -> Result<(u64, Vec<u8>)> {
    let section_pfns: u64 = 1 << geo.section_shift;
    let pb: u64 = 1 << geo.pageblock_order;
    if pb > section_pfns {
        bail!("pageblocks of {pb} pages do not fit the {section_pfns}-page sections");
    }
    let first = start / pb * pb;
    let mut out = Vec::new();
    let mut cached: Option<(u64, Vec<u8>)> = None;
    let mut pfn = first;
    while pfn < start + nr {
        let sec = pfn / section_pfns;
        if cached.as_ref().is_none_or(|c| c.0 != sec) {
            let ms = geo.entry(qmp, mem_section, sec, tmp)?;
            let map = if ms == 0 { 0 } else { read_u64(qmp, ms, tmp)? };
            if map & 1 == 0 {
                if !absent_ok {
                    bail!("section {sec} is not present");
                }
                let next = (sec + 1) * section_pfns;
                while pfn < next.min(start + nr) {
                    out.push(NO_SECTION);
                    pfn += pb;
                }
                continue;
            }
            let usage = read_u64(qmp, ms + 8, tmp)?;
            let len = ((section_pfns / pb) * u64::from(bits)).div_ceil(8);
            qmp.memsave(usage + 24, len, tmp)?;
            cached = Some((sec, fs::read(tmp)?));
        }
        let flags = &cached.as_ref().context("section cached")?.1;
        let bitidx = ((pfn % section_pfns) / pb) * u64::from(bits);
        let byte = *flags.get((bitidx / 8) as usize).context("the section's pageblock flags are short")?;
        out.push((byte >> (bitidx % 8)) & 7);
        pfn += pb;
    }
    Ok((first, out))
}

pub(crate) fn word(b: &[u8], off: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(w)
}

/// Finds the hugetlb folios of `order` in the guest's RAM by reading its memmap section by
/// section: `order`-aligned `PGTY_hugetlb` heads followed by a tail with `order` in its flags.
pub(crate) fn find_hugetlb(
    qmp: &mut Qmp,
    base: u64,
    ram: &[PfnRange],
    order: u32,
    tmp: &Path,
) -> Result<Vec<u64>> {
    const CHUNK: u64 = 32768;
    let nr = 1u64 << order;
    let mut heads = Vec::new();
    for &PfnRange { start: lo, end: hi } in ram {
        // Pfns are below 2^52 (`ram_pfns` divides byte addresses by 4096): no overflow below.
        let mut pfn = lo.next_multiple_of(nr);
        while pfn < hi {
            let chunk_end = (pfn / CHUNK + 1) * CHUNK;
            let n = chunk_end.min(hi) - pfn;
            if qmp.memsave(base + pfn * STRUCT_PAGE, n * STRUCT_PAGE, tmp).is_err() {
                pfn = chunk_end.next_multiple_of(nr);
                continue;
            }
            let data = fs::read(tmp)?;
            let mut p = 0u64;
            while p + 1 < n {
                let o = (p * STRUCT_PAGE) as usize;
                // 6.1 has no page type: `_folio_dtor` (HUGETLB_PAGE_DTOR) and `_folio_order`.
                let v6_1 = data[o + v6_1::FOLIO_DTOR] == v6_1::HUGETLB_PAGE_DTOR
                    && u32::from(data[o + v6_1::FOLIO_ORDER]) == order;
                let hugetlb = data[o + offsets::PAGE_TYPE + 3] == PageType::HUGETLB
                    && word(&data, o + folio::FLAGS_1) & 0xff == u64::from(order);
                if (hugetlb || v6_1) && word(&data, o + folio::HEAD_1) & 1 == 1 {
                    heads.push(pfn + p);
                }
                p += nr;
            }
            pfn = chunk_end.min(hi).next_multiple_of(nr);
        }
    }
    Ok(heads)
}

/// Sets each hugetlb folio's position on its node's free list from the heads' `lru` links
/// (`blobs[i]` holds region `i`'s struct pages); left unset where the links do not chain a node's
/// folios.
pub fn free_list_positions(regions: &mut [Region], blobs: &[Vec<u8>], vbase: u64) {
    let lru_pfn = |v: u64| {
        let rel = v.wrapping_sub(vbase).wrapping_sub(offsets::LRU_NEXT as u64);
        (rel % STRUCT_PAGE == 0).then_some(rel / STRUCT_PAGE)
    };
    let nids: std::collections::BTreeSet<u32> =
        regions.iter().filter_map(|r| r.folio.map(|f| f.nid)).collect();
    for nid in nids {
        let idx: Vec<usize> =
            (0..regions.len()).filter(|&i| regions[i].folio.is_some_and(|f| f.nid == nid)).collect();
        let of = |pfn: Option<u64>| idx.iter().copied().find(|&i| Some(regions[i].start_pfn) == pfn);
        let first: Vec<usize> = idx
            .iter()
            .copied()
            .filter(|&i| of(lru_pfn(word(&blobs[i], offsets::LRU_PREV))).is_none())
            .collect();
        let [mut at] = first[..] else { continue };
        let mut chain = vec![at];
        while let Some(next) = of(lru_pfn(word(&blobs[at], offsets::LRU_NEXT))) {
            if chain.contains(&next) {
                break;
            }
            chain.push(next);
            at = next;
        }
        if chain.len() != idx.len() {
            continue;
        }
        for (pos, i) in chain.into_iter().enumerate() {
            if let Some(f) = regions[i].folio.as_mut() {
                f.list_pos = Some(pos as u32);
            }
        }
    }
}

/// Whether a struct page heads a free buddy block of `order`: `PageBuddy` in either encoding
/// ([`memmap_core::buddy_page_type`] of 6.1 and 6.12, checked before the release is trusted) and
/// the order in `private`.
#[must_use]
pub fn is_free_block_head(page: &[u8], order: u32) -> bool {
    let t = &page[offsets::PAGE_TYPE..offsets::PAGE_TYPE + 4];
    let page_type = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
    [KernelVersion::V6_1, KernelVersion::V6_12]
        .into_iter()
        .any(|v| page_type == memmap_core::buddy_page_type(&KernelConfig::X86_64.with_version(v)))
        && word(page, offsets::PRIVATE) == u64::from(order)
}

/// The first pfns of the `order`-aligned blocks of a dump (`bytes` from `start_pfn`)
/// whose head is not a free block of that order ([`is_free_block_head`]).
#[must_use]
pub fn allocated_blocks(bytes: &[u8], start_pfn: u64, order: u32) -> Vec<u64> {
    let n = 1u64 << order;
    let nr = bytes.len() as u64 / STRUCT_PAGE;
    let mut out = Vec::new();
    let mut pfn = start_pfn.next_multiple_of(n);
    while pfn + n <= start_pfn + nr {
        let o = ((pfn - start_pfn) * STRUCT_PAGE) as usize;
        if !is_free_block_head(&bytes[o..o + STRUCT_PAGE as usize], order) {
            out.push(pfn);
        }
        pfn += n;
    }
    out
}

/// Checks that the `memmap_stream` module loaded and said that every check passed.
///
/// # Errors
///
/// The module failed to load, or its log does not say that every check passed.
pub fn module_passed(report: &str) -> Result<()> {
    let loaded = report.lines().any(|l| l.trim() == "insmod exit 0");
    let passed = report.lines().any(|l| l.contains("memmap_stream: all checks passed"));
    if loaded && passed {
        return Ok(());
    }
    bail!(
        "memmap_stream.ko {}:\n{}",
        if loaded { "loaded without reporting that its checks passed" } else { "failed to load" },
        report.trim_end()
    )
}

/// A pmem namespace as the guest's `/sys/bus/nd` describes it.
pub(crate) struct Namespace {
    /// First byte (guest-physical).
    pub(crate) start: u64,
    /// Bytes.
    pub(crate) size: u64,
    /// The pfn/dax device holding it (empty: none, a raw namespace).
    pub(crate) holder: String,
    /// First byte of the data (after the info block and the altmap's struct pages).
    pub(crate) data_start: u64,
    /// The holder's alignment.
    pub(crate) align: u64,
    /// The holder's mode (`ram` for a raw namespace).
    pub(crate) mode: String,
    /// The node the guest reports (negative ones as node 0).
    pub(crate) nid: u32,
}

impl Namespace {
    /// `namespace0.0` and its holder from the guest's `nd` block.
    pub(crate) fn of(nd_text: &str) -> Result<Namespace> {
        let nd = parse_nd(nd_text);
        let ns = nd.get("namespace0.0").context("no namespace0.0 in the guest's /sys/bus/nd")?;
        let start = parse_num(ns.get("resource").context("namespace resource")?)?;
        let size = parse_num(ns.get("size").context("namespace size")?)?;
        let holder = ns.get("holder").cloned().unwrap_or_default();
        // A legacy (e820) namespace without a pfn/dax holder is "raw": the pmem driver maps
        // the whole namespace as fsdax with struct pages in RAM (what ndctl reports as fsdax,
        // map=mem), and no info block.
        let (data_start, align, mode) = if holder.is_empty() {
            (start, 4096, "ram".to_string())
        } else {
            let h = nd.get(&holder).with_context(|| format!("namespace holder {holder:?} not found"))?;
            (
                parse_num(h.get("resource").context("holder resource")?)?,
                parse_num(h.get("align").context("holder align")?)?,
                h.get("mode").cloned().unwrap_or_default(),
            )
        };
        let nid = ns.get("numa_node").and_then(|v| v.parse::<i64>().ok()).unwrap_or(0).clamp(0, 1023) as u32;
        let pages = size / 4096;
        if pages == 0 || pages > crate::facts::MAX_REGION_PAGES || start.checked_add(size).is_none() {
            bail!(
                "the guest's namespace0.0 [{start:#x}, +{size:#x}): expected 1 to {} pages of address space",
                crate::facts::MAX_REGION_PAGES
            );
        }
        // A pfn device keeps an info block (8 KiB) and the altmap's struct pages before its data.
        let min_data = if mode == "pmem" { 8192 } else { 0 };
        let off = data_start.checked_sub(start);
        if off.is_none_or(|o| o < min_data || o > size) || !align.is_power_of_two() {
            bail!(
                "the guest's {holder}: data at {data_start:#x}, align {align:#x}: expected data {min_data:#x} to \
                 {size:#x} bytes into namespace0.0 at {start:#x} and a power-of-two alignment"
            );
        }
        Ok(Namespace { start, size, holder, data_start, align, mode, nid })
    }
}

/// Pages per memory block from the guest's `hotplug` block, after checking that every memory
/// block of the DIMM at `[addr, addr + size)` is online.
pub(crate) fn online_blocks(hb: &str, addr: u64, size: u64, page_shift: u32) -> Result<u64> {
    let bs = hb
        .lines()
        .find_map(|l| l.strip_prefix("block_size_bytes "))
        .context("the guest did not report block_size_bytes")?;
    let block_pages = u64::from_str_radix(bs.trim(), 16).context("block_size_bytes")? >> page_shift;
    if block_pages == 0 {
        bail!("the guest reported block_size_bytes {bs:?}: expected at least a page");
    }
    let nr = size >> page_shift;
    let first_block = (addr >> page_shift) / block_pages;
    for k in 0..nr / block_pages {
        let name = format!("memory{}", first_block + k);
        let line = hb.lines().find(|l| l.split(' ').next() == Some(name.as_str())).unwrap_or_default();
        if !line.contains(" online ") {
            bail!("memory block {name} of the DIMM is not online: {line:?}");
        }
    }
    Ok(block_pages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_block_must_say_loaded_and_passed() {
        let passed = "memmap_stream: streaming: 262144 of 262144 struct pages equal\nmemmap_stream: all checks passed\ninsmod exit 0\n";
        assert!(module_passed(passed).is_ok());
        // A failed check fails insmod; its lines are in the error.
        let failed = "memmap_stream: streaming: first difference at pfn 0x100000\ninsmod exit 1\n";
        let e = module_passed(failed).unwrap_err().to_string();
        assert!(e.contains("failed to load") && e.contains("first difference at pfn 0x100000"), "{e}");
        // Loaded without the final line (a module that reports nothing) is no pass either.
        let e = module_passed("insmod exit 0\n").unwrap_err().to_string();
        assert!(e.contains("without reporting"), "{e}");
        assert!(module_passed("").is_err());
    }

    #[test]
    fn page_geometry_follows_the_kernel_config() {
        let k = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
        };
        // ppc64el-64k: 64 KiB pages, orders up to 8, 16 MiB sections of 256 pages.
        let ppc =
            k(&[("CONFIG_PPC64", "y"), ("CONFIG_PAGE_SHIFT", "16"), ("CONFIG_ARCH_FORCE_MAX_ORDER", "8")]);
        let cfg = crate::facts::model_config(&ppc, "7.2").unwrap();
        assert_eq!((cfg.page_shift, cfg.max_page_order), (16, 8));
        let s = Sections::new(&cfg, true);
        assert_eq!((s.section_shift, s.size, s.per_root), (8, 32, 2048));
        // Pfns of 64 KiB: the partial page at either end of a range is left out.
        let ram = crate::facts::iomem_ranges("00008000-4000ffff : System RAM\n", false, 16);
        assert_eq!(ram, [PfnRange::new(1, 0x4001)]);
        // A kernel without CONFIG_PAGE_SHIFT (before 6.8) has 4 KiB pages; odd values are refused.
        let x86 = crate::facts::model_config(&k(&[]), "7.2").unwrap();
        assert_eq!((x86.page_shift, x86.max_page_order), (12, 10));
        assert!(crate::facts::model_config(&k(&[("CONFIG_PAGE_SHIFT", "13")]), "7.2").is_err());
        assert!(crate::facts::model_config(&k(&[("CONFIG_ARCH_FORCE_MAX_ORDER", "99")]), "7.2").is_err());
    }

    #[test]
    fn hostile_guest_reports_are_errors_not_overflows() {
        // A System RAM range ending at the top of the address space, and a zone whose span
        // passes u64::MAX.
        assert_eq!(
            crate::facts::iomem_ranges("0-ffffffffffffffff : System RAM\n", false, 12),
            [PfnRange::new(0, 1 << 52)]
        );
        assert!(
            node_spans("Node 0, zone Normal\n  spanned 10\n  start_pfn: 18446744073709551615\n").is_empty()
        );
        // Namespaces: data before the namespace, a pfn device without its info block, a size
        // past the address space, no pages, a holder alignment that is no power of two.
        let nd = |res: &str, size: &str, hres: &str, mode: &str, align: &str| {
            format!(
                "namespace0.0 resource {res}\nnamespace0.0 size {size}\nnamespace0.0 holder pfn0.0\n\
                 pfn0.0 resource {hres}\npfn0.0 align {align}\npfn0.0 mode {mode}\n"
            )
        };
        let ok = nd("0x100000000", "0x40000000", "0x100200000", "pmem", "0x200000");
        assert!(Namespace::of(&ok).is_ok());
        for bad in [
            nd("0x100000000", "0x40000000", "0xff000000", "pmem", "0x200000"),
            nd("0x100000000", "0x40000000", "0x100001000", "pmem", "0x200000"),
            nd("0x100000000", "0x40000000", "0x200000000", "pmem", "0x200000"),
            nd("0xfffffffffffff000", "0x40000000", "0xfffffffffffff000", "ram", "0x1000"),
            nd("0x100000000", "0x800", "0x100000000", "ram", "0x1000"),
            nd("0x100000000", "0x40000000", "0x100200000", "pmem", "0x300000"),
        ] {
            let e = Namespace::of(&bad).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.starts_with("the guest's "), "{bad}: {e:?}");
        }
        let e = online_blocks("block_size_bytes 0\n", 1 << 32, 1 << 28, 12).unwrap_err().to_string();
        assert!(e.contains("expected at least a page"), "{e}");
    }
}
