//! One configuration on one kernel: build the initramfs, boot QEMU, set the memory up in the
//! guest, learn the pfn ranges from the guest, dump the struct pages through QMP and write
//! `facts.json` + `region-N.bin`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::facts::{Altmap, FORMAT, Facts, Folio, KernelFacts, Region};
use crate::initramfs;
use crate::kernel::{self, Arch, Kernel, SystemMap};
use crate::qemu::{Console, Guest, Qmp};
use crate::scenario::{Hotplug, Hugetlb, Pmem, Scenario};

/// `sizeof(struct page)` of every kernel the oracle boots (no `WANT_PAGE_VIRTUAL`).
pub const STRUCT_PAGE: u64 = 64;
/// Struct pages per 4 KiB vmemmap page.
pub const PER_VMEMMAP_PAGE: u64 = 4096 / STRUCT_PAGE;
/// `PGTY_hugetlb`, the top byte of a hugetlb folio head's `page_type`.
pub const PGTY_HUGETLB: u8 = 0xf4;

/// Where the vmemmap starts and how large it is, for `arch` with KASLR off.
#[must_use]
pub fn vmemmap(arch: Arch) -> (u64, u64) {
    match arch {
        // 4-level paging (`no5lvl`), `nokaslr`: VMEMMAP_START, a 1 TiB area.
        Arch::Amd64 => (0xffff_ea00_0000_0000, 1 << 40),
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
        Arch::Ppc64el => (0xc00c_0000_0000_0000, 1 << 49),
    }
}

/// Options of a run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Download and build cache.
    pub cache: PathBuf,
    /// Output directory of this configuration (`OUT/<kernel>/<config>`).
    pub out: PathBuf,
    /// How long the guest may take to be ready.
    pub timeout: Duration,
}

fn qemu_command(kernel: &Kernel, sc: &Scenario, initrd: &Path, work: &Path) -> Result<(String, Vec<String>)> {
    let mut a: Vec<String> = Vec::new();
    let mut append: Vec<String> = vec!["nokaslr".into(), "quiet".into(), "panic=-1".into()];
    let qemu = match sc.arch {
        Arch::Amd64 => {
            a.extend(["-machine", "q35", "-cpu", "max", "-smp"].map(String::from));
            a.push(sc.boot.map_or(1, |b| b.smp).to_string());
            append.insert(0, "console=ttyS0".into());
            // 4-level paging: the vmemmap at 0xffffea0000000000. `-cpu max` offers LA57 (and
            // pdpe1gb, which 1 GiB hugetlb pages need).
            append.push("no5lvl".into());
            "qemu-system-x86_64"
        }
        Arch::Arm64 => {
            a.extend(["-machine", "virt", "-cpu", "max,pauth-impdef=on", "-smp", "1"].map(String::from));
            append.insert(0, "console=ttyAMA0".into());
            "qemu-system-aarch64"
        }
        Arch::Riscv64 => {
            // OpenSBI (QEMU's bundled `fw_dynamic`) starts the kernel in S mode.
            a.extend(["-machine", "virt", "-cpu", "max", "-smp", "1", "-bios", "default"].map(String::from));
            append.insert(0, "console=ttyS0".into());
            // Sv39 (see `vmemmap`): `-cpu max` offers Sv57, which the kernel would pick.
            append.push("no4lvl".into());
            "qemu-system-riscv64"
        }
        Arch::Ppc64el => {
            // Radix MMU (POWER10), the Virtual Open Firmware instead of SLOF (it boots in a
            // fraction of the time and hands over the same device tree), and the Spectre
            // capabilities TCG cannot provide declared broken so the machine starts.
            a.extend(
                [
                    "-machine",
                    "pseries,x-vof=on,cap-cfpc=broken,cap-sbbc=broken,cap-ibs=broken,cap-ccf-assist=off",
                    "-cpu",
                    "power10",
                    "-smp",
                    "1",
                ]
                .map(String::from),
            );
            append.insert(0, "console=hvc0".into());
            "qemu-system-ppc64"
        }
    };
    let extra_mb = sc.virtio_pmem_mb.unwrap_or(0) + sc.hotplug.map_or(0, |h| h.size_mb);
    if extra_mb > 0 {
        a.extend(["-m".into(), format!("{}M,slots=2,maxmem={}M", sc.mem_mb, sc.mem_mb + extra_mb + 1024)]);
    } else {
        a.extend(["-m".into(), format!("{}M", sc.mem_mb)]);
    }
    for (i, mb) in sc.numa_mb.iter().enumerate() {
        if *mb == 0 {
            a.extend(["-numa".into(), format!("node,nodeid={i}")]);
            continue;
        }
        a.extend(["-object".into(), format!("memory-backend-ram,id=m{i},size={mb}M")]);
        a.extend(["-numa".into(), format!("node,nodeid={i},memdev=m{i}")]);
    }
    if let Some(mb) = sc.virtio_pmem_mb {
        let file = work.join("virtio-pmem.img");
        a.extend([
            "-object".into(),
            format!(
                "memory-backend-file,id=pm0,mem-path={},size={mb}M,share=on",
                crate::files::qemu_opt_path(&file)?
            ),
            "-device".into(),
            "virtio-pmem-pci,memdev=pm0,id=vp0".into(),
        ]);
    }
    match (sc.hotplug, sc.arch) {
        // pseries: the DIMM comes after boot (`hot_add_dimm`).
        (None, _) | (Some(_), Arch::Ppc64el) => {}
        (Some(hp), Arch::Arm64) => a.extend([
            "-object".into(),
            format!("memory-backend-ram,id=hp0,size={}M", hp.size_mb),
            "-device".into(),
            format!("virtio-mem-pci,id={HOTPLUG_DEVICE},memdev=hp0,requested-size={}M", hp.size_mb),
        ]),
        (Some(hp), _) => a.extend([
            "-object".into(),
            format!("memory-backend-ram,id=hp0,size={}M", hp.size_mb),
            "-device".into(),
            format!("pc-dimm,id={HOTPLUG_DEVICE},memdev=hp0"),
        ]),
    }
    append.extend(sc.append());
    a.extend(["-kernel".into(), kernel.image.display().to_string()]);
    a.extend(["-initrd".into(), initrd.display().to_string()]);
    a.extend(["-append".into(), append.join(" ")]);
    Ok((qemu.to_string(), a))
}

/// `SIZE!START` (`1G!3G`, `960M!4160M`) as bytes `(size, start)`.
///
/// # Errors
///
/// Not two sizes in M or G around a `!`.
pub fn parse_carve(carve: &str) -> Result<(u64, u64)> {
    let bytes = |v: &str| -> Option<u64> {
        let (n, unit) = v.split_at(v.len().checked_sub(1)?);
        let shift = match unit {
            "M" => 20,
            "G" => 30,
            _ => return None,
        };
        n.parse::<u64>().ok()?.checked_mul(1 << shift)
    };
    let (size, start) = carve.split_once('!').context("no '!'")?;
    bytes(size).zip(bytes(start)).with_context(|| format!("{carve:?}: expected SIZE!START in M or G"))
}

