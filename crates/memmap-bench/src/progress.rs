//! The progress bar, driven by the initializers' `cond_resched` hook.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use memmap_core::InitHooks;

/// Creates a bar for `total` units (PFNs or bytes), drawn on stderr only if it is a terminal
/// and `enabled`.
///
/// # Panics
///
/// Never: the template is a constant known to be valid.
#[must_use]
pub fn bar(total: u64, message: &str, enabled: bool) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(
        Some(total),
        if enabled { ProgressDrawTarget::stderr_with_hz(10) } else { ProgressDrawTarget::hidden() },
    );
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg:<28} [{bar:40}] {percent:>3}% {elapsed_precise}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.set_message(message.to_string());
    pb
}

/// `InitHooks` that advance a progress bar by `step` units per `cond_resched` call (one
/// pageblock), batching updates so the bar costs nothing measurable.
#[derive(Debug)]
pub struct ProgressHooks {
    bar: ProgressBar,
    step: u64,
    pending: u64,
}

impl ProgressHooks {
    /// Hooks for `bar`, `step` units per call.
    #[must_use]
    pub fn new(bar: ProgressBar, step: u64) -> Self {
        ProgressHooks { bar, step, pending: 0 }
    }

    /// Adds `n` units directly (for work that does not call the hook).
    pub fn advance(&mut self, n: u64) {
        self.bar.inc(n);
    }
}

impl InitHooks for ProgressHooks {
    #[inline]
    fn cond_resched(&mut self, _pfn: u64) {
        self.pending += self.step;
        if self.pending >= 64 * self.step {
            self.bar.inc(self.pending);
            self.pending = 0;
        }
    }
}

impl Drop for ProgressHooks {
    fn drop(&mut self) {
        self.bar.inc(self.pending);
    }
}
