//! Where a report comes from: when, which build, which kernel and CPU, so that two reports can
//! be compared or told apart.

use schemars::JsonSchema;
use serde::Serialize;

/// The build and machine state a report was made with.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Provenance {
    /// When the report was made, RFC 3339 in UTC (`2026-12-01T12:18:46Z`).
    #[schemars(extend("format" = "date-time"))]
    pub generated_at: String,
    /// The bench's crate version.
    pub version: String,
    /// The git commit the bench was built from (`git rev-parse HEAD` at build time), when it
    /// was built from a checkout.
    pub git_commit: Option<String>,
    /// `rustc --version` of the compiler that built it.
    pub rustc: Option<String>,
    /// The running kernel's release (`uname -r`, from `/proc/sys/kernel/osrelease`).
    pub kernel: Option<String>,
    /// The transparent huge page mode (`always`, `madvise` or `never`: the selected entry of
    /// `/sys/kernel/mm/transparent_hugepage/enabled`); the memmaps and buffers ask for huge pages
    /// with `MADV_HUGEPAGE`, which `never` refuses.
    pub thp: Option<String>,
    /// The CPU.
    pub cpu_model: CpuModel,
}

/// The CPU, from `/proc/cpuinfo` (the first CPU's entry).
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct CpuModel {
    /// `model name` (x86) or the architecture when there is none.
    pub name: String,
    /// `vendor_id` (x86) or `CPU implementer` (arm64).
    pub vendor: Option<String>,
    /// `cpu family` (x86) or `CPU architecture` (arm64).
    pub family: Option<String>,
    /// `model` (x86) or `CPU part` (arm64).
    pub model: Option<String>,
    /// `stepping` (x86) or `CPU variant` / `CPU revision` (arm64).
    pub stepping: Option<String>,
    /// The CPU flags among [`BACKEND_FLAGS`] that this CPU has: the ones that pick stream-hal's
    /// store instructions and the limit methods.
    pub flags: Vec<String>,
}

/// CPU flags (`/proc/cpuinfo` spelling) that select stream-hal's paths or the limits' methods:
/// `sse2` (`movntdq` rather than `movnti`), `erms` and `fsrm` (`rep stosb`), `avx` and
/// `avx512f` (the wide `vmovntdq` fills), `clzero` (streaming clears) on x86-64; `asimd`
/// (`stnp` of vector pairs) on arm64.
pub const BACKEND_FLAGS: [&str; 7] = ["sse2", "erms", "fsrm", "avx", "avx512f", "clzero", "asimd"];

impl Provenance {
    /// This build on this machine, now.
    #[must_use]
    pub fn now() -> Provenance {
        Provenance {
            generated_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            git_commit: option_env!("MEMMAP_BENCH_GIT_COMMIT").map(str::to_string),
            rustc: option_env!("MEMMAP_BENCH_RUSTC").map(str::to_string),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|s| s.trim().to_string()),
            thp: std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
                .ok()
                .and_then(|s| thp_mode(&s)),
            cpu_model: CpuModel::detect(),
        }
    }
}

/// The bracketed entry of a sysfs choice list (`always [madvise] never` → `madvise`).
#[must_use]
pub fn thp_mode(text: &str) -> Option<String> {
    let start = text.find('[')? + 1;
    let len = text[start..].find(']')?;
    Some(text[start..start + len].to_string())
}

impl CpuModel {
    /// The first CPU of `/proc/cpuinfo` (parsed by `procfs`); the architecture alone where it
    /// cannot be read.
    #[must_use]
    pub fn detect() -> CpuModel {
        use procfs::Current as _;
        match procfs::CpuInfo::current() {
            Ok(info) => CpuModel::from_cpuinfo(&info),
            Err(_) => CpuModel { name: std::env::consts::ARCH.to_string(), ..CpuModel::default() },
        }
    }

    /// The first CPU of `info`.
    #[must_use]
    pub fn from_cpuinfo(info: &procfs::CpuInfo) -> CpuModel {
        let field = |names: &[&str]| {
            names
                .iter()
                .find_map(|n| info.get_field(0, n).or_else(|| info.fields.get(*n).map(String::as_str)))
        };
        let owned = |names: &[&str]| field(names).map(|v| v.trim().to_string());
        // x86 names its flags `flags`, arm64 `Features`.
        let flags: Vec<&str> = info
            .flags(0)
            .or_else(|| field(&["Features"]).map(|f| f.split_whitespace().collect()))
            .unwrap_or_default();
        let stepping = owned(&["stepping"]).or_else(|| {
            let (v, r) = (owned(&["CPU variant"]), owned(&["CPU revision"]));
            (v.is_some() || r.is_some())
                .then(|| format!("{}/{}", v.unwrap_or_default(), r.unwrap_or_default()))
        });
        CpuModel {
            name: owned(&["model name", "Model", "cpu model"])
                .unwrap_or_else(|| std::env::consts::ARCH.to_string()),
            vendor: owned(&["vendor_id", "CPU implementer"]),
            family: owned(&["cpu family", "CPU architecture"]),
            model: owned(&["model", "CPU part"]),
            stepping,
            flags: BACKEND_FLAGS.iter().filter(|f| flags.contains(f)).map(|f| f.to_string()).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thp_mode_is_the_bracketed_entry() {
        assert_eq!(thp_mode("always [madvise] never\n").as_deref(), Some("madvise"));
        assert_eq!(thp_mode("[always] madvise never").as_deref(), Some("always"));
        assert_eq!(thp_mode("always madvise never"), None);
        assert_eq!(thp_mode("always [madvise"), None);
    }

    #[test]
    fn cpu_models_of_x86_and_arm64() {
        use procfs::FromRead as _;
        let x86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n\
                   model name\t: AMD EPYC 7763 64-Core Processor\nstepping\t: 1\n\
                   flags\t\t: fpu sse2 avx erms clzero avx2\n\n";
        let m = CpuModel::from_cpuinfo(&procfs::CpuInfo::from_read(x86.as_bytes()).unwrap());
        assert_eq!(m.name, "AMD EPYC 7763 64-Core Processor");
        assert_eq!(
            (m.vendor.as_deref(), m.family.as_deref(), m.model.as_deref(), m.stepping.as_deref()),
            (Some("AuthenticAMD"), Some("25"), Some("1"), Some("1"))
        );
        assert_eq!(m.flags, ["sse2", "erms", "avx", "clzero"]);
        let arm = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes\n\
                   CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\n\
                   CPU part\t: 0xd0c\nCPU revision\t: 1\n\n";
        let m = CpuModel::from_cpuinfo(&procfs::CpuInfo::from_read(arm.as_bytes()).unwrap());
        assert_eq!(
            (m.vendor.as_deref(), m.family.as_deref(), m.model.as_deref(), m.stepping.as_deref()),
            (Some("0x41"), Some("8"), Some("0xd0c"), Some("0x3/1"))
        );
        assert_eq!(m.flags, ["asimd"]);
    }

    #[test]
    fn this_build_and_machine_are_named() {
        let p = Provenance::now();
        assert!(humantime::parse_rfc3339(&p.generated_at).is_ok(), "{}", p.generated_at);
        assert_eq!(p.version, env!("CARGO_PKG_VERSION"));
        assert!(p.rustc.as_deref().is_some_and(|v| v.starts_with("rustc ")), "{:?}", p.rustc);
        if let Some(c) = &p.git_commit {
            assert!(c.len() == 40 && c.bytes().all(|b| b.is_ascii_hexdigit()), "{c}");
        }
        assert!(!p.cpu_model.name.is_empty());
    }
}
