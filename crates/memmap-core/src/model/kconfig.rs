//! Reading a kernel's own `.config` into a [`KernelConfig`].

use core::fmt;

use super::config::{Arch, ConfigError, KernelConfig};

/// A kernel `.config`: `CONFIG_FOO=value` lines and `# CONFIG_FOO is not set` comments, read
/// in place without allocation, or symbols already read elsewhere ([`Kconfig::from_fn`]).
///
/// ```
/// use memmap_core::{Kconfig, KernelConfig};
///
/// let dotconfig = "CONFIG_X86_64=y\nCONFIG_NUMA=y\nCONFIG_NODES_SHIFT=6\nCONFIG_NR_CPUS=64\n\
///                  CONFIG_NUMA_BALANCING=y\n# CONFIG_LRU_GEN is not set\n";
/// let cfg = KernelConfig::X86_64.with_kconfig(&Kconfig::new(dotconfig))?;
/// assert_eq!(cfg.nodes_shift, 6);
/// assert_eq!(cfg.last_cpupid_shift, 8 + 6);
/// assert_eq!(cfg.lru_gen_width, 0);
/// # Ok::<(), memmap_core::KconfigError>(())
/// ```
#[derive(Clone, Copy)]
pub struct Kconfig<'a> {
    source: Source<'a>,
}

#[derive(Clone, Copy)]
enum Source<'a> {
    Text(&'a str),
    Lookup(&'a dyn Fn(&str) -> Option<&'a str>),
}

impl fmt::Debug for Kconfig<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.source {
            Source::Text(text) => f.debug_struct("Kconfig").field("text", &text).finish(),
            Source::Lookup(_) => f.write_str("Kconfig(lookup)"),
        }
    }
}

impl<'a> Kconfig<'a> {
    /// The `.config` text.
    #[must_use]
    pub const fn new(text: &'a str) -> Self {
        Kconfig { source: Source::Text(text) }
    }

    /// Symbols kept elsewhere (a map of a recorded `.config`): `lookup(symbol)` answers what
    /// [`Kconfig::get`] would.
    #[must_use]
    pub const fn from_fn(lookup: &'a dyn Fn(&str) -> Option<&'a str>) -> Self {
        Kconfig { source: Source::Lookup(lookup) }
    }

    /// The value of `symbol` (with its `CONFIG_` prefix): `Some("y")`, `Some("m")`,
    /// `Some("10")`, `Some("\"string\"")`, `Some("n")` for `# CONFIG_FOO is not set`, `None`
    /// when the text does not mention it. The last mention wins, as in Kconfig.
    #[must_use]
    pub fn get(&self, symbol: &str) -> Option<&'a str> {
        let text = match self.source {
            Source::Text(text) => text,
            Source::Lookup(lookup) => return lookup(symbol),
        };
        let mut found = None;
        for line in text.lines() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("# ") {
                if rest.strip_prefix(symbol).is_some_and(|r| r == " is not set") {
                    found = Some("n");
                }
            } else if let Some(rest) = line.strip_prefix(symbol) {
                if let Some(value) = rest.strip_prefix('=') {
                    found = Some(value.trim());
                }
            }
        }
        found
    }

    /// `Some(true)` for `y` or `m`, `Some(false)` for `n` or not set, `None` when not mentioned.
    #[must_use]
    pub fn enabled(&self, symbol: &str) -> Option<bool> {
        self.get(symbol).map(|v| v == "y" || v == "m")
    }

    /// A decimal (or `0x` hexadecimal) value; `Ok(None)` when not mentioned or not set.
    ///
    /// # Errors
    ///
    /// [`KconfigError::BadValue`] when the value is not a number.
    pub(crate) fn number(&self, symbol: &'static str) -> Result<Option<u64>, KconfigError> {
        match self.get(symbol) {
            None | Some("n") => Ok(None),
            Some(v) => {
                let parsed = match v.strip_prefix("0x") {
                    Some(hex) => u64::from_str_radix(hex, 16),
                    None => v.parse(),
                };
                parsed.map(Some).map_err(|_| KconfigError::BadValue { symbol })
            }
        }
    }
}

