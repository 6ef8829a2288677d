//! The model side: `memmap-bench dump` for the same configuration, run in process through
//! the memmap-bench library (the same command line the program takes, so every comparison
//! names a command a reader can rerun).

use std::fs;
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::Value;

use crate::facts::{Facts, Region};

/// A model dump read back: `meta.json` and `memmap.bin`.
#[derive(Debug, Clone)]
pub struct ModelDump {
    /// `meta.json`.
    pub meta: Value,
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
    /// The part of the model's vmemmap its pointers can point into: from pfn 0 to the end of
    /// the dump plus one gigantic page (the model places nothing beyond), so that values such
    /// as `-1` near the top of the address space are not read as struct page pointers.
    #[must_use]
    pub fn span(&self) -> u64 {
        (self.start_pfn + (self.bytes.len() as u64) / 64 + (1 << 18)) * 64
    }
}

fn u(meta: &Value, key: &str) -> Result<u64> {
    meta.get(key).and_then(Value::as_u64).with_context(|| format!("meta.json has no {key}"))
}

/// Runs `memmap-bench ARGS --out DIR --force` (in process) and reads the dump back.
///
/// # Errors
///
/// The command line is refused, the dump fails, or it writes a malformed dump.
pub fn dump(args: &[String], dir: &Path) -> Result<ModelDump> {
    use memmap_bench::cli::{Invocation, parse};
    use memmap_bench::dump::{OutputDir, dump_hugetlb, dump_zone_device};
    let _ = fs::remove_dir_all(dir);
    let mut argv: Vec<String> = args.to_vec();
    argv.extend(["--out".into(), dir.display().to_string()]);
    let full = std::iter::once("memmap-bench".to_string()).chain(argv.iter().cloned());
    let inv = parse(full, &memmap_bench::memory::MemInfo::read())
        .map_err(|e| anyhow!("memmap-bench {}: {e}", argv.join(" ")))?;
    let run = |r: Result<_, memmap_bench::dump::DumpError>| {
        r.map(|_| ()).map_err(|e| anyhow!("memmap-bench {}: {e}", argv.join(" ")))
    };
    match inv {
        Invocation::DumpZoneDevice(opts, out, force) => {
            run(OutputDir::prepare(&out, force).and_then(|o| dump_zone_device(&opts, &o)))?;
        }
        Invocation::DumpHugetlb(opts, out, force) => {
            run(OutputDir::prepare(&out, force).and_then(|o| dump_hugetlb(&opts, &o)))?;
        }
        _ => bail!("memmap-bench {}: not a dump command", argv.join(" ")),
    }
    let meta: Value = serde_json::from_slice(&fs::read(dir.join("meta.json"))?)?;
    let bytes = fs::read(dir.join("memmap.bin"))?;
    let start_pfn = u(&meta, "start_pfn")?;
    let size = u(&meta, "struct_page_size")?;
    let base = u(&meta, "page_addr_base")?.wrapping_sub(start_pfn.wrapping_mul(size));
    if bytes.len() as u64 != u(&meta, "nr_pages")? * size {
        bail!("{}: size disagrees with meta.json", dir.display());
    }
    Ok(ModelDump { meta, bytes, start_pfn, vmemmap_base: base, argv })
}

/// The model preset of the kernel's architecture (`x86_64` or `arm64`).
#[must_use]
pub fn preset(facts: &Facts) -> &'static str {
    if facts.kernel.arch == "arm64" { "arm64" } else { "x86_64" }
}

/// The kernel's `.config` symbols recorded in `facts`, as `.config` text (`n` as
/// `# CONFIG_FOO is not set`).
#[must_use]
pub fn kconfig_text(facts: &Facts) -> String {
    let mut text = String::new();
    for (k, v) in &facts.kernel.kconfig {
        if v == "n" {
            text.push_str(&format!("# {k} is not set\n"));
        } else {
            text.push_str(&format!("{k}={v}\n"));
        }
    }
    text
}