/// The device tree `dts` (dtc's text) with the carve-out `[start, start + size)` taken out of the
/// memory node that holds it and declared a `pmem-region` node, which the kernel's of_pmem
/// driver turns into a label-less pmem region.
fn carve_pmem(dts: &str, start: u64, size: u64) -> Result<String> {
    let cells = |v: u64| format!("{:#x} {:#x}", v >> 32, v & 0xffff_ffff);
    let mut out = String::new();
    let mut rest = dts;
    let mut found = false;
    while let Some(i) = rest.find("memory@") {
        let end = rest[i..].find("};").context("a memory node without its end")? + i;
        let node = &rest[i..end];
        out.push_str(&rest[..i]);
        let reg = node.find("reg = <").map(|r| r + 7);
        let parsed = reg.and_then(|r| {
            let close = node[r..].find('>')? + r;
            let c: Vec<u64> = node[r..close]
                .split_whitespace()
                .filter_map(|w| u64::from_str_radix(w.strip_prefix("0x")?, 16).ok())
                .collect();
            match c[..] {
                [a, b, x, y] => Some((r, close, (a << 32) | b, (x << 32) | y)),
                _ => None,
            }
        });
        match parsed {
            Some((r, close, base, len)) if base < start && start + size <= base + len => {
                out.push_str(&node[..r]);
                out.push_str(&format!("{} {}", cells(base), cells(start - base)));
                if start + size < base + len {
                    out.push_str(&format!(" {} {}", cells(start + size), cells(base + len - start - size)));
                }
                out.push_str(&node[close..]);
                found = true;
            }
            _ => out.push_str(node),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    if !found {
        bail!("no memory node of the device tree ends with the pmem carve-out [{start:#x}, +{size:#x})");
    }
    let root_end = out.rfind("};").context("the device tree has no root node")?;
    out.insert_str(
        root_end,
        &format!(
            "\tpmem@{start:x} {{\n\t\tcompatible = \"pmem-region\";\n\t\treg = <{} {}>;\n\t}};\n",
            cells(start),
            cells(size)
        ),
    );
    Ok(out)
}

/// arm64 and riscv64: the device tree QEMU builds for `qemu args` (`-machine dumpdtb`, read with
/// `dtc`) with the `memmap` carve-out as a pmem region ([`carve_pmem`]), compiled into
/// `work/pmem.dtb` for `-dtb`.
fn pmem_dtb(qemu: &str, args: &[String], carve: &str, work: &Path) -> Result<PathBuf> {
    let (size, start) = parse_carve(carve).with_context(|| format!("the carve-out {carve:?}"))?;
    let raw = work.join("qemu.dtb");
    let mut a = args.to_vec();
    a.extend(["-machine".into(), format!("dumpdtb={}", crate::files::qemu_opt_path(&raw)?)]);
    a.extend(["-display".into(), "none".into()]);
    crate::cmd::run(qemu, &a, None, Duration::from_secs(60)).context("dumping QEMU's device tree")?;
    let dtc = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|s| (*s).to_string()).collect();
        crate::cmd::run("dtc", &args, None, Duration::from_secs(60))
            .context("dtc (Debian's device-tree-compiler) failed or is not installed")
    };
    let raw_s = raw.display().to_string();
    let dts = dtc(&["-q", "-I", "dtb", "-O", "dts", &raw_s])?.stdout;
    let src = work.join("pmem.dts");
    crate::files::write_file(&src, carve_pmem(&dts, start, size)?.as_bytes())?;
    let out = work.join("pmem.dtb");
    dtc(&["-q", "-I", "dts", "-O", "dtb", "-o", &out.display().to_string(), &src.display().to_string()])?;
    Ok(out)
}

/// QEMU's id of the hot-added memory device.
const HOTPLUG_DEVICE: &str = "dimm0";

