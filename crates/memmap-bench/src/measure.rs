//! Interleaved, round-by-round timing of several strategies in one process.
//!
//! Round `r` runs every strategy once, starting with strategy `r % n`, so no strategy always
//! runs first (after a cold cache) or last. Round 0 is the "first binding" (each strategy's
//! storage is fresh), rounds 1.. are the "rebinds".

use std::time::Duration;

/// One strategy under measurement: a name and a closure that runs one round and returns the
/// time of the measured part only.
pub struct Runner<'a> {
    /// Strategy name.
    pub name: String,
    /// Runs round `r`.
    pub run: Box<dyn FnMut(usize) -> Duration + 'a>,
}

impl<'a> Runner<'a> {
    /// A runner.
    pub fn new(name: impl Into<String>, run: impl FnMut(usize) -> Duration + 'a) -> Self {
        Runner { name: name.into(), run: Box::new(run) }
    }
}

/// The times of one strategy.
#[derive(Debug, Clone, PartialEq)]
pub struct Samples {
    /// Strategy name.
    pub name: String,
    /// Round times, round 0 first.
    pub rounds: Vec<Duration>,
}

impl Samples {
    /// Round 0.
    #[must_use]
    pub fn first(&self) -> Duration {
        self.rounds[0]
    }

    /// Rounds 1.. (round 0 if it is the only one).
    #[must_use]
    pub fn rebinds(&self) -> &[Duration] {
        if self.rounds.len() > 1 { &self.rounds[1..] } else { &self.rounds }
    }

    /// Mean of the rebinds, in milliseconds.
    #[must_use]
    pub fn rebind_avg_ms(&self) -> f64 {
        let r = self.rebinds();
        r.iter().map(Duration::as_secs_f64).sum::<f64>() / r.len() as f64 * 1e3
    }

    /// Median of the rebinds, in milliseconds.
    #[must_use]
    pub fn median_ms(&self) -> f64 {
        median(self.rebinds()) * 1e3
    }
}

/// Median in seconds.
#[must_use]
pub fn median(v: &[Duration]) -> f64 {
    let mut s: Vec<f64> = v.iter().map(Duration::as_secs_f64).collect();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 }
}

/// Median of plain numbers (NaN for none).
#[must_use]
pub fn median_f64(v: &[f64]) -> f64 {
    let d: Vec<Duration> = v.iter().map(|&x| Duration::from_secs_f64(x.max(0.0))).collect();
    median(&d)
}

/// Runs `rounds` interleaved rounds of every runner.
///
/// # Panics
///
/// If `rounds` is 0.
pub fn interleaved(rounds: usize, runners: &mut [Runner<'_>]) -> Vec<Samples> {
    assert!(rounds > 0, "at least one round");
    let n = runners.len();
    let mut out: Vec<Samples> =
        runners.iter().map(|r| Samples { name: r.name.clone(), rounds: Vec::new() }).collect();
    for round in 0..rounds {
        for k in 0..n {
            let i = if round == 0 { k } else { (round + k) % n };
            let t = (runners[i].run)(round);
            out[i].rounds.push(t);
        }
    }
    out
}

/// Bytes per second as GB/s (10^9).
#[must_use]
pub fn gbps(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 / seconds / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn rounds_interleave_and_rotate() {
        let log = RefCell::new(Vec::new());
        let mut runners: Vec<Runner<'_>> = ["a", "b", "c"]
            .iter()
            .map(|&name| {
                let log = &log;
                Runner::new(name, move |r| {
                    log.borrow_mut().push((r, name));
                    Duration::from_millis(if r == 0 { 10 } else { 1 + r as u64 })
                })
            })
            .collect();
        let s = interleaved(3, &mut runners);
        let names: Vec<&str> = log.borrow().iter().map(|&(_, n)| n).collect();
        assert_eq!(names, ["a", "b", "c", "b", "c", "a", "c", "a", "b"]);
        assert_eq!(s[0].first(), Duration::from_millis(10));
        assert_eq!(s[0].rebinds().len(), 2);
        assert!((s[0].rebind_avg_ms() - 2.5).abs() < 1e-9);
        assert!((s[0].median_ms() - 2.5).abs() < 1e-9);
    }

    #[test]
    fn median_odd_even() {
        let d = |v: &[u64]| v.iter().map(|&x| Duration::from_secs(x)).collect::<Vec<_>>();
        assert_eq!(median(&d(&[3, 1, 2])), 2.0);
        assert_eq!(median(&d(&[4, 1, 2, 3])), 2.5);
        assert!((gbps(2_000_000_000, 2.0) - 1.0).abs() < 1e-12);
    }
}
