//! The kernels the oracle boots, as data: which Debian suite and package names hold them, and
//! where the unpacked packages keep the image, the `.config`, `System.map` and the modules.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
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
pub const KERNELS: [KernelSpec; 4] = [
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
        id: "6.1-amd64",
        suite: "bookworm",
        arch: Arch::Amd64,
        image_pattern: r"^linux-image-6\.1\.0-[0-9]+-amd64$",
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

/// A kernel to boot: a fetched and unpacked Debian package ([`fetch`]) or one a user built
/// ([`from_paths`]).
#[derive(Debug, Clone)]
pub struct Kernel {
    /// Short id used in directory names (`7.2-amd64`; `path-RELEASE` for a kernel by path).
    pub id: String,
    /// Where it came from: the Debian suite, or `path`.
    pub suite: String,
    /// Architecture.
    pub arch: Arch,
    /// Release string (`uname -r`).
    pub release: String,
    /// Packages it came from (none for a kernel by path).
    pub packages: Vec<Package>,
    /// The bootable image.
    pub image: PathBuf,
    /// The kernel's `.config`.
    pub config: PathBuf,
    /// `System.map`, if there is one (the guest's `/proc/kallsyms` names symbols otherwise).
    pub system_map: Option<PathBuf>,
    /// The module files the guest loads, by module name ([`find_modules`]).
    pub modules: BTreeMap<String, PathBuf>,
}

/// Largest kernel image or module file read.
pub const MAX_BINARY_BYTES: u64 = 256 << 20;

/// Suffixes of module files, as `find_modules` looks for them.
pub const MODULE_SUFFIXES: [&str; 4] = [".ko", ".ko.xz", ".ko.zst", ".ko.gz"];

/// Finds the files of the modules `wanted` (paths like `nvdimm/libnvdimm`) below `dir`: any
/// file named `NAME.ko`, `NAME.ko.xz`, `NAME.ko.zst` or `NAME.ko.gz` (`-` and `_` are the same
/// in module names), preferring one under the wanted subdirectory. Symbolic links to
/// directories are not followed.
///
/// # Errors
///
/// `dir` is not a directory, or some modules are not found (all of them are named).
pub fn find_modules(dir: &Path, wanted: &[&str]) -> Result<BTreeMap<String, PathBuf>> {
    if !fs::metadata(dir).is_ok_and(|m| m.is_dir()) {
        bail!("--modules {}: not a directory", dir.display());
    }
    let norm = |s: &str| s.replace('-', "_");
    let mut found: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    let mut stack = vec![(dir.to_path_buf(), 0u32)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            let path = e.path();
            if ft.is_dir() && depth < 12 {
                stack.push((path, depth + 1));
            } else if ft.is_file() || ft.is_symlink() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(base) = MODULE_SUFFIXES.iter().find_map(|s| name.strip_suffix(s)) {
                    found.entry(norm(base)).or_default().push(path);
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    let mut missing = Vec::new();
    for w in wanted {
        let base = w.rsplit('/').next().unwrap_or(w);
        let mut cands = found.get(&norm(base)).cloned().unwrap_or_default();
        cands.sort();
        let sub = Path::new(w).parent().unwrap_or(Path::new(""));
        let pick =
            cands.iter().find(|p| p.parent().is_some_and(|q| q.ends_with(sub))).or(cands.first()).cloned();
        match pick {
            Some(p) => {
                out.insert(base.to_string(), p);
            }
            None => missing.push(base.to_string()),
        }
    }
    if !missing.is_empty() {
        bail!(
            "--modules {}: no file for module(s) {} (looked for NAME{} below it)",
            dir.display(),
            missing.join(", "),
            MODULE_SUFFIXES.join(", NAME")
        );
    }
    Ok(out)
}

/// The bytes of a module file, decompressed by its suffix (`xz`, `zstd`, gzip in process;
/// `.ko` as it is). Only a regular file of at most [`MAX_BINARY_BYTES`] is read.
///
/// # Errors
///
/// Not a regular file, too large, or the decompressor fails (named).
pub fn module_bytes(path: &Path) -> Result<Vec<u8>> {
    let raw = crate::files::read_binary(path, MAX_BINARY_BYTES)?;
    let name = path.to_string_lossy();
    let via = |tool: &str, pkg: &str| -> Result<Vec<u8>> {
        let out = std::process::Command::new(tool)
            .arg("-dc")
            .arg(path)
            .output()
            .with_context(|| format!("running {tool} (install {pkg})"))?;
        if !out.status.success() {
            bail!("{tool} -dc {} failed: {}", path.display(), String::from_utf8_lossy(&out.stderr));
        }
        if out.stdout.len() as u64 > MAX_BINARY_BYTES {
            bail!("{}: more than {MAX_BINARY_BYTES} bytes decompressed", path.display());
        }
        Ok(out.stdout)
    };
    if name.ends_with(".ko.xz") {
        via("xz", "xz-utils")
    } else if name.ends_with(".ko.zst") {
        via("zstd", "zstd")
    } else if name.ends_with(".ko.gz") {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .take(MAX_BINARY_BYTES + 1)
            .read_to_end(&mut out)
            .with_context(|| format!("gunzip {}", path.display()))?;
        if out.len() as u64 > MAX_BINARY_BYTES {
            bail!("{}: more than {MAX_BINARY_BYTES} bytes decompressed", path.display());
        }
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// The architecture and release of a kernel image: an x86 bzImage (the setup header's
/// `kernel_version` string, whose first word is `uname -r`) or an arm64 `Image` (plain or
/// gzip, its `Linux version RELEASE` banner).
///
/// # Errors
///
/// The file is not a regular file, too large, or neither format (the error says which were
/// tried).
pub fn image_release(image: &Path) -> Result<(Arch, String)> {
    let raw = crate::files::read_binary(image, MAX_BINARY_BYTES)?;
    if raw.len() > 0x210 && &raw[0x202..0x206] == b"HdrS" {
        let off = usize::from(u16::from_le_bytes([raw[0x20e], raw[0x20f]])) + 0x200;
        let text = raw.get(off..(off + 256).min(raw.len())).unwrap_or_default();
        let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
        let release =
            String::from_utf8_lossy(&text[..end]).split_whitespace().next().unwrap_or("").to_string();
        if release.is_empty() {
            bail!("{}: a bzImage without a kernel_version string", image.display());
        }
        return Ok((Arch::Amd64, release));
    }
    let plain = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .take(MAX_BINARY_BYTES + 1)
            .read_to_end(&mut out)
            .with_context(|| format!("gunzip {}", image.display()))?;
        out
    } else {
        raw
    };
    if plain.len() > 0x40 && &plain[0x38..0x3c] == b"ARM\x64" {
        let banner = b"Linux version ";
        if let Some(i) = plain.windows(banner.len()).position(|w| w == banner) {
            let rest = &plain[i + banner.len()..(i + banner.len() + 128).min(plain.len())];
            let end = rest.iter().position(|&b| b == b' ' || b == 0).unwrap_or(rest.len());
            return Ok((Arch::Arm64, String::from_utf8_lossy(&rest[..end]).into_owned()));
        }
        bail!("{}: an arm64 Image without a `Linux version` banner", image.display());
    }
    bail!(
        "{}: not a kernel image the oracle can read the release from (an x86 bzImage with the \"HdrS\" \
         setup header, or an arm64 Image, plain or gzip)",
        image.display()
    )
}

/// A kernel a user built: the image (its release and architecture read from it), the
/// directory holding its modules (compressed or not, see [`find_modules`]), its `.config`, and
/// optionally its `System.map`. `id` names its output directories (default `path-RELEASE`).
///
/// # Errors
///
/// Whatever is missing or unreadable, by name.
pub fn from_paths(
    image: &Path,
    modules: &Path,
    config: &Path,
    system_map: Option<&Path>,
    id: Option<&str>,
) -> Result<Kernel> {
    let (arch, release) =
        image_release(image).with_context(|| format!("--kernel-image {}", image.display()))?;
    memmap_dump::read_user_file(config, memmap_dump::MAX_USER_FILE_BYTES)
        .with_context(|| format!("--config {}", config.display()))?;
    if let Some(m) = system_map {
        memmap_dump::read_user_file(m, MAX_SYSTEM_MAP_BYTES)
            .with_context(|| format!("--system-map {}", m.display()))?;
    }
    let modules = find_modules(modules, crate::initramfs::modules(arch))?;
    let id = id.map_or_else(|| format!("path-{release}"), str::to_string);
    if id.is_empty() || id.contains('/') || id.starts_with('.') {
        bail!("--id {id:?}: must be a plain directory name");
    }
    Ok(Kernel {
        id,
        suite: "path".into(),
        arch,
        release,
        packages: Vec::new(),
        image: image.to_path_buf(),
        config: config.to_path_buf(),
        system_map: system_map.map(Path::to_path_buf),
        modules,
    })
}

/// Largest `System.map` read.
pub const MAX_SYSTEM_MAP_BYTES: u64 = 64 << 20;

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
    let modules = find_modules(&modules, crate::initramfs::modules(spec.arch))?;
    Ok(Kernel {
        id: spec.id.into(),
        suite: spec.suite.into(),
        arch: spec.arch,
        release,
        packages,
        image,
        config,
        system_map: Some(system_map),
        modules,
    })
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
    let text = memmap_dump::read_user_file(config, memmap_dump::MAX_USER_FILE_BYTES)
        .with_context(|| format!("reading {}", config.display()))?
        .text;
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
        let text = memmap_dump::read_user_file(path, MAX_SYSTEM_MAP_BYTES)
            .with_context(|| format!("reading {}", path.display()))?
            .text;
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
    fn a_kernel_by_path_is_read_from_its_image_modules_and_config() {
        let dir = tempfile::Builder::new().prefix("oracle-kernel-path-").tempdir().unwrap();
        let d = dir.path();
        // A bzImage setup header: "HdrS" at 0x202, kernel_version at 0x20e (offset from 0x200).
        let mut img = vec![0u8; 0x400];
        img[0x202..0x206].copy_from_slice(b"HdrS");
        img[0x20e..0x210].copy_from_slice(&0x100u16.to_le_bytes());
        let v = b"7.3.0-rc1-patched (me@host) #1 SMP\0";
        img[0x300..0x300 + v.len()].copy_from_slice(v);
        std::fs::write(d.join("bzImage"), &img).unwrap();
        std::fs::write(d.join(".config"), "CONFIG_NODES_SHIFT=10\n").unwrap();
        let m = d.join("lib/modules/7.3.0-rc1-patched/kernel/drivers");
        for sub in ["nvdimm", "dax"] {
            std::fs::create_dir_all(m.join(sub)).unwrap();
        }
        let wanted = crate::initramfs::modules(Arch::Amd64);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, b"\x7fELF module").unwrap();
        let gz = gz.finish().unwrap();
        for (i, w) in wanted.iter().enumerate().skip(1) {
            let (sub, name) = w.split_once('/').unwrap();
            if i % 2 == 0 {
                std::fs::write(m.join(sub).join(format!("{name}.ko.gz")), &gz).unwrap();
            } else {
                std::fs::write(m.join(sub).join(format!("{name}.ko")), b"\x7fELF plain").unwrap();
            }
        }
        // libnvdimm is missing: the error names it and nothing else.
        let e = from_paths(&d.join("bzImage"), &d.join("lib"), &d.join(".config"), None, None).unwrap_err();
        let text = format!("{e:#}");
        assert!(text.contains("libnvdimm") && !text.contains("nd_pmem"), "{text}");
        std::fs::write(m.join("nvdimm/libnvdimm.ko"), b"\x7fELF").unwrap();
        let k = from_paths(&d.join("bzImage"), &d.join("lib"), &d.join(".config"), None, None).unwrap();
        assert_eq!(
            (k.release.as_str(), k.arch, k.id.as_str()),
            ("7.3.0-rc1-patched", Arch::Amd64, "path-7.3.0-rc1-patched")
        );
        assert_eq!(k.modules.len(), wanted.len());
        assert_eq!(module_bytes(&k.modules["nd_btt"]).unwrap(), b"\x7fELF plain");
        assert_eq!(module_bytes(&k.modules["nd_e820"]).unwrap(), b"\x7fELF module");
        // Not a kernel image; a missing config.
        assert!(
            format!("{:#}", image_release(&d.join(".config")).unwrap_err()).contains("not a kernel image")
        );
        assert!(from_paths(&d.join("bzImage"), &d.join("lib"), &d.join("nope"), None, None).is_err());
        assert!(
            from_paths(&d.join("bzImage"), &d.join("lib"), &d.join(".config"), None, Some("../x")).is_err()
        );
    }

    #[test]
    fn unknown_kernels_are_an_error() {
        assert!(spec("9.9-amd64").is_err());
        assert_eq!(spec("6.12-amd64").map(|k| k.suite).ok(), Some("bookworm-backports"));
    }
}
