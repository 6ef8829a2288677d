//! The all-core thread count of a timing run: `--threads N|auto` decided once, with the reason.
//!
//! [`ThreadPolicy::resolve`] turns the command line's policy into the run's [`AllCore`] before
//! the limits phase and outside every timed region (`auto` is stream-par's [`Threads::Auto`]);
//! every scenario runs at its [`AllCore::counts`] and gives a library a count as [`policy`].

use schemars::JsonSchema;
use serde::Serialize;
use stream_par::Threads;

/// The largest `--threads N`.
pub const MAX_THREADS: usize = 1024;

/// The buffer stream-par's `Threads::Auto` search fills (its documented 256 MiB): a budget
/// smaller than this cannot hold the search, and `auto` takes one thread instead.
pub const AUTO_SEARCH_BYTES: u64 = 256 << 20;

/// What `--threads` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadPolicy {
    /// `--threads N` (1 leaves the all-core rows out).
    Given(usize),
    /// `--threads auto`: stream-par's [`Threads::Auto`].
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

    /// The run's all-core count: `--threads N` as given; `auto` stream-par's [`Threads::Auto`]
    /// resolved now (measured once per process), or one thread where the memory budget
    /// (`budget` bytes, if known) cannot hold its search ([`AUTO_SEARCH_BYTES`]).
    #[must_use]
    pub fn resolve(self, budget: Option<u64>) -> AllCore {
        match self {
            ThreadPolicy::Given(n) => AllCore::given(n),
            ThreadPolicy::Auto if budget.is_some_and(|b| b < AUTO_SEARCH_BYTES) => {
                AllCore { count: 1, source: ThreadSource::Budget }
            }
            ThreadPolicy::Auto => {
                let count = match Threads::Auto.resolve() {
                    Threads::Fixed(n) => n.max(1),
                    _ => 1,
                };
                AllCore { count, source: ThreadSource::Auto }
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
    /// `--threads auto`: stream-par's `Threads::Auto`.
    Auto,
    /// `--threads auto` in a budget too small for its search: one thread.
    Budget,
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
            ThreadSource::Auto => {
                "--threads auto: where this machine's streaming bandwidth stops growing (stream-par's Threads::Auto)"
                    .to_string()
            }
            ThreadSource::Budget => format!(
                "--threads auto: one thread, the memory budget cannot hold the {} search of stream-par's Threads::Auto",
                crate::size::Bytes(AUTO_SEARCH_BYTES)
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
    fn the_count_is_given_or_stream_pars_auto() {
        let given = ThreadPolicy::Given(4).resolve(Some(1 << 20));
        assert_eq!((given.count(), given.source(), given.counts()), (4, ThreadSource::Flag, vec![1, 4]));
        assert_eq!(given.reason(), "--threads 4");
        assert_eq!(AllCore::given(1).counts(), [1]);
        let small = ThreadPolicy::Auto.resolve(Some(AUTO_SEARCH_BYTES - 1));
        assert_eq!((small.count(), small.source()), (1, ThreadSource::Budget));
        assert!(small.reason().contains("256 MiB"), "{}", small.reason());
        let auto = ThreadPolicy::Auto.resolve(None);
        assert_eq!(auto.source(), ThreadSource::Auto);
        assert!((1..=stream_par::available_cpus()).contains(&auto.count()), "{}", auto.count());
        assert!(auto.reason().contains("Threads::Auto"), "{}", auto.reason());
        assert_eq!((policy(1), policy(0), policy(3)), (Threads::One, Threads::One, Threads::Fixed(3)));
    }
}
