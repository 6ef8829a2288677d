//! The memory configurations the oracle sets up in a guest, as data.

use memmap_core::Arch;

/// The ZONE_DEVICE namespace a configuration creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pmem {
    /// `ndctl create-namespace -m`: `fsdax` or `devdax`.
    pub mode: &'static str,
    /// `-M`: `mem` (struct pages in RAM) or `dev` (in the namespace, through an altmap).
    pub map: &'static str,
    /// `-a` for devdax (`4K`, `2M`, `1G`; off x86-64 also `PAGE`, the kernel's page size, and
    /// `PMD`, its PMD huge page: 2 MiB with 4 KiB pages, 32 MiB with 16 KiB); `None` for fsdax.
    pub align: Option<&'static str>,
}

/// The hugetlb pages a configuration allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hugetlb {
    /// Huge page size in KiB (2048, 32768, 1048576, ...).
    pub size_kb: u64,
    /// Pages per node.
    pub per_node: u64,
    /// Allocated at boot (`hugepages=` on the command line) rather than at run time.
    pub boot: bool,
    /// `hugetlb_free_vmemmap=on`.
    pub hvo: bool,
}

/// The memory a configuration hot-adds: a `pc-dimm` present from boot on x86-64, a
/// `virtio-mem-pci` device on arm64 (no `ACPI_HOTPLUG_MEMORY` there), a `pc-dimm` added after
/// boot with QMP on ppc64el (DLPAR onlines it). x86-64 and arm64 guests online the blocks in
/// ascending order just before they are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hotplug {
    /// DIMM size in MiB (a multiple of the 128 MiB memory block).
    pub size_mb: u64,
    /// `online_movable` (ZONE_MOVABLE) rather than `online_kernel` (ZONE_NORMAL).
    pub movable: bool,
}

impl Hugetlb {
    /// The size as `hugepagesz=` and the model's `--hstate` take it (`64K`, `2M`, `32M`, `1G`).
    #[must_use]
    pub fn size_name(&self) -> String {
        match self.size_kb {
            kb if kb >= 1 << 20 && kb % (1 << 20) == 0 => format!("{}G", kb >> 20),
            kb if kb >= 1 << 10 && kb % (1 << 10) == 0 => format!("{}M", kb >> 10),
            kb => format!("{kb}K"),
        }
    }
}

impl Hotplug {
    /// The sysfs `state` the guest writes.
    #[must_use]
    pub fn online_type(&self) -> &'static str {
        if self.movable { "online_movable" } else { "online_kernel" }
    }
}

/// A boot configuration: nothing is set up after boot; the memmap of every zone of every node
/// of the guest's ordinary RAM is read as soon as `/init` has reported what the guest found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Boot {
    /// vCPUs: with one, deferred struct page init runs on one thread and is deterministic.
    pub smp: u32,
    /// `movablecore=` in MiB: the top of the memory becomes ZONE_MOVABLE.
    pub movablecore_mb: Option<u64>,
    /// `early_page_ext`: page extensions need every struct page early, so `defer_init()` defers
    /// nothing and the kernel initializes the memmap eagerly.
    pub eager: bool,
}

/// One configuration.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// Name (directory name, command-line argument).
    pub name: &'static str,
    /// Guest architecture.
    pub arch: Arch,
    /// Guest RAM in MiB.
    pub mem_mb: u64,
    /// NUMA node sizes in MiB (empty: one node; 0: a memoryless node, where a DIMM goes).
    pub numa_mb: &'static [u64],
    /// A `SIZE!START` pmem carve-out of the guest's RAM (e.g. `1G!4G`): `memmap=` on x86-64, a
    /// device-tree `pmem-region` on arm64 and riscv64, giving a label-less namespace0.0.
    pub memmap: Option<&'static str>,
    /// virtio-pmem device size in MiB (arm64).
    pub virtio_pmem_mb: Option<u64>,
    /// The namespace to set up and dump.
    pub pmem: Option<Pmem>,
    /// The hugetlb pages to set up and dump.
    pub hugetlb: Option<Hugetlb>,
    /// The memory to hot-add, online and dump.
    pub hotplug: Option<Hotplug>,
    /// The boot memmap to dump.
    pub boot: Option<Boot>,
    /// Load `memmap_stream.ko` (built by `kernel-oracle build`) once the namespace exists, to check
    /// memmap-core's and stream-hal's code against the kernel in place.
    pub module: bool,
    /// With `module`: the module is the kernel's ZONE_DEVICE memmap provider (the patched
    /// `memmap_init_zone_device()`), the namespace's driver is rebound [`REBINDS`] times, each
    /// bind checked in the module and dumped by the host, then the memory is used (ext4 with
    /// `-o dax` on fsdax, every page of a devdax device mapped), the module unloaded and the
    /// namespace bound once more by the kernel's own loop.
    pub provider: bool,
}

