//! The thread-count policy of every parallel runner, [`Threads`], and its `Auto` search.

#[cfg(feature = "std")]
use std::sync::OnceLock;
#[cfg(feature = "std")]
use std::time::{Duration, Instant};
#[cfg(feature = "std")]
use std::vec::Vec;

/// How many threads a parallel runner may use. The default is [`Threads::One`]: nothing is
/// measured or started unless the caller asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Threads {
    /// The calling thread only: the kernel-faithful run (same call order as the one-thread
    /// functions).
    #[default]
    One,
    /// Exactly this many workers (the caller included; 0 counts as 1). Not capped by the CPU
    /// count: an explicit request is honoured.
    Fixed(usize),
    /// The count where bandwidth stops growing on this machine, at most [`available_cpus`],
    /// measured once per process by the first job of at least [`AUTO_MIN_BYTES`] (slower, and
    /// 256 MiB more peak memory): resolve it up front with [`Threads::resolve`] to keep it out
    /// of a timed or latency-bound call, or pass [`Threads::Fixed`].
    Auto,
    /// As many workers as the job has work items (`gather_bootmem_prealloc()`: one per node);
    /// for jobs split by size, bounded only by the job's `min_chunk`.
    Each,
}

/// The smallest gain of a step in the [`Threads::Auto`] search: 10 %.
#[cfg(feature = "std")]
const AUTO_MIN_GAIN: f64 = 1.10;

/// Below this many bytes of work, [`Threads::Auto`] uses one thread: 8 MiB.
pub const AUTO_MIN_BYTES: u64 = 8 << 20;

#[cfg(feature = "std")]
/// Runs of each count in the [`Threads::Auto`] search: 5.
const AUTO_RUNS: usize = 5;

#[cfg(feature = "std")]
/// Size of the buffer [`auto_threads`] measures on: 256 MiB (eight times a large last-level
/// cache, so the figure is a memory bandwidth).
const AUTO_PROBE_BYTES: usize = 256 << 20;

impl Threads {
    /// The number of workers for a job of `bytes` bytes of stores (1 for every policy without
    /// `std`, which has no threads).
    #[must_use]
    pub fn count(self, bytes: u64) -> usize {
        #[cfg(feature = "std")]
        let n = match self {
            Threads::One => 1,
            Threads::Fixed(n) => n.max(1),
            Threads::Auto if bytes < AUTO_MIN_BYTES => 1,
            Threads::Auto => auto_threads(),
            Threads::Each => usize::MAX,
        };
        #[cfg(not(feature = "std"))]
        let n = {
            let _ = bytes;
            1
        };
        n
    }

    /// The policy with `Auto` replaced by the count it stands for (measured
    /// now if this process has not measured it yet); other policies unchanged.
    #[must_use]
    pub fn resolve(self) -> Threads {
        match self {
            #[cfg(feature = "std")]
            Threads::Auto => match auto_threads() {
                1 => Threads::One,
                n => Threads::Fixed(n),
            },
            t => t,
        }
    }
}

impl core::fmt::Display for Threads {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Threads::One => f.write_str("1"),
            Threads::Fixed(n) => write!(f, "{n}"),
            Threads::Auto => f.write_str("auto"),
            Threads::Each => f.write_str("each"),
        }
    }
}

#[cfg(feature = "std")]
/// The CPUs this process may run on (`std::thread::available_parallelism`, 1 if unknown).
#[must_use]
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

#[cfg(feature = "std")]
/// The [`Threads::Auto`] count, measured on the first call and cached for the process.
///
/// Streaming fills of a 256 MiB buffer on 1, 2, 4, ... threads up to [`available_cpus`] step
/// up while a step gains at least [`AUTO_MIN_GAIN`] over the best so far: past saturated
/// bandwidth more threads only cost. A count's figure is its fastest of five runs, alternating
/// with the best count. The NUMA node is not consulted: pin the process to a node first
/// (costs: `docs/performance/vmm-notes.md`).
#[must_use]
pub(crate) fn auto_threads() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| measure_auto(available_cpus(), AUTO_PROBE_BYTES))
}

#[cfg(feature = "std")]
/// The thread counts the search tries: 1, 2, 4, ... below `cpus`, then `cpus`.
#[must_use]
fn auto_steps(cpus: usize) -> Vec<usize> {
    let cpus = cpus.max(1);
    let mut v = Vec::new();
    let mut t = 1;
    while t < cpus {
        v.push(t);
        t *= 2;
    }
    v.push(cpus);
    v
}

