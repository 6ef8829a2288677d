//! The all-core thread count of a timing run: `--threads N|auto` decided once, with the reason.
//!
//! The command line gives a [`ThreadPolicy`]. The limits phase measures the machine at the
//! counts the policy needs ([`ThreadPolicy::limit_counts`]: with `auto`, 1, 2, 4, ... and every
//! CPU available); then [`ThreadPolicy::resolve`] turns the policy into the run's [`AllCore`],
//! once, from those limits and outside every timed region, so that the count the run uses
//! agrees with the limits it reports. Every scenario is handed that value, runs at its
//! [`AllCore::counts`] and gives a library a count as [`policy`]. The report carries the count,
//! where it came from and why ([`AllCore::reason`]).

use memmap_core::Threads;
use schemars::JsonSchema;
use serde::Serialize;

use crate::limits::Limits;

/// The largest `--threads N`.
pub const MAX_THREADS: usize = 1024;

/// `--threads auto` takes the fewest threads whose struct page fill limit is within this
/// fraction of the best at any count the limits phase measured.
pub const AUTO_WITHIN: f64 = 0.05;

/// What `--threads` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadPolicy {
    /// `--threads N` (1 leaves the all-core rows out).
    Given(usize),
    /// `--threads auto`: the count where the limits phase's bandwidth stops growing.
    Auto,
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

    /// The thread counts the limits phase must measure besides 1 and every CPU (`cpus`): the
    /// given count, or for `auto` the powers of two below `cpus`.
    #[must_use]
    pub fn limit_counts(self, cpus: usize) -> Vec<usize> {
        match self {
            ThreadPolicy::Given(n) => vec![n.max(1)],
            ThreadPolicy::Auto => (1..usize::BITS).map(|k| 1usize << k).take_while(|&n| n < cpus).collect(),
        }
    }

    /// The run's all-core count, from the limits phase of the same run: `--threads N` as
    /// given; `auto` the fewest threads whose struct page fill limit is within [`AUTO_WITHIN`] of
    /// the best of every count `limits` measured (so no count the limits show faster by more
    /// than that is left out).
    #[must_use]
    pub fn resolve(self, limits: &Limits) -> AllCore {
        match self {
            ThreadPolicy::Given(n) => AllCore { count: n.max(1), source: ThreadSource::Flag },
            ThreadPolicy::Auto => {
                let best = limits.per_threads.iter().map(|t| t.fill_struct_page_gbps).fold(0.0, f64::max);
                let count = limits
                    .per_threads
                    .iter()
                    .filter(|t| t.fill_struct_page_gbps >= best * (1.0 - AUTO_WITHIN))
                    .map(|t| t.threads)
                    .min()
                    .unwrap_or(1);
                AllCore { count, source: ThreadSource::Limits }
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
    /// `--threads auto`, chosen from the same run's limits.
    Limits,
}

/// A run's all-core count, decided once ([`ThreadPolicy::resolve`]), and why.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AllCore {
    count: usize,
    source: ThreadSource,
}

impl AllCore {
    /// `n` workers, as `--threads n` gives them (library callers and tests).
    #[must_use]
    pub fn given(n: usize) -> AllCore {
        AllCore { count: n.max(1), source: ThreadSource::Flag }
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
            ThreadSource::Limits => format!(
                "--threads auto: the fewest threads whose struct page fill limit is within {:.0}% of the \
                 best count this run measured",
                AUTO_WITHIN * 100.0
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
    fn the_count_is_decided_once_from_the_runs_limits() {
        use crate::limits::ThreadLimits;
        let limits = |rates: &[(usize, f64)]| Limits {
            per_threads: rates.iter().map(|&(t, g)| ThreadLimits::with_struct_page(t, g)).collect(),
            ..Limits::example()
        };
        // The run the issue reported: 31.3 GB/s on 1 thread, 55.9 on 2: both counts run.
        let two = ThreadPolicy::Auto.resolve(&limits(&[(1, 31.3), (2, 55.9)]));
        assert_eq!((two.count(), two.source(), two.counts()), (2, ThreadSource::Limits, vec![1, 2]));
        assert!(two.reason().contains("within 5%"), "{}", two.reason());
        // No gain worth a thread: the fewest within 5% of the best.
        assert_eq!(ThreadPolicy::Auto.resolve(&limits(&[(1, 33.7), (2, 34.9)])).count(), 1);
        assert_eq!(
            ThreadPolicy::Auto.resolve(&limits(&[(1, 10.0), (2, 19.0), (4, 30.0), (8, 30.5)])).count(),
            4
        );
        let given = ThreadPolicy::Given(4).resolve(&limits(&[(1, 1.0)]));
        assert_eq!((given.count(), given.source(), given.counts()), (4, ThreadSource::Flag, vec![1, 4]));
        assert_eq!(given.reason(), "--threads 4");
        assert_eq!(AllCore::given(1).counts(), [1]);
        assert_eq!(ThreadPolicy::Auto.limit_counts(2), Vec::<usize>::new());
        assert_eq!(ThreadPolicy::Auto.limit_counts(12), [2, 4, 8]);
        assert_eq!(ThreadPolicy::Given(3).limit_counts(2), [3]);
        assert_eq!((policy(1), policy(0), policy(3)), (Threads::One, Threads::One, Threads::Fixed(3)));
    }
}
