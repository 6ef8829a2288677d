//! The guest's initramfs: a `newc` cpio archive with a static busybox, the nvdimm/dax modules
//! (decompressed from `.ko.xz`), `ndctl` with its shared libraries (x86-64), and an `/init`
//! that loads the modules, runs the configuration's script and waits for the host.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use flate2::Compression;
use flate2::write::GzEncoder;

use crate::cmd;
use crate::kernel::apt::{self, PrivateApt};
use memmap_core::Arch;

use crate::kernel::Kernel;

/// A `newc` cpio archive being built.
#[derive(Default)]
pub struct Cpio {
    out: Vec<u8>,
    ino: u32,
    dirs: BTreeSet<String>,
}

impl Cpio {
    fn header(&mut self, name: &str, mode: u32, size: usize) {
        self.ino += 1;
        let namesize = name.len() + 1;
        let fields = [self.ino, mode, 0, 0, 1, 0, size as u32, 0, 0, 0, 0, namesize as u32, 0];
        self.out.extend_from_slice(b"070701");
        for f in fields {
            self.out.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(0);
        self.pad();
    }

    fn pad(&mut self) {
        while self.out.len() % 4 != 0 {
            self.out.push(0);
        }
    }

    /// Adds a directory and its parents (once each).
    pub fn dir(&mut self, path: &str) {
        let path = path.trim_matches('/');
        let mut acc = String::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            if !acc.is_empty() {
                acc.push('/');
            }
            acc.push_str(part);
            if self.dirs.insert(acc.clone()) {
                let name = acc.clone();
                self.header(&name, 0o040_755, 0);
            }
        }
    }

    /// Adds a regular file (its parent directories too).
    pub fn file(&mut self, path: &str, mode: u32, data: &[u8]) {
        let path = path.trim_start_matches('/');
        if let Some((parent, _)) = path.rsplit_once('/') {
            self.dir(parent);
        }
        self.header(path, 0o100_000 | mode, data.len());
        self.out.extend_from_slice(data);
        self.pad();
    }

    /// Adds a symbolic link.
    pub fn symlink(&mut self, path: &str, target: &str) {
        let path = path.trim_start_matches('/');
        if let Some((parent, _)) = path.rsplit_once('/') {
            self.dir(parent);
        }
        self.header(path, 0o120_777, target.len());
        self.out.extend_from_slice(target.as_bytes());
        self.pad();
    }

    /// Closes the archive and returns its bytes.
    #[must_use]
    pub fn finish(mut self) -> Vec<u8> {
        self.header("TRAILER!!!", 0, 0);
        while self.out.len() % 512 != 0 {
            self.out.push(0);
        }
        self.out
    }
}

/// The `/init` of every guest. It prints `@@`-prefixed markers on the console that the host
/// parses: `@@begin NAME` ... `@@end NAME` blocks, `@@fail WHY`, and `@@ready` once the memory
/// is set up and may be read. `report` prints what the host reads the memory with; a script
/// that has the host read it before the end calls it first (the host reads the first blocks).
pub const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp /run
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs dev /dev
block() { echo "@@begin $1"; shift; "$@" 2>&1; echo "@@end"; }
fail() { echo "@@fail $*"; while true; do sleep 3600; done; }
run() { echo "@@run $*"; "$@" || fail "$* (exit $?)"; }
for m in $(cat /modules.order); do insmod /mods/$m.ko || fail "insmod $m"; done
block release uname -r
block version cat /proc/version
block cmdline cat /proc/cmdline
report() {
block iomem cat /proc/iomem
block nodes sh -c 'for n in /sys/devices/system/node/node*; do echo "${n##*/} $(cat $n/cpulist)"; done'
block hugepages sh -c 'for f in /sys/devices/system/node/node*/hugepages/hugepages-*/nr_hugepages; do echo "$f $(cat $f)"; done'
block ndctl sh -c 'command -v ndctl >/dev/null && ndctl list -N -v || echo "[]"'
block nd sh -c 'for d in /sys/bus/nd/devices/*; do for a in devtype mode resource size align numa_node namespace holder; do [ -r $d/$a ] && echo "${d##*/} $a $(cat $d/$a 2>/dev/null)"; done; done'
block zoneinfo sh -c 'grep -E "^Node|spanned|present|start_pfn" /proc/zoneinfo'
block kallsyms sh -c 'echo 0 > /proc/sys/kernel/kptr_restrict; grep -E " (_text|_stext|_etext|_sdata|_edata|__bss_start|__bss_stop|_end|hstates|max_hstate|default_hstate_idx|node_states|contig_page_data|node_data|mem_section|memstart_addr|pageblock_order)$" /proc/kallsyms'
block dmesg dmesg
}
. /scenario.sh
report
[ -r /late.sh ] && . /late.sh
echo "@@ready"
while true; do sleep 3600; done
"#;

