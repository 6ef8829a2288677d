//! What the guest does for a configuration: its kernel command line and the `/init` script
//! that sets its memory up and reports what it found.

use anyhow::{Context, Result};
use memmap_core::Arch;

use super::scenario::{Pmem, Scenario};

/// The end of a boot configuration's script: the zones' counts, read with shell builtins only
/// (nothing forked allocates) after `stat_refresh`, then `@@ready`.
const BOOT_LATE: &str = "echo 1 > /proc/sys/vm/stat_refresh
for f in zoneinfo buddyinfo; do
  if [ $f = zoneinfo ]; then echo \"@@begin zoneinfo-full\"; else echo \"@@begin $f\"; fi
  while read -r l; do echo \"$l\"; done < /proc/$f
  echo \"@@end\"
done
echo \"@@ready\"
while true; do read x; done
";

/// Loads `memmap_stream.ko` (its checks run in its init: a failed check fails `insmod`) and
/// reports its kernel log lines.
const MODULE_SCRIPT: &str = "block memmap_stream sh -c 'insmod /mods/memmap_stream.ko; s=$?; dmesg | grep memmap_stream:; echo \"insmod exit $s\"'
";

/// The provider configurations, after `MODULE_SCRIPT`: the module is the memmap provider; the
/// namespace's holder (`pfn0.N` on `nd_pmem`, `dax0.N` on `dax_pmem`; a legacy namespace in
/// fsdax `map=mem` is its own, on `nd_pmem`) is unbound and bound
/// `REBINDS` times, the module compares each bind with the slow path (`check`) and the host
/// dumps it (`@@bound N`, then it writes a line on the second serial port). Then the memory
/// is used (`USE_FSDAX` or `USE_DEVDAX`), and `PROVIDER_END` unloads the module and binds
/// once more: that bind must be the kernel's own loop.
const PROVIDER_BINDS: &str = "[ -d /sys/module/memmap_stream ] || fail \"memmap_stream.ko is not loaded\"
report
exec 3< /dev/ttyS1
read -r h < /sys/bus/nd/devices/namespace0.0/holder
[ -n \"$h\" ] || h=namespace0.0
drv=$(readlink /sys/bus/nd/devices/$h/driver); drv=${drv##*/}
rebind() { echo $h > /sys/bus/nd/drivers/$drv/unbind || fail \"unbind $h from $drv\"; echo $h > /sys/bus/nd/drivers/$drv/bind || fail \"bind $h to $drv\"; }
i=1
while [ $i -le REBINDS ]; do
  rebind
  echo 1 > /sys/module/memmap_stream/parameters/check || fail \"memmap_stream's check after bind $i\"
  block bind-$i sh -c 'dmesg | grep -E \"memmap_stream: (provider|slow)|memmap_init_zone_device\" | tail -n 3'
  echo \"@@bound $i\"
  read -r go <&3
  i=$((i + 1))
done
";

/// ext4 on the fsdax namespace with `-o dax`: files written, synced, dropped from the caches,
/// read back after a remount, and `e2fsck` clean (e2fsprogs by path: busybox's shell prefers its
/// own `mke2fs`, which makes no ext4).
const USE_FSDAX: &str = "mkdir -p /mnt; ln -sf /proc/mounts /etc/mtab
run /bin/mke2fs -q -F -t ext4 -b 4096 /dev/pmem0
run mount -t ext4 -o dax /dev/pmem0 /mnt
grep -q ' /mnt ext4 .*dax' /proc/mounts || fail \"/mnt is not mounted with dax: $(grep /mnt /proc/mounts)\"
for f in 0 1 2 3 4 5 6 7; do run dd if=/dev/urandom of=/mnt/f$f bs=1M count=4; done
run sync
sha256sum /mnt/f* > /tmp/sums
echo 3 > /proc/sys/vm/drop_caches
run umount /mnt
run mount -t ext4 -o dax /dev/pmem0 /mnt
block files sha256sum -c /tmp/sums
sha256sum -c -s /tmp/sums || fail \"the files read back differ from those written\"
run umount /mnt
block fsck /bin/e2fsck -f -n /dev/pmem0
/bin/e2fsck -f -n /dev/pmem0 > /dev/null 2>&1 || fail \"e2fsck found errors\"
";

/// Every page of the devdax device written and read back through a shared mapping.
const USE_DEVDAX: &str = "d=$(ls /sys/bus/dax/devices | head -n 1)
read -r size < /sys/bus/dax/devices/$d/size
read -r align < /sys/bus/dax/devices/$d/align
block dax-rw dax-rw /dev/$d $size $align
dax-rw /dev/$d $size $align > /dev/null || fail \"dax-rw /dev/$d $size $align\"
";

/// The module unloaded, one more bind by the kernel's loop, and no warning from mm.
const PROVIDER_END: &str = "run rmmod memmap_stream
rebind
block timing sh -c 'dmesg | grep -E \"memmap_init_zone_device|memmap_stream: provider:\"'
dmesg | grep memmap_init_zone_device | tail -n 1 | grep -q 'by the provider' && fail \"the bind after rmmod ran the provider\"
block mm-warnings sh -c 'dmesg | grep -E \"WARNING:|BUG:|Bad page|page dumped because\" || true'
dmesg | grep -qE \"WARNING:|BUG:|Bad page|page dumped because\" && fail \"the kernel log has a warning\"
";

/// What `ndctl create-namespace -f -e namespace0.0 -m MODE -M MAP [-a ALIGN]` does, through
/// sysfs, for guests without `ndctl` (off x86-64): the region's pfn or dax seed configured and
/// probed.
fn sysfs_namespace(p: Pmem) -> String {
    let seed = if p.mode == "devdax" { "dax_seed" } else { "pfn_seed" };
    let location = if p.map == "dev" { "pmem" } else { "ram" };
    let mut s = format!(
        "w() {{ echo \"@@run echo $2 > $1\"; echo \"$2\" > \"$1\" || fail \"echo $2 > $1\"; }}
[ -e /sys/bus/nd/devices/namespace0.0/driver ] && w /sys/bus/nd/drivers/nd_pmem/unbind namespace0.0
read seed < /sys/bus/nd/devices/region0/{seed}
d=/sys/bus/nd/devices/$seed
w $d/uuid 5b0c8f3e-6a2d-4e1f-9c7b-2d4e6f8a0b1c
w $d/mode {location}
"
    );
    if let Some(which @ ("PAGE" | "PMD")) = p.align {
        // `supported_alignments` lists PAGE_SIZE, the PMD size and (where the kernel maps PUD
        // pages) the PUD size, ascending.
        let var = if which == "PAGE" { "page" } else { "pmd" };
        s.push_str(&format!("read -r page pmd rest < $d/supported_alignments\nw $d/align ${var}\n"));
    } else if let Some(a) = p.align {
        let (n, unit) = a.split_at(a.len() - 1);
        let shift = match unit {
            "K" => 10,
            "M" => 20,
            _ => 30,
        };
        s.push_str(&format!("w $d/align $(( {n} << {shift} ))\n"));
    }
    s.push_str(
        "w $d/namespace namespace0.0
w /sys/bus/nd/drivers_probe $seed
read h < /sys/bus/nd/devices/namespace0.0/holder
[ \"$h\" = \"$seed\" ] || fail \"namespace0.0 is held by '$h', not $seed\"
",
    );
    s
}

impl Scenario {
    /// Extra kernel command-line words.
    #[must_use]
    pub fn append(&self) -> Vec<String> {
        let mut a = Vec::new();
        match self.memmap {
            Some(m) if self.arch == Arch::X86_64 => a.push(format!("memmap={m}")),
            // QEMU's arm64 `virt` writes its own memory node into a `-dtb`, so the kernel is
            // kept to the RAM below the carve-out by `mem=`.
            Some(m) => {
                let ram_base = if self.arch == Arch::Riscv64 { 2 << 30 } else { 1 << 30 };
                let below = parse_carve(m).map_or(0, |(_, start)| start.saturating_sub(ram_base));
                a.push(format!("mem={}M", below >> 20));
            }
            None => {}
        }
        if let Some(hp) = self.hotplug {
            // pseries DLPAR onlines each block it adds (`dlpar_online_lmb()`, the kernel zone);
            // into ZONE_MOVABLE only when that is the default state.
            let movable_now = self.arch == Arch::Powerpc64 && hp.movable;
            a.push(format!("memhp_default_state={}", if movable_now { "online_movable" } else { "offline" }));
        }
        if let Some(b) = self.boot {
            // Every memblock reservation and free in the log, and room for them.
            a.extend(["memblock=debug".into(), "log_buf_len=16M".into()]);
            if let Some(mb) = b.movablecore_mb {
                a.push(format!("movablecore={mb}M"));
            }
            if b.eager {
                a.push("early_page_ext".into());
            }
            // No CMA area: the model does not model one (MIGRATE_CMA pageblocks), and Debian's
            // riscv64 and ppc64el kernels reserve one by default (amd64's reserve none).
            if self.arch != Arch::X86_64 {
                a.push("cma=0".into());
            }
        }
        if let Some(h) = self.hugetlb {
            a.push(format!("hugetlb_free_vmemmap={}", if h.hvo { "on" } else { "off" }));
            if h.boot {
                a.push(format!("hugepagesz={}", h.size_name()));
                if self.numa_mb.len() > 1 {
                    let per: Vec<String> =
                        (0..self.numa_mb.len()).map(|n| format!("{n}:{}", h.per_node)).collect();
                    a.push(format!("hugepages={}", per.join(",")));
                } else {
                    a.push(format!("hugepages={}", h.per_node));
                }
            }
        }
        a
    }

    /// The part of the guest script that runs last (`/late.sh`, before `@@ready`): the hotplug
    /// configurations online the offline blocks in ascending order, report them, print `@@ready`
    /// and wait with shell builtins only, so nothing forks after onlining.
    #[must_use]
    pub fn late_script(&self) -> String {
        if self.boot.is_some() {
            return BOOT_LATE.into();
        }
        let Some(hp) = self.hotplug else { return String::new() };
        let mut s = String::new();
        if self.arch != Arch::X86_64 {
            // The device's blocks come after boot: virtio-mem adds them offline from its work
            // queue, DLPAR adds and onlines them once the host has sent `device_add` (it waits
            // for `@@hotplug-wait`). Polled with builtins, a second apart.
            let state = if self.arch == Arch::Powerpc64 { "online" } else { "offline" };
            s.push_str(&format!(
                "read bs < /sys/devices/system/memory/block_size_bytes
exp=$(( {size} / 0x$bs ))
count() {{ n=0; for b in /sys/devices/system/memory/memory*; do read st < $b/state; [ \"$st\" = {state} ] && n=$((n + 1)); done; }}
count; before=$n
[ {state} = offline ] && before=0
echo \"@@hotplug-wait\"
tries=0
while count; [ $n -lt $((before + exp)) ]; do
  tries=$((tries + 1)); [ $tries -gt 300 ] && fail \"{state} memory blocks: $n, expected $((before + exp))\"
  read -t 1 x
done
",
                size = hp.size_mb << 20
            ));
        }
        s.push_str(
            "for b in /sys/devices/system/memory/memory*; do
",
        );
        s.push_str(
            "  read st < $b/state
",
        );
        s.push_str(&format!(
            "  if [ \"$st\" = offline ]; then echo \"@@run online $b\"; echo {} > $b/state || fail \"online $b\"; fi
",
            hp.online_type()
        ));
        s.push_str(
            "done
",
        );
        s.push_str(
            "echo \"@@begin hotplug\"
",
        );
        s.push_str(
            "read bs < /sys/devices/system/memory/block_size_bytes; echo \"block_size_bytes $bs\"
",
        );
        s.push_str(
            "for b in /sys/devices/system/memory/memory*; do
",
        );
        s.push_str("  read st < $b/state; read z < $b/valid_zones; read p < $b/phys_index; echo \"${b##*/} $p $st $z\"
");
        s.push_str(
            "done
",
        );
        s.push_str(
            "echo \"@@end\"
",
        );
        s.push_str(
            "echo \"@@ready\"
",
        );
        s.push_str(
            "while true; do read x; done
",
        );
        s
    }

    /// The guest script (`/scenario.sh`, sourced by `/init`, which defines `run` and `fail`).
    #[must_use]
    pub fn script(&self) -> String {
        let mut s = String::new();
        if self.boot.is_some() {
            s.push_str("block pagetypeinfo cat /proc/pagetypeinfo\n");
        }
        if let Some(p) = self.pmem.filter(|_| self.arch == Arch::X86_64) {
            let mut c = format!("run ndctl create-namespace -f -e namespace0.0 -m {} -M {}", p.mode, p.map);
            if let Some(a) = p.align {
                c.push_str(&format!(" -a {a}"));
            }
            s.push_str(&c);
            s.push('\n');
        } else if let Some(p) = self.pmem {
            s.push_str(&sysfs_namespace(p));
        }
        if self.provider {
            // The kernel's `memmap_init_zone_device()` timing line (`pr_debug`), for every bind.
            s.insert_str(
                0,
                "echo 'func memmap_init_zone_device +p' > /proc/dynamic_debug/control || fail dyndbg\n",
            );
        }
        if self.module {
            s.push_str(MODULE_SCRIPT);
        }
        if self.provider {
            s.push_str(&PROVIDER_BINDS.replace("REBINDS", &super::scenario::REBINDS.to_string()));
            s.push_str(if self.pmem.is_some_and(|p| p.mode == "devdax") { USE_DEVDAX } else { USE_FSDAX });
            s.push_str(PROVIDER_END);
        }
        if let Some(h) = self.hugetlb {
            if !h.boot {
                let total = h.per_node * self.numa_mb.len().max(1) as u64;
                s.push_str(&format!(
                    "run sh -c 'echo {total} > /sys/kernel/mm/hugepages/hugepages-{}kB/nr_hugepages'\n",
                    h.size_kb
                ));
            }
        }
        s
    }
}

/// `SIZE!START` (`1G!3G`, `960M!4160M`) as bytes `(size, start)`.
///
/// # Errors
///
/// Not two sizes in M or G around a `!`.
pub fn parse_carve(carve: &str) -> Result<(u64, u64)> {
    let bytes = |v: &str| -> Option<u64> {
        let (n, unit) = v.split_at(v.len().checked_sub(1)?);
        let shift = match unit {
            "M" => 20,
            "G" => 30,
            _ => return None,
        };
        n.parse::<u64>().ok()?.checked_mul(1 << shift)
    };
    let (size, start) = carve.split_once('!').context("no '!'")?;
    bytes(size).zip(bytes(start)).with_context(|| format!("{carve:?}: expected SIZE!START in M or G"))
}
