//! `guest-memory-reset`: making used guest memory read as zero again (see
//! [`super::guest_memory`]).

use std::time::{Duration, Instant};

use stream_vm_memory::{PopulateOptions, ResetPolicy, advise_huge_pages, populate_all, reset};
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryRegion, MemoryRegionAddress};

use super::guest_host::{GuestMemory, Mem, unsupported, workers};
use super::scenario::{Context, RunError};
use super::spec::Rounds;
use crate::limits::{FillKind, best_on, run_fastest};
use crate::measure::{Runner, interleaved_paired};
use crate::report::scenario::{Figure, LimitKind, ScenarioReport, ScenarioSpec};
use crate::size::Bytes as Size;

/// The reset scenario's name.
pub const RESET: &str = "guest-memory-reset";

/// The reset scenario's strategies, baseline first.
pub const RESET_STRATEGIES: &[&str] = &["write-slice", "memset", "zero", "reset-auto", "discard-refault"];

/// The reset rounds: 7 (3 under `--quick`).
pub const RESET_ROUNDS: Rounds = Rounds::new(7, 3);

/// The chunk `write-slice` loops over.
const CHUNK: usize = 2 << 20;

/// The guest memory of `s` faulted in as THP on `all` workers, the bytes advised, the time in ms.
fn resident_guest_memory(s: &GuestMemory, all: usize) -> Result<(Mem, u64, f64), RunError> {
    let size = s.size;
    let mem = Mem::from_ranges(&s.ranges()).map_err(|e| {
        RunError::of(RESET, format!("map {} of guest memory", Size(size)))(std::io::Error::other(
            e.to_string(),
        ))
    })?;
    let advised = advise_huge_pages(&mem, GuestAddress(0), size as usize).unwrap_or(0);
    let t = Instant::now();
    let fault = populate_all(&mem, &PopulateOptions::new(workers(all))).map_err(|e| {
        RunError::of(RESET, "populate the guest memory")(std::io::Error::other(e.to_string()))
    })?;
    let fault_ms = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(fault.populated, size);
    Ok((mem, advised, fault_ms))
}

/// The time `f` takes.
fn timed(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

/// The reset strategies over `len` bytes of `mem` (host memory `host`), each with the index into
/// `counts` of the limit run it follows.
fn reset_runners<'a>(
    mem: &'a Mem,
    host: &'a [(usize, usize)],
    zeros: &'a [u8],
    counts: &[usize],
    len: usize,
) -> (Vec<Runner<'a>>, Vec<Option<usize>>) {
    let mut runners: Vec<Runner<'a>> = Vec::new();
    let mut pair: Vec<Option<usize>> = Vec::new();
    runners.push(Runner::new("write-slice", move |_| {
        timed(|| {
            let mut off = 0;
            while off < len {
                let n = CHUNK.min(len - off);
                mem.write_slice(&zeros[..n], GuestAddress(off as u64)).expect("write_slice");
                off += n;
            }
        })
    }));
    pair.push(Some(0));
    runners.push(Runner::new("memset", move |_| {
        timed(|| {
            for &(p, n) in host {
                // SAFETY: `[p, p + n)` is a whole region's host mapping, alive for the whole
                // scenario; only the running strategy (or limit run) touches guest memory.
                unsafe { libc::memset(std::hint::black_box(p as *mut libc::c_void), 0, n) };
            }
        })
    }));
    pair.push(Some(0));
    for (k, &threads) in counts.iter().enumerate() {
        for (name, policy) in [
            ("zero", ResetPolicy::InPlace),
            ("reset-auto", ResetPolicy::Auto),
            ("discard-refault", ResetPolicy::Discard { repopulate: true }),
        ] {
            let w = workers(threads);
            runners.push(Runner::new(name, move |_| {
                timed(|| {
                    reset(mem, GuestAddress(0), len, policy, &w).expect("reset");
                })
            }));
            pair.push(Some(k));
        }
    }
    (runners, pair)
}