impl Kconfig<'_> {
    /// The architecture whose symbol (`CONFIG_X86_64`, `CONFIG_ARM64`, ...) is set.
    fn arch(&self) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| self.enabled(a.kconfig_symbol()) == Some(true))
    }

    /// `PAGE_SHIFT`: `CONFIG_PAGE_SHIFT` (6.8+), or the architecture's page-size choice
    /// (`ARM64_{4K,16K,64K}_PAGES`, `PPC_{4K,64K}_PAGES`); `None` when the text says neither.
    ///
    /// # Errors
    ///
    /// [`KconfigError::BadValue`] when `CONFIG_PAGE_SHIFT` is not a number,
    /// [`KconfigError::Conflict`] when two page sizes are chosen (a Kconfig `choice` has one).
    fn page_shift(&self) -> Result<Option<u64>, KconfigError> {
        const CHOICES: [(&str, u64); 5] = [
            ("CONFIG_ARM64_4K_PAGES", 12),
            ("CONFIG_ARM64_16K_PAGES", 14),
            ("CONFIG_ARM64_64K_PAGES", 16),
            ("CONFIG_PPC_4K_PAGES", 12),
            ("CONFIG_PPC_64K_PAGES", 16),
        ];
        let mut chosen: Option<(&'static str, u64)> = None;
        for (symbol, shift) in CHOICES {
            if self.enabled(symbol) == Some(true) {
                if let Some((first, _)) = chosen {
                    return Err(KconfigError::Conflict { first, second: symbol });
                }
                chosen = Some((symbol, shift));
            }
        }
        match (self.number("CONFIG_PAGE_SHIFT")?, chosen) {
            (Some(s), Some((symbol, c))) if s != c => {
                Err(KconfigError::Conflict { first: "CONFIG_PAGE_SHIFT", second: symbol })
            }
            (Some(s), _) => Ok(Some(s)),
            (None, c) => Ok(c.map(|(_, shift)| shift)),
        }
    }
}

/// Why a `.config` cannot be applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KconfigError {
    /// The `.config` is for another architecture than the base configuration.
    ArchMismatch {
        /// The architecture the `.config` names.
        kconfig: &'static str,
        /// The base configuration's preset name.
        base: &'static str,
    },
    /// A symbol's value could not be read.
    BadValue {
        /// The symbol.
        symbol: &'static str,
    },
    /// Two symbols that exclude each other are both set (two page sizes).
    Conflict {
        /// The first symbol.
        first: &'static str,
        /// The symbol that contradicts it.
        second: &'static str,
    },
    /// The `.config`'s page size is not the base configuration's (16 and 64 KiB pages have
    /// presets of their own where they are modelled: [`KernelConfig::PPC64EL_64K`]).
    UnsupportedPageSize,
    /// The resulting configuration does not fit `page->flags` (or is otherwise invalid).
    Config(ConfigError),
}

impl fmt::Display for KconfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            KconfigError::ArchMismatch { kconfig, base } => {
                write!(f, "the .config is for {kconfig}, the base configuration {base} is not")
            }
            KconfigError::BadValue { symbol } => write!(f, "{symbol} has a value that is not a number"),
            KconfigError::Conflict { first, second } => {
                write!(f, "{first} and {second} contradict each other")
            }
            KconfigError::UnsupportedPageSize => {
                f.write_str("the .config's page size is not the base configuration's")
            }
            KconfigError::Config(e) => write!(f, "{e}"),
        }
    }
}

impl core::error::Error for KconfigError {}

/// `order_base_2(n)`: the smallest `k` with `2^k >= n` (0 for 0 and 1).
const fn order_base_2(n: u64) -> u32 {
    if n <= 1 { 0 } else { 64 - (n - 1).leading_zeros() }
}

/// `PG_locked` .. `PG_dropbehind`: the page flags every configuration has (v6.18+ order).
const BASE_PAGEFLAGS: u32 = 20;

impl KernelConfig {
    /// The preset of the `.config`'s architecture (x86-64 where it names none) and page size
    /// (4 KiB where it says none) with the `.config` applied ([`KernelConfig::with_kconfig`]).
    ///
    /// # Errors
    ///
    /// As [`KernelConfig::with_kconfig`]; a page size no preset of the architecture has is
    /// [`KconfigError::UnsupportedPageSize`].
    pub fn from_kconfig(kconfig: &Kconfig<'_>) -> Result<KernelConfig, KconfigError> {
        let base = match (kconfig.arch().unwrap_or(Arch::X86_64), kconfig.page_shift()?.unwrap_or(12)) {
            (Arch::Arm64, 14) => KernelConfig::ARM64_16K,
            (Arch::Arm64, _) => KernelConfig::ARM64,
            (Arch::Riscv64, _) => KernelConfig::RISCV64,
            (Arch::Powerpc64, 16) => KernelConfig::PPC64EL_64K,
            (Arch::Powerpc64, _) => KernelConfig::PPC64EL,
            (Arch::X86_64, _) => KernelConfig::X86_64,
        };
        base.with_kconfig(kconfig)
    }

