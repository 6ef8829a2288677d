//! The kernels the oracle boots, as data: which Debian suite and package names hold them, and
//! where the unpacked packages keep the image, the `.config`, `System.map` and the modules.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::apt::{self, PrivateApt};

/// How a kernel is split into packages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packaging {
    /// Debian 14 (forky/sid) packaging: `linux-binary-REL` (image), `linux-modules-REL`,
    /// `linux-base-REL` (`config`, `System.map`), files under `/usr/lib/modules/REL`.
    Split,
    /// Debian 12 packaging: one `linux-image-REL` with `/boot/{vmlinuz,config,System.map}-REL`
    /// and `/lib/modules/REL`.
    Single,
}

/// Guest CPU architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// x86-64 (`qemu-system-x86_64`).
    Amd64,
    /// arm64 (`qemu-system-aarch64 -machine virt`).
    Arm64,
}

impl Arch {
    /// Debian architecture name.
    #[must_use]
    pub fn debian(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }
}

/// One kernel the oracle knows how to fetch.
#[derive(Debug, Clone, Copy)]
pub struct KernelSpec {
    /// Short id used on the command line and in directory names (`7.2-amd64`).
    pub id: &'static str,
    /// Debian suite that carries it.
    pub suite: &'static str,
    /// Architecture.
    pub arch: Arch,
    /// `apt-cache search --names-only` pattern of the image package; the release string is the
    /// part after `image_prefix`.
    pub image_pattern: &'static str,
    /// Package-name prefix in front of the release string.
    pub image_prefix: &'static str,
    /// Package layout.
    pub packaging: Packaging,
}

/// Every kernel the oracle knows.
pub const KERNELS: [KernelSpec; 3] = [
    KernelSpec {
        id: "7.2-amd64",
        suite: "sid",
        arch: Arch::Amd64,
        image_pattern: r"^linux-binary-7\.2\.[0-9]+\+deb[0-9]+-amd64$",
        image_prefix: "linux-binary-",
        packaging: Packaging::Split,
    },
    KernelSpec {
        id: "6.12-amd64",
        suite: "bookworm-backports",
        arch: Arch::Amd64,
        image_pattern: r"^linux-image-6\.12\.[0-9]+\+deb[0-9]+-amd64$",
        image_prefix: "linux-image-",
        packaging: Packaging::Single,
    },
    KernelSpec {
        id: "7.2-arm64",
        suite: "sid",
        arch: Arch::Arm64,
        image_pattern: r"^linux-binary-7\.2\.[0-9]+\+deb[0-9]+-arm64$",
        image_prefix: "linux-binary-",
        packaging: Packaging::Split,
    },
];

/// Looks a kernel up by id.
///
/// # Errors
///
/// Unknown id.
pub fn spec(id: &str) -> Result<KernelSpec> {
    KERNELS.iter().copied().find(|k| k.id == id).with_context(|| {
        format!(
            "unknown kernel {id:?}; known: {}",
            KERNELS.iter().map(|k| k.id).collect::<Vec<_>>().join(", ")
        )
    })
}

/// A `(package, version)` pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Package {
    /// Package name.
    pub name: String,
    /// Version.
    pub version: String,
}

/// A fetched and unpacked kernel.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// Its spec.
    pub spec: KernelSpec,
    /// Release string (`uname -r`).
    pub release: String,
    /// Packages it came from.
    pub packages: Vec<Package>,
    /// The bootable image.
    pub image: PathBuf,
    /// The kernel's `.config`.
    pub config: PathBuf,
    /// `System.map`.
    pub system_map: PathBuf,
    /// Root of `kernel/` in the modules tree.
    pub modules: PathBuf,
}

/// Orders release strings like `7.2.13+deb14-amd64` by their numeric components.
fn release_key(release: &str) -> Vec<u64> {
    release.split(|c: char| !c.is_ascii_digit()).filter_map(|s| s.parse().ok()).collect()
}

/// Finds the newest matching image package in the spec's suite, downloads the packages (cached
/// under `cache/debs`), and unpacks them under `cache/kernels/<release>`.
///
/// # Errors
///
/// apt errors, no matching package, or an unpacked tree without the expected files.
pub fn fetch(spec: KernelSpec, cache: &Path, refresh: bool) -> Result<Kernel> {
    let apt = PrivateApt::new(cache, spec.suite, spec.arch.debian())?;
    apt.update(refresh)?;
    let mut names = apt.search(spec.image_pattern)?;
    names.sort_by_key(|n| release_key(n));
    let image_pkg = names.pop().with_context(|| {
        format!("no package matching {} in suite {} ({})", spec.image_pattern, spec.suite, spec.arch.debian())
    })?;
    let release = image_pkg.strip_prefix(spec.image_prefix).context("image package prefix")?.to_string();
    let pkgs: Vec<String> = match spec.packaging {
        Packaging::Split => vec![
            format!("linux-binary-{release}"),
            format!("linux-modules-{release}"),
            format!("linux-base-{release}"),
        ],
        Packaging::Single => vec![format!("linux-image-{release}")],
    };
    let root = cache.join("kernels").join(&release);
    let debs = cache.join("debs");
    let mut packages = Vec::new();
    for p in &pkgs {
        let version = apt.version(p)?;
        let stamp = root.join(format!(".unpacked-{p}_{version}"));
        if !stamp.is_file() {
            let deb = apt.download(p, &debs)?;
            apt::extract(&deb, &root)?;
            crate::files::write_file(&stamp, b"")?;
        }
        packages.push(Package { name: p.clone(), version });
    }
    let (image, config, system_map, modules) = match spec.packaging {
        Packaging::Split => {
            let m = root.join("usr/lib/modules").join(&release);
            (m.join("vmlinuz"), m.join("config"), m.join("System.map"), m.join("kernel"))
        }
        Packaging::Single => (
            root.join(format!("boot/vmlinuz-{release}")),
            root.join(format!("boot/config-{release}")),
            root.join(format!("boot/System.map-{release}")),
            root.join("lib/modules").join(&release).join("kernel"),
        ),
    };
    for p in [&image, &config, &system_map, &modules] {
        if !p.exists() {
            bail!("{} is missing from the unpacked packages of {release}", p.display());
        }
    }
    Ok(Kernel { spec, release, packages, image, config, system_map, modules })
}