/// Largest host file put in the initramfs (busybox, ndctl, a shared library).
pub const MAX_HOST_FILE_BYTES: u64 = 64 << 20;

/// Largest cached base initramfs read back: its modules and host files, compressed.
pub const MAX_INITRAMFS_BYTES: u64 = 1 << 30;

/// Finds the static busybox for `arch`: the host's on amd64, else unpacked with apt.
fn busybox(arch: Arch, cache: &Path) -> Result<Vec<u8>> {
    match arch {
        Arch::X86_64 => {
            let path = ["/bin/busybox", "/usr/bin/busybox"]
                .iter()
                .map(PathBuf::from)
                .find(|p| p.is_file())
                .context("busybox not found: install Debian's busybox-static")?;
            let out =
                cmd::run("file", &["-L".into(), path.display().to_string()], None, Duration::from_secs(30));
            if let Ok(o) = out {
                if !o.stdout.contains("statically linked") {
                    bail!("{} is not statically linked: install busybox-static", path.display());
                }
            }
            Ok(memmap_dump::read_user_bytes(&path, MAX_HOST_FILE_BYTES)?)
        }
        _ => {
            let apt = PrivateApt::new(cache, "sid", crate::kernel::debian(arch))?;
            apt.update(false)?;
            let deb = apt.download("busybox-static", &cache.join("debs"))?;
            let dest = cache.join(format!("busybox-{}", crate::kernel::debian(arch)));
            apt::extract(&deb, &dest)?;
            let read = |p: &str| memmap_dump::read_user_bytes(&dest.join(p), MAX_HOST_FILE_BYTES);
            Ok(read("bin/busybox").or_else(|_| read("usr/bin/busybox"))?)
        }
    }
}

/// A host program (the first of `paths` that exists; `package` names its Debian package) as
/// `bin/NAME`, and the shared libraries `ldd` names for it, as (guest path, bytes).
fn host_program(paths: &[&str], package: &str) -> Result<Vec<(String, Vec<u8>)>> {
    let program = paths
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .with_context(|| format!("{} not found: install Debian's {package}", paths[0]))?;
    let name = program.file_name().context("a program path without a name")?.to_string_lossy();
    let mut files =
        vec![(format!("bin/{name}"), memmap_dump::read_user_bytes(&program, MAX_HOST_FILE_BYTES)?)];
    let ldd = cmd::run("ldd", &[program.display().to_string()], None, Duration::from_secs(30))?;
    for line in ldd.stdout.lines() {
        let path = line.split_whitespace().find(|w| w.starts_with('/'));
        if let Some(p) = path {
            let real = fs::canonicalize(p)?;
            files.push((
                p.trim_start_matches('/').to_string(),
                memmap_dump::read_user_bytes(&real, MAX_HOST_FILE_BYTES)?,
            ));
        }
    }
    Ok(files)
}

