//! The model side: the `memmap-dump` model run of the same configuration, in this process
//! and in memory (nothing is written), with the `memmap-bench dump` command line that runs the
//! same model so that every comparison names a command a reader can rerun.

use anyhow::{Context, Result, anyhow};
use hugetlb_init::{Hstate, HvoMode};
use memmap_core::Named;
use memmap_core::{KernelConfig, MemoryType, Strategy};
use memmap_dump::{HotplugDump, HugetlbDump, ZoneDeviceDump};

use crate::facts::{Facts, Region};

/// A model dump read back: `meta.json` and `memmap.bin`.
#[derive(Debug, Clone)]
pub struct ModelDump {
    /// `meta.json`.
    pub meta: memmap_dump::DumpMeta,
    /// `memmap.bin`.
    pub bytes: Vec<u8>,
    /// `start_pfn`.
    pub start_pfn: u64,
    /// `page_addr_base - start_pfn * struct_page_size`: the model's vmemmap base.
    pub vmemmap_base: u64,
    /// The command line that made it.
    pub argv: Vec<String>,
}

impl ModelDump {
    /// The part of the model's vmemmap its pointers can point into (up to one gigantic page past
    /// the dump), so that values such as `-1` are not read as struct page pointers.
    #[must_use]
    pub fn span(&self) -> u64 {
        (self.start_pfn + (self.bytes.len() as u64) / 64 + (1 << 18)) * 64
    }
}

impl ModelDump {
    /// Runs a model dump in this process and reads its result.
    ///
    /// # Errors
    ///
    /// The model refuses the parameters or its storage cannot be mapped.
    pub fn run(spec: &Spec) -> Result<ModelDump> {
        let dump = match &spec.what {
            What::ZoneDevice(z) => z.run(),
            What::Hugetlb(h) => h.run(),
            What::Hotplug(h) => h.run(),
        }
        .map_err(|e| anyhow!("memmap-bench {}: {e}", spec.argv.join(" ")))?;
        let (start_pfn, size) = (dump.meta.start_pfn, dump.meta.struct_page_size as u64);
        let vmemmap_base = dump.meta.page_addr_base.wrapping_sub(start_pfn.wrapping_mul(size));
        Ok(ModelDump {
            bytes: dump.memmap().to_vec(),
            meta: dump.meta,
            start_pfn,
            vmemmap_base,
            argv: spec.argv.clone(),
        })
    }
}

/// What the model runs for a kernel region, and the `memmap-bench` command line that runs it.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The model run.
    pub what: What,
    /// The equivalent `memmap-bench` arguments.
    pub argv: Vec<String>,
}

/// The two kinds of model runs.
#[derive(Debug, Clone)]
pub enum What {
    /// `dump zone-device`.
    ZoneDevice(ZoneDeviceDump),
    /// `dump hugetlb`.
    Hugetlb(HugetlbDump),
    /// `dump hotplug`.
    Hotplug(HotplugDump),
}

/// The model configuration of the kernel of `facts` ([`crate::facts::model_config`] of its
/// `.config` symbols and release) and the arguments that select it.
///
/// # Errors
///
/// The release is not `MAJOR.MINOR...`, or the `.config` is refused.
pub fn kernel_config(facts: &Facts) -> Result<(KernelConfig, Vec<String>)> {
    let cfg = crate::facts::model_config(&facts.kernel.kconfig, &facts.kernel.release)?;
    let version = cfg.version.to_string();
    let args = ["--config", cfg.name, "--kernel", &version, "--kconfig", "KCONFIG"];
    Ok((cfg, args.map(String::from).to_vec()))
}

/// The end of the boot RAM below `start_pfn` (from the guest's `/proc/iomem`, 0 when not
/// recorded), for `--boot-memory-end`: a device range sharing a section with boot RAM reuses its
/// boot memmap.
#[must_use]
pub fn boot_memory_end(facts: &Facts, start_pfn: u64) -> u64 {
    let Some(iomem) = facts.guest.get("iomem") else { return 0 };
    crate::facts::system_ram(iomem).iter().map(|r| r.end).filter(|&end| end <= start_pfn).max().unwrap_or(0)
}

/// The start of the boot RAM at or above `end_pfn` (`u64::MAX` when none or not recorded), for
/// `--boot-memory-above`.
#[must_use]
pub fn boot_memory_above(facts: &Facts, end_pfn: u64) -> u64 {
    let Some(iomem) = facts.guest.get("iomem") else { return u64::MAX };
    crate::facts::system_ram(iomem)
        .iter()
        .map(|r| r.start)
        .filter(|&s| s >= end_pfn)
        .min()
        .unwrap_or(u64::MAX)
}