/// pseries: once the guest prints `@@hotplug-wait`, adds a `pc-dimm` of `size_mb` with QMP
/// (`object-add`, `device_add`) to `node` (QEMU's default where `None`); the kernel's DLPAR
/// handler adds and onlines its memory blocks.
fn hot_add_dimm(guest: &mut Guest, size_mb: u64, node: Option<usize>, timeout: Duration) -> Result<()> {
    let start = Instant::now();
    while !guest.console().text.contains("\n@@hotplug-wait\n") {
        let c = guest.console();
        if c.text.contains("@@fail ") || c.text.contains("Kernel panic") || start.elapsed() > timeout {
            let tail: Vec<&str> = c.text.lines().rev().take(30).collect();
            bail!(
                "the guest did not wait for the DIMM within {} s\n--- console tail ---\n{}",
                timeout.as_secs(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let qmp = guest.qmp();
    qmp.execute(
        "object-add",
        serde_json::json!({"qom-type": "memory-backend-ram", "id": "hp0", "size": size_mb << 20}),
    )?;
    let mut dev = serde_json::json!({"driver": "pc-dimm", "id": HOTPLUG_DEVICE, "memdev": "hp0"});
    if let Some(n) = node {
        dev["node"] = n.into();
    }
    qmp.execute("device_add", dev)?;
    eprintln!("  added a {size_mb} MiB pc-dimm after {:.1} s", start.elapsed().as_secs_f64());
    Ok(())
}

/// `PAGE_SHIFT` from the kernel's `.config` (`CONFIG_PAGE_SHIFT`, since Linux 6.8; 12 when a
/// configuration does not have it).
///
/// # Errors
///
/// A value other than 12, 14 or 16.
pub fn page_shift(kconfig: &BTreeMap<String, String>) -> Result<u32> {
    match kconfig.get("CONFIG_PAGE_SHIFT").map(String::as_str) {
        None | Some("n") => Ok(12),
        Some(v) => v
            .parse::<u32>()
            .ok()
            .filter(|s| [12, 14, 16].contains(s))
            .with_context(|| format!("CONFIG_PAGE_SHIFT={v}: expected 12, 14 or 16")),
    }
}

/// `SECTION_SIZE_BITS` of `arch` with `page_shift`: 27 (128 MiB) on x86-64, riscv64 and arm64
/// with 4 or 16 KiB pages, 29 on arm64 with 64 KiB pages (`arch/arm64/include/asm/sparsemem.h`),
/// 24 (16 MiB) on powerpc (`arch/powerpc/include/asm/sparsemem.h`).
#[must_use]
pub fn section_size_bits(arch: Arch, page_shift: u32) -> u32 {
    match arch {
        Arch::Amd64 | Arch::Riscv64 => 27,
        Arch::Arm64 => {
            if page_shift == 16 {
                29
            } else {
                27
            }
        }
        Arch::Ppc64el => 24,
    }
}

/// How the kernel's `mem_section[]` (SPARSEMEM_EXTREME) is laid out: `PFN_SECTION_SHIFT`,
/// `sizeof(struct mem_section)` (section_mem_map and usage, with PAGE_EXTENSION page_ext and a
/// pad: 32 bytes, else 16), `SECTIONS_PER_ROOT` (`PAGE_SIZE` / that size) and `pageblock_order`.
#[derive(Debug, Clone, Copy)]
struct Sections {
    section_shift: u32,
    size: u64,
    per_root: u64,
    pageblock_order: u32,
}

impl Sections {
    fn new(arch: Arch, kconfig: &BTreeMap<String, String>, pageblock_order: u32) -> Result<Sections> {
        let page_shift = page_shift(kconfig)?;
        let size: u64 = if kconfig.get("CONFIG_PAGE_EXTENSION").is_some_and(|v| v == "y") { 32 } else { 16 };
        Ok(Sections {
            section_shift: section_size_bits(arch, page_shift) - page_shift,
            size,
            per_root: (1u64 << page_shift) / size,
            pageblock_order,
        })
    }

    /// The address of section `sec`'s `struct mem_section`, 0 where its root is not allocated.
    fn entry(&self, qmp: &mut Qmp, mem_section: u64, sec: u64, tmp: &Path) -> Result<u64> {
        let roots = read_u64(qmp, mem_section, tmp)?;
        let root = read_u64(qmp, roots + (sec / self.per_root) * 8, tmp)?;
        Ok(if root == 0 { 0 } else { root + (sec % self.per_root) * self.size })
    }
}

/// `dev attr value` lines of the `nd` block, as `dev -> attr -> value`.
fn parse_nd(text: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut m: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for line in text.lines() {
        let mut it = line.splitn(3, ' ');
        if let (Some(d), Some(a), Some(v)) = (it.next(), it.next(), it.next()) {
            m.entry(d.into()).or_default().insert(a.into(), v.trim().into());
        }
    }
    m
}

fn parse_num(s: &str) -> Result<u64> {
    let s = s.trim();
    let v = if let Some(h) = s.strip_prefix("0x") { u64::from_str_radix(h, 16) } else { s.parse() };
    v.with_context(|| format!("not a number: {s:?}"))
}

/// Node pfn spans from the `zoneinfo` block: `(nid, start_pfn, end_pfn)` per populated zone.
fn node_spans(zoneinfo: &str) -> Vec<(u32, u64, u64)> {
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

/// Top-level `System RAM` ranges of `/proc/iomem`, as pfn ranges.
fn ram_pfns(iomem: &str, page_shift: u32) -> Vec<(u64, u64)> {
    iomem
        .lines()
        .filter(|l| !l.starts_with(' ') && l.ends_with(": System RAM"))
        .filter_map(|l| {
            let (a, b) = l.split(" : ").next()?.split_once('-')?;
            let (a, b) = (u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()?);
            // The inclusive end + 1 in 65 bits: a range ending at the top is pfn 2^52.
            let page = 1u64 << page_shift;
            Some((a.div_ceil(page), ((u128::from(b) + 1) >> page_shift) as u64))
        })
        .collect()
}

/// Reads the struct pages of `[start, start + nr)` through the guest's vmemmap: every 4 KiB
/// vmemmap page is translated with `gva2gpa` (unmapped pages read as zeros), and the mapped runs
/// are copied with `memsave`.
fn dump_pages(
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

fn read_u64(qmp: &mut Qmp, addr: u64, tmp: &Path) -> Result<u64> {
    qmp.memsave(addr, 8, tmp)?;
    let b = fs::read(tmp)?;
    Ok(word(&b, 0))
}

/// The migrate type recorded for a pageblock whose section is not present.
pub const NO_SECTION: u8 = 0xff;

/// Bits per pageblock in `pageblock_flags`: 4 before Linux 6.16, 8 since the isolation bit
/// became `PB_migrate_isolate` (bit 7; `NR_PAGEBLOCK_BITS` is rounded up to a power of two).
#[must_use]
pub fn pageblock_bits(release: &str) -> u32 {
    let mut it = release.split(|c: char| !c.is_ascii_digit()).filter_map(|x| x.parse::<u32>().ok());
    let (major, minor) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    if (major, minor) >= (6, 16) { 8 } else { 4 }
}

/// Reads the migrate type of every pageblock overlapping `[start, start + nr)` from the guest's
/// `mem_section` (its geometry `geo`; `usage->pageblock_flags` at byte 24 after the rcu head and
/// the subsection map, one word for sections of up to 64 subsections). Returns the first
/// pageblock's pfn and the types; a pageblock of a section that is not present is an error, or
/// [`NO_SECTION`] with `absent_ok` (a boot zone's span covers holes such as the PCI hole).
fn read_pageblocks(
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

fn word(b: &[u8], off: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(w)
}

/// Finds the hugetlb folios of `order` in the guest's RAM by reading its memmap section by
/// section: a head is an `order`-aligned struct page whose `page_type` is `PGTY_hugetlb` and
/// whose next struct page is a tail (`compound_head` bit 0) with `order` in its flags.
fn find_hugetlb(qmp: &mut Qmp, base: u64, ram: &[(u64, u64)], order: u32, tmp: &Path) -> Result<Vec<u64>> {
    const CHUNK: u64 = 32768;
    let nr = 1u64 << order;
    let mut heads = Vec::new();
    for &(lo, hi) in ram {
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
                let o1 = o + STRUCT_PAGE as usize;
                // 6.1 has no page type: `_folio_dtor` (HUGETLB_PAGE_DTOR 2) and `_folio_order`.
                let v6_1 = data[o1 + 16] == 2 && u32::from(data[o1 + 17]) == order;
                if (data[o + 51] == PGTY_HUGETLB && word(&data, o1) & 0xff == u64::from(order) || v6_1)
                    && word(&data, o1 + 8) & 1 == 1
                {
                    heads.push(pfn + p);
                }
                p += nr;
            }
            pfn = chunk_end.min(hi).next_multiple_of(nr);
        }
    }
    Ok(heads)
}

/// Sets each hugetlb folio's position on its node's free list from the heads' `lru.next`
/// links (`blobs[i]` holds region `i`'s struct pages): the first folio is the one whose
/// `lru.prev` is no other folio's head. Leaves them unset for a node whose links do not form
/// one chain through all its folios.
pub fn free_list_positions(regions: &mut [Region], blobs: &[Vec<u8>], vbase: u64) {
    let lru_pfn = |v: u64| {
        let rel = v.wrapping_sub(vbase).wrapping_sub(8);
        (rel % STRUCT_PAGE == 0).then_some(rel / STRUCT_PAGE)
    };
    let nids: std::collections::BTreeSet<u32> =
        regions.iter().filter_map(|r| r.folio.map(|f| f.nid)).collect();
    for nid in nids {
        let idx: Vec<usize> =
            (0..regions.len()).filter(|&i| regions[i].folio.is_some_and(|f| f.nid == nid)).collect();
        let of = |pfn: Option<u64>| idx.iter().copied().find(|&i| Some(regions[i].start_pfn) == pfn);
        let first: Vec<usize> =
            idx.iter().copied().filter(|&i| of(lru_pfn(word(&blobs[i], 16))).is_none()).collect();
        let [mut at] = first[..] else { continue };
        let mut chain = vec![at];
        while let Some(next) = of(lru_pfn(word(&blobs[at], 8))) {
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

/// `MAX_PAGE_ORDER` of x86-64.
pub const MAX_PAGE_ORDER: u32 = 10;

/// `MAX_PAGE_ORDER` of a kernel: `CONFIG_ARCH_FORCE_MAX_ORDER` where the architecture sets it
/// (12 on ppc64el with 4 KiB pages), else [`MAX_PAGE_ORDER`].
///
/// # Errors
///
/// A value that is not an order the model has room for (at most 20).
pub fn max_page_order(kconfig: &BTreeMap<String, String>) -> Result<u32> {
    match kconfig.get("CONFIG_ARCH_FORCE_MAX_ORDER").map(String::as_str) {
        None | Some("n") => Ok(MAX_PAGE_ORDER),
        Some(v) => v
            .parse::<u32>()
            .ok()
            .filter(|&o| o <= 20)
            .with_context(|| format!("CONFIG_ARCH_FORCE_MAX_ORDER={v}: expected an order up to 20")),
    }
}

/// Whether a struct page heads a free buddy block of `order`: `PageBuddy` in either
/// `page_type` encoding (`PGTY_buddy << 24` from 6.12, `~PG_buddy` = `0xffffff7f` before) and
/// the order in `private`.
#[must_use]
pub fn is_free_block_head(page: &[u8], order: u32) -> bool {
    let page_type = u32::from_le_bytes([page[48], page[49], page[50], page[51]]);
    (page_type == 0xf000_0000 || page_type == 0xffff_ff7f) && word(page, 40) == u64::from(order)
}

/// The first pfns of the `order`-aligned blocks of a dump (`bytes` from `start_pfn`) whose
/// head is not a free block of `order`.
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

/// The largest `CONFIG_NODES_SHIFT` a kernel accepts (`NODES_SHIFT` is at most 10).
pub const MAX_NODES_SHIFT: u32 = 10;

/// `(nodes_pgshift, zones_pgshift, zones_width)` for a kernel `.config` with SPARSEMEM_VMEMMAP
/// (no section number in `page->flags`): the node field sits at the top of `flags`, the zone
/// field right below it (`include/linux/page-flags-layout.h`).
///
/// # Errors
///
/// `CONFIG_NODES_SHIFT` is not a number from 0 to [`MAX_NODES_SHIFT`].
pub fn node_zone_layout(kconfig: &BTreeMap<String, String>) -> Result<(u32, u32, u32)> {
    let on = |s: &str| kconfig.get(s).is_some_and(|v| v == "y");
    let nodes_shift = match kconfig.get("CONFIG_NODES_SHIFT").map(String::as_str) {
        None | Some("n") => 0,
        Some(v) => v.parse::<u32>().ok().filter(|&n| n <= MAX_NODES_SHIFT).with_context(|| {
            format!("CONFIG_NODES_SHIFT={v}: expected a number from 0 to {MAX_NODES_SHIFT}")
        })?,
    };
    let zones = 2
        + u32::from(on("CONFIG_ZONE_DMA"))
        + u32::from(on("CONFIG_ZONE_DMA32"))
        + u32::from(on("CONFIG_ZONE_DEVICE"))
        + u32::from(on("CONFIG_HIGHMEM"));
    let zones_width = match zones {
        0..=1 => 0,
        2 => 1,
        3..=4 => 2,
        _ => 3,
    };
    Ok((64 - nodes_shift, 64 - nodes_shift - zones_width, zones_width))
}

fn flags_node_zone(flags: u64, layout: (u32, u32, u32)) -> (u32, u32) {
    let (nshift, zshift, zwidth) = layout;
    let nid = if nshift >= 64 { 0 } else { (flags >> nshift) as u32 };
    let zone = ((flags >> zshift) & ((1 << zwidth) - 1)) as u32;
    (nid, zone)
}

/// Checks the `memmap_stream` block of a module configuration: the module loaded and said
/// that every check passed.
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

/// Boots `sc` on `kernel`, dumps its regions into `opts.out` and returns the facts.
///
/// # Errors
///
/// QEMU or the guest fails, or the regions cannot be found or read.
pub fn run(kernel: &Kernel, sc: &Scenario, opts: &RunOptions) -> Result<Facts> {
    if kernel.arch != sc.arch {
        bail!("configuration {} is for {:?}, kernel {} is {:?}", sc.name, sc.arch, kernel.id, kernel.arch);
    }
    let started = Instant::now();
    let mut workdir = crate::files::WorkDir::new(&opts.cache, &format!("{}-{}", kernel.id, sc.name))?;
    let work = workdir.path().to_path_buf();
    let base = initramfs::base(kernel, &opts.cache)?;
    let initrd = work.join("initrd.img");
    crate::files::write_file(&initrd, &initramfs::with_scenario(&base, &sc.script(), &sc.late_script()))?;
    let (qemu, mut args) = qemu_command(kernel, sc, &initrd, &work)?;
    if let Some(carve) = sc.memmap.filter(|_| sc.arch != Arch::Amd64) {
        let dtb = pmem_dtb(&qemu, &args, carve, &work)?;
        args.extend(["-dtb".into(), dtb.display().to_string()]);
    }
    let qemu_version = Guest::version(&qemu)?;
    let mut guest = Guest::start(&qemu, &args, &work)?;
    let added = match sc.hotplug {
        Some(hp) if sc.arch == Arch::Ppc64el => {
            // The node without memory, where there is one.
            let node = sc.numa_mb.iter().rposition(|&mb| mb == 0);
            hot_add_dimm(&mut guest, hp.size_mb, node, opts.timeout)
        }
        _ => Ok(()),
    };
    let console = match added.and_then(|()| guest.wait_ready(opts.timeout)) {
        Ok(c) => c,
        Err(e) => {
            let _ = crate::files::write_file(&opts.out.join("console.log"), guest.console().text.as_bytes());
            guest.quit();
            return Err(e.context(format!("QEMU's files kept in {}", workdir.keep().display())));
        }
    };
    eprintln!("  guest ready after {:.1} s", started.elapsed().as_secs_f64());
    if sc.module {
        let report = console.block("memmap_stream").unwrap_or_default();
        for l in report.lines() {
            eprintln!("  {l}");
        }
        if let Err(e) = module_passed(&report) {
            let _ = crate::files::write_file(&opts.out.join("console.log"), guest.console().text.as_bytes());
            guest.quit();
            return Err(e);
        }
    }
    if sc.hotplug.is_some() || sc.boot.is_some() {
        // Nothing may allocate from the memory while it is read.
        guest.qmp().execute("stop", serde_json::json!({}))?;
    }
    let result = collect(kernel, sc, &console, &mut guest, &work, opts, qemu_version);
    crate::files::write_file(&opts.out.join("console.log"), guest.console().text.as_bytes())?;
    guest.quit();
    let facts = result?;
    facts.save(&opts.out)?;
    eprintln!("  dumped after {:.1} s", started.elapsed().as_secs_f64());
    Ok(facts)
}

fn collect(
    kernel: &Kernel,
    sc: &Scenario,
    console: &Console,
    guest: &mut Guest,
    work: &Path,
    opts: &RunOptions,
    qemu_version: String,
) -> Result<Facts> {
    let block = |n: &str| console.block(n).unwrap_or_default();
    let kconfig = kernel::kconfig_symbols(&kernel.config)?;
    let mut sysmap = match &kernel.system_map {
        Some(p) => SystemMap::load(p)?,
        None => SystemMap::default(),
    };
    if sysmap.len() < 1000 {
        sysmap = SystemMap::parse(&block("kallsyms"));
    }
    let (vbase, vsize) = vmemmap(sc.arch);
    let argv = guest.argv.clone();
    let mut d = Dumper {
        console,
        qmp: guest.qmp(),
        sysmap: &sysmap,
        arch: sc.arch,
        layout: node_zone_layout(&kconfig)?,
        max_order: max_page_order(&kconfig)?,
        page_shift: page_shift(&kconfig)?,
        // `pageblock_order` is the PMD huge page's order where it is a constant (one page of
        // 8-byte entries: PAGE_SHIFT - 3, so 9 with 4 KiB pages and 11 with 16 KiB), at most
        // MAX_PAGE_ORDER; a variable (HUGETLB_PAGE_SIZE_VARIABLE) is read from the guest
        // (`learn_geometry`).
        sections: Sections::new(
            sc.arch,
            &kconfig,
            (page_shift(&kconfig)? - 3).min(max_page_order(&kconfig)?),
        )?,
        vbase,
        tmp: work.join("memsave.tmp"),
        regions: Vec::new(),
        blobs: Vec::new(),
    };
    let vsize = d.learn_geometry(&kconfig, vsize)?;
    if let Some(p) = sc.pmem {
        d.pmem(p)?;
    }
    if let Some(h) = sc.hugetlb {
        d.hugetlb(h, sc.numa_mb.len().max(1) as u64)?;
    }
    if let Some(hp) = sc.hotplug {
        d.hotplug(hp)?;
    }
    if sc.boot.is_some() {
        d.boot()?;
    }
    let Dumper { vbase, regions, blobs, sections, .. } = d;
    let pageblock_order = sections.pageblock_order;
    let kernel_image = (sysmap.addr("_text").unwrap_or(0), sysmap.addr("_end").unwrap_or(0));
    let kernel_symbols = write_regions(&opts.out, &regions, &blobs, &sysmap, kernel_image)?;
    let nodes = block("nodes")
        .lines()
        .filter_map(|l| l.strip_prefix("node")?.split(' ').next()?.parse().ok())
        .collect();
    let warnings = block("dmesg")
        .lines()
        .filter(|l| l.contains("WARNING:") || l.contains("BUG:"))
        .map(|l| l.split_once("] ").map_or(l, |x| x.1).to_string())
        .collect();
    let mut gblocks = BTreeMap::new();
    for n in [
        "iomem",
        "ndctl",
        "nd",
        "hugepages",
        "zoneinfo",
        "nodes",
        "kallsyms",
        "hotplug",
        "zoneinfo-full",
        "buddyinfo",
        "pagetypeinfo",
    ] {
        gblocks.insert(n.to_string(), block(n));
    }
    Ok(Facts {
        format: FORMAT,
        config: sc.name.into(),
        kernel: KernelFacts {
            id: kernel.id.clone(),
            release: block("release").trim().into(),
            version: block("version").trim().into(),
            suite: kernel.suite.clone(),
            arch: kernel.arch.debian().into(),
            packages: kernel.packages.clone(),
            kconfig,
        },
        qemu_version,
        qemu_argv: argv,
        cmdline: block("cmdline").trim().into(),
        vmemmap_base: vbase,
        vmemmap_size: vsize,
        struct_page_size: STRUCT_PAGE,
        pageblock_order,
        kernel_image,
        kernel_symbols,
        nodes,
        warnings,
        guest: gblocks,
        regions,
    })
}

/// Writes each region's struct pages to its file in `out`; returns the kernel-image addresses
/// (in `[lo, hi)` of `kernel_image`) the words of any region hold, with their names.
fn write_regions(
    out: &Path,
    regions: &[Region],
    blobs: &[Vec<u8>],
    sysmap: &SystemMap,
    (text_lo, text_hi): (u64, u64),
) -> Result<BTreeMap<String, String>> {
    let mut kernel_symbols = BTreeMap::new();
    for (r, b) in regions.iter().zip(blobs) {
        crate::files::write_file(&out.join(&r.file), b)?;
        for w in b.chunks_exact(8) {
            let v = word(w, 0);
            if v >= text_lo && v < text_hi {
                if let Some(n) = sysmap.name(v) {
                    kernel_symbols.insert(format!("{v:#x}"), n);
                }
            }
        }
    }
    Ok(kernel_symbols)
}

/// Reads the regions of one configuration out of the guest: each kind's
/// pfn range learned from what the guest reported, its struct pages dumped through QMP.
struct Dumper<'a> {
    console: &'a Console,
    qmp: &'a mut Qmp,
    sysmap: &'a SystemMap,
    arch: Arch,
    /// `(NODES_PGSHIFT, ZONES_PGSHIFT, ZONES_WIDTH)` of the kernel's page flags.
    layout: (u32, u32, u32),
    /// `MAX_PAGE_ORDER` (`CONFIG_ARCH_FORCE_MAX_ORDER`, else 10).
    max_order: u32,
    /// `PAGE_SHIFT`.
    page_shift: u32,
    /// The layout of `mem_section[]` and `pageblock_order`.
    sections: Sections,
    /// Address of the struct page of pfn 0.
    vbase: u64,
    /// The scratch file QMP `memsave` writes.
    tmp: PathBuf,
    /// The regions found so far, and their struct pages.
    regions: Vec<Region>,
    blobs: Vec<Vec<u8>>,
}

/// A pmem namespace as the guest's `/sys/bus/nd` describes it.
struct Namespace {
    /// First byte (guest-physical).
    start: u64,
    /// Bytes.
    size: u64,
    /// The pfn/dax device holding it (empty: none, a raw namespace).
    holder: String,
    /// First byte of the data (after the info block and the altmap's struct pages).
    data_start: u64,
    /// The holder's alignment.
    align: u64,
    /// The holder's mode (`ram` for a raw namespace).
    mode: String,
    /// The node the guest reports (negative ones as node 0).
    nid: u32,
}

impl Namespace {
    /// `namespace0.0` and its holder from the guest's `nd` block.
    fn of(nd_text: &str) -> Result<Namespace> {
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

impl Dumper<'_> {
    /// A block of the guest's console output (empty when it did not print it).
    fn block(&self, name: &str) -> String {
        self.console.block(name).unwrap_or_default()
    }

    /// arm64: the struct page of pfn 0 sits `memstart_addr >> PAGE_SHIFT` struct pages below
    /// `VMEMMAP_START` (vmemmap = (struct page *)VMEMMAP_START - (memstart_addr >> PAGE_SHIFT)).
    fn arm64_vmemmap_base(&mut self) -> Result<()> {
        let ms = self.sysmap.addr("memstart_addr").context("memstart_addr not in the guest's kallsyms")?;
        let memstart = read_u64(self.qmp, ms, &self.tmp)?;
        self.vbase = self.vbase.wrapping_sub((memstart >> 12) * STRUCT_PAGE);
        eprintln!("  arm64: memstart_addr {memstart:#x}, struct page of pfn 0 at {:#x}", self.vbase);
        Ok(())
    }

    /// Learns `pageblock_order` where it is a variable, and where pfn 0's struct page is where
    /// the architecture does not fix it (arm64 with 4 KiB pages from `memstart_addr`, the others
    /// from `mem_section[]`); returns the vmemmap area's size from there (its end stays where
    /// [`vmemmap`] puts it).
    fn learn_geometry(&mut self, kconfig: &BTreeMap<String, String>, vsize: u64) -> Result<u64> {
        if let Some(a) = self.sysmap.addr("pageblock_order") {
            let order = (read_u64(self.qmp, a, &self.tmp)? & 0xffff_ffff) as u32;
            if order > 20 {
                bail!("the guest's pageblock_order reads {order}");
            }
            eprintln!("  pageblock_order {order} (a variable of this kernel)");
            self.sections.pageblock_order = order;
        }
        match self.arch {
            Arch::Amd64 => Ok(vsize),
            Arch::Arm64 if self.page_shift == 12 => self.arm64_vmemmap_base().map(|()| vsize),
            Arch::Arm64 | Arch::Riscv64 | Arch::Ppc64el => {
                let first = ram_pfns(&self.block("iomem"), self.page_shift)
                    .first()
                    .map(|r| r.0)
                    .context("no System RAM in /proc/iomem")?;
                let end = self.vbase + vsize;
                self.vbase = self.mem_section_vmemmap(kconfig, first)?;
                end.checked_sub(self.vbase).context("pfn 0's struct page above the vmemmap's end")
            }
        }
    }

    /// The address of pfn 0's struct page, from the guest's `mem_section[]`: with
    /// SPARSEMEM_VMEMMAP a present section's `section_mem_map` is its `mem_map` minus its first
    /// pfn (`sparse_encode_mem_map()`), which is `vmemmap`, with the section flags in the bits
    /// below `SECTION_MAP_LAST_BIT` (5 in 7.2; struct pages are 64-byte aligned, so the low six
    /// bits are cleared). `pfn` is a pfn of RAM (its section is present).
    fn mem_section_vmemmap(&mut self, kconfig: &BTreeMap<String, String>, pfn: u64) -> Result<u64> {
        let on = |s: &str| kconfig.get(s).is_some_and(|v| v == "y");
        if !on("CONFIG_SPARSEMEM_EXTREME") || !on("CONFIG_SPARSEMEM_VMEMMAP") {
            bail!("the kernel's memmap is not SPARSEMEM_EXTREME with VMEMMAP");
        }
        let sec = pfn >> self.sections.section_shift;
        let ms = self.sysmap.addr("mem_section").context("mem_section not in the guest's kallsyms")?;
        let entry = self.sections.entry(self.qmp, ms, sec, &self.tmp)?;
        if entry == 0 {
            bail!("mem_section root of section {sec} (pfn {pfn:#x}) is not allocated");
        }
        let map = read_u64(self.qmp, entry, &self.tmp)?;
        if map & 1 == 0 {
            bail!("section {sec} (pfn {pfn:#x}) is not present: {map:#x}");
        }
        let base = map & !63;
        eprintln!(
            "  {}: section {sec} section_mem_map {map:#x}, struct page of pfn 0 at {base:#x}",
            self.arch.debian()
        );
        Ok(base)
    }

    /// The struct pages of pfns `[start_pfn, start_pfn + nr)` and the frame of each vmemmap page.
    fn dump(&mut self, start_pfn: u64, nr: u64) -> Result<(Vec<u8>, Vec<Option<u64>>)> {
        dump_pages(self.qmp, self.vbase, start_pfn, nr, &self.tmp)
    }

    /// The pageblock migrate types of pfns `[start_pfn, start_pfn + nr)` from `mem_section`.
    fn pageblocks(&mut self, mem_section: u64, start_pfn: u64, nr: u64) -> Result<(u64, Vec<u8>)> {
        let bits = pageblock_bits(self.block("release").trim());
        read_pageblocks(self.qmp, mem_section, bits, (self.sections, start_pfn, nr), false, &self.tmp)
    }

    /// Adds a region (its file named by its index) with its struct pages.
    fn push(&mut self, region: Region, bytes: Vec<u8>) {
        self.regions.push(region);
        self.blobs.push(bytes);
    }

    /// The next region's file name.
    fn file(&self) -> String {
        format!("region-{}.bin", self.regions.len())
    }

    /// The ZONE_DEVICE region of namespace0.0: the whole namespace, its altmap and initialized
    /// range from the holder's data offset, its pageblocks where they can be read (amd64).
    fn pmem(&mut self, p: Pmem) -> Result<()> {
        let ns = Namespace::of(&self.block("nd"))?;
        let shift = self.page_shift;
        let start_pfn = ns.start >> shift;
        let nr = ns.size >> shift;
        let dataoff = (ns.data_start - ns.start) >> shift;
        // nvdimm's __nvdimm_setup_pfn: base_pfn = the (subsection-aligned) namespace start,
        // reserve = the info block (`ALIGN(SZ_8K, PAGE_SIZE)`: 2 pages of 4 KiB, 1 of 16 or 64
        // KiB), free = the rest of the data offset.
        let reserve = 8192u64.div_ceil(1 << shift);
        let altmap =
            (ns.mode == "pmem").then(|| Altmap { base_pfn: start_pfn, reserve, free: dataoff - reserve });
        let init_start = start_pfn + altmap.map_or(0, |a| a.reserve + a.free);
        let vmemmap_shift = if p.mode == "devdax" { (ns.align >> shift).trailing_zeros() } else { 0 };
        eprintln!(
            "  namespace pfns [{start_pfn:#x}, {:#x}) holder {} mode {} align {} data offset {dataoff} pfns",
            start_pfn + nr,
            ns.holder,
            ns.mode,
            ns.align
        );
        let (bytes, gpas) = self.dump(start_pfn, nr)?;
        let pageblocks = match self.sysmap.addr("mem_section") {
            Some(ms) => match self.pageblocks(ms, start_pfn, nr) {
                Ok(p) => Some(p),
                Err(e) => {
                    eprintln!("  note: pageblock migrate types not read: {e:#}");
                    None
                }
            },
            None => None,
        };
        let io = ((init_start - start_pfn) * STRUCT_PAGE) as usize;
        let first = bytes.get(io..io + 64).context("init start beyond the namespace")?;
        let (fnid, zone) = flags_node_zone(word(first, 0), self.layout);
        if fnid != ns.nid {
            eprintln!("  note: namespace numa_node {}, flags say node {fnid}", ns.nid);
        }
        let region = Region {
            memory_type: Some(if p.mode == "devdax" { "generic" } else { "fsdax" }.into()),
            mode: Some(p.mode.into()),
            map: Some(p.map.into()),
            holder: Some(ns.holder.clone()),
            align: Some(ns.align),
            vmemmap_shift: Some(vmemmap_shift),
            altmap,
            init_start_pfn: Some(init_start),
            pgmap_addr: Some(word(first, 8)),
            pageblock_first_pfn: pageblocks.as_ref().map(|p| p.0),
            pageblock_migratetypes: pageblocks.map(|p| p.1).unwrap_or_default(),
            vmemmap_gpa: gpas,
            ..Region::new("zone-device", self.file(), start_pfn, nr, fnid, zone)
        };
        self.push(region, bytes);
        Ok(())
    }

    /// One region per hugetlb folio found in the memmap of the guest's RAM (`h.per_node` on each
    /// of `nodes`), then their positions on the hstate free lists.
    fn hugetlb(&mut self, h: Hugetlb, nodes: u64) -> Result<()> {
        // The order in the kernel's base pages (a 2 MiB page is order 9 of 4 KiB, 7 of 16 KiB).
        let order = ((h.size_kb << 10) >> self.page_shift).trailing_zeros();
        let ram = ram_pfns(&self.block("iomem"), self.page_shift);
        let spans = node_spans(&self.block("zoneinfo"));
        let heads = find_hugetlb(self.qmp, self.vbase, &ram, order, &self.tmp)?;
        let expected = h.per_node * nodes;
        if heads.len() as u64 != expected {
            bail!("found {} hugetlb folios of order {order} in the memmap, expected {expected}", heads.len());
        }
        for head in heads {
            let nr = 1u64 << order;
            let (bytes, gpas) = self.dump(head, nr)?;
            let (fnid, zone) = flags_node_zone(word(&bytes, 0), self.layout);
            let span_nid = spans.iter().find(|s| s.1 <= head && head < s.2).map_or(fnid, |s| s.0);
            if span_nid != fnid {
                eprintln!("  note: folio {head:#x} in node {span_nid}'s span, flags say node {fnid}");
            }
            eprintln!("  hugetlb folio at pfn {head:#x} (order {order}, node {fnid})");
            let region = Region {
                hstate: Some(h.size_name()),
                hvo: Some(h.hvo),
                boot: Some(h.boot),
                folio: Some(Folio { head_pfn: head, order, nid: fnid, list_pos: None }),
                vmemmap_gpa: gpas,
                ..Region::new("hugetlb", self.file(), head, nr, fnid, zone)
            };
            self.push(region, bytes);
        }
        free_list_positions(&mut self.regions, &self.blobs, self.vbase);
        Ok(())
    }

    /// The hot-added DIMM's pfn range (QEMU's `dimm0`), checked online block by block, and
    /// the blocks the guest allocated from since.
    fn hotplug(&mut self, hp: Hotplug) -> Result<()> {
        let devs = self.qmp.execute("query-memory-devices", serde_json::json!({}))?;
        let dimm = devs
            .as_array()
            .and_then(|a| a.iter().find(|d| d["data"]["id"] == HOTPLUG_DEVICE))
            .with_context(|| format!("QEMU reports no {HOTPLUG_DEVICE} (query-memory-devices)"))?;
        // A pc-dimm's first byte is `addr`, a virtio-mem device's `memaddr`.
        let addr = dimm["data"]["addr"]
            .as_u64()
            .or_else(|| dimm["data"]["memaddr"].as_u64())
            .context("the memory device's address")?;
        let size = dimm["data"]["size"].as_u64().context("the memory device's size")?;
        let page = 1u64 << self.page_shift;
        if size / page == 0
            || size / page > crate::facts::MAX_REGION_PAGES
            || addr.checked_add(size).is_none()
        {
            bail!(
                "QEMU's dimm0 [{addr:#x}, +{size:#x}): expected 1 to {} pages",
                crate::facts::MAX_REGION_PAGES
            );
        }
        let block_pages = online_blocks(&self.block("hotplug"), addr, size, self.page_shift)?;
        let (start_pfn, nr) = (addr / page, size / page);
        eprintln!(
            "  DIMM pfns [{start_pfn:#x}, {:#x}), {block_pages} pages per memory block",
            start_pfn + nr
        );
        let (bytes, gpas) = self.dump(start_pfn, nr)?;
        let ms = self.sysmap.addr("mem_section").context("mem_section not in the guest's kallsyms")?;
        let (pb_first, pbs) = self.pageblocks(ms, start_pfn, nr)?;
        let (fnid, zone) = flags_node_zone(word(&bytes, 0), self.layout);
        let region = Region {
            online_type: Some(hp.online_type().into()),
            memory_block_pages: Some(block_pages),
            allocated_blocks: allocated_blocks(&bytes, start_pfn, self.max_order),
            pageblock_first_pfn: Some(pb_first),
            pageblock_migratetypes: pbs,
            vmemmap_gpa: gpas,
            ..Region::new("hotplug", self.file(), start_pfn, nr, fnid, zone)
        };
        self.push(region, bytes);
        Ok(())
    }
}

/// How far a boot zone's free buddy pages may be from the `pages free` the guest printed: the
/// guest runs between printing and the host's stop (the shell's read of `/proc/zoneinfo`
/// allocates, kernel threads run on every vCPU), and per-CPU vmstat differences up to the
/// kernel's threshold (at most 125 per CPU) are not in a printed total. A classifier that
/// misread free blocks would be off by whole blocks of thousands of pages in a zone.
pub const BOOT_FREE_DRIFT: u64 = 512;

impl Dumper<'_> {
    /// One region per populated zone of every node, its whole span (holes included: their
    /// struct pages exist where their section is present), with its pageblocks.
    fn boot(&mut self) -> Result<()> {
        let zones = crate::boot::zones(&self.block("zoneinfo-full"))?;
        let rel = self.block("release");
        let version = memmap_core::KernelVersion::parse(rel.trim())
            .with_context(|| format!("the guest's release {:?} names no kernel version", rel.trim()))?;
        // The release decides the buddy page type and the PG_reserved bit.
        let release = memmap_core::KernelConfig {
            max_page_order: self.max_order,
            ..memmap_core::KernelConfig::X86_64.with_version(version)
        };
        let ms = self.sysmap.addr("mem_section").context("mem_section not in the guest's kallsyms")?;
        for z in zones.iter().filter(|z| z.spanned > 0) {
            if z.spanned > crate::facts::MAX_REGION_PAGES {
                bail!(
                    "node {} zone {} spans {} pages: at most {}",
                    z.nid,
                    z.name,
                    z.spanned,
                    crate::facts::MAX_REGION_PAGES
                );
            }
            eprintln!(
                "  node {} zone {}: pfns [{:#x}, {:#x}), {} present, {} managed",
                z.nid,
                z.name,
                z.start_pfn,
                z.start_pfn + z.spanned,
                z.present,
                z.managed
            );
            let (bytes, gpas) = self.dump(z.start_pfn, z.spanned)?;
            let first_vpage = (self.vbase + z.start_pfn * STRUCT_PAGE) / 4096;
            let vpage = |pfn: u64| ((self.vbase + pfn * STRUCT_PAGE) / 4096 - first_vpage) as usize;
            let classes = crate::boot::classify(&bytes, z.start_pfn, &release, |pfn| {
                gpas.get(vpage(pfn)).is_some_and(Option::is_some)
            });
            let counts = crate::boot::counts(&classes);
            let line: Vec<String> = crate::boot::Class::ALL
                .iter()
                .zip(counts)
                .map(|(k, n)| format!("{n} {}", k.name()))
                .collect();
            eprintln!("    {}", line.join(", "));
            // The buddy allocator's own count (NR_FREE_PAGES, per-CPU lists excluded), printed
            // a moment before the host stopped the guest.
            let free = counts[0] + counts[1];
            if free.abs_diff(z.free) > BOOT_FREE_DRIFT {
                bail!(
                    "node {} zone {}: {free} pages are in free buddy blocks, /proc/zoneinfo says {} free \
                     (more apart than the {BOOT_FREE_DRIFT} pages the guest may change meanwhile)",
                    z.nid,
                    z.name,
                    z.free
                );
            }
            if free != z.free {
                eprintln!(
                    "    /proc/zoneinfo said {} free: the guest changed {} pages before it stopped",
                    z.free,
                    free.abs_diff(z.free)
                );
            }
            let bits = pageblock_bits(rel.trim());
            let (pb_first, pbs) = read_pageblocks(
                self.qmp,
                ms,
                bits,
                (self.sections, z.start_pfn, z.spanned),
                true,
                &self.tmp,
            )?;
            let region = Region {
                zone_name: Some(z.name.clone()),
                pageblock_first_pfn: Some(pb_first),
                pageblock_migratetypes: pbs,
                vmemmap_gpa: gpas,
                ..Region::new("boot", self.file(), z.start_pfn, z.spanned, z.nid, z.index)
            };
            self.push(region, bytes);
        }
        Ok(())
    }
}

/// Pages per memory block from the guest's `hotplug` block, after checking that every memory
/// block of the DIMM at `[addr, addr + size)` is online.
fn online_blocks(hb: &str, addr: u64, size: u64, page_shift: u32) -> Result<u64> {
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
        let ppc = k(&[
            ("CONFIG_PAGE_SHIFT", "16"),
            ("CONFIG_ARCH_FORCE_MAX_ORDER", "8"),
            ("CONFIG_PAGE_EXTENSION", "y"),
        ]);
        assert_eq!((page_shift(&ppc).unwrap(), max_page_order(&ppc).unwrap()), (16, 8));
        let s = Sections::new(Arch::Ppc64el, &ppc, 5).unwrap();
        assert_eq!((s.section_shift, s.size, s.per_root), (8, 32, 2048));
        // Pfns of 64 KiB: the partial page at either end of a range is left out.
        assert_eq!(ram_pfns("00008000-4000ffff : System RAM\n", 16), [(1, 0x4001)]);
        // A kernel without CONFIG_PAGE_SHIFT (before 6.8) has 4 KiB pages; odd values are refused.
        assert_eq!((page_shift(&k(&[])).unwrap(), max_page_order(&k(&[])).unwrap()), (12, MAX_PAGE_ORDER));
        assert!(page_shift(&k(&[("CONFIG_PAGE_SHIFT", "13")])).is_err());
        assert!(max_page_order(&k(&[("CONFIG_ARCH_FORCE_MAX_ORDER", "99")])).is_err());
        assert_eq!(section_size_bits(Arch::Arm64, 16), 29);
    }

    #[test]
    fn hostile_guest_reports_are_errors_not_overflows() {
        // A System RAM range ending at the top of the address space, and a zone whose span
        // passes u64::MAX.
        assert_eq!(ram_pfns("0-ffffffffffffffff : System RAM\n", 12), [(0, 1 << 52)]);
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

    #[test]
    fn a_pmem_carve_out_leaves_the_memory_node_and_becomes_a_pmem_region() {
        assert_eq!(parse_carve("1G!3G").unwrap(), (1 << 30, 3 << 30));
        assert_eq!(parse_carve("960M!4160M").unwrap(), (960 << 20, 4160 << 20));
        for bad in ["1G", "1G!", "!3G", "1T!3G", "xG!3G", "99999999999G!1G"] {
            assert!(parse_carve(bad).is_err(), "{bad}");
        }
        // QEMU's arm64 `virt` with 3 GiB: RAM [1 GiB, 4 GiB), the top 1 GiB carved out.
        let dts = "/dts-v1/;\n\n/ {\n\tmemory@40000000 {\n\t\treg = <0x00 0x40000000 0x00 0xc0000000>;\n\t\t\
                   device_type = \"memory\";\n\t};\n};\n";
        let out = carve_pmem(dts, 3 << 30, 1 << 30).unwrap();
        assert!(out.contains("reg = <0x0 0x40000000 0x0 0x80000000>;"), "{out}");
        assert!(out.contains(
            "pmem@c0000000 {\n\t\tcompatible = \"pmem-region\";\n\t\treg = <0x0 0xc0000000 0x0 0x40000000>;"
        ));
        assert!(out.trim_end().ends_with("};\n};"), "{out}");
        // Inside the node: the memory on both sides stays.
        let mid = carve_pmem(dts, 2 << 30, 1 << 30).unwrap();
        assert!(
            mid.contains("reg = <0x0 0x40000000 0x0 0x40000000 0x0 0xc0000000 0x0 0x40000000>;"),
            "{mid}"
        );
        // A carve-out outside every memory node is refused.
        assert!(carve_pmem(dts, 4 << 30, 1 << 30).is_err());
        assert!(carve_pmem("/ {\n};\n", 3 << 30, 1 << 30).is_err());
    }

    #[test]
    fn a_nodes_shift_no_kernel_has_is_refused() {
        let k = |v: &str| BTreeMap::from([("CONFIG_NODES_SHIFT".to_string(), v.to_string())]);
        assert_eq!(node_zone_layout(&k("10")).unwrap().0, 54);
        assert_eq!(node_zone_layout(&k("n")).unwrap().0, 64);
        for bad in ["65", "100", "-1", "x"] {
            let e = node_zone_layout(&k(bad)).unwrap_err().to_string();
            assert_eq!(e, format!("CONFIG_NODES_SHIFT={bad}: expected a number from 0 to 10"));
        }
    }
}
