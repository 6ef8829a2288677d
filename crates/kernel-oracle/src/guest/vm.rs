//! What we boot: the QEMU command line of a configuration on a kernel, the device tree with a
//! pmem carve-out (arm64, riscv64), and the DIMM hot-added over QMP (pseries).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use memmap_core::Arch;

use crate::guest::qemu::Guest;
use crate::guest::scenario::Scenario;
use crate::guest::script::parse_carve;
use crate::kernel::Kernel;

/// The socket of the guest's second serial port in the work directory (provider configurations).
pub const CONTROL_SOCKET: &str = "ctl.sock";

/// The QEMU binary and arguments that boot `sc` on `kernel` with `initrd` (files QEMU makes
/// go to `work`).
///
/// # Errors
///
/// A path QEMU cannot take in an option, or an architecture the oracle does not boot.
pub fn qemu_command(
    kernel: &Kernel,
    sc: &Scenario,
    initrd: &Path,
    work: &Path,
) -> Result<(String, Vec<String>)> {
    let mut a: Vec<String> = Vec::new();
    let mut append: Vec<String> = vec!["nokaslr".into(), "quiet".into(), "panic=-1".into()];
    let qemu = match sc.arch {
        Arch::X86_64 => {
            a.extend(["-machine", "q35", "-cpu", "max", "-smp"].map(String::from));
            a.push(sc.boot.map_or(1, |b| b.smp).to_string());
            append.insert(0, "console=ttyS0".into());
            // 4-level paging: the vmemmap at 0xffffea0000000000. `-cpu max` offers LA57 (and
            // pdpe1gb, which 1 GiB hugetlb pages need).
            append.push("no5lvl".into());
            "qemu-system-x86_64"
        }
        Arch::Arm64 => {
            a.extend(["-machine", "virt", "-cpu", "max,pauth-impdef=on", "-smp", "1"].map(String::from));
            append.insert(0, "console=ttyAMA0".into());
            "qemu-system-aarch64"
        }
        Arch::Riscv64 => {
            // OpenSBI (QEMU's bundled `fw_dynamic`) starts the kernel in S mode.
            a.extend(["-machine", "virt", "-cpu", "max", "-smp", "1", "-bios", "default"].map(String::from));
            append.insert(0, "console=ttyS0".into());
            // Sv39 (see `vmemmap`): `-cpu max` offers Sv57, which the kernel would pick.
            append.push("no4lvl".into());
            "qemu-system-riscv64"
        }
        Arch::Powerpc64 => {
            // Radix MMU (POWER10), the Virtual Open Firmware instead of SLOF (it boots in a
            // fraction of the time and hands over the same device tree), and the Spectre
            // capabilities TCG cannot provide declared broken so the machine starts.
            a.extend(
                [
                    "-machine",
                    "pseries,x-vof=on,cap-cfpc=broken,cap-sbbc=broken,cap-ibs=broken,cap-ccf-assist=off",
                    "-cpu",
                    "power10",
                    "-smp",
                    "1",
                ]
                .map(String::from),
            );
            append.insert(0, "console=hvc0".into());
            "qemu-system-ppc64"
        }
        arch => bail!("the oracle boots no {} guests", arch.name()),
    };
    let extra_mb = sc.virtio_pmem_mb.unwrap_or(0) + sc.hotplug.map_or(0, |h| h.size_mb);
    if extra_mb > 0 {
        a.extend(["-m".into(), format!("{}M,slots=2,maxmem={}M", sc.mem_mb, sc.mem_mb + extra_mb + 1024)]);
    } else {
        a.extend(["-m".into(), format!("{}M", sc.mem_mb)]);
    }
    for (i, mb) in sc.numa_mb.iter().enumerate() {
        if *mb == 0 {
            a.extend(["-numa".into(), format!("node,nodeid={i}")]);
            continue;
        }
        a.extend(["-object".into(), format!("memory-backend-ram,id=m{i},size={mb}M")]);
        a.extend(["-numa".into(), format!("node,nodeid={i},memdev=m{i}")]);
    }
    if let Some(mb) = sc.virtio_pmem_mb {
        let file = work.join("virtio-pmem.img");
        a.extend([
            "-object".into(),
            format!(
                "memory-backend-file,id=pm0,mem-path={},size={mb}M,share=on",
                crate::files::qemu_opt_path(&file)?
            ),
            "-device".into(),
            "virtio-pmem-pci,memdev=pm0,id=vp0".into(),
        ]);
    }
    match (sc.hotplug, sc.arch) {
        // pseries: the DIMM comes after boot (`hot_add_dimm`).
        (None, _) | (Some(_), Arch::Powerpc64) => {}
        (Some(hp), Arch::Arm64) => a.extend([
            "-object".into(),
            format!("memory-backend-ram,id=hp0,size={}M", hp.size_mb),
            "-device".into(),
            format!("virtio-mem-pci,id={HOTPLUG_DEVICE},memdev=hp0,requested-size={}M", hp.size_mb),
        ]),
        (Some(hp), _) => a.extend([
            "-object".into(),
            format!("memory-backend-ram,id=hp0,size={}M", hp.size_mb),
            "-device".into(),
            format!("pc-dimm,id={HOTPLUG_DEVICE},memdev=hp0"),
        ]),
    }
    if sc.provider {
        // The host's side of the guest's waits: a second serial port (`/dev/ttyS1`, COM2) on a
        // socket the host writes a line to when the guest may go on.
        a.extend([
            "-chardev".into(),
            format!(
                "socket,id=ctl,path={},server=on,wait=off",
                crate::files::qemu_opt_path(&work.join(CONTROL_SOCKET))?
            ),
            "-device".into(),
            "isa-serial,chardev=ctl,index=1".into(),
        ]);
    }
    append.extend(sc.append());
    a.extend(["-kernel".into(), kernel.image.display().to_string()]);
    a.extend(["-initrd".into(), initrd.display().to_string()]);
    a.extend(["-append".into(), append.join(" ")]);
    Ok((qemu.to_string(), a))
}

