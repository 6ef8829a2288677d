//! The timing scenarios. Each builds its storage, runs its strategies interleaved with
//! [`crate::measure::interleaved`], and returns a [`crate::report::Scenario`].

pub mod alloc;
pub mod clear;
pub mod deferred;
pub mod hugetlb;
pub mod zone_device;

/// Settings shared by every scenario.
#[derive(Debug, Clone)]
pub struct Common {
    /// Rounds per strategy (`None`: the scenario's default).
    pub rounds: Option<usize>,
    /// Threads to split a range across.
    pub threads: usize,
    /// Draw progress bars.
    pub progress: bool,
    /// `--quick`: CI-sized.
    pub quick: bool,
}

impl Common {
    /// Rounds: `--rounds`, else `default` (or `quick` under `--quick`).
    #[must_use]
    pub fn rounds(&self, default: usize, quick: usize) -> usize {
        self.rounds.unwrap_or(if self.quick { quick } else { default })
    }
}

/// Splits `[start, start + nr)` into at most `threads` chunks whose boundaries are multiples of
/// `align` (the kernel's padata jobs split at section boundaries). Returns `(start, len)` pairs.
#[must_use]
pub fn split(start: u64, nr: u64, threads: usize, align: u64) -> Vec<(u64, u64)> {
    let threads = threads.max(1) as u64;
    let chunk = nr.div_ceil(threads).div_ceil(align) * align;
    let mut out = Vec::new();
    let mut s = start;
    let end = start + nr;
    while s < end {
        let e = ((s / align + chunk / align) * align).min(end).max(s + 1);
        out.push((s, e - s));
        s = e;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn split_is_aligned_and_covers_once() {
        for (start, nr, threads) in
            [(0u64, 1u64 << 20, 2usize), (1 << 24, 100_000, 3), (32768, 32768, 4), (0, 5, 8)]
        {
            let parts = split(start, nr, threads, 32768);
            assert!(parts.len() <= threads.max(1));
            let mut at = start;
            for (i, &(s, n)) in parts.iter().enumerate() {
                assert_eq!(s, at);
                if i > 0 {
                    assert_eq!(s % 32768, 0, "chunk start aligned");
                }
                at += n;
            }
            assert_eq!(at, start + nr);
        }
    }
}
