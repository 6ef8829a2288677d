//! The kernels the oracle boots, as data: which Debian suite and package names hold them, and
//! where the unpacked packages keep the image, the `.config`, `System.map` and the modules.

pub mod apt;
pub mod initramfs;
pub mod kbuild;
pub mod ksource;
pub mod modules;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use memmap_core::Arch;
use memmap_core::Kconfig;

pub use crate::facts::Package;
use apt::PrivateApt;
use modules::find_modules;

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

/// The Debian architecture name of `arch` (`amd64`, `arm64`, `riscv64`, `ppc64el`).
#[must_use]
pub fn debian(arch: Arch) -> &'static str {
    match arch {
        Arch::Arm64 => "arm64",
        Arch::Riscv64 => "riscv64",
        Arch::Powerpc64 => "ppc64el",
        _ => "amd64",
    }
}

/// Modules to load, in dependency order.
#[must_use]
pub fn guest_modules(arch: Arch) -> &'static [&'static str] {
    match arch {
        Arch::X86_64 => &[
            "nvdimm/libnvdimm",
            "nvdimm/nd_btt",
            "nvdimm/nd_e820",
            "nvdimm/nd_pmem",
            "dax/device_dax",
            "dax/dax_pmem",
        ],
        // pmem from a device-tree `pmem-region` (QEMU 10.0 has no virtio-pmem-pci for these
        // machines); arm64's hot-added memory comes from virtio-mem (Debian's riscv64 kernels
        // have no VIRTIO_MEM, and QEMU's riscv64 `virt` no memory devices).
        Arch::Arm64 => &[
            "nvdimm/libnvdimm",
            "nvdimm/nd_btt",
            "nvdimm/nd_pmem",
            "nvdimm/of_pmem",
            "dax/device_dax",
            "dax/dax_pmem",
            "virtio/virtio_mem",
        ],
        Arch::Riscv64 => &[
            "nvdimm/libnvdimm",
            "nvdimm/nd_btt",
            "nvdimm/nd_pmem",
            "nvdimm/of_pmem",
            "dax/device_dax",
            "dax/dax_pmem",
        ],
        // Debian's ppc64el kernels have no LIBNVDIMM.
        _ => &[],
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

/// A kernel with split packaging (`linux-binary-RELEASE-FLAVOUR`): `$release` is the pattern of
/// the release before the flavour.
macro_rules! split {
    ($id:literal, $suite:literal, $release:literal, $arch:expr, $flavour:literal) => {
        KernelSpec {
            id: $id,
            suite: $suite,
            arch: $arch,
            image_pattern: concat!("^linux-binary-", $release, "-", $flavour, "$"),
            image_prefix: "linux-binary-",
            packaging: Packaging::Split,
        }
    };
}

/// A Linux 7.2 kernel of sid (`linux-binary-7.2.N+debN-FLAVOUR`).
macro_rules! sid_7_2 {
    ($id:literal, $arch:expr, $flavour:literal) => {
        split!($id, "sid", r"7\.2\.[0-9]+\+deb[0-9]+", $arch, $flavour)
    };
}

/// A Linux 7.3 kernel of experimental: a release candidate (`linux-binary-7.3-FLAVOUR`) or, once
/// one is there, a stable update (`7.3.N+debN`).
macro_rules! experimental_7_3 {
    ($id:literal, $arch:expr, $flavour:literal) => {
        split!($id, "experimental", r"7\.3(\.[0-9]+\+deb[0-9]+)?", $arch, $flavour)
    };
}

/// Every kernel the oracle knows.
pub const KERNELS: [KernelSpec; 13] = [
    sid_7_2!("7.2-amd64", Arch::X86_64, "amd64"),
    KernelSpec {
        id: "6.12-amd64",
        suite: "bookworm-backports",
        arch: Arch::X86_64,
        image_pattern: r"^linux-image-6\.12\.[0-9]+\+deb[0-9]+-amd64$",
        image_prefix: "linux-image-",
        packaging: Packaging::Single,
    },
    KernelSpec {
        id: "6.1-amd64",
        suite: "bookworm",
        arch: Arch::X86_64,
        image_pattern: r"^linux-image-6\.1\.0-[0-9]+-amd64$",
        image_prefix: "linux-image-",
        packaging: Packaging::Single,
    },
    sid_7_2!("7.2-arm64", Arch::Arm64, "arm64"),
    sid_7_2!("7.2-arm64-16k", Arch::Arm64, "arm64-16k"),
    sid_7_2!("7.2-riscv64", Arch::Riscv64, "riscv64"),
    sid_7_2!("7.2-ppc64el", Arch::Powerpc64, "powerpc64le"),
    sid_7_2!("7.2-ppc64el-64k", Arch::Powerpc64, "powerpc64le-64k"),
    experimental_7_3!("7.3-amd64", Arch::X86_64, "amd64"),
    experimental_7_3!("7.3-arm64", Arch::Arm64, "arm64"),
    experimental_7_3!("7.3-arm64-16k", Arch::Arm64, "arm64-16k"),
    experimental_7_3!("7.3-ppc64el", Arch::Powerpc64, "powerpc64le"),
    experimental_7_3!("7.3-ppc64el-64k", Arch::Powerpc64, "powerpc64le-64k"),
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

/// A kernel to boot: an unpacked Debian package ([`fetch`]) or one a user built ([`from_paths`]).
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

impl Kernel {
    /// The model's configuration of this kernel ([`crate::facts::model_config`] of its
    /// `.config` and release).
    ///
    /// # Errors
    ///
    /// The `.config` cannot be read or is refused, or the release is not `MAJOR.MINOR...`.
    pub fn model_config(&self) -> Result<memmap_core::KernelConfig> {
        crate::facts::model_config(&kconfig_symbols(&self.config)?, &self.release)
    }
}

/// Largest kernel image read, also after gunzip (an arm64 `Image` is about 40 MiB).
pub const MAX_BINARY_BYTES: u64 = 256 << 20;

/// The architecture and release of a kernel image: an x86 bzImage (the setup header's
/// `kernel_version`) or an arm64 `Image` (plain or gzip, its `Linux version` banner). The
/// release must be a plain name ([`crate::files::name`]): it names the output directory.
///
/// # Errors
///
/// The file is not a regular file, too large, neither format (the error says which were
/// tried), or its release cannot name a directory.
pub fn image_release(image: &Path) -> Result<(Arch, String)> {
    let raw = memmap_dump::read_user_bytes(image, MAX_BINARY_BYTES)?;
    image_release_of(&raw).with_context(|| image.display().to_string())
}

/// [`image_release`] of an image's bytes. A gzip'd arm64 `Image` is decompressed as a stream,
/// at most [`MAX_BINARY_BYTES`] of it, and only a window around the banner is kept.
///
/// # Errors
///
/// As [`image_release`].
pub fn image_release_of(raw: &[u8]) -> Result<(Arch, String)> {
    if raw.len() > 0x210 && &raw[0x202..0x206] == b"HdrS" {
        let off = usize::from(u16::from_le_bytes([raw[0x20e], raw[0x20f]])) + 0x200;
        let text = raw.get(off..(off + 256).min(raw.len())).unwrap_or_default();
        let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
        let release =
            String::from_utf8_lossy(&text[..end]).split_whitespace().next().unwrap_or("").to_string();
        if release.is_empty() {
            bail!("a bzImage without a kernel_version string");
        }
        crate::files::name("the release in its kernel_version string", &release)?;
        return Ok((Arch::X86_64, release));
    }
    let arm64 = if raw.starts_with(&[0x1f, 0x8b]) {
        let gz = flate2::read::MultiGzDecoder::new(raw).take(MAX_BINARY_BYTES);
        arm64_banner(gz).context("gzip data")?
    } else {
        arm64_banner(raw).context("reading")?
    };
    match arm64 {
        Arm64Image::Release(release) => {
            crate::files::name("the release in its `Linux version` banner", &release)?;
            Ok((Arch::Arm64, release))
        }
        Arm64Image::NoBanner => bail!("an arm64 Image without a `Linux version` banner"),
        Arm64Image::NotArm64 => bail!(
            "not a kernel image the oracle can read the release from (an x86 bzImage with the \"HdrS\" \
             setup header, or an arm64 Image, plain or gzip)"
        ),
    }
}

/// What [`arm64_banner`] found.
enum Arm64Image {
    /// Not an arm64 `Image` (no `ARM\x64` magic at 0x38).
    NotArm64,
    /// An arm64 `Image` without a banner.
    NoBanner,
    /// The release of its `Linux version RELEASE` banner.
    Release(String),
}

/// Reads an arm64 `Image` from `r` until its `Linux version ` banner, keeping only the bytes
/// that may still hold it (a window of 64 KiB plus the banner and 128 bytes of release).
fn arm64_banner(mut r: impl Read) -> std::io::Result<Arm64Image> {
    const BANNER: &[u8] = b"Linux version ";
    const TAIL: usize = 128;
    let mut head = [0u8; 0x40];
    let mut got = 0;
    while got < head.len() {
        match r.read(&mut head[got..])? {
            0 => return Ok(Arm64Image::NotArm64),
            n => got += n,
        }
    }
    if &head[0x38..0x3c] != b"ARM\x64" {
        return Ok(Arm64Image::NotArm64);
    }
    let mut window: Vec<u8> = head.to_vec();
    let mut chunk = vec![0u8; 64 << 10];
    let mut eof = false;
    loop {
        if let Some(i) = window.windows(BANNER.len()).position(|w| w == BANNER) {
            let rest = &window[i + BANNER.len()..];
            if rest.len() >= TAIL || eof {
                let rest = &rest[..rest.len().min(TAIL)];
                let end = rest.iter().position(|&b| b == b' ' || b == 0).unwrap_or(rest.len());
                return Ok(Arm64Image::Release(String::from_utf8_lossy(&rest[..end]).into_owned()));
            }
        } else if eof {
            return Ok(Arm64Image::NoBanner);
        } else {
            // Nothing before the last banner-length bytes can start the banner.
            let keep = window.len().min(BANNER.len() - 1);
            window.drain(..window.len() - keep);
        }
        let n = r.read(&mut chunk)?;
        eof = n == 0;
        window.extend_from_slice(&chunk[..n]);
    }
}

/// A kernel a user built: the image, its modules' directory ([`find_modules`]), its `.config` and
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
    let (arch, release) = image_release(image).context("--kernel-image")?;
    let id = match id {
        Some(id) => crate::files::name("--id", id)?.to_string(),
        None => {
            let id = format!("path-{release}");
            if crate::files::name("", &id).is_err() {
                bail!(
                    "--kernel-image {}: its release {release:?} makes the output directory name {id:?}, which is \
                     not {}; pass --id NAME to name it",
                    image.display(),
                    crate::files::NAME_RULE
                );
            }
            id
        }
    };
    let kconfig = kconfig_symbols(config).context("--config")?;
    crate::facts::model_config(&kconfig, &release)
        .with_context(|| format!("--config {}", config.display()))?;
    if let Some(m) = system_map {
        memmap_dump::read_user_file(m, crate::facts::symbols::MAX_SYSTEM_MAP_BYTES)
            .context("--system-map")?;
    }
    let modules_dir = modules;
    let mut modules = find_modules(modules_dir, guest_modules(arch))?;
    // The module configurations' module, where the kernel has one (`kernel-oracle build`).
    if let Ok(m) = find_modules(modules_dir, &[crate::guest::scenario::MODULE_NAME]) {
        modules.extend(m);
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

/// Orders release strings like `7.2.13+deb14-amd64` by their numeric components.
fn release_key(release: &str) -> Vec<u64> {
    release.split(|c: char| !c.is_ascii_digit()).filter_map(|s| s.parse().ok()).collect()
}

/// The release in an image package's name (`linux-image-RELEASE`): it names the cache's
/// directory of the kernel, so it must be one plain name ([`crate::files::name`]).
///
/// # Errors
///
/// The name lacks the prefix, or the release cannot name a directory.
fn package_release(package: &str, prefix: &str) -> Result<String> {
    let release =
        package.strip_prefix(prefix).with_context(|| format!("package {package:?} lacks {prefix:?}"))?;
    crate::files::name(&format!("the release of package {package:?}"), release)?;
    Ok(release.to_string())
}

/// Finds the newest matching image package in the spec's suite, downloads the packages (cached
/// under `cache/debs`), and unpacks them under `cache/kernels/<release>`.
///
/// # Errors
///
/// apt errors, no matching package, or an unpacked tree without the expected files.
pub fn fetch(spec: KernelSpec, cache: &Path, refresh: bool) -> Result<Kernel> {
    let apt = PrivateApt::new(cache, spec.suite, debian(spec.arch))?;
    apt.update(refresh)?;
    let mut names = apt.search(spec.image_pattern)?;
    names.sort_by_key(|n| release_key(n));
    let image_pkg = names.pop().with_context(|| {
        format!("no package matching {} in suite {} ({})", spec.image_pattern, spec.suite, debian(spec.arch))
    })?;
    let release = package_release(&image_pkg, spec.image_prefix)?;
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
        crate::files::name(&format!("the version apt reports for {p}"), &version)?;
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
    let modules = find_modules(&modules, guest_modules(spec.arch))?;
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
    "CONFIG_SPARSEMEM_EXTREME",
    "CONFIG_PAGE_SHIFT",
    "CONFIG_ARCH_FORCE_MAX_ORDER",
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
    "CONFIG_PAGE_EXTENSION",
    "CONFIG_DEFERRED_STRUCT_PAGE_INIT",
    "CONFIG_TRANSPARENT_HUGEPAGE",
    "CONFIG_MEMORY_FAILURE",
    "CONFIG_X86_PAT",
    "CONFIG_X86_64",
    "CONFIG_ARM64",
    "CONFIG_RISCV",
    "CONFIG_PPC64",
    "CONFIG_ARM64_16K_PAGES",
    "CONFIG_ARM64_64K_PAGES",
    "CONFIG_PPC_64K_PAGES",
    "CONFIG_ILLEGAL_POINTER_VALUE",
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
    "CONFIG_RISCV_ISA_SVNAPOT",
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
    let text = memmap_dump::read_user_file(config, memmap_dump::MAX_USER_FILE_BYTES)?.text;
    let kconfig = Kconfig::new(&text);
    Ok(KCONFIG_SYMBOLS
        .iter()
        .map(|s| (s.to_string(), kconfig.get(s).unwrap_or("n").trim_matches('"').to_string()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::modules::module_bytes;

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
        let wanted = guest_modules(Arch::X86_64);
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
            ("7.3.0-rc1-patched", Arch::X86_64, "path-7.3.0-rc1-patched")
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
    fn a_package_release_names_one_directory() {
        assert_eq!(package_release("linux-image-6.1.0-50-amd64", "linux-image-").unwrap(), "6.1.0-50-amd64");
        for bad in ["linux-image-../../x", "linux-image-a/b", "linux-image-", "linux-binary-7.2"] {
            assert!(package_release(bad, "linux-image-").is_err(), "{bad}");
        }
    }

    #[test]
    fn sid_kernels_match_their_flavour_only() {
        assert_eq!(
            spec("7.2-arm64-16k").unwrap().image_pattern,
            r"^linux-binary-7\.2\.[0-9]+\+deb[0-9]+-arm64-16k$"
        );
    }

    /// 7.3 is in experimental for every architecture of 7.2 but riscv64, as a release candidate
    /// (`linux-binary-7.3-FLAVOUR`) or a stable update.
    #[test]
    fn experimental_kernels_follow_sid_but_riscv64() {
        assert_eq!(
            spec("7.3-arm64-16k").unwrap().image_pattern,
            r"^linux-binary-7\.3(\.[0-9]+\+deb[0-9]+)?-arm64-16k$"
        );
        let ids = |prefix: &str| -> Vec<String> {
            KERNELS.iter().filter_map(|k| k.id.strip_prefix(prefix)).map(String::from).collect()
        };
        let sid: Vec<String> = ids("7.2-").into_iter().filter(|a| a != "riscv64").collect();
        assert_eq!(ids("7.3-"), sid);
        assert!(KERNELS.iter().filter(|k| k.id.starts_with("7.3-")).all(|k| k.suite == "experimental"));
    }

    #[test]
    fn unknown_kernels_are_an_error() {
        assert!(spec("9.9-amd64").is_err());
        assert_eq!(spec("6.12-amd64").map(|k| k.suite).ok(), Some("bookworm-backports"));
    }

    #[test]
    fn an_arm64_image_is_read_as_a_stream_to_its_banner() {
        let mut img = vec![0u8; 0x40];
        img[0x38..0x3c].copy_from_slice(b"ARM\x64");
        img.extend(vec![0u8; 3 << 20]);
        img.extend_from_slice(b"Linux version 7.2.13+deb14-arm64 (debian-kernel@lists.debian.org) #1 SMP\0");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &img).unwrap();
        let gz = gz.finish().unwrap();
        for raw in [&img, &gz] {
            let (arch, release) = image_release_of(raw).unwrap();
            assert_eq!((arch, release.as_str()), (Arch::Arm64, "7.2.13+deb14-arm64"));
        }
        // The banner cut by the end of the image, or missing.
        let cut = &img[..img.len() - 40];
        assert_eq!(image_release_of(cut).unwrap().1, "7.2.13+deb14-arm64");
        let e = image_release_of(&img[..3 << 20]).unwrap_err().to_string();
        assert!(e.contains("without a `Linux version` banner"), "{e}");
    }

    #[test]
    fn a_release_that_cannot_name_a_directory_is_refused_with_what_would_do() {
        let dir = tempfile::Builder::new().prefix("oracle-release-").tempdir().unwrap();
        let d = dir.path();
        let image = |version: &str| {
            let mut img = vec![0u8; 0x400];
            img[0x202..0x206].copy_from_slice(b"HdrS");
            img[0x20e..0x210].copy_from_slice(&0x100u16.to_le_bytes());
            img[0x300..0x300 + version.len()].copy_from_slice(version.as_bytes());
            std::fs::write(d.join("bzImage"), img).unwrap();
        };
        std::fs::write(d.join(".config"), "CONFIG_NODES_SHIFT=10\n").unwrap();
        std::fs::create_dir(d.join("mods")).unwrap();
        for bad in ["../../x (me@host) #1", "/tmp/abs #1", ".hidden #1"] {
            image(bad);
            let e = format!(
                "{:#}",
                from_paths(&d.join("bzImage"), &d.join("mods"), &d.join(".config"), None, None).unwrap_err()
            );
            let release = bad.split(' ').next().unwrap();
            assert!(
                e.contains(&format!("the release in its kernel_version string {release:?} cannot name")),
                "{e}"
            );
            assert!(!e.contains("--id"), "{e}");
        }
        // A release fine as a name whose `path-` id is too long: the error says to pass --id.
        image(&"7".repeat(125));
        let e = format!(
            "{:#}",
            from_paths(&d.join("bzImage"), &d.join("mods"), &d.join(".config"), None, None).unwrap_err()
        );
        assert!(
            e.contains("pass --id NAME to name it") && e.contains("makes the output directory name"),
            "{e}"
        );
        // A bad --id is quoted as given.
        image("7.3.0 #1");
        let e = format!(
            "{:#}",
            from_paths(&d.join("bzImage"), &d.join("mods"), &d.join(".config"), None, Some("a/b"))
                .unwrap_err()
        );
        assert!(e.starts_with("--id \"a/b\" cannot name"), "{e}");
        // The .config is checked before a boot needs it.
        std::fs::write(d.join(".config"), "CONFIG_NUMA=y\nCONFIG_NODES_SHIFT=100\n").unwrap();
        let e = format!(
            "{:#}",
            from_paths(&d.join("bzImage"), &d.join("mods"), &d.join(".config"), None, None).unwrap_err()
        );
        assert!(e.contains("--config") && e.contains("page->flags"), "{e}");
    }
}
