//! `dump` and `diff`: the dump options checked against memory, and running them.

use memmap_core::Named;
use std::path::Path;
use std::process::ExitCode;

use memmap_core::KernelConfig;
use memmap_dump::diff::{DiffError, diff_dumps_report};
use memmap_dump::{
    Dump, DumpError, HotplugDump, HugetlbDump, LayoutFile, MAX_USER_FILE_BYTES, OutputDir, ZoneDeviceDump,
    open_dump,
};

use super::args::{DumpCommon, DumpHotplugArgs, DumpHugetlbArgs, DumpNodeArgs, DumpZoneDeviceArgs};
use super::error::{CliError, fail};
use super::invocation::Invocation;
use crate::memory::{self, MemInfo};

/// The configuration a dump models: the preset, with the `.config` and the release applied.
fn dump_config(c: &DumpCommon) -> Result<KernelConfig, CliError> {
    let mut cfg = c.config;
    if let Some(path) = &c.kconfig {
        let file = memmap_dump::read_user_file(path, MAX_USER_FILE_BYTES)
            .map_err(|e| CliError::Usage(format!("--kconfig: {e}")))?;
        cfg = cfg
            .with_kconfig(&memmap_core::Kconfig::new(&file.text))
            .map_err(|e| CliError::Usage(format!("--kconfig {}: {e}", path.display())))?;
        eprintln!("kconfig: read {}", file.describe());
    }
    if let Some(v) = c.kernel {
        cfg = cfg.with_version(v);
    }
    Ok(cfg)
}

/// `dump zone-device`, checked.
pub(super) fn zone_device(a: &DumpZoneDeviceArgs, info: &MemInfo) -> Result<Invocation, CliError> {
    let usage = CliError::Usage;
    let c = &a.common;
    let altmap = (a.altmap_reserve.is_some() || a.altmap_free.is_some())
        .then(|| (a.altmap_reserve.unwrap_or(0), a.altmap_free.unwrap_or(0)));
    let opts = ZoneDeviceDump {
        config: dump_config(c)?,
        layout72: c.layout == 72,
        memory_type: a.memory_type,
        vmemmap_shift: a.vmemmap_shift,
        altmap,
        start_pfn: a.start_pfn,
        nr_pages: a.pages,
        nid: a.nid,
        strategy: c.strategy,
        page_ref_trace: c.page_ref_trace,
        boot_memory_end_pfn: a.boot_memory_end,
        boot_memory_above_pfn: a.boot_memory_above.unwrap_or(u64::MAX),
    };
    mappable(&opts)?;
    let need =
        memory::zone_device_dump_need(&opts).map_err(|e| usage(memory::MemoryError::from(e).to_string()))?;
    let who = if opts.page_ref_trace { "the dump (memmap and tracepoint events)" } else { "the dump" };
    memory::check(who, &need, info).map_err(|e| usage(e.to_string()))?;
    Ok(Invocation::DumpZoneDevice(opts, c.out.clone(), c.force))
}

/// Refuses a range the kernel maps no ZONE_DEVICE pages for, naming the flags.
fn mappable(opts: &ZoneDeviceDump) -> Result<(), CliError> {
    opts.check_mappable().map_err(|e| {
        CliError::Usage(format!("--start-pfn {:#x} --pages {}: {e}", opts.start_pfn, opts.nr_pages))
    })
}

/// `dump hugetlb`, checked.
pub(super) fn hugetlb(a: &DumpHugetlbArgs, info: &MemInfo) -> Result<Invocation, CliError> {
    let usage = CliError::Usage;
    let c = &a.common;
    let config = dump_config(c)?;
    let opts = HugetlbDump {
        runtime: a.runtime,
        placed: a.place.clone(),
        zone: a.zone.unwrap_or(config.zone_device().saturating_sub(2)),
        config,
        layout72: c.layout == 72,
        hstate: hstate(&a.hstate, &config)?,
        count: a.count.unwrap_or(0),
        nodes: a.nodes,
        hvo: a.hvo,
        strategy: c.strategy,
        page_ref_trace: c.page_ref_trace,
    };
    let who = placed_in_range(&opts)?;
    let need =
        memory::hugetlb_dump_need(&opts).map_err(|e| usage(memory::MemoryError::from(e).to_string()))?;
    memory::check(&who, &need, info).map_err(|e| usage(e.to_string()))?;
    Ok(Invocation::DumpHugetlb(opts, c.out.clone(), c.force))
}

/// `--hstate`: a size of the configuration's architecture and page size.
fn hstate(name: &str, config: &memmap_core::KernelConfig) -> Result<hugetlb_init::Hstate, CliError> {
    let supported = hugetlb_init::Hstates::of(config);
    let size = hugetlb_init::Hstate::parse_size(name).ok_or_else(|| {
        CliError::Usage(format!(
            "--hstate {name}: not a size (the configuration {} has {supported})",
            config.name
        ))
    })?;
    hugetlb_init::Hstate::new(config, size)
        .map_err(|e| CliError::Usage(format!("--hstate {name}: {e} (--config {})", config.name)))
}

