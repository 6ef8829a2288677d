//! One configuration on one kernel: build the initramfs, boot QEMU, set the memory up in the
//! guest, learn the pfn ranges from the guest, dump the struct pages through QMP and write
//! `facts.json` + `region-N.bin`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use memmap_core::{Arch, FlagsLayout, KernelConfig};
use memmap_core::{Kconfig, offsets};

use crate::facts::read::{
    Namespace, Sections, allocated_blocks, dump_pages, find_hugetlb, free_list_positions, module_passed,
    node_spans, online_blocks, pageblock_bits, read_pageblocks, read_u64, vmemmap, word,
};
use crate::facts::symbols::SystemMap;
use crate::facts::{FORMAT, Facts, Folio, KernelFacts, Region, STRUCT_PAGE};
use crate::guest::provider;
use crate::guest::qemu::{Console, Guest, Qmp};
use crate::guest::scenario::{Hotplug, Hugetlb, Pmem, Scenario};
use crate::guest::vm::{HOTPLUG_DEVICE, hot_add_dimm, pmem_dtb, qemu_command};
use crate::kernel::Kernel;
use crate::kernel::initramfs;

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
    if let Some(carve) = sc.memmap.filter(|_| sc.arch != Arch::X86_64) {
        let dtb = pmem_dtb(&qemu, &args, carve, &work)?;
        args.extend(["-dtb".into(), dtb.display().to_string()]);
    }
    let qemu_version = Guest::version(&qemu)?;
    let mut guest = Guest::start(&qemu, &args, &work)?;
    let added = match sc.hotplug {
        Some(hp) if sc.arch == Arch::Powerpc64 => {
            // The node without memory, where there is one.
            let node = sc.numa_mb.iter().rposition(|&mb| mb == 0);
            hot_add_dimm(&mut guest, hp.size_mb, node, opts.timeout)
        }
        _ => Ok(()),
    };
    let binds = added.and_then(|()| {
        if !sc.provider {
            return Ok(());
        }
        provider::binds(&mut guest, &work, &opts.out, opts.timeout, |console, guest, out| {
            let sub = RunOptions { out: out.to_path_buf(), ..opts.clone() };
            collect(kernel, sc, console, guest, &work, &sub, qemu_version.clone())
        })
    });
    let console = match binds.and_then(|()| guest.wait_ready(opts.timeout)) {
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
    if sc.provider {
        for l in console.block("timing").unwrap_or_default().lines() {
            eprintln!("  {l}");
        }
        eprintln!("  {}", provider::timing_summary(&console.block("timing").unwrap_or_default()));
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
    let kconfig = crate::kernel::kconfig_symbols(&kernel.config)?;
    let mut sysmap = match &kernel.system_map {
        Some(p) => SystemMap::load(p)?,
        None => SystemMap::default(),
    };
    if sysmap.len() < 1000 {
        sysmap = SystemMap::parse(&block("kallsyms"));
    }
    let cfg = crate::facts::model_config(&kconfig, &kernel.release)?;
    let lookup = |s: &str| kconfig.get(s).map(String::as_str);
    let symbols = Kconfig::from_fn(&lookup);
    let (vbase, vsize) = vmemmap(sc.arch);
    let argv = guest.argv.clone();
    let mut d = Dumper {
        console,
        qmp: guest.qmp(),
        sysmap: &sysmap,
        layout: cfg.flags_layout().map_err(|e| anyhow!("the kernel's .config: {e}"))?,
        // `pageblock_order` as the model has it where it is a constant; a variable
        // (HUGETLB_PAGE_SIZE_VARIABLE) is read from the guest (`learn_geometry`).
        sections: Sections::new(&cfg, symbols.enabled("CONFIG_PAGE_EXTENSION") == Some(true)),
        cfg,
        vbase,
        tmp: work.join("memsave.tmp"),
        regions: Vec::new(),
        blobs: Vec::new(),
    };
    let vsize = d.learn_geometry(symbols.enabled("CONFIG_SPARSEMEM_EXTREME") == Some(true), vsize)?;
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
            arch: crate::kernel::debian(kernel.arch).into(),
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

/// Reads the regions of one configuration out of the guest through QMP.
struct Dumper<'a> {
    console: &'a Console,
    qmp: &'a mut Qmp,
    sysmap: &'a SystemMap,
    /// The model's configuration of the kernel (its `.config` and release).
    cfg: KernelConfig,
    /// The kernel's page-flags layout.
    layout: FlagsLayout,
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

    /// Learns `pageblock_order` where it is a variable, and pfn 0's struct page where the
    /// architecture does not fix it; returns the vmemmap area's size from there.
    fn learn_geometry(&mut self, sparsemem_extreme: bool, vsize: u64) -> Result<u64> {
        if let Some(a) = self.sysmap.addr("pageblock_order") {
            let order = (read_u64(self.qmp, a, &self.tmp)? & 0xffff_ffff) as u32;
            if order > 20 {
                bail!("the guest's pageblock_order reads {order}");
            }
            eprintln!("  pageblock_order {order} (a variable of this kernel)");
            self.sections.pageblock_order = order;
        }
        match self.cfg.arch {
            Arch::X86_64 => Ok(vsize),
            Arch::Arm64 if self.cfg.page_shift == 12 => self.arm64_vmemmap_base().map(|()| vsize),
            _ => {
                let first = crate::facts::iomem_ranges(&self.block("iomem"), false, self.cfg.page_shift)
                    .first()
                    .map(|r| r.start)
                    .context("no System RAM in /proc/iomem")?;
                let end = self.vbase + vsize;
                self.vbase = self.mem_section_vmemmap(sparsemem_extreme, first)?;
                end.checked_sub(self.vbase).context("pfn 0's struct page above the vmemmap's end")
            }
        }
    }

    /// The address of pfn 0's struct page from `mem_section[]`: a present section's
    /// `section_mem_map` is `vmemmap` (its `mem_map` minus its first pfn) with flags in the low six
    /// bits (`sparse_encode_mem_map()`). `pfn` is a pfn of RAM.
    fn mem_section_vmemmap(&mut self, sparsemem_extreme: bool, pfn: u64) -> Result<u64> {
        if !sparsemem_extreme || !self.cfg.sparsemem_vmemmap {
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
            crate::kernel::debian(self.cfg.arch)
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
        let shift = self.cfg.page_shift;
        let start_pfn = ns.start >> shift;
        let nr = ns.size >> shift;
        let dataoff = (ns.data_start - ns.start) >> shift;
        // nvdimm's __nvdimm_setup_pfn: base_pfn = the (subsection-aligned) namespace start,
        // reserve = the info block (`ALIGN(SZ_8K, PAGE_SIZE)`: 2 pages of 4 KiB, 1 of 16 or 64
        // KiB), free = the rest of the data offset.
        let reserve = 8192u64.div_ceil(1 << shift);
        let altmap = (ns.mode == "pmem").then(|| memmap_dump::AltmapJson {
            base_pfn: start_pfn,
            reserve,
            free: dataoff - reserve,
        });
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
        let (fnid, zone) = (self.layout.node(word(first, 0)), self.layout.zone(word(first, 0)));
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
            pgmap_addr: Some(word(first, offsets::PGMAP)),
            pageblock_first_pfn: pageblocks.as_ref().map(|p| p.0),
            pageblock_migratetypes: pageblocks.map(|p| p.1).unwrap_or_default(),
            vmemmap_gpa: gpas,
            ..Region::new("zone-device", self.file(), start_pfn, nr, fnid, zone)
        };
        self.push(region, bytes);
        Ok(())
    }

    /// One region per hugetlb folio found in the guest's RAM, with its free-list position.
    fn hugetlb(&mut self, h: Hugetlb, nodes: u64) -> Result<()> {
        // The order in the kernel's base pages (a 2 MiB page is order 9 of 4 KiB, 7 of 16 KiB).
        let order = ((h.size_kb << 10) >> self.cfg.page_shift).trailing_zeros();
        let ram = crate::facts::iomem_ranges(&self.block("iomem"), false, self.cfg.page_shift);
        let spans = node_spans(&self.block("zoneinfo"));
        let heads = find_hugetlb(self.qmp, self.vbase, &ram, order, &self.tmp)?;
        let expected = h.per_node * nodes;
        if heads.len() as u64 != expected {
            bail!("found {} hugetlb folios of order {order} in the memmap, expected {expected}", heads.len());
        }
        for head in heads {
            let nr = 1u64 << order;
            let (bytes, gpas) = self.dump(head, nr)?;
            let (fnid, zone) = (self.layout.node(word(&bytes, 0)), self.layout.zone(word(&bytes, 0)));
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

    /// The hot-added DIMM's pfn range, checked online, and the blocks allocated from since.
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
        let page = 1u64 << self.cfg.page_shift;
        if size / page == 0
            || size / page > crate::facts::MAX_REGION_PAGES
            || addr.checked_add(size).is_none()
        {
            bail!(
                "QEMU's dimm0 [{addr:#x}, +{size:#x}): expected 1 to {} pages",
                crate::facts::MAX_REGION_PAGES
            );
        }
        let block_pages = online_blocks(&self.block("hotplug"), addr, size, self.cfg.page_shift)?;
        let (start_pfn, nr) = (addr / page, size / page);
        eprintln!(
            "  DIMM pfns [{start_pfn:#x}, {:#x}), {block_pages} pages per memory block",
            start_pfn + nr
        );
        let (bytes, gpas) = self.dump(start_pfn, nr)?;
        let ms = self.sysmap.addr("mem_section").context("mem_section not in the guest's kallsyms")?;
        let (pb_first, pbs) = self.pageblocks(ms, start_pfn, nr)?;
        let (fnid, zone) = (self.layout.node(word(&bytes, 0)), self.layout.zone(word(&bytes, 0)));
        let region = Region {
            online_type: Some(hp.online_type().into()),
            memory_block_pages: Some(block_pages),
            allocated_blocks: allocated_blocks(&bytes, start_pfn, self.cfg.max_page_order),
            pageblock_first_pfn: Some(pb_first),
            pageblock_migratetypes: pbs,
            vmemmap_gpa: gpas,
            ..Region::new("hotplug", self.file(), start_pfn, nr, fnid, zone)
        };
        self.push(region, bytes);
        Ok(())
    }
}

/// How far a boot zone's free buddy pages may be from the `pages free` the guest printed (the
/// guest runs until stopped, per-CPU vmstat deltas are not in the total); a misread free block
/// would be off by thousands of pages.
pub const BOOT_FREE_DRIFT: u64 = 512;

impl Dumper<'_> {
    /// One region per populated zone of every node, holes included, with its pageblocks.
    fn boot(&mut self) -> Result<()> {
        let zones = crate::facts::zones::zones(&self.block("zoneinfo-full"))?;
        let rel = self.block("release");
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
            // The machine's last zone runs to the end of its section: memmap_init()'s last
            // init_unavailable_range() writes the struct pages from its end to there.
            let end = z.start_pfn + z.spanned;
            let last = zones.iter().all(|o| o.start_pfn + o.spanned <= end);
            let pps = self.cfg.pages_per_section();
            let dumped = if last { end.div_ceil(pps).saturating_mul(pps) - z.start_pfn } else { z.spanned };
            let (bytes, gpas) = self.dump(z.start_pfn, dumped)?;
            let first_vpage = (self.vbase + z.start_pfn * STRUCT_PAGE) / 4096;
            let vpage = |pfn: u64| ((self.vbase + pfn * STRUCT_PAGE) / 4096 - first_vpage) as usize;
            let classes = crate::facts::zones::classify(&bytes, z.start_pfn, &self.cfg, |pfn| {
                gpas.get(vpage(pfn)).is_some_and(Option::is_some)
            });
            let counts = crate::facts::zones::counts(&classes);
            let line: Vec<String> = crate::facts::zones::Class::ALL
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
                ..Region::new("boot", self.file(), z.start_pfn, dumped, z.nid, z.index)
            };
            self.push(region, bytes);
        }
        Ok(())
    }
}