/// The device tree `dts` (dtc's text) with `[start, start + size)` taken out of its memory node
/// and declared a `pmem-region` (of_pmem's label-less pmem region).
fn carve_pmem(dts: &str, start: u64, size: u64) -> Result<String> {
    let cells = |v: u64| format!("{:#x} {:#x}", v >> 32, v & 0xffff_ffff);
    let mut out = String::new();
    let mut rest = dts;
    let mut found = false;
    while let Some(i) = rest.find("memory@") {
        let end = rest[i..].find("};").context("a memory node without its end")? + i;
        let node = &rest[i..end];
        out.push_str(&rest[..i]);
        let reg = node.find("reg = <").map(|r| r + 7);
        let parsed = reg.and_then(|r| {
            let close = node[r..].find('>')? + r;
            let c: Vec<u64> = node[r..close]
                .split_whitespace()
                .filter_map(|w| u64::from_str_radix(w.strip_prefix("0x")?, 16).ok())
                .collect();
            match c[..] {
                [a, b, x, y] => Some((r, close, (a << 32) | b, (x << 32) | y)),
                _ => None,
            }
        });
        match parsed {
            Some((r, close, base, len)) if base < start && start + size <= base + len => {
                out.push_str(&node[..r]);
                out.push_str(&format!("{} {}", cells(base), cells(start - base)));
                if start + size < base + len {
                    out.push_str(&format!(" {} {}", cells(start + size), cells(base + len - start - size)));
                }
                out.push_str(&node[close..]);
                found = true;
            }
            _ => out.push_str(node),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    if !found {
        bail!("no memory node of the device tree ends with the pmem carve-out [{start:#x}, +{size:#x})");
    }
    let root_end = out.rfind("};").context("the device tree has no root node")?;
    out.insert_str(
        root_end,
        &format!(
            "\tpmem@{start:x} {{\n\t\tcompatible = \"pmem-region\";\n\t\treg = <{} {}>;\n\t}};\n",
            cells(start),
            cells(size)
        ),
    );
    Ok(out)
}

/// arm64 and riscv64: QEMU's device tree for `qemu args` with the `memmap` carve-out as a pmem
/// region ([`carve_pmem`]), compiled into `work/pmem.dtb` for `-dtb`.
pub(crate) fn pmem_dtb(qemu: &str, args: &[String], carve: &str, work: &Path) -> Result<PathBuf> {
    let (size, start) = parse_carve(carve).with_context(|| format!("the carve-out {carve:?}"))?;
    let raw = work.join("qemu.dtb");
    let mut a = args.to_vec();
    a.extend(["-machine".into(), format!("dumpdtb={}", crate::files::qemu_opt_path(&raw)?)]);
    a.extend(["-display".into(), "none".into()]);
    crate::cmd::run(qemu, &a, None, Duration::from_secs(60)).context("dumping QEMU's device tree")?;
    let dtc = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|s| (*s).to_string()).collect();
        crate::cmd::run("dtc", &args, None, Duration::from_secs(60))
            .context("dtc (Debian's device-tree-compiler) failed or is not installed")
    };
    let raw_s = raw.display().to_string();
    let dts = dtc(&["-q", "-I", "dtb", "-O", "dts", &raw_s])?.stdout;
    let src = work.join("pmem.dts");
    crate::files::write_file(&src, carve_pmem(&dts, start, size)?.as_bytes())?;
    let out = work.join("pmem.dtb");
    dtc(&["-q", "-I", "dts", "-O", "dtb", "-o", &out.display().to_string(), &src.display().to_string()])?;
    Ok(out)
}