/// Builds (or reuses from the cache) the gzip-compressed base initramfs of `kernel` and returns
/// its bytes, padded to a multiple of 4 so a scenario archive can be appended.
///
/// # Errors
///
/// Missing host tools or files.
pub fn base(kernel: &Kernel, cache: &Path) -> Result<Vec<u8>> {
    // The cache key covers everything that goes in besides the host's binaries.
    // A kernel by path may be rebuilt under the same release: its module files' paths, sizes
    // and modification times are part of the key too.
    let mut stamp = String::new();
    let dax_rw = kernel.modules.get(crate::guest::scenario::MODULE_NAME).map(|p| {
        (crate::kernel::kbuild::DAX_RW.to_string(), p.with_file_name(crate::kernel::kbuild::DAX_RW))
    });
    for (name, p) in kernel.modules.iter().map(|(n, p)| (n.clone(), p.clone())).chain(dax_rw) {
        let m = fs::metadata(&p).with_context(|| format!("{name}: {}", p.display()))?;
        let mtime = m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        stamp.push_str(&format!("{name}={}:{}:{:?};", p.display(), m.len(), mtime));
    }
    let mut key: u64 = 0xcbf2_9ce4_8422_2325;
    let text = [INIT, &crate::kernel::guest_modules(kernel.arch).concat(), &kernel.release, &stamp];
    for b in text.iter().flat_map(|t| t.bytes().chain([0])) {
        key = (key ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    // Named by the kernel's id (one plain name, see `crate::files::name`), the release in the key.
    let id = crate::files::name("the kernel id", &kernel.id)?;
    let path = cache.join("initramfs").join(format!("{id}-{key:016x}.cpio.gz"));
    if path.is_file() {
        return Ok(memmap_dump::read_user_bytes(&path, MAX_INITRAMFS_BYTES)?);
    }
    let arch = kernel.arch;
    let mut cpio = Cpio::default();
    for d in ["bin", "sbin", "usr/bin", "usr/sbin", "proc", "sys", "dev", "tmp", "run", "etc", "mods"] {
        cpio.dir(d);
    }
    cpio.file("bin/busybox", 0o755, &busybox(arch, cache)?);
    cpio.symlink("bin/sh", "busybox");
    cpio.file("init", 0o755, INIT.as_bytes());
    let mut order = String::new();
    for m in crate::kernel::guest_modules(arch) {
        let name = m.rsplit('/').next().unwrap_or(m);
        let src = kernel.modules.get(name).with_context(|| format!("module {name} was not found"))?;
        cpio.file(&format!("mods/{name}.ko"), 0o644, &crate::kernel::modules::module_bytes(src)?);
        order.push_str(name);
        order.push('\n');
    }
    cpio.file("modules.order", 0o644, order.as_bytes());
    if arch == Arch::X86_64 {
        for (p, data) in host_program(&["/usr/bin/ndctl", "/bin/ndctl"], "ndctl")? {
            cpio.file(&p, 0o755, &data);
        }
    }
    // Loaded by the module configurations' scripts, not at boot; the provider configurations
    // use the namespace with e2fsprogs and `dax-rw` (built beside the module).
    if let Some(src) = kernel.modules.get(crate::guest::scenario::MODULE_NAME) {
        cpio.file(
            &format!("mods/{}.ko", crate::guest::scenario::MODULE_NAME),
            0o644,
            &crate::kernel::modules::module_bytes(src)?,
        );
        let dax_rw = src.with_file_name(crate::kernel::kbuild::DAX_RW);
        cpio.file("bin/dax-rw", 0o755, &memmap_dump::read_user_bytes(&dax_rw, MAX_HOST_FILE_BYTES)?);
        for program in ["mke2fs", "e2fsck"] {
            for (p, data) in
                host_program(&[&format!("/usr/sbin/{program}"), &format!("/sbin/{program}")], "e2fsprogs")?
            {
                cpio.file(&p, 0o755, &data);
            }
        }
    }
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    gz.write_all(&cpio.finish())?;
    let mut bytes = gz.finish()?;
    while bytes.len() % 4 != 0 {
        bytes.push(0);
    }
    crate::files::create_dirs_below(cache, Path::new("initramfs"))?;
    crate::files::write_file(&path, &bytes)?;
    Ok(bytes)
}

/// The base archive followed by an uncompressed archive holding `/scenario.sh` and, when
/// `late` is not empty, `/late.sh` (the kernel unpacks concatenated archives in order).
#[must_use]
pub fn with_scenario(base: &[u8], script: &str, late: &str) -> Vec<u8> {
    let mut cpio = Cpio::default();
    cpio.file("scenario.sh", 0o644, script.as_bytes());
    if !late.is_empty() {
        cpio.file("late.sh", 0o644, late.as_bytes());
    }
    let mut out = base.to_vec();
    out.extend_from_slice(&cpio.finish());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpio_entries_are_newc_and_aligned() {
        let mut c = Cpio::default();
        c.file("a/b", 0o644, b"hello");
        c.symlink("a/c", "b");
        let out = c.finish();
        assert_eq!(&out[..6], b"070701");
        assert_eq!(out.len() % 512, 0);
        let text = String::from_utf8_lossy(&out);
        // The parent directory comes first, then the file, the link and the trailer.
        let (d, f, l, t) =
            (text.find("a\0"), text.find("a/b\0"), text.find("a/c\0"), text.find("TRAILER!!!"));
        assert!(d < f && f < l && l < t && t.is_some());
        assert!(text.contains("hello"));
    }
}