/// The `.config` symbols that shape `struct page` and its initialization.
pub const KCONFIG_SYMBOLS: &[&str] = &[
    "CONFIG_NODES_SHIFT",
    "CONFIG_NUMA",
    "CONFIG_SPARSEMEM_VMEMMAP",
    "CONFIG_SPARSEMEM_VMEMMAP_PREINIT",
    "CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP",
    "CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP_DEFAULT_ON",
    "CONFIG_ARCH_WANT_OPTIMIZE_DAX_VMEMMAP",
    "CONFIG_ARCH_WANT_OPTIMIZE_HUGETLB_VMEMMAP",
    "CONFIG_WANT_PAGE_VIRTUAL",
    "CONFIG_KASAN",
    "CONFIG_KMSAN",
    "CONFIG_PAGE_IDLE_FLAG",
    "CONFIG_NUMA_BALANCING",
    "CONFIG_NR_CPUS",
    "CONFIG_LRU_GEN",
    "CONFIG_MEMCG",
    "CONFIG_SLAB_OBJ_EXT",
    "CONFIG_ZONE_DMA",
    "CONFIG_ZONE_DMA32",
    "CONFIG_ZONE_DEVICE",
    "CONFIG_HIGHMEM",
    "CONFIG_MAX_PAGE_ORDER",
    "CONFIG_ARCH_FORCE_MAX_ORDER",
    "CONFIG_PAGE_EXTENSION",
    "CONFIG_DEFERRED_STRUCT_PAGE_INIT",
    "CONFIG_TRANSPARENT_HUGEPAGE",
    "CONFIG_MEMORY_FAILURE",
    "CONFIG_X86_PAT",
    "CONFIG_ARM64_MTE",
    "CONFIG_CGROUP_HUGETLB",
    "CONFIG_DEBUG_PAGE_REF",
    "CONFIG_DEBUG_VM",
    "CONFIG_PAGE_MAPCOUNT",
    "CONFIG_MM_ID",
    "CONFIG_64BIT",
    "CONFIG_PGTABLE_LEVELS",
    "CONFIG_X86_5LEVEL",
    "CONFIG_ARM64_VA_BITS",
    "CONFIG_ARM64_PA_BITS",
    "CONFIG_ARM64_4K_PAGES",
    "CONFIG_INIT_ON_ALLOC_DEFAULT_ON",
    "CONFIG_PAGE_POISONING",
    "CONFIG_RANDOMIZE_BASE",
    "CONFIG_RANDOMIZE_MEMORY",
];

/// Reads the [`KCONFIG_SYMBOLS`] from a `.config`: `y`/`m`/numbers as written, `n` for
/// `# ... is not set` and for absent symbols.
///
/// # Errors
///
/// The file cannot be read.
pub fn kconfig_symbols(config: &Path) -> Result<BTreeMap<String, String>> {
    let text = fs::read_to_string(config).with_context(|| format!("reading {}", config.display()))?;
    let mut all = BTreeMap::new();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once('=') {
            all.insert(k.to_string(), v.trim_matches('"').to_string());
        }
    }
    Ok(KCONFIG_SYMBOLS
        .iter()
        .map(|s| (s.to_string(), all.get(*s).cloned().unwrap_or_else(|| "n".into())))
        .collect())
}

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
        let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
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
    fn releases_order_numerically() {
        let mut v = [
            "linux-binary-7.2.9+deb14-amd64",
            "linux-binary-7.2.13+deb14-amd64",
            "linux-binary-7.2.10+deb14-amd64",
        ];
        v.sort_by_key(|n| release_key(n));
        assert_eq!(v.last(), Some(&"linux-binary-7.2.13+deb14-amd64"));
    }

    #[test]
    fn kallsyms_names_addresses_in_the_image() {
        let m = SystemMap::parse(
            "ffffffff81000000 T _text\nffffffff83e00000 D hstates\nffffffff84000000 B _end\n",
        );
        assert_eq!(m.name(0xffff_ffff_83e0_0058).as_deref(), Some("hstates+0x58"));
        assert_eq!(m.name(0xffff_ffff_ffff_8001), None);
    }

    #[test]
    fn unknown_kernels_are_an_error() {
        assert!(spec("9.9-amd64").is_err());
        assert_eq!(spec("6.12-amd64").map(|k| k.suite).ok(), Some("bookworm-backports"));
    }
}
