//! The provider configurations' side on the host: the dump and comparison after each of the
//! guest's binds, the go-ahead on its second serial port, and the kernel's timing lines.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::facts::Facts;
use crate::guest::qemu::{Console, Guest};
use crate::guest::scenario::REBINDS;
use crate::guest::vm::CONTROL_SOCKET;

/// The provider configurations' binds: at each `@@bound N` the namespace is dumped into
/// `bind/` (overwritten bind after bind, left as it is when one differs) and compared with the
/// model, then the guest is told to go on with a line on its second serial port.
///
/// `dump` reads the guest's memory into the directory it is given and returns the facts.
///
/// # Errors
///
/// The guest fails or times out, a dump fails or differs from the model, or the serial port
/// cannot be written.
pub fn binds(
    guest: &mut Guest,
    work: &Path,
    out: &Path,
    timeout: Duration,
    mut dump: impl FnMut(&Console, &mut Guest, &Path) -> Result<Facts>,
) -> Result<()> {
    let dir = crate::files::create_dirs_below(out, Path::new("bind"))?;
    let mut control: Option<UnixStream> = None;
    for n in 1..=REBINDS {
        let console = guest.wait_for(&format!("@@bound {n}"), timeout)?;
        let facts = dump(&console, guest, &dir).with_context(|| format!("dumping bind {n}"))?;
        facts.save(&dir)?;
        let res = crate::compare::compare_dir(&dir, &facts)?;
        let failed_check = res.checks.iter().find(|c| c.failure.is_some());
        if crate::compare::differs(&res) || failed_check.is_some() {
            bail!(
                "bind {n} by the provider differs from the model (dump kept in {}):\n{}",
                dir.display(),
                crate::compare::render(&res, false)
            );
        }
        let module = console.block(&format!("bind-{n}")).unwrap_or_default();
        let provider = module.lines().find(|l| l.contains("provider:")).unwrap_or("no provider line");
        eprintln!("  bind {n:>2}: dump {}; {}", crate::compare::verdict(&res), provider.trim());
        let stream = match &mut control {
            Some(s) => s,
            None => control.insert(
                UnixStream::connect(work.join(CONTROL_SOCKET))
                    .context("connecting to the guest's second serial port")?,
            ),
        };
        stream.write_all(b"go\n").context("writing to the guest's second serial port")?;
    }
    Ok(())
}

/// The kernel's `memmap_init_zone_device()` times (its `pr_debug` line, whole milliseconds of
/// jiffies) by the kernel's loop and by the provider, as medians.
pub fn timing_summary(block: &str) -> String {
    let (mut by_loop, mut by_provider) = (Vec::new(), Vec::new());
    for l in block.lines().filter(|l| l.contains("memmap_init_zone_device initialised")) {
        let ms = l
            .split(" pages in ")
            .nth(1)
            .and_then(|r| r.split("ms").next())
            .and_then(|v| v.parse::<u64>().ok());
        match ms {
            Some(ms) if l.contains("by the provider") => by_provider.push(ms),
            Some(ms) => by_loop.push(ms),
            None => {}
        }
    }
    let median = |v: &mut Vec<u64>| {
        v.sort_unstable();
        v.get(v.len() / 2).map_or("-".to_string(), |m| format!("{m} ms"))
    };
    format!(
        "memmap_init_zone_device (the kernel's timing line, under TCG: the emulator's speed): the kernel's loop {} binds, median {}; the provider {} binds, median {}",
        by_loop.len(),
        median(&mut by_loop),
        by_provider.len(),
        median(&mut by_provider)
    )
}

#[cfg(test)]
mod tests {
    use super::timing_summary;

    #[test]
    fn the_timing_summary_splits_the_kernels_loop_from_the_provider() {
        let block = "[    3.1] memmap_init_zone_device initialised 65536 pages in 40ms
[    5.2] memmap_init_zone_device initialised 65536 pages in 12ms by the provider
[    6.0] memmap_stream: provider: pfns 0x100000..0x110000: 65536 struct pages written
[    7.2] memmap_init_zone_device initialised 65536 pages in 16ms by the provider
[    8.2] memmap_init_zone_device initialised 65536 pages in 14ms by the provider
[    9.9] memmap_init_zone_device initialised 65536 pages in 44ms
[    9.9] memmap_init_zone_device initialised 65536 pages in garbage";
        let s = timing_summary(block);
        assert!(s.contains("the kernel's loop 2 binds, median 44 ms"), "{s}");
        assert!(s.contains("the provider 3 binds, median 14 ms"), "{s}");
        assert!(timing_summary("").contains("loop 0 binds, median -"));
    }
}
