//! Interleaved, round-by-round timing of several strategies in one process, in a new order per
//! round ([`round_order`]). Round 0 is the "first binding" on fresh storage, later ones "rebinds".

use std::time::Duration;

use crate::progress::Phase;

/// One strategy under measurement: a name and a closure that times one round's measured part.
pub struct Runner<'a> {
    /// Strategy name.
    pub name: String,
    /// Runs round `r`.
    pub run: Box<dyn FnMut(usize) -> Duration + 'a>,
    /// Units of progress one run stands for (1 unless [`Runner::weight`] says otherwise).
    pub weight: u64,
}

impl<'a> Runner<'a> {
    /// A runner of weight 1.
    pub fn new(name: impl Into<String>, run: impl FnMut(usize) -> Duration + 'a) -> Self {
        Runner { name: name.into(), run: Box::new(run), weight: 1 }
    }

    /// The same runner, one run standing for `units` of progress (the PFNs it initializes, say).
    #[must_use]
    pub fn weight(mut self, units: u64) -> Self {
        self.weight = units;
        self
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
    let s: Vec<f64> = v.iter().map(Duration::as_secs_f64).collect();
    median_f64(&s)
}

/// Median of plain numbers (NaN for none).
#[must_use]
pub fn median_f64(v: &[f64]) -> f64 {
    quantile(v, 0.5)
}

/// The `q`-quantile (0..=1) of plain numbers, linearly interpolated (NaN for none).
#[must_use]
pub fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n => {
            let x = q.clamp(0.0, 1.0) * (n - 1) as f64;
            let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
            s[lo] + (s[hi] - s[lo]) * (x - lo as f64)
        }
    }
}

