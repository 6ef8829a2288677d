//! The all-core thread count of a timing run: `--threads N|auto` decided once, with the reason.
//!
//! The command line gives a [`ThreadPolicy`], checked against the memory budget before any
//! work (`auto` is measured on a buffer of its own, [`AUTO_PROBE_BYTES`]:
//! [`ThreadPolicy::within`]). When the run starts, [`ThreadPolicy::resolve`] turns it into
//! the run's [`AllCore`], once, outside every timed region; every scenario is handed that
//! value, runs at its [`AllCore::counts`] and gives a library a count as [`policy`]. The
//! report carries the count, where it came from and why ([`AllCore::reason`]).

use memmap_core::Threads;
use schemars::JsonSchema;
use serde::Serialize;

use crate::progress::{Phase, ProgressMode};
use crate::size::Bytes;

/// The buffer `memmap_core::auto_threads` measures `--threads auto` on: its own 256 MiB, not
/// part of any scenario.
pub const AUTO_PROBE_BYTES: u64 = 256 << 20;

/// The largest `--threads N`.
pub const MAX_THREADS: usize = 1024;

/// What `--threads` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadPolicy {
    /// `--threads N` (1 leaves the all-core rows out).
    Given(usize),
    /// `--threads auto`: the count where bandwidth stops growing, measured when the run starts.
    Auto,
    /// `--threads auto` whose probe does not fit the memory budget: every CPU available.
    EveryCpu,
}

impl ThreadPolicy {
    /// Parses `--threads`: `auto`, or a count in `1..=`[`MAX_THREADS`].
    ///
    /// # Errors
    ///
    /// Anything else, with what is accepted (`each`, which the library also spells, is not a
    /// count of the all-core rows).
    pub fn parse(s: &str) -> Result<ThreadPolicy, String> {
        match s {
            "auto" => Ok(ThreadPolicy::Auto),
            _ => match s.parse::<usize>() {
                Ok(n @ 1..=MAX_THREADS) => Ok(ThreadPolicy::Given(n)),
                Ok(n) => Err(format!("{n} is not in 1..={MAX_THREADS}")),
                Err(_) if s.bytes().all(|b| b.is_ascii_digit()) && !s.is_empty() => {
                    Err(format!("{s} is not in 1..={MAX_THREADS}"))
                }
                Err(_) => Err(format!("`{s}` is neither `auto` nor a thread count in 1..={MAX_THREADS}")),
            },
        }
    }

    /// The policy with `auto` replaced by [`ThreadPolicy::EveryCpu`] when its probe's buffer
    /// does not fit (`probe_fits`: whether [`AUTO_PROBE_BYTES`] fit the memory budget; in a
    /// small container the probe would be killed for it).
    #[must_use]
    pub fn within(self, probe_fits: bool) -> ThreadPolicy {
        match self {
            ThreadPolicy::Auto if !probe_fits => ThreadPolicy::EveryCpu,
            p => p,
        }
    }

    /// The run's all-core count: `auto` measured now (once per process: memmap-core caches it),
    /// with a spinner on `progress` while the probe runs.
    #[must_use]
    pub fn resolve(self, progress: ProgressMode) -> AllCore {
        match self {
            ThreadPolicy::Given(n) => AllCore { count: n.max(1), source: ThreadSource::Flag, steps: None },
            ThreadPolicy::EveryCpu => {
                AllCore { count: memmap_core::available_cpus(), source: ThreadSource::EveryCpu, steps: None }
            }
            ThreadPolicy::Auto => {
                let phase = Phase::new("--threads auto: thread count probe", progress);
                let count = memmap_core::auto_threads().max(1);
                phase.finish();
                let steps = memmap_core::parallel::auto_threads_steps();
                AllCore { count, source: ThreadSource::Measured, steps }
            }
        }
    }
}

/// Where a run's all-core count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ThreadSource {
    /// `--threads N`.
    Flag,
    /// `--threads auto`, measured before the run.
    Measured,
    /// `--threads auto` not measured (its probe does not fit the memory budget): every CPU.
    EveryCpu,
}