/// How often the provider configurations rebind their namespace's driver (the upstream series'
/// test procedure).
pub const REBINDS: u32 = 30;

/// The fields a configuration does not set: an x86-64 guest with nothing set up.
const BASE: Scenario = Scenario {
    name: "",
    arch: Arch::X86_64,
    mem_mb: 2048,
    numa_mb: &[],
    memmap: None,
    virtio_pmem_mb: None,
    pmem: None,
    hugetlb: None,
    hotplug: None,
    boot: None,
    module: false,
    provider: false,
};

const fn pmem(name: &'static str, memmap: &'static str, mem_mb: u64, p: Pmem) -> Scenario {
    pmem_on(Arch::X86_64, name, memmap, mem_mb, p)
}

const fn pmem_on(arch: Arch, name: &'static str, memmap: &'static str, mem_mb: u64, p: Pmem) -> Scenario {
    Scenario { name, arch, mem_mb, memmap: Some(memmap), pmem: Some(p), ..BASE }
}

/// A pmem configuration that also loads `memmap_stream.ko`.
const fn with_module(sc: Scenario) -> Scenario {
    Scenario { module: true, ..sc }
}

/// A pmem configuration whose namespace the module initializes, bind after bind.
const fn with_provider(sc: Scenario) -> Scenario {
    Scenario { module: true, provider: true, ..sc }
}

const fn huge(name: &'static str, mem_mb: u64, h: Hugetlb) -> Scenario {
    huge_on(Arch::X86_64, name, mem_mb, h)
}

const fn huge_on(arch: Arch, name: &'static str, mem_mb: u64, h: Hugetlb) -> Scenario {
    Scenario { name, arch, mem_mb, hugetlb: Some(h), ..BASE }
}

const fn hotplug(name: &'static str, size_mb: u64, movable: bool) -> Scenario {
    hotplug_on(Arch::X86_64, name, size_mb, movable)
}

const fn hotplug_on(arch: Arch, name: &'static str, size_mb: u64, movable: bool) -> Scenario {
    Scenario { name, arch, hotplug: Some(Hotplug { size_mb, movable }), ..BASE }
}

const fn boot(name: &'static str, mem_mb: u64, numa_mb: &'static [u64], b: Boot) -> Scenario {
    boot_on(Arch::X86_64, name, mem_mb, numa_mb, b)
}

const fn boot_on(arch: Arch, name: &'static str, mem_mb: u64, numa_mb: &'static [u64], b: Boot) -> Scenario {
    Scenario { name, arch, mem_mb, numa_mb, boot: Some(b), ..BASE }
}

const fn dd(map: &'static str, align: &'static str) -> Pmem {
    Pmem { mode: "devdax", map, align: Some(align) }
}

const fn h(size_kb: u64, per_node: u64, boot: bool, hvo: bool) -> Hugetlb {
    Hugetlb { size_kb, per_node, boot, hvo }
}