/// Runs `rounds` interleaved rounds of every runner, showing them on `phase`.
///
/// # Panics
///
/// If `rounds` is 0.
pub fn interleaved(rounds: usize, runners: &mut [Runner<'_>], phase: &Phase) -> Vec<Samples> {
    interleaved_paired(rounds, runners, &mut [], &vec![None; runners.len()], phase).0
}

/// As [`interleaved`], each run of runner `i` right after a run of `companions[pair[i]]`, the
/// limit method on its storage (a shared machine's bandwidth changes within a second). Returns
/// the runners' samples and each one's companion samples (empty for an unpaired runner).
///
/// # Panics
///
/// If `rounds` is 0, `pair` is not one entry per runner, or an entry is out of `companions`.
pub fn interleaved_paired(
    rounds: usize,
    runners: &mut [Runner<'_>],
    companions: &mut [Runner<'_>],
    pair: &[Option<usize>],
    phase: &Phase,
) -> (Vec<Samples>, Vec<Samples>) {
    assert!(rounds > 0, "at least one round");
    assert_eq!(pair.len(), runners.len(), "one pairing entry per runner");
    assert!(pair.iter().flatten().all(|&c| c < companions.len()), "pairing with a missing companion");
    let n = runners.len();
    let mut out: Vec<Samples> =
        runners.iter().map(|r| Samples { name: r.name.clone(), rounds: Vec::new() }).collect();
    let mut paired: Vec<Samples> = runners
        .iter()
        .zip(pair)
        .map(|(r, p)| Samples {
            name: p.map_or_else(String::new, |c| format!("{} next to {}", companions[c].name, r.name)),
            rounds: Vec::new(),
        })
        .collect();
    let per_round: u64 = runners
        .iter()
        .zip(pair)
        .map(|(r, p)| r.weight.saturating_add(p.map_or(0, |c| companions[c].weight)))
        .fold(0, u64::saturating_add);
    phase.work(per_round.saturating_mul(rounds as u64));
    let mut done = 0u64;
    for round in 0..rounds {
        for i in round_order(round, n) {
            if let Some(c) = pair[i] {
                paired[i].rounds.push((companions[c].run)(round));
                done = done.saturating_add(companions[c].weight);
                phase.set(done);
            }
            let t = (runners[i].run)(round);
            out[i].rounds.push(t);
            done = done.saturating_add(runners[i].weight);
            phase.set(done);
        }
    }
    (out, paired)
}

/// The order of the runners in round `round` of `n`: as given in round 0, then a shuffle
/// seeded with the round, so that no runner always inherits the state another leaves behind.
#[must_use]
pub fn round_order(round: usize, n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    if round > 0 {
        fastrand::Rng::with_seed(round as u64).shuffle(&mut order);
    }
    order
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
    fn rounds_interleave_in_a_new_order_each_round() {
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
        let phase = Phase::hidden();
        let s = interleaved(3, &mut runners, &phase);
        assert_eq!(phase.bar().position(), 9, "one unit per run");
        assert_eq!(phase.bar().length(), Some(9));
        let log = log.borrow();
        let names: Vec<&str> = log.iter().map(|&(_, n)| n).collect();
        assert_eq!(names[..3], ["a", "b", "c"], "round 0 in the given order");
        for r in 0..3 {
            let order: Vec<&str> = log.iter().filter(|&&(q, _)| q == r).map(|&(_, n)| n).collect();
            let want: Vec<&str> = round_order(r, 3).into_iter().map(|i| ["a", "b", "c"][i]).collect();
            assert_eq!(order, want, "round {r}");
        }
        assert_eq!(s[0].first(), Duration::from_millis(10));
        assert_eq!(s[0].rebinds().len(), 2);
        assert!((s[0].rebind_avg_ms() - 2.5).abs() < 1e-9);
        assert!((s[0].median_ms() - 2.5).abs() < 1e-9);
    }

    #[test]
    fn round_orders_are_permutations_that_change_predecessors() {
        for n in 0..12 {
            for r in 0..40 {
                let mut o = round_order(r, n);
                o.sort_unstable();
                assert_eq!(o, (0..n).collect::<Vec<_>>(), "round {r} of {n}");
            }
        }
        // Over 11 rounds of 8 runners (the populate group on two counts), each runner follows
        // more than two different runners, unlike a rotation (always the same one).
        for i in 0..8 {
            let mut before = std::collections::BTreeSet::new();
            for r in 0..11 {
                let o = round_order(r, 8);
                let k = o.iter().position(|&x| x == i).unwrap();
                if k > 0 {
                    before.insert(o[k - 1]);
                }
            }
            assert!(before.len() > 2, "runner {i} follows only {before:?}");
        }
    }

    #[test]
    fn companions_run_next_to_their_runner() {
        let log = RefCell::new(Vec::new());
        let mk = |name: &'static str, ms: u64| {
            let log = &log;
            Runner::new(name, move |r| {
                log.borrow_mut().push(name);
                Duration::from_millis(ms + r as u64)
            })
        };
        let mut runners = vec![mk("a", 10).weight(5), mk("b", 20), mk("c", 30)];
        let mut companions = vec![mk("p", 100), mk("q", 200)];
        let phase = Phase::hidden();
        let (s, p) = interleaved_paired(2, &mut runners, &mut companions, &[Some(0), None, Some(1)], &phase);
        // (5 + 1) + 1 + (1 + 1) units per round, two rounds: the bar ends full.
        assert_eq!((phase.bar().position(), phase.bar().length()), (18, Some(18)));
        // A companion always right before its runner, in each round's order.
        let mut want = Vec::new();
        for r in 0..2 {
            for i in round_order(r, 3) {
                want.extend([["p"].as_slice(), &[], &["q"]][i]);
                want.push(["a", "b", "c"][i]);
            }
        }
        assert_eq!(*log.borrow(), want);
        assert_eq!(s[0].rounds, [Duration::from_millis(10), Duration::from_millis(11)]);
        assert_eq!(p[0].rounds, [Duration::from_millis(100), Duration::from_millis(101)]);
        assert!(p[1].rounds.is_empty());
        assert_eq!(p[2].rounds, [Duration::from_millis(200), Duration::from_millis(201)]);
        assert_eq!(p[2].name, "q next to c");
    }

    #[test]
    fn median_odd_even() {
        let d = |v: &[u64]| v.iter().map(|&x| Duration::from_secs(x)).collect::<Vec<_>>();
        assert_eq!(median(&d(&[3, 1, 2])), 2.0);
        assert_eq!(median(&d(&[4, 1, 2, 3])), 2.5);
        assert!((gbps(2_000_000_000, 2.0) - 1.0).abs() < 1e-12);
        assert_eq!(quantile(&[4.0, 1.0, 3.0, 2.0], 0.25), 1.75);
        assert_eq!(quantile(&[4.0, 1.0, 3.0, 2.0], 1.0), 4.0);
        assert_eq!(quantile(&[7.0], 0.5), 7.0);
        assert!(quantile(&[], 0.5).is_nan());
    }
}