/// The reset scenario: one report per thread count.
pub(crate) fn run_reset(s: &GuestMemory, ctx: &Context<'_>) -> Result<Vec<ScenarioReport>, RunError> {
    let support = stream_vm_memory::host_support();
    if !support.populate_write || !support.dontneed {
        return Err(unsupported(RESET, "MADV_DONTNEED or MADV_POPULATE_WRITE"));
    }
    let rounds = ctx.common.rounds(RESET_ROUNDS);
    let len = s.size as usize;
    let (all, counts) = (ctx.threads.count(), ctx.threads.counts());
    let phase = ctx.phase(RESET);
    phase.step(format!("{RESET}: map and fault in {}", Size(s.size)));
    let (mem, advised, fault_ms) = resident_guest_memory(s, all)?;
    // The regions' host memory, for memset and the limit runs.
    let host: Vec<(usize, usize)> = mem
        .iter()
        .map(|r| {
            (r.get_host_address(MemoryRegionAddress(0)).expect("host address") as usize, r.len() as usize)
        })
        .collect();
    let zeros = vec![0u8; CHUNK];
    let (mut runners, pair) = reset_runners(&mem, &host, &zeros, &counts, len);
    // The limit runs: the best zero-fill method at each count over both regions, right before
    // each strategy's round.
    let region_bytes = |i: usize| {
        let (p, n) = host[i];
        // SAFETY: a whole region's host mapping, alive for the whole scenario; the strategies
        // and the limit runs run one at a time, and none keeps the slice past its own run, so
        // it is the only access to these bytes while it lives.
        unsafe { std::slice::from_raw_parts_mut(p as *mut u8, n) }
    };
    let methods: Vec<Vec<String>> =
        counts.iter().map(|&t| best_on(ctx.limits, FillKind::Zero, t, region_bytes(0))).collect();
    let mut companions: Vec<Runner<'_>> = counts
        .iter()
        .zip(&methods)
        .map(|(&threads, m)| {
            let (host, region_bytes) = (&host, &region_bytes);
            Runner::new("limit", move |round| {
                (0..host.len())
                    .map(|i| run_fastest(m, FillKind::Zero, threads, round, region_bytes(i)))
                    .sum::<Duration>()
            })
        })
        .collect();
    phase.step(format!("{RESET}: {rounds} rounds"));
    let (samples, paired) = interleaved_paired(rounds, &mut runners, &mut companions, &pair, &phase);
    drop((runners, companions));
    phase.finish();
    let mut probe = [1u8; 4096];
    for at in [0, len / 2 - 4096, len - 4096] {
        mem.read_slice(&mut probe, GuestAddress(at as u64)).expect("read back");
        assert!(probe.iter().all(|&b| b == 0), "a reset strategy left non-zero bytes");
    }
    let auto = reset(&mem, GuestAddress(0), len, ResetPolicy::Auto, &workers(all)).expect("reset");
    let mut out = Vec::new();
    for (k, &threads) in counts.iter().enumerate() {
        // One thread: write-slice, memset, and the three of count 0; all cores: the three of
        // its count.
        let (from, to) = if k == 0 { (0, 5) } else { (2 + 3 * k, 5 + 3 * k) };
        let spec = ScenarioSpec {
            name: RESET.into(),
            description: format!(
                "reset {} of resident guest memory (2 regions, {} advised MADV_HUGEPAGE), {rounds} rounds, {}; faulting it in: {fault_ms:.1} ms (not in \"first\")",
                Size(s.size),
                Size(advised),
                if threads > 1 { format!("{threads} threads") } else { "1 thread".into() },
            ),
            struct_pages: 0,
            bytes: s.size,
            threads,
            limit: LimitKind::FillZero,
            figure: Figure::Bandwidth,
        };
        let mut sc = ScenarioReport::from_samples(spec, ctx.limits, &samples[from..to]);
        sc.set_paired_limit(&methods[k].join(" or "), s.size, &paired[from..to]);
        sc.extra.insert("guest_bytes".into(), s.size.into());
        sc.extra.insert("thp_advised_bytes".into(), advised.into());
        sc.extra.insert("fault_ms".into(), fault_ms.into());
        sc.extra.insert("auto_in_place_bytes".into(), auto.in_place.into());
        sc.extra.insert("auto_discarded_bytes".into(), auto.discarded.into());
        out.push(sc);
    }
    Ok(out)
}