/// QEMU's id of the hot-added memory device.
pub(crate) const HOTPLUG_DEVICE: &str = "dimm0";

/// pseries: hot-adds a `pc-dimm` to `node` with QMP once the guest prints `@@hotplug-wait`.
pub(crate) fn hot_add_dimm(
    guest: &mut Guest,
    size_mb: u64,
    node: Option<usize>,
    timeout: Duration,
) -> Result<()> {
    let start = Instant::now();
    while !guest.console().text.contains("\n@@hotplug-wait\n") {
        let c = guest.console();
        if c.text.contains("@@fail ") || c.text.contains("Kernel panic") || start.elapsed() > timeout {
            let tail: Vec<&str> = c.text.lines().rev().take(30).collect();
            bail!(
                "the guest did not wait for the DIMM within {} s\n--- console tail ---\n{}",
                timeout.as_secs(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let qmp = guest.qmp();
    qmp.execute(
        "object-add",
        serde_json::json!({"qom-type": "memory-backend-ram", "id": "hp0", "size": size_mb << 20}),
    )?;
    let mut dev = serde_json::json!({"driver": "pc-dimm", "id": HOTPLUG_DEVICE, "memdev": "hp0"});
    if let Some(n) = node {
        dev["node"] = n.into();
    }
    qmp.execute("device_add", dev)?;
    eprintln!("  added a {size_mb} MiB pc-dimm after {:.1} s", start.elapsed().as_secs_f64());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pmem_carve_out_leaves_the_memory_node_and_becomes_a_pmem_region() {
        assert_eq!(parse_carve("1G!3G").unwrap(), (1 << 30, 3 << 30));
        assert_eq!(parse_carve("960M!4160M").unwrap(), (960 << 20, 4160 << 20));
        for bad in ["1G", "1G!", "!3G", "1T!3G", "xG!3G", "99999999999G!1G"] {
            assert!(parse_carve(bad).is_err(), "{bad}");
        }
        // QEMU's arm64 `virt` with 3 GiB: RAM [1 GiB, 4 GiB), the top 1 GiB carved out.
        let dts = "/dts-v1/;\n\n/ {\n\tmemory@40000000 {\n\t\treg = <0x00 0x40000000 0x00 0xc0000000>;\n\t\t\
                   device_type = \"memory\";\n\t};\n};\n";
        let out = carve_pmem(dts, 3 << 30, 1 << 30).unwrap();
        assert!(out.contains("reg = <0x0 0x40000000 0x0 0x80000000>;"), "{out}");
        assert!(out.contains(
            "pmem@c0000000 {\n\t\tcompatible = \"pmem-region\";\n\t\treg = <0x0 0xc0000000 0x0 0x40000000>;"
        ));
        assert!(out.trim_end().ends_with("};\n};"), "{out}");
        // Inside the node: the memory on both sides stays.
        let mid = carve_pmem(dts, 2 << 30, 1 << 30).unwrap();
        assert!(
            mid.contains("reg = <0x0 0x40000000 0x0 0x40000000 0x0 0xc0000000 0x0 0x40000000>;"),
            "{mid}"
        );
        // A carve-out outside every memory node is refused.
        assert!(carve_pmem(dts, 4 << 30, 1 << 30).is_err());
        assert!(carve_pmem("/ {\n};\n", 3 << 30, 1 << 30).is_err());
    }
}