/// The model run of a ZONE_DEVICE region (`memmap-bench dump zone-device`).
///
/// # Errors
///
/// A region without its ZONE_DEVICE facts, or [`kernel_config`]'s errors.
pub fn zone_device_spec(facts: &Facts, r: &Region) -> Result<Spec> {
    let (config, mut argv) = kernel_config(facts)?;
    let type_name = r.memory_type.clone().context("memory_type")?;
    let memory_type =
        MemoryType::from_name(&type_name).with_context(|| format!("unknown memory type {type_name:?}"))?;
    let vmemmap_shift = r.vmemmap_shift.context("vmemmap_shift")?;
    let boot_memory_end_pfn = boot_memory_end(facts, r.start_pfn);
    let boot_memory_above_pfn = boot_memory_above(facts, r.start_pfn.saturating_add(r.nr_pages));
    let mut head: Vec<String> = vec!["dump".into(), "zone-device".into()];
    head.append(&mut argv);
    head.extend([
        "--memory-type".into(),
        type_name,
        "--pages".into(),
        r.nr_pages.to_string(),
        "--start-pfn".into(),
        r.start_pfn.to_string(),
        "--vmemmap-shift".into(),
        vmemmap_shift.to_string(),
        "--nid".into(),
        r.nid.to_string(),
        "--boot-memory-end".into(),
        boot_memory_end_pfn.to_string(),
    ]);
    if boot_memory_above_pfn != u64::MAX {
        head.extend(["--boot-memory-above".into(), boot_memory_above_pfn.to_string()]);
    }
    if let Some(alt) = r.altmap {
        head.extend([
            "--altmap-reserve".into(),
            alt.reserve.to_string(),
            "--altmap-free".into(),
            alt.free.to_string(),
        ]);
    }
    let dump = ZoneDeviceDump {
        config,
        layout72: false,
        memory_type,
        vmemmap_shift,
        altmap: r.altmap.map(|a| (a.reserve, a.free)),
        start_pfn: r.start_pfn,
        nr_pages: r.nr_pages,
        nid: r.nid,
        strategy: Strategy::Auto,
        page_ref_trace: false,
        boot_memory_end_pfn,
        boot_memory_above_pfn,
    };
    Ok(Spec { what: What::ZoneDevice(dump), argv: head })
}

/// The model run of the hugetlb regions of `facts` (`memmap-bench dump hugetlb`).
///
/// # Errors
///
/// No hugetlb region, or [`kernel_config`]'s errors.
pub fn hugetlb_spec(facts: &Facts) -> Result<Spec> {
    let hs: Vec<&Region> = facts.regions.iter().filter(|r| r.kind == "hugetlb").collect();
    let first = hs.first().context("no hugetlb region")?;
    let nodes = hs.iter().map(|r| r.nid).max().unwrap_or(0) + 1;
    let per_node = (0..nodes).map(|n| hs.iter().filter(|r| r.nid == n).count()).max().unwrap_or(1);
    let (config, mut argv) = kernel_config(facts)?;
    let hstate_name = first.hstate.clone().context("hstate")?;
    let hstate = Hstate::from_name(&config, &hstate_name).with_context(|| {
        format!(
            "hstate {hstate_name:?} is not one of {} ({})",
            config.name,
            hugetlb_init::Hstates::of(&config)
        )
    })?;
    let hvo = if first.hvo == Some(true) { HvoMode::On } else { HvoMode::Off };
    let runtime = first.boot == Some(false);
    let mut head: Vec<String> = vec!["dump".into(), "hugetlb".into()];
    head.append(&mut argv);
    head.extend([
        "--hstate".into(),
        hstate_name,
        "--count".into(),
        per_node.to_string(),
        "--nodes".into(),
        nodes.to_string(),
        "--zone".into(),
        first.zone.to_string(),
        "--hvo".into(),
        hvo.name().into(),
    ]);
    if runtime {
        head.push("--runtime".into());
    }
    // The folios where the kernel put them, in its free-list order, when the guest's links
    // told it (every folio has its position).
    let mut placed: Vec<(u64, u32, u32)> =
        hs.iter().filter_map(|r| r.folio.and_then(|f| Some((f.head_pfn, f.nid, f.list_pos?)))).collect();
    if placed.len() == hs.len() {
        placed.sort_by_key(|&(_, nid, pos)| (nid, pos));
        for &(pfn, nid, _) in &placed {
            head.extend(["--place".into(), format!("{pfn:#x}@{nid}")]);
        }
    } else {
        placed.clear();
    }
    let dump = HugetlbDump {
        placed: placed.iter().map(|&(p, n, _)| (p, n)).collect(),
        config,
        layout72: false,
        hstate,
        count: per_node as u64,
        nodes,
        hvo,
        strategy: Strategy::Auto,
        page_ref_trace: false,
        zone: first.zone,
        runtime,
    };
    Ok(Spec { what: What::Hugetlb(dump), argv: head })
}

/// The model run of a hot-added region (`memmap-bench dump hotplug`), the blocks the guest
/// allocated from taken off the free list.
///
/// # Errors
///
/// A region without its hotplug facts, or [`kernel_config`]'s errors.
pub fn hotplug_spec(facts: &Facts, r: &Region) -> Result<Spec> {
    let (config, mut argv) = kernel_config(facts)?;
    let online = r.online_type.clone().context("online_type")?;
    let target = if online == "online_movable" {
        memmap_core::HotplugTarget::Movable
    } else {
        memmap_core::HotplugTarget::Normal
    };
    let block = r.memory_block_pages.context("memory_block_pages")?;
    let mut head: Vec<String> = vec!["dump".into(), "hotplug".into()];
    head.append(&mut argv);
    head.extend([
        "--start-pfn".into(),
        r.start_pfn.to_string(),
        "--pages".into(),
        r.nr_pages.to_string(),
        "--zone".into(),
        target.name().into(),
        "--nid".into(),
        r.nid.to_string(),
        "--memory-block-pages".into(),
        block.to_string(),
    ]);
    for t in &r.allocated_blocks {
        head.extend(["--taken".into(), t.to_string()]);
    }
    let dump = HotplugDump {
        config,
        layout72: false,
        start_pfn: r.start_pfn,
        nr_pages: r.nr_pages,
        target,
        nid: r.nid,
        memory_block_pages: block,
        strategy: Strategy::Auto,
        page_ref_trace: false,
        taken: r.allocated_blocks.clone(),
    };
    Ok(Spec { what: What::Hotplug(dump), argv: head })
}