/// Every configuration. x86-64 legacy pmem carve-outs sit at 4 GiB, where q35's RAM above 2 GiB
/// starts, so that guest RAM backs them.
pub const SCENARIOS: &[Scenario] = &[
    pmem("fsdax-mem", "1G!4G", 3072, Pmem { mode: "fsdax", map: "mem", align: None }),
    pmem("fsdax-dev", "1G!4G", 3072, Pmem { mode: "fsdax", map: "dev", align: None }),
    // The same two on a kernel with `memmap_stream.ko` (`kernel-oracle build`): the module
    // compares the model with the kernel's memmap in place as well.
    with_module(pmem("module-fsdax-mem", "1G!4G", 3072, Pmem { mode: "fsdax", map: "mem", align: None })),
    with_module(pmem("module-fsdax-dev", "1G!4G", 3072, Pmem { mode: "fsdax", map: "dev", align: None })),
    // The kernel runs on the module's memmap: 256 MiB namespaces rebound 30 times each.
    with_provider(pmem(
        "provider-fsdax-mem",
        "256M!4G",
        3072,
        Pmem { mode: "fsdax", map: "mem", align: None },
    )),
    with_provider(pmem(
        "provider-fsdax-dev",
        "256M!4G",
        3072,
        Pmem { mode: "fsdax", map: "dev", align: None },
    )),
    with_provider(pmem("provider-devdax-2m-mem", "256M!4G", 3072, dd("mem", "2M"))),
    with_provider(pmem("provider-devdax-2m-dev", "256M!4G", 3072, dd("dev", "2M"))),
    pmem("devdax-4k-mem", "1G!4G", 3072, dd("mem", "4K")),
    pmem("devdax-4k-dev", "1G!4G", 3072, dd("dev", "4K")),
    pmem("devdax-2m-mem", "1G!4G", 3072, dd("mem", "2M")),
    pmem("devdax-2m-dev", "1G!4G", 3072, dd("dev", "2M")),
    // The namespace starts 64 MiB into the section at 4 GiB, whose first 64 MiB are boot RAM:
    // its first compound pages live in an early section (boot memmap, no vmemmap dedup).
    pmem("devdax-2m-mem-early-section", "960M!4160M", 4096, dd("mem", "2M")),
    // The namespace ends 64 MiB before the end of the section at 4 GiB + 896 MiB, whose last
    // 64 MiB are boot RAM: its last compound pages live in an early section.
    pmem("devdax-2m-mem-trailing-early-section", "960M!4G", 4096, dd("mem", "2M")),
    // The same start with an altmap (`map=dev`): the altmap's first pfns, and the namespace's
    // first pageblock, share the early section with boot RAM.
    pmem("fsdax-dev-early-section", "960M!4160M", 4096, Pmem { mode: "fsdax", map: "dev", align: None }),
    pmem("devdax-2m-dev-early-section", "960M!4160M", 4096, dd("dev", "2M")),
    pmem("devdax-1g-mem", "2G!4G", 4096, dd("mem", "1G")),
    pmem("devdax-1g-dev", "2G!4G", 4096, dd("dev", "1G")),
    huge("hugetlb-2m-hvo-off", 1024, h(2048, 4, false, false)),
    huge("hugetlb-2m-hvo-on", 1024, h(2048, 4, false, true)),
    // 64 boot-time 2 MiB pages (`hugepagesz=2M hugepages=64`): they come from the buddy
    // allocator (`alloc_pool_huge_folio()`), not from memblock as gigantic pages do.
    huge("hugetlb-2m-boot-hvo-off", 1024, h(2048, 64, true, false)),
    huge("hugetlb-2m-boot-hvo-on", 1024, h(2048, 64, true, true)),
    huge("hugetlb-1g-hvo-off", 5120, h(1 << 20, 2, true, false)),
    huge("hugetlb-1g-hvo-on", 5120, h(1 << 20, 2, true, true)),
    // Two nodes: node 0 is [0, 2G) + [4G, 6G), node 1 is [6G, 9G). One 1 GiB page per node
    // with HVO (each node's shared tail page), and a 2 MiB devdax namespace in node 1.
    Scenario {
        numa_mb: &[4096, 3072],
        hugetlb: Some(h(1 << 20, 1, true, true)),
        ..pmem("numa2-hugetlb-1g-hvo-on-devdax-2m", "1G!7G", 7168, dd("mem", "2M"))
    },
    // arm64 (`virt`, RAM from 1 GiB): the top 1 GiB of 3 GiB of RAM as a device-tree pmem
    // region (QEMU 10.0 has no virtio-pmem-pci for either machine, and the nvdimm of arm64's
    // `virt` is described by ACPI only), namespaces set up through sysfs. riscv64 (RAM from 2
    // GiB): [4 GiB, 5 GiB) of 3.5 GiB, below the device tree QEMU puts at the top of RAM.
    pmem_on(Arch::Arm64, "arm64-fsdax-mem", "1G!3G", 3072, Pmem { mode: "fsdax", map: "mem", align: None }),
    pmem_on(Arch::Arm64, "arm64-fsdax-dev", "1G!3G", 3072, Pmem { mode: "fsdax", map: "dev", align: None }),
    pmem_on(Arch::Arm64, "arm64-devdax-page-mem", "1G!3G", 3072, dd("mem", "PAGE")),
    pmem_on(Arch::Arm64, "arm64-devdax-pmd-mem", "1G!3G", 3072, dd("mem", "PMD")),
    pmem_on(Arch::Arm64, "arm64-devdax-pmd-dev", "1G!3G", 3072, dd("dev", "PMD")),
    pmem_on(
        Arch::Riscv64,
        "riscv64-fsdax-mem",
        "1G!4G",
        3584,
        Pmem { mode: "fsdax", map: "mem", align: None },
    ),
    pmem_on(
        Arch::Riscv64,
        "riscv64-fsdax-dev",
        "1G!4G",
        3584,
        Pmem { mode: "fsdax", map: "dev", align: None },
    ),
    pmem_on(Arch::Riscv64, "riscv64-devdax-2m-mem", "1G!4G", 3584, dd("mem", "2M")),
    pmem_on(Arch::Riscv64, "riscv64-devdax-2m-dev", "1G!4G", 3584, dd("dev", "2M")),
    // arm64: runtime 2 MiB hugetlb pages and boot-time 1 GiB pages.
    huge_on(Arch::Arm64, "arm64-hugetlb-2m", 1024, h(2048, 4, false, false)),
    huge_on(Arch::Arm64, "arm64-hugetlb-1g", 3072, h(1 << 20, 1, true, false)),
    // The arm64 hstates beyond 2M and 1G: boot-time 32 MiB pages (contiguous PMDs with 4 KiB
    // pages, gigantic: memblock; one PMD with 16 KiB pages, order 11: the buddy allocator) and
    // run-time 64 KiB pages (contiguous PTEs, 4 KiB pages only). Both arm64 kernels run the
    // configurations their page size has (the 16 KiB kernel's 2M and 1G are a contiguous PTE
    // run and a contiguous PMD run).
    huge_on(Arch::Arm64, "arm64-hugetlb-32m", 1024, h(32 << 10, 4, true, false)),
    huge_on(Arch::Arm64, "arm64-hugetlb-64k", 1024, h(64, 16, false, false)),
    // riscv64 (`virt`, Sv39): 2 MiB pages at run time with and without HVO, boot-time 1 GiB
    // pages with HVO, run-time 64 KiB Svnapot pages with HVO on (which leaves them alone: their
    // 16 struct pages fit in the vmemmap page it keeps).
    huge_on(Arch::Riscv64, "riscv64-hugetlb-2m-hvo-off", 1024, h(2048, 4, false, false)),
    huge_on(Arch::Riscv64, "riscv64-hugetlb-2m-hvo-on", 1024, h(2048, 4, false, true)),
    huge_on(Arch::Riscv64, "riscv64-hugetlb-1g-hvo-on", 5120, h(1 << 20, 1, true, true)),
    huge_on(Arch::Riscv64, "riscv64-hugetlb-64k-hvo-on", 1024, h(64, 16, false, true)),
    // ppc64el (`pseries`, radix): 2 MiB pages at run time, boot-time 1 GiB pages (Debian's
    // ppc64el kernels have no HVO and no LIBNVDIMM); on the 64 KiB kernel too (orders 5 and 14).
    huge_on(Arch::Powerpc64, "ppc64el-hugetlb-2m", 1024, h(2048, 4, false, false)),
    huge_on(Arch::Powerpc64, "ppc64el-hugetlb-1g", 3072, h(1 << 20, 1, true, false)),
    // Memory hotplug: a 2 GiB guest (all of it below 4 GiB, in ZONE_DMA32) with a DIMM at 4 GiB
    // onlined into an empty ZONE_NORMAL or ZONE_MOVABLE, 128 MiB memory blocks.
    hotplug("hotplug-256m-normal", 256, false),
    hotplug("hotplug-256m-movable", 256, true),
    hotplug("hotplug-1g-normal", 1024, false),
    hotplug("hotplug-1g-movable", 1024, true),
    // arm64 (`virt`, RAM from 1 GiB, all of it ZONE_DMA): a 256 MiB virtio-mem device right
    // above RAM onlined into an empty ZONE_NORMAL or ZONE_MOVABLE, 128 MiB memory blocks.
    hotplug_on(Arch::Arm64, "arm64-hotplug-256m-normal", 256, false),
    hotplug_on(Arch::Arm64, "arm64-hotplug-256m-movable", 256, true),
    // ppc64el (`pseries`, RAM from 0, all ZONE_NORMAL): a 512 MiB DIMM at 2 GiB added after boot,
    // two 256 MiB LMBs that DLPAR adds and onlines one after the other. Into ZONE_NORMAL on a
    // node without memory (node 1): node 0's ZONE_NORMAL holds the boot memory, whose free
    // blocks the hot-added ones would be linked in front of.
    Scenario {
        numa_mb: &[2048, 0],
        ..hotplug_on(Arch::Powerpc64, "ppc64el-hotplug-512m-normal", 512, false)
    },
    hotplug_on(Arch::Powerpc64, "ppc64el-hotplug-512m-movable", 512, true),
    // The boot memmap of ordinary RAM: ZONE_DMA and ZONE_DMA32 below 2 GiB (q35), ZONE_NORMAL
    // from 4 GiB, ZONE_MOVABLE through `movablecore=`, two nodes; one vCPU (deferred init on
    // one thread) and two (in parallel).
    // The boot memmap of riscv64 (RAM from 2 GiB: ZONE_DMA32 up to 4 GiB, ZONE_NORMAL above)
    // and ppc64el (RAM from 0, all ZONE_NORMAL; on 7.2-ppc64el-64k too: 64 KiB pages, 16 MiB
    // sections of 256 pages, pageblock_order 5).
    boot_on(Arch::Arm64, "arm64-boot-2g", 2048, &[], Boot { smp: 1, movablecore_mb: None, eager: false }),
    boot_on(Arch::Riscv64, "riscv64-boot-3g", 3072, &[], Boot { smp: 1, movablecore_mb: None, eager: false }),
    boot_on(
        Arch::Powerpc64,
        "ppc64el-boot-2g",
        2048,
        &[],
        Boot { smp: 1, movablecore_mb: None, eager: false },
    ),
    // arm64 has a spare page flag, so the model's on-demand path runs too: against the
    // kernel's eager init.
    boot_on(
        Arch::Arm64,
        "arm64-boot-2g-eager",
        2048,
        &[],
        Boot { smp: 1, movablecore_mb: None, eager: true },
    ),
    boot("boot-3g", 3072, &[], Boot { smp: 1, movablecore_mb: None, eager: false }),
    boot("boot-3g-smp2", 3072, &[], Boot { smp: 2, movablecore_mb: None, eager: false }),
    boot("boot-3g-movable", 3072, &[], Boot { smp: 1, movablecore_mb: Some(512), eager: false }),
    boot("boot-numa2-4g", 4096, &[2048, 2048], Boot { smp: 2, movablecore_mb: None, eager: false }),
    // Node boundaries inside a section: node 0 ends 64 MiB into the section at 4 GiB; and node 1
    // starts at 1.5 GiB, below the hole under 4 GiB that holds the firmware's tables.
    boot(
        "boot-numa2-split-section-4g",
        4096,
        &[2112, 1984],
        Boot { smp: 2, movablecore_mb: None, eager: false },
    ),
    boot("boot-numa2-low-split-4g", 4096, &[1536, 2560], Boot { smp: 2, movablecore_mb: None, eager: false }),
    // One node whose last zone ends inside a section (32 MiB into the section at 5 GiB).
    boot("boot-3g-partial-section", 3104, &[], Boot { smp: 1, movablecore_mb: None, eager: false }),
    // The kernel's eager init (`early_page_ext`), the model's eager and on-demand paths as the
    // reference: one node, and two.
    boot("boot-3g-eager", 3072, &[], Boot { smp: 1, movablecore_mb: None, eager: true }),
    boot("boot-numa2-4g-eager", 4096, &[2048, 2048], Boot { smp: 2, movablecore_mb: None, eager: true }),
];