/// Refuses a `--place` folio past the configuration's last pfn; returns who needs the memory,
/// for the memory check's message.
fn placed_in_range(opts: &HugetlbDump) -> Result<String, CliError> {
    let nr = opts.hstate.nr_pages();
    let max_pfn = opts.config.max_pfn();
    for &(head, nid) in &opts.placed {
        if head.checked_add(nr).is_none_or(|end| end > max_pfn) {
            return Err(CliError::Usage(format!(
                "--place {head:#x}@{nid}: a {} folio there ends past pfn {:#x}, the configuration's last \
                 (MAX_PHYSMEM_BITS {}); place it at or below {:#x}",
                opts.hstate,
                max_pfn - 1,
                opts.config.max_physmem_bits,
                max_pfn.saturating_sub(nr)
            )));
        }
    }
    let (Some(lo), Some(hi)) = (opts.placed.iter().map(|p| p.0).min(), opts.placed.iter().map(|p| p.0).max())
    else {
        return Ok("the dump".into());
    };
    Ok(format!(
        "the dump (every struct page from the lowest --place head {lo:#x} to the end of the highest folio \
         {:#x}: {} pages, in the vmemmap and again in memmap.bin)",
        hi + nr,
        hi + nr - lo
    ))
}

/// `dump hotplug`, checked.
pub(super) fn hotplug(a: &DumpHotplugArgs, info: &MemInfo) -> Result<Invocation, CliError> {
    let usage = CliError::Usage;
    let c = &a.common;
    let config = dump_config(c)?;
    let target = memmap_core::HotplugTarget::from_name(&a.zone)
        .ok_or_else(|| usage(format!("--zone {}: normal or movable", a.zone)))?;
    let opts = HotplugDump {
        memory_block_pages: a.memory_block_pages.unwrap_or(config.pages_per_section()),
        config,
        layout72: c.layout == 72,
        start_pfn: a.start_pfn,
        nr_pages: a.pages,
        target,
        nid: a.nid,
        strategy: c.strategy,
        page_ref_trace: c.page_ref_trace,
        taken: a.taken.clone(),
    };
    let need = memory::hotplug_dump_need(&opts)
        .map_err(|e| usage(format!("--pages {}: {}", a.pages, memory::MemoryError::from(e))))?;
    let who = if opts.page_ref_trace { "the dump (memmap and tracepoint events)" } else { "the dump" };
    memory::check(who, &need, info).map_err(|e| usage(e.to_string()))?;
    Ok(Invocation::DumpHotplug(opts, c.out.clone(), c.force))
}

/// `dump node`, checked: the node's memmap need checked before anything is built from the file.
pub(super) fn node(a: &DumpNodeArgs, info: &MemInfo) -> Result<Invocation, CliError> {
    let usage = CliError::Usage;
    let c = &a.common;
    let config = dump_config(c)?;
    let bytes = memmap_dump::read_user_bytes(&a.node_layout, memmap_dump::node::MAX_LAYOUT_BYTES)
        .map_err(|e| usage(format!("--node-layout: {e}")))?;
    let file = LayoutFile::parse(&bytes, &a.node_layout).map_err(|e| usage(format!("--node-layout: {e}")))?;
    let span = file.node_span(a.nid).ok_or_else(|| {
        usage(format!("--node-layout {}: no node {} with zones", a.node_layout.display(), a.nid))
    })?;
    let size = if c.layout == 72 { 72 } else { 64 };
    let need = memory::node_dump_need(span.len(), size)
        .map_err(|e| usage(format!("--node-layout: {}", memory::MemoryError::from(e))))?;
    memory::check("the dump (the node's memmap)", &need, info).map_err(|e| usage(e.to_string()))?;
    let mode = match a.mode.as_str() {
        "eager" => memmap_core::InitMode::Eager,
        "on-demand" => memmap_core::InitMode::OnDemand,
        _ => memmap_core::InitMode::Deferred,
    };
    let order =
        if a.order == "fused" { memmap_core::BootOrder::Fused } else { memmap_core::BootOrder::Kernel };
    let mut opts = file
        .node_dump(a.nid, config, (mode, order, c.strategy))
        .map_err(|e| usage(format!("--node-layout {}: {e}", a.node_layout.display())))?;
    opts.layout72 = c.layout == 72;
    Ok(Invocation::DumpNode(opts, c.out.clone(), c.force))
}

/// Runs a dump into `dir` (prepared first, replaced with `force`): `made` is its model's `run`;
/// `folios` says how many folios it wrote (`dump hugetlb`).
pub(super) fn run_dump(
    dir: &Path,
    force: bool,
    folios: bool,
    made: impl FnOnce() -> Result<Dump, DumpError>,
) -> ExitCode {
    let r =
        OutputDir::prepare(dir, force).and_then(|out| made().and_then(|d| d.write(&out).map(|()| d.meta)));
    match r {
        Ok(meta) => {
            let n = meta.detail.get("folios").and_then(|f| f.as_array()).map_or(0, Vec::len);
            let of = if folios { format!(" of {n} folio(s)") } else { String::new() };
            println!(
                "wrote {} struct pages ({} bytes each){of} to {}: strategy {} ({})",
                meta.nr_pages,
                meta.struct_page_size,
                dir.display(),
                meta.strategy,
                meta.strategy_reason
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e, e.exit_code()),
    }
}

/// Runs `diff A B [--json]`.
pub(super) fn run_diff(a: &Path, b: &Path, json: bool) -> ExitCode {
    let opened = open_dump(a).and_then(|da| open_dump(b).map(|db| (da, db)));
    let (mut da, mut db) = match opened {
        Ok(p) => p,
        Err(e) => return fail(&e, e.exit_code()),
    };
    match diff_dumps_report(&mut da, &mut db) {
        Ok(r) => {
            if json {
                println!("{}", r.to_json());
            } else {
                print!("{r}");
            }
            ExitCode::from(r.exit_code())
        }
        Err(e @ (DiffError::Incomparable(_) | DiffError::Read(_))) => fail(&e, 2),
    }
}