/// The arguments every model dump takes for the kernel of `facts`: its architecture's preset,
/// its release (`--kernel`) and its `.config` (`--kconfig`, written to `model_dir/kconfig`).
///
/// # Errors
///
/// The `.config` cannot be written, or the release is not `MAJOR.MINOR...`.
pub fn kernel_args(facts: &Facts, model_dir: &Path) -> Result<Vec<String>> {
    fs::create_dir_all(model_dir).with_context(|| format!("create {}", model_dir.display()))?;
    let path = model_dir.join("kconfig");
    fs::write(&path, kconfig_text(facts)).with_context(|| format!("write {}", path.display()))?;
    let release = &facts.kernel.release;
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let (Some(major), Some(minor)) = (parts.next(), parts.next()) else {
        bail!("kernel release {release:?} is not MAJOR.MINOR...");
    };
    Ok(vec![
        "--config".into(),
        preset(facts).into(),
        "--kernel".into(),
        format!("{major}.{minor}"),
        "--kconfig".into(),
        path.display().to_string(),
    ])
}

/// The end of the boot RAM below `start_pfn` (the top-level `System RAM` ranges of the
/// guest's `/proc/iomem`), for `--boot-memory-end`: a device range in the same section as boot
/// RAM reuses that section's boot memmap. 0 when the guest's iomem is not recorded.
#[must_use]
pub fn boot_memory_end(facts: &Facts, start_pfn: u64) -> u64 {
    let Some(iomem) = facts.guest.get("iomem") else { return 0 };
    iomem
        .lines()
        .filter(|l| !l.starts_with(' ') && l.ends_with(": System RAM"))
        .filter_map(|l| {
            let range = l.split(" : ").next()?;
            let (_, end) = range.split_once('-')?;
            let end = u64::from_str_radix(end.trim(), 16).ok()?;
            // The inclusive end + 1 in 65 bits: a range ending at the top of the address
            // space is pfn 2^52, not an overflow.
            Some(((u128::from(end) + 1) >> 12) as u64)
        })
        .filter(|&end| end <= start_pfn)
        .max()
        .unwrap_or(0)
}

/// The `memmap-bench dump zone-device` arguments for a ZONE_DEVICE region.
///
/// # Errors
///
/// A region without its ZONE_DEVICE facts, or [`kernel_args`]' errors.
pub fn zone_device_args(facts: &Facts, r: &Region, model_dir: &Path) -> Result<Vec<String>> {
    let mut a: Vec<String> = vec!["dump".into(), "zone-device".into()];
    a.extend(kernel_args(facts, model_dir)?);
    a.extend([
        "--memory-type".into(),
        r.memory_type.clone().context("memory_type")?,
        "--pages".into(),
        r.nr_pages.to_string(),
        "--start-pfn".into(),
        r.start_pfn.to_string(),
        "--vmemmap-shift".into(),
        r.vmemmap_shift.context("vmemmap_shift")?.to_string(),
        "--nid".into(),
        r.nid.to_string(),
        "--boot-memory-end".into(),
        boot_memory_end(facts, r.start_pfn).to_string(),
    ]);
    if let Some(alt) = r.altmap {
        a.extend([
            "--altmap-reserve".into(),
            alt.reserve.to_string(),
            "--altmap-free".into(),
            alt.free.to_string(),
        ]);
    }
    Ok(a)
}

/// The `memmap-bench dump hugetlb` arguments for the hugetlb regions of `facts`.
///
/// # Errors
///
/// No hugetlb region, or [`kernel_args`]' errors.
pub fn hugetlb_args(facts: &Facts, model_dir: &Path) -> Result<Vec<String>> {
    let hs: Vec<&Region> = facts.regions.iter().filter(|r| r.kind == "hugetlb").collect();
    let first = hs.first().context("no hugetlb region")?;
    let nodes = hs.iter().map(|r| r.nid).max().unwrap_or(0) + 1;
    let per_node = (0..nodes).map(|n| hs.iter().filter(|r| r.nid == n).count()).max().unwrap_or(1);
    let mut a: Vec<String> = vec!["dump".into(), "hugetlb".into()];
    a.extend(kernel_args(facts, model_dir)?);
    a.extend([
        "--hstate".into(),
        first.hstate.clone().context("hstate")?,
        "--count".into(),
        per_node.to_string(),
        "--nodes".into(),
        nodes.to_string(),
        "--zone".into(),
        first.zone.to_string(),
        "--hvo".into(),
        if first.hvo == Some(true) { "on" } else { "off" }.into(),
    ]);
    if first.boot == Some(false) {
        a.push("--runtime".into());
    }
    Ok(a)
}