/// The name of the module the module configurations load.
pub const MODULE_NAME: &str = "memmap_stream";

/// Looks a configuration up by name.
#[must_use]
pub fn find(name: &str) -> Option<Scenario> {
    SCENARIOS.iter().copied().find(|s| s.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_configurations_load_the_module_after_the_namespace() {
        let m: Vec<&Scenario> = SCENARIOS.iter().filter(|s| s.module).collect();
        assert_eq!(
            m.iter().map(|s| s.name).collect::<Vec<_>>(),
            [
                "module-fsdax-mem",
                "module-fsdax-dev",
                "provider-fsdax-mem",
                "provider-fsdax-dev",
                "provider-devdax-2m-mem",
                "provider-devdax-2m-dev",
            ]
        );
        for s in m {
            let script = s.script();
            let (ns, insmod) = (script.find("create-namespace").unwrap(), script.find("insmod").unwrap());
            assert!(ns < insmod, "{script}");
            assert!(script.contains(&format!("/mods/{MODULE_NAME}.ko")));
        }
        assert!(!find("fsdax-dev").unwrap().script().contains("insmod"));
    }

    #[test]
    fn provider_configurations_rebind_check_use_and_unload_in_that_order() {
        for (name, used) in [
            ("provider-fsdax-mem", "mount -t ext4 -o dax"),
            ("provider-fsdax-dev", "e2fsck -f -n"),
            ("provider-devdax-2m-mem", "dax-rw /dev/$d $size $align"),
            ("provider-devdax-2m-dev", "dax-rw /dev/$d $size $align"),
        ] {
            let sc = find(name).unwrap();
            assert!(sc.module && sc.provider, "{name}");
            let s = sc.script();
            let at = |needle: &str| s.find(needle).unwrap_or_else(|| panic!("{name}: no {needle:?} in {s}"));
            let order = [
                at("memmap_init_zone_device +p"),
                at("create-namespace"),
                at("insmod"),
                at(&format!("while [ $i -le {REBINDS} ]")),
                at("parameters/check"),
                at("@@bound $i"),
                at("read -r go <&3"),
                at(used),
                at("rmmod memmap_stream"),
                at("ran the provider"),
                at("the kernel log has a warning"),
            ];
            assert!(order.windows(2).all(|w| w[0] < w[1]), "{name}: {order:?}");
        }
        assert!(!find("module-fsdax-mem").unwrap().script().contains("rebind"));
    }

    #[test]
    fn off_x86_pmem_is_a_device_tree_carve_out_set_up_through_sysfs() {
        let sc = find("riscv64-devdax-2m-dev").unwrap();
        // No `memmap=` outside x86-64: the kernel is kept off the carve-out with `mem=`.
        assert!(sc.append().contains(&"mem=2048M".to_string()));
        assert!(find("arm64-devdax-pmd-dev").unwrap().script().contains("w $d/align $pmd"));
        assert!(!sc.append().iter().any(|a| a.starts_with("memmap=")));
        let script = sc.script();
        for line in [
            "read seed < /sys/bus/nd/devices/region0/dax_seed",
            "w $d/mode pmem",
            "w $d/align $(( 2 << 20 ))",
            "w /sys/bus/nd/drivers_probe $seed",
        ] {
            assert!(script.contains(line), "{line}: {script}");
        }
        assert!(!script.contains("ndctl"));
        let fsdax = find("arm64-fsdax-mem").unwrap().script();
        assert!(fsdax.contains("pfn_seed") && fsdax.contains("w $d/mode ram") && !fsdax.contains("align"));
        // x86-64 keeps ndctl and `memmap=`.
        let x86 = find("devdax-2m-dev").unwrap();
        assert!(x86.script().starts_with("run ndctl create-namespace"));
        assert!(x86.append().contains(&"memmap=1G!4G".to_string()));
    }

    #[test]
    fn hot_added_memory_waits_for_the_devices_blocks_off_x86() {
        // ppc64el: the host's device_add comes after `@@hotplug-wait`; DLPAR onlines the blocks,
        // into ZONE_MOVABLE only as the default state.
        let ppc = find("ppc64el-hotplug-512m-movable").unwrap();
        assert!(ppc.append().contains(&"memhp_default_state=online_movable".to_string()));
        let late = ppc.late_script();
        assert!(late.contains("exp=$(( 536870912 / 0x$bs ))") && late.contains("= online ]"));
        assert!(late.find("@@hotplug-wait").unwrap() < late.find("@@ready").unwrap());
        let normal = find("ppc64el-hotplug-512m-normal").unwrap();
        assert_eq!(normal.numa_mb, &[2048, 0]);
        assert!(normal.append().contains(&"memhp_default_state=offline".to_string()));
        // arm64: virtio-mem adds its blocks offline; the guest waits for them, then onlines.
        let arm = find("arm64-hotplug-256m-normal").unwrap().late_script();
        assert!(arm.contains("= offline ]") && arm.contains("echo online_kernel > $b/state"));
        // x86-64: the DIMM is there from boot, nothing to wait for.
        assert!(!find("hotplug-256m-normal").unwrap().late_script().contains("@@hotplug-wait"));
    }
}