/// A run's all-core count, decided once ([`ThreadPolicy::resolve`]), and why.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AllCore {
    count: usize,
    source: ThreadSource,
    steps: Option<&'static [(usize, f64)]>,
}

impl AllCore {
    /// `n` workers, as `--threads n` gives them (library callers and tests).
    #[must_use]
    pub fn given(n: usize) -> AllCore {
        ThreadPolicy::Given(n).resolve(ProgressMode { enabled: false })
    }

    /// Workers of the all-core rows (1: there are none).
    #[must_use]
    pub fn count(self) -> usize {
        self.count
    }

    /// Where the count came from.
    #[must_use]
    pub fn source(self) -> ThreadSource {
        self.source
    }

    /// The `(threads, GB/s)` steps `--threads auto` measured, when it was measured.
    #[must_use]
    pub fn steps(self) -> Option<&'static [(usize, f64)]> {
        self.steps
    }

    /// The thread counts a scenario runs: 1 (the kernel's own), and the all-core count when it
    /// is more.
    #[must_use]
    pub fn counts(self) -> Vec<usize> {
        if self.count > 1 { vec![1, self.count] } else { vec![1] }
    }

    /// Why this count, in a phrase (the report's header and `all_core_threads_reason`).
    #[must_use]
    pub fn reason(self) -> String {
        match self.source {
            ThreadSource::Flag => format!("--threads {}", self.count),
            ThreadSource::Measured => format!(
                "--threads auto: measured, bandwidth stops growing at {} thread(s) on this machine",
                self.count
            ),
            ThreadSource::EveryCpu => format!(
                "--threads auto not measured (its {} probe does not fit the memory budget): every CPU \
                 available, {}",
                Bytes(AUTO_PROBE_BYTES),
                self.count
            ),
        }
    }
}

/// The library policy for `n` workers: one is the kernel-faithful [`Threads::One`], more
/// exactly that many.
#[must_use]
pub fn policy(n: usize) -> Threads {
    if n > 1 { Threads::Fixed(n) } else { Threads::One }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_parse_to_a_count_or_auto_and_nothing_else() {
        assert_eq!(ThreadPolicy::parse("auto"), Ok(ThreadPolicy::Auto));
        assert_eq!(ThreadPolicy::parse("1"), Ok(ThreadPolicy::Given(1)));
        assert_eq!(ThreadPolicy::parse("1024"), Ok(ThreadPolicy::Given(1024)));
        // `each` is the library's spelling of one worker per item: it used to be accepted and
        // run the all-core rows on one thread without a word.
        for bad in ["each", "0", "-1", "", "1.5", "two"] {
            let e = ThreadPolicy::parse(bad).unwrap_err();
            assert!(e.contains("1..=1024"), "{bad:?}: {e}");
        }
        assert_eq!(ThreadPolicy::parse("1025").unwrap_err(), "1025 is not in 1..=1024");
        assert_eq!(
            ThreadPolicy::parse("99999999999999999999999").unwrap_err(),
            "99999999999999999999999 is not in 1..=1024"
        );
    }

    #[test]
    fn the_count_is_decided_once_with_its_reason() {
        assert_eq!(ThreadPolicy::Auto.within(false), ThreadPolicy::EveryCpu);
        assert_eq!(ThreadPolicy::Auto.within(true), ThreadPolicy::Auto);
        assert_eq!(ThreadPolicy::Given(3).within(false), ThreadPolicy::Given(3));
        let quiet = ProgressMode { enabled: false };
        let given = ThreadPolicy::Given(4).resolve(quiet);
        assert_eq!((given.count(), given.source(), given.counts()), (4, ThreadSource::Flag, vec![1, 4]));
        assert_eq!(given.reason(), "--threads 4");
        assert_eq!(AllCore::given(1).counts(), [1]);
        let every = ThreadPolicy::EveryCpu.resolve(quiet);
        assert_eq!(every.count(), memmap_core::available_cpus());
        assert!(every.reason().contains("256 MiB probe does not fit"), "{}", every.reason());
        assert_eq!((policy(1), policy(0), policy(3)), (Threads::One, Threads::One, Threads::Fixed(3)));
    }
}
