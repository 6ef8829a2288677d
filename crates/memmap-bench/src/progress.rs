//! Progress on stderr for every phase of a run, drawn only on a terminal without
//! `--no-progress`: a spinner until the phase's work is known, then a bar moved by the timing
//! loop and the initializers' `cond_resched` hook ([`ProgressHooks`]).

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use memmap_core::InitHooks;

/// Whether progress is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgressMode {
    /// `false` with `--no-progress`; stderr must also be a terminal (indicatif checks).
    pub enabled: bool,
}

/// One phase's progress line: a spinner, then a bar once the work is known.
#[derive(Debug, Clone)]
pub struct Phase {
    bar: ProgressBar,
}

/// The bar's template (a constant known to be valid).
const BAR: &str = "{spinner} {msg:<32} [{bar:36}] {percent:>3}% {elapsed_precise}";
/// The spinner's template.
const SPINNER: &str = "{spinner} {msg:<32} {elapsed_precise}";

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

impl Phase {
    /// A phase named `message`, spinning until [`Phase::work`] gives it a length.
    #[must_use]
    pub fn new(message: &str, mode: ProgressMode) -> Phase {
        let target =
            if mode.enabled { ProgressDrawTarget::stderr_with_hz(10) } else { ProgressDrawTarget::hidden() };
        let bar = ProgressBar::with_draw_target(None, target);
        bar.set_style(style(SPINNER));
        bar.set_message(message.to_string());
        if mode.enabled {
            bar.enable_steady_tick(Duration::from_millis(120));
        }
        Phase { bar }
    }

    /// A phase that draws nothing (for library callers and tests).
    #[must_use]
    pub fn hidden() -> Phase {
        Phase::new("", ProgressMode { enabled: false })
    }

    /// Says what the phase does now (`zone-device-fsdax: fault in 6 memmaps`).
    pub fn step(&self, message: impl Into<String>) {
        self.bar.set_message(message.into());
    }

    /// From here on a bar of `total` units, starting at 0.
    pub fn work(&self, total: u64) {
        self.bar.set_style(style(BAR));
        self.bar.set_length(total);
        self.bar.set_position(0);
    }

    /// The underlying bar (for hooks that advance it).
    #[must_use]
    pub fn bar(&self) -> &ProgressBar {
        &self.bar
    }

    /// Sets the bar to `done` units.
    pub fn set(&self, done: u64) {
        self.bar.set_position(done);
    }

    /// Removes the line (the phase's result is printed next).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// `InitHooks` that advance a bar by the PFNs an initializer has passed, batched so the bar
/// costs nothing measurable.
#[derive(Debug)]
pub struct ProgressHooks {
    bar: ProgressBar,
    last: u64,
    pending: u64,
}

/// Units the hooks collect before they touch the bar.
const BATCH: u64 = 1 << 15;

impl ProgressHooks {
    /// Hooks for `bar` over PFNs from `start`.
    #[must_use]
    pub fn new(bar: ProgressBar, start: u64) -> Self {
        ProgressHooks { bar, last: start, pending: 0 }
    }
}

impl InitHooks for ProgressHooks {
    #[inline]
    fn cond_resched(&mut self, pfn: u64) {
        self.pending += pfn.saturating_sub(self.last);
        self.last = self.last.max(pfn);
        if self.pending >= BATCH {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_count_the_pfns_passed() {
        let phase = Phase::hidden();
        phase.work(1 << 20);
        {
            let mut h = ProgressHooks::new(phase.bar().clone(), 1000);
            for pfn in (1000..1000 + (1 << 17)).step_by(512) {
                h.cond_resched(pfn);
            }
            // A pfn behind the last one adds nothing.
            h.cond_resched(0);
        }
        assert_eq!(phase.bar().position(), (1 << 17) - 512);
        phase.set(1 << 20);
        assert_eq!(phase.bar().position(), phase.bar().length().unwrap_or(0));
    }
}