/// The rule of the search, on measured `(threads, GB/s)` steps in order: keep the first count,
/// step up while a step gains at least [`AUTO_MIN_GAIN`] over the best so far.
#[cfg(feature = "std")]
#[must_use]
fn auto_choice(steps: &[(usize, f64)]) -> usize {
    let Some(&(mut best, mut best_bw)) = steps.first() else { return 1 };
    for &(t, bw) in &steps[1..] {
        if bw >= best_bw * AUTO_MIN_GAIN {
            best = t;
            best_bw = bw;
        } else {
            break;
        }
    }
    best
}

#[cfg(feature = "std")]
fn measure_auto(cpus: usize, bytes: usize) -> usize {
    let steps_to_try = auto_steps(cpus);
    if steps_to_try.len() == 1 {
        return 1;
    }
    let lines = bytes / 64;
    let mut buf: Vec<[u64; 8]> = std::vec![[1u64; 8]; lines];
    let template = [0x5a5a_5a5a_5a5a_5a5au64; 8];
    let mut fill = |t: usize| {
        let start = Instant::now();
        let per = lines.div_ceil(t);
        std::thread::scope(|s| {
            for part in buf.chunks_mut(per) {
                s.spawn(move || {
                    // `[u64; 8]` is a plain record: view the initialized slots as `MaybeUninit`
                    // through the safe writer's slice API.
                    stream_hal::fill(as_uninit(part), &template);
                });
            }
        });
        start.elapsed()
    };
    // Each step against the best count so far, in alternating runs, best run of each: the
    // capacity of a count is its fastest run (a shared machine's bandwidth moves between
    // modes from one run to the next), and alternating keeps both counts in the same modes.
    let gbps = |d: Duration| bytes as f64 / d.as_secs_f64().max(1e-9) / 1e9;
    let mut best: Option<(usize, Duration)> = None;
    let mut steps: Vec<(usize, f64)> = Vec::new();
    for &t in &steps_to_try {
        let mut mine = Duration::MAX;
        for _ in 0..AUTO_RUNS {
            if let Some((b, d)) = &mut best {
                *d = (*d).min(fill(*b));
            }
            mine = mine.min(fill(t));
        }
        if let Some((b, d)) = best {
            if let Some(step) = steps.iter_mut().find(|(c, _)| *c == b) {
                step.1 = gbps(d);
            }
        }
        steps.push((t, gbps(mine)));
        if auto_choice(&steps) != t {
            break;
        }
        best = Some((t, mine));
    }
    std::hint::black_box(&buf);
    auto_choice(&steps).min(cpus)
}

#[cfg(feature = "std")]
/// `&mut [T]` as `&mut [MaybeUninit<T>]` for overwriting initialized plain data.
fn as_uninit<T: Copy>(s: &mut [T]) -> &mut [core::mem::MaybeUninit<T>] {
    // SAFETY: `MaybeUninit<T>` has the layout of `T`; writing through the result can only store
    // initialized `T` values (the writer never de-initializes a slot), and `T: Copy` has no
    // drop glue that an overwrite could skip.
    unsafe { &mut *(core::ptr::from_mut(s) as *mut [core::mem::MaybeUninit<T>]) }
}

#[cfg(all(test, feature = "std", not(miri)))]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn auto_rule() {
        assert_eq!(auto_steps(1), [1]);
        assert_eq!(auto_steps(2), [1, 2]);
        assert_eq!(auto_steps(6), [1, 2, 4, 6]);
        assert_eq!(auto_steps(8), [1, 2, 4, 8]);
        // Two threads gain 94 %: take them.
        assert_eq!(auto_choice(&[(1, 23.7), (2, 45.7)]), 2);
        // Two threads gain nothing: stay at one.
        assert_eq!(auto_choice(&[(1, 25.0), (2, 25.4)]), 1);
        // Saturation at 4 of 8.
        assert_eq!(auto_choice(&[(1, 10.0), (2, 19.0), (4, 30.0), (8, 31.0)]), 4);
        assert_eq!(auto_choice(&[]), 1);
    }

    #[test]
    fn threads_count_and_names() {
        assert_eq!(Threads::One.count(1 << 40), 1);
        assert_eq!(Threads::Fixed(0).count(1), 1);
        assert_eq!(Threads::Fixed(3).count(1), 3);
        assert_eq!(Threads::Auto.count(AUTO_MIN_BYTES - 1), 1);
        let auto = Threads::Auto.count(1 << 30);
        assert!((1..=available_cpus()).contains(&auto));
        assert_eq!(Threads::Fixed(4).to_string(), "4");
        assert_eq!(Threads::default(), Threads::One, "nothing is measured unless asked");
        assert_eq!(Threads::Fixed(3).resolve(), Threads::Fixed(3));
        let resolved = Threads::Auto.resolve();
        assert_ne!(resolved, Threads::Auto);
        assert_eq!(resolved.count(1), auto);
    }
}