    /// This configuration with every Kconfig symbol the model depends on read from `kconfig`.
    /// The base supplies the architecture's constants (address layout, section size) and the
    /// release ([`KernelConfig::version`]); symbols the text does not mention keep the base's
    /// values. The architecture symbol must be the base's, and `PAGE_SHIFT` its page size.
    ///
    /// # Errors
    ///
    /// [`KconfigError`]: another architecture, a bad value, another page size, or a result that
    /// does not fit `page->flags`.
    pub fn with_kconfig(self, kconfig: &Kconfig<'_>) -> Result<KernelConfig, KconfigError> {
        let mut c = self;
        let arm64_base = self.arch == Arch::Arm64;
        for arch in Arch::ALL {
            if arch != self.arch && kconfig.enabled(arch.kconfig_symbol()) == Some(true) {
                return Err(KconfigError::ArchMismatch { kconfig: arch.name(), base: self.name });
            }
        }
        // The page size is the base's (a preset per page size).
        if kconfig.page_shift()?.is_some_and(|s| s != u64::from(self.page_shift)) {
            return Err(KconfigError::UnsupportedPageSize);
        }
        if let Some(delta) = kconfig.number("CONFIG_ILLEGAL_POINTER_VALUE")? {
            c.poison_pointer_delta = delta;
        }
        let set = |field: &mut bool, symbol: &str| {
            if let Some(v) = kconfig.enabled(symbol) {
                *field = v;
            }
        };
        match (kconfig.enabled("CONFIG_NUMA"), kconfig.number("CONFIG_NODES_SHIFT")?) {
            (Some(false), _) => c.nodes_shift = 0,
            (_, Some(shift)) => c.nodes_shift = u32::try_from(shift).unwrap_or(u32::MAX),
            _ => {}
        }
        let cpus = kconfig.number("CONFIG_NR_CPUS")?;
        match kconfig.enabled("CONFIG_NUMA_BALANCING") {
            Some(false) => c.last_cpupid_shift = 0,
            Some(true) => {
                if let Some(n) = cpus {
                    c.last_cpupid_shift = 8 + order_base_2(n);
                }
            }
            None => {}
        }
        let zone = |symbol: &str, now: bool| kconfig.enabled(symbol).unwrap_or(now);
        // ZONE_NORMAL and ZONE_MOVABLE always exist; ZONE_DEVICE is the last zone.
        let zones = 2
            + u32::from(zone("CONFIG_ZONE_DMA", self.max_nr_zones >= 5))
            + u32::from(zone("CONFIG_ZONE_DMA32", self.max_nr_zones >= 5))
            + u32::from(zone("CONFIG_HIGHMEM", false))
            + u32::from(zone("CONFIG_ZONE_DEVICE", true));
        c.max_nr_zones = zones;
        if let Some(on) = kconfig.enabled("CONFIG_LRU_GEN") {
            // order_base_2(MAX_NR_GENS + 1) and MAX_NR_TIERS - 2 with MAX_NR_GENS = MAX_NR_TIERS = 4.
            (c.lru_gen_width, c.lru_refs_width) = if on { (3, 2) } else { (0, 0) };
        }
        if let Some(on) = kconfig.enabled("CONFIG_KASAN") {
            c.kasan = on;
            c.kasan_tag_width = if !on {
                0
            } else if kconfig.enabled("CONFIG_KASAN_SW_TAGS") == Some(true) {
                8
            } else if kconfig.enabled("CONFIG_KASAN_HW_TAGS") == Some(true) {
                4
            } else {
                0
            };
        }
        set(&mut c.kmsan, "CONFIG_KMSAN");
        set(&mut c.debug_page_ref, "CONFIG_DEBUG_PAGE_REF");
        set(&mut c.debug_vm, "CONFIG_DEBUG_VM");
        if let (Some(memcg), obj_ext) =
            (kconfig.enabled("CONFIG_MEMCG"), kconfig.enabled("CONFIG_SLAB_OBJ_EXT"))
        {
            c.nr_pages_in_large_folio = memcg || obj_ext == Some(true);
        }
        set(&mut c.page_mapcount, "CONFIG_PAGE_MAPCOUNT");
        set(&mut c.mm_id, "CONFIG_MM_ID");
        set(&mut c.sparsemem_vmemmap, "CONFIG_SPARSEMEM_VMEMMAP");
        set(&mut c.optimize_dax_vmemmap, "CONFIG_ARCH_WANT_OPTIMIZE_DAX_VMEMMAP");
        set(&mut c.hugetlb_vmemmap, "CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP");
        set(&mut c.sparsemem_vmemmap_preinit, "CONFIG_SPARSEMEM_VMEMMAP_PREINIT");
        set(&mut c.cgroup_hugetlb, "CONFIG_CGROUP_HUGETLB");
        if self.arch == Arch::Riscv64 {
            set(&mut c.riscv_svnapot, "CONFIG_RISCV_ISA_SVNAPOT");
        }
        if let Some(order) = kconfig.number("CONFIG_ARCH_FORCE_MAX_ORDER")? {
            c.max_page_order = u32::try_from(order).unwrap_or(u32::MAX);
        }
        if arm64_base {
            if let Some(bits) = kconfig.number("CONFIG_ARM64_PA_BITS")? {
                c.max_physmem_bits = u32::try_from(bits).unwrap_or(u32::MAX);
            }
        }
        // __NR_PAGEFLAGS: the base flags, PG_mlocked (MMU), and the optional ones.
        let uncached = self.arch == Arch::X86_64 && kconfig.enabled("CONFIG_X86_PAT").unwrap_or(true);
        let hwpoison = kconfig.enabled("CONFIG_MEMORY_FAILURE").unwrap_or(true);
        let mte = arm64_base && kconfig.enabled("CONFIG_ARM64_MTE").unwrap_or(true);
        // PG_young and PG_idle (`CONFIG_PAGE_IDLE_FLAG` on 64-bit).
        let idle = kconfig.enabled("CONFIG_PAGE_IDLE_FLAG").unwrap_or(false);
        c.nr_pageflags = BASE_PAGEFLAGS
            + 1
            + u32::from(uncached)
            + u32::from(hwpoison)
            + 2 * u32::from(idle)
            + 2 * u32::from(mte);
        c.flags_layout().map_err(KconfigError::Config)?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::version::KernelVersion;

    /// The symbols of Debian's `linux-image-7.2.13+deb14-amd64` `.config` that shape struct page.
    const DEBIAN_7_2_AMD64: &str = "\
CONFIG_X86_64=y
CONFIG_64BIT=y
# CONFIG_ARCH_FORCE_MAX_ORDER is not set
CONFIG_ARCH_WANT_OPTIMIZE_DAX_VMEMMAP=y
CONFIG_CGROUP_HUGETLB=y
# CONFIG_DEBUG_PAGE_REF is not set
# CONFIG_HIGHMEM is not set
CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP=y
# CONFIG_KASAN is not set
# CONFIG_KMSAN is not set
CONFIG_LRU_GEN=y
CONFIG_MEMCG=y
CONFIG_MEMORY_FAILURE=y
CONFIG_MM_ID=y
CONFIG_NODES_SHIFT=10
CONFIG_NR_CPUS=8192
CONFIG_NUMA=y
CONFIG_NUMA_BALANCING=y
CONFIG_PAGE_IDLE_FLAG=y
CONFIG_PAGE_MAPCOUNT=y
CONFIG_SLAB_OBJ_EXT=y
CONFIG_SPARSEMEM_VMEMMAP=y
CONFIG_X86_PAT=y
CONFIG_ZONE_DEVICE=y
CONFIG_ZONE_DMA=y
CONFIG_ZONE_DMA32=y
";

    #[test]
    #[cfg_attr(miri, ignore = "parses Debian's whole config: safe code only, slow under Miri")]
    fn debian_amd64_gives_the_x86_64_preset() {
        let cfg = KernelConfig::X86_64.with_kconfig(&Kconfig::new(DEBIAN_7_2_AMD64)).unwrap();
        // The preset leaves PG_young and PG_idle out (see `KernelConfig::nr_pageflags`): with
        // them Debian's layout has no spare bit for the on-demand RFC's flag.
        assert_eq!(cfg.nr_pageflags, 25);
        assert_eq!(cfg, KernelConfig { nr_pageflags: 25, ..KernelConfig::X86_64 });
        assert_eq!(crate::node::pg_uninitialized_2m(&cfg), None);
        assert_eq!(crate::node::pg_uninitialized_2m(&KernelConfig::X86_64), Some(23));
        // The layout the kernel booted under QEMU uses: node 63..54, zone 53..51, cpupid 50..30.
        let l = cfg.flags_layout().unwrap();
        assert_eq!((l.nodes_pgshift, l.zones_pgshift, l.last_cpupid_pgshift), (54, 51, 30));
        let six = KernelConfig::X86_64_6_12.with_kconfig(&Kconfig::new(DEBIAN_7_2_AMD64)).unwrap();
        assert_eq!(six.version, KernelVersion::V6_12, "the version comes from the base");
    }

    #[test]
    fn values_and_comments_are_read() {
        let k =
            Kconfig::new("CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=0x10\nCONFIG_D=\"x\"\nCONFIG_A=n\n");
        assert_eq!(k.get("CONFIG_A"), Some("n"), "the last mention wins");
        assert_eq!(k.enabled("CONFIG_B"), Some(false));
        assert_eq!(k.number("CONFIG_C"), Ok(Some(16)));
        assert_eq!(k.number("CONFIG_D"), Err(KconfigError::BadValue { symbol: "CONFIG_D" }));
        assert_eq!(k.get("CONFIG_AB"), None, "prefixes do not match");
        assert_eq!(k.get("CONFIG_E"), None);
    }

    #[test]
    fn wrong_architecture_page_size_or_width_is_an_error() {
        assert_eq!(
            KernelConfig::ARM64.with_kconfig(&Kconfig::new("CONFIG_X86_64=y")),
            Err(KconfigError::ArchMismatch { kconfig: "x86_64", base: "arm64" })
        );
        assert_eq!(
            KernelConfig::ARM64.with_kconfig(&Kconfig::new("CONFIG_ARM64=y\nCONFIG_ARM64_64K_PAGES=y")),
            Err(KconfigError::UnsupportedPageSize)
        );
        assert!(matches!(
            KernelConfig::X86_64.with_kconfig(&Kconfig::new("CONFIG_NODES_SHIFT=40")),
            Err(KconfigError::Config(_))
        ));
        assert_eq!(order_base_2(512), 9);
        assert_eq!(order_base_2(8192), 13);
        assert_eq!(order_base_2(100), 7);
    }

    #[test]
    fn the_preset_follows_the_architecture_and_page_size() {
        let text = "CONFIG_PPC64=y\nCONFIG_PAGE_SHIFT=16\n";
        assert_eq!(KernelConfig::from_kconfig(&Kconfig::new(text)).unwrap().name, "ppc64el-64k");
        let map = |s: &str| (s == "CONFIG_ARM64_16K_PAGES" || s == "CONFIG_ARM64").then_some("y");
        assert_eq!(KernelConfig::from_kconfig(&Kconfig::from_fn(&map)).unwrap().name, "arm64-16k");
        assert_eq!(
            KernelConfig::from_kconfig(&Kconfig::new("CONFIG_ARM64=y\nCONFIG_ARM64_64K_PAGES=y")),
            Err(KconfigError::UnsupportedPageSize)
        );
        assert_eq!(KernelConfig::from_kconfig(&Kconfig::new("")), Ok(KernelConfig::X86_64));
    }

    #[test]
    fn arm64_mte_and_pa_bits() {
        let text = "CONFIG_ARM64=y\nCONFIG_ARM64_4K_PAGES=y\nCONFIG_ARM64_MTE=y\nCONFIG_ARM64_PA_BITS=52\n\
                    CONFIG_NODES_SHIFT=4\nCONFIG_NR_CPUS=512\nCONFIG_NUMA_BALANCING=y\n\
                    # CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP is not set\n";
        let cfg = KernelConfig::ARM64.with_kconfig(&Kconfig::new(text)).unwrap();
        assert_eq!(cfg, KernelConfig::ARM64);
    }
}
