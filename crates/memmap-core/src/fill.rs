//! The strategy policy of every initializer (this crate's and `hugetlb-init`'s): which
//! [`Strategy`] a job uses and why ([`resolve`], [`FillOptions`], [`StrategyReason`]).

use core::fmt;

use crate::hooks::InitHooks;
use crate::model::config::KernelConfig;
use stream_hal::Reuse;

/// How to initialize a range of struct pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Strategy {
    /// The kernel's per-page code.
    Slow,
    /// A template built through the slow path, copied with normal stores.
    Template,
    /// The template copied with `stream-hal` streaming stores.
    Streaming,
    /// Choose by the kernel's rules and a size threshold ([`FillOptions::resolve`]).
    Auto,
}

crate::named!(Strategy { Slow => "slow", Template => "template", Streaming => "streaming", Auto => "auto" });

/// Why an initializer used the strategy it used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StrategyReason {
    /// The caller asked for it and nothing prevented it.
    Requested,
    /// The `page_ref_set` tracepoint is active: every page must emit its events.
    PageRefTracepoint,
    /// KASAN or KMSAN is configured: the fast paths are off.
    KasanOrKmsan,
    /// `stream-hal` is running its generic backend because of a sanitizer ([`Strategy::Auto`]).
    SanitizerBuild,
    /// [`Strategy::Auto`]: at or above the streaming threshold.
    AboveThreshold,
    /// [`Strategy::Auto`]: below the streaming threshold.
    BelowThreshold,
    /// [`Strategy::Auto`] for a job read back right after it is written ([`Reuse::ReadSoon`]:
    /// the caller's hint, or the fused boot's free pass), below that hint's threshold: the
    /// pages stay cached until the read, which streaming them to memory would make miss.
    ReadBackSoon,
}

// The machine-readable names; `Display` says it in words.
crate::named!(StrategyReason, no_display {
    Requested => "requested",
    PageRefTracepoint => "page-ref-tracepoint",
    KasanOrKmsan => "kasan-or-kmsan",
    SanitizerBuild => "sanitizer-build",
    AboveThreshold => "above-threshold",
    BelowThreshold => "below-threshold",
    ReadBackSoon => "read-back-soon",
});

impl fmt::Display for StrategyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StrategyReason::Requested => "requested",
            StrategyReason::PageRefTracepoint => "page_ref_set tracepoint active",
            StrategyReason::KasanOrKmsan => "KASAN/KMSAN configured",
            StrategyReason::SanitizerBuild => "sanitizer build (stream-hal generic)",
            StrategyReason::AboveThreshold => "at or above the streaming threshold",
            StrategyReason::BelowThreshold => "below the streaming threshold",
            StrategyReason::ReadBackSoon => "read back soon, below the read-soon threshold",
        })
    }
}

/// The strategy request every initializer takes: which [`Strategy`], and where
/// [`Strategy::Auto`] starts streaming.
///
/// Auto streams a job from [`FillOptions::threshold`] bytes of struct pages up.
///
/// ```
/// use memmap_core::{FillOptions, Strategy};
/// use stream_hal::Reuse;
///
/// let kernel = FillOptions::new(Strategy::Auto);
/// assert_eq!(kernel.threshold(), stream_hal::WRITE_ONCE_FLOOR);
/// let reads_back = kernel.with_reuse(Reuse::ReadSoon);
/// assert_eq!(reads_back.threshold(), stream_hal::auto_threshold(Reuse::ReadSoon));
/// // A threshold of the caller's own replaces both.
/// assert_eq!(reads_back.with_threshold(2 << 20).threshold(), 2 << 20);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FillOptions {
    /// The requested strategy.
    pub strategy: Strategy,
    /// How soon the caller reads the struct pages after the job (where Auto streams from).
    pub reuse: Reuse,
    /// An explicit [`Strategy::Auto`] threshold in bytes of struct pages, replacing the one of
    /// [`FillOptions::reuse`] and the caches; `None` (the default) for that one.
    pub threshold_bytes: Option<usize>,
}

impl FillOptions {
    /// `strategy` for a memmap written once ([`Reuse::WriteOnce`]).
    #[must_use]
    pub const fn new(strategy: Strategy) -> Self {
        FillOptions { strategy, reuse: Reuse::WriteOnce, threshold_bytes: None }
    }

    /// With the explicit threshold `bytes` ([`FillOptions::threshold_bytes`]).
    #[must_use]
    pub const fn with_threshold(mut self, bytes: usize) -> Self {
        self.threshold_bytes = Some(bytes);
        self
    }

    /// With the reuse hint `reuse` ([`FillOptions::reuse`]).
    #[must_use]
    pub const fn with_reuse(mut self, reuse: Reuse) -> Self {
        self.reuse = reuse;
        self
    }

    /// The size (bytes of struct pages per job) from which [`Strategy::Auto`] streams:
    /// [`FillOptions::threshold_bytes`] if set, else [`stream_hal::auto_threshold`] of
    /// [`FillOptions::reuse`].
    #[must_use]
    pub fn threshold(&self) -> usize {
        match self.threshold_bytes {
            Some(bytes) => bytes,
            None => stream_hal::auto_threshold(self.reuse),
        }
    }

    /// The [`Job`] of `bytes` bytes of struct pages, for [`resolve`].
    pub(crate) fn job(&self, bytes: u64, tracepoint: bool) -> Job {
        Job { bytes, threshold_bytes: self.threshold(), tracepoint, reuse: self.reuse }
    }

    /// The strategy a job of `bytes` bytes of struct pages under `cfg` uses (never
    /// [`Strategy::Auto`]), and why: every initializer's one strategy choice.
    ///
    /// * [`Strategy::Slow`] is always honoured;
    /// * every other request falls back to Slow while the `page_ref_set` tracepoint is active
    ///   (read from `hooks`: every page must emit its event, the kernel's
    ///   `zone_device_page_init_optimization_enabled()`) and when KASAN or KMSAN is configured;
    /// * [`Strategy::Template`] and [`Strategy::Streaming`] are otherwise honoured;
    /// * [`Strategy::Auto`] chooses Slow in a sanitizer build (`stream-hal` generic for a
    ///   sanitizer), Streaming at or above [`FillOptions::threshold`] and Template below.
    #[must_use]
    pub fn resolve<H: InitHooks>(
        &self,
        cfg: &KernelConfig,
        hooks: &H,
        bytes: u64,
    ) -> (Strategy, StrategyReason) {
        let job = self.job(bytes, cfg.debug_page_ref && hooks.page_ref_tracepoint_enabled());
        resolve(cfg, self.strategy, &job)
    }
}

impl Default for FillOptions {
    fn default() -> Self {
        Self::new(Strategy::Auto)
    }
}

/// What a run of struct pages is about to do, for [`resolve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Job {
    /// Bytes of struct pages the job writes.
    pub(crate) bytes: u64,
    /// [`Strategy::Auto`] streams from this many bytes up.
    pub(crate) threshold_bytes: usize,
    /// Whether the `page_ref_set` tracepoint is active.
    pub(crate) tracepoint: bool,
    /// How soon the pages are read after the job; only the reason below the threshold uses it.
    pub(crate) reuse: Reuse,
}

impl Job {
    /// A run of `bytes` read back right after it is written ([`Reuse::ReadSoon`]'s threshold).
    pub(crate) fn read_back_soon(bytes: u64, tracepoint: bool) -> Job {
        Job {
            bytes,
            threshold_bytes: stream_hal::auto_threshold(Reuse::ReadSoon),
            tracepoint,
            reuse: Reuse::ReadSoon,
        }
    }
}

/// Whether `stream-hal` switched itself to its generic backend because of a sanitizer: `Auto`
/// then takes the slow path ([`StrategyReason::SanitizerBuild`]).
fn sanitizer_build() -> bool {
    matches!(stream_hal::backend(), stream_hal::Backend::Generic(stream_hal::GenericReason::Sanitizer(_)))
}

/// The strategy a job uses for `requested`, and why (the rules are on [`FillOptions::resolve`]).
#[must_use]
pub(crate) fn resolve(cfg: &KernelConfig, requested: Strategy, job: &Job) -> (Strategy, StrategyReason) {
    match requested {
        Strategy::Slow => return (Strategy::Slow, StrategyReason::Requested),
        _ if job.tracepoint => return (Strategy::Slow, StrategyReason::PageRefTracepoint),
        _ if cfg.kasan || cfg.kmsan => return (Strategy::Slow, StrategyReason::KasanOrKmsan),
        Strategy::Template | Strategy::Streaming => return (requested, StrategyReason::Requested),
        Strategy::Auto => {}
    }
    if sanitizer_build() {
        (Strategy::Slow, StrategyReason::SanitizerBuild)
    } else if job.bytes >= job.threshold_bytes as u64 {
        (Strategy::Streaming, StrategyReason::AboveThreshold)
    } else if job.reuse == Reuse::ReadSoon {
        (Strategy::Template, StrategyReason::ReadBackSoon)
    } else {
        (Strategy::Template, StrategyReason::BelowThreshold)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CountingHooks, Memmap, Page64, StructPage};
    use std::vec;

    fn job(bytes: u64, tracepoint: bool, read_back_soon: bool) -> Job {
        let reuse = if read_back_soon { Reuse::ReadSoon } else { Reuse::WriteOnce };
        Job { bytes, threshold_bytes: 100, tracepoint, reuse }
    }

    #[test]
    fn auto_follows_the_threshold_and_slow_wins_with_the_tracepoint() {
        let cfg = KernelConfig::X86_64;
        if !sanitizer_build() {
            assert_eq!(
                resolve(&cfg, Strategy::Auto, &job(100, false, false)),
                (Strategy::Streaming, StrategyReason::AboveThreshold)
            );
            assert_eq!(
                resolve(&cfg, Strategy::Auto, &job(99, false, false)),
                (Strategy::Template, StrategyReason::BelowThreshold)
            );
            assert_eq!(
                resolve(&cfg, Strategy::Auto, &job(99, false, true)),
                (Strategy::Template, StrategyReason::ReadBackSoon)
            );
            assert_eq!(
                resolve(&cfg, Strategy::Auto, &job(100, false, true)),
                (Strategy::Streaming, StrategyReason::AboveThreshold)
            );
        } else {
            assert_eq!(
                resolve(&cfg, Strategy::Auto, &job(100, false, false)),
                (Strategy::Slow, StrategyReason::SanitizerBuild)
            );
        }
        assert_eq!(
            resolve(&cfg, Strategy::Streaming, &job(1000, true, false)),
            (Strategy::Slow, StrategyReason::PageRefTracepoint)
        );
        assert_eq!(
            resolve(&cfg, Strategy::Slow, &job(1000, false, false)),
            (Strategy::Slow, StrategyReason::Requested)
        );
        assert_eq!(
            resolve(&cfg, Strategy::Template, &job(1000, false, false)),
            (Strategy::Template, StrategyReason::Requested)
        );
        let kasan = KernelConfig { kasan: true, ..cfg };
        assert_eq!(
            resolve(&kasan, Strategy::Streaming, &job(1000, false, false)),
            (Strategy::Slow, StrategyReason::KasanOrKmsan)
        );
        let kmsan = KernelConfig { kmsan: true, ..cfg };
        assert_eq!(
            resolve(&kmsan, Strategy::Auto, &job(1000, false, false)),
            (Strategy::Slow, StrategyReason::KasanOrKmsan)
        );
    }

    /// Runs `check` on a 4-page x86-64 memmap and hooks without the tracepoint, unless this is
    /// a sanitizer build (where `Auto` always takes the slow path).
    fn without_sanitizer(check: impl FnOnce(&Memmap<'_, Page64>, &CountingHooks)) {
        if sanitizer_build() {
            return;
        }
        let mut pages = vec![Page64::ZEROED; 4];
        let mut pb = vec![0; 1];
        let m = Memmap::new(KernelConfig::X86_64, 0, &mut pages, &mut pb).unwrap();
        check(&m, &CountingHooks::new(false));
    }

    #[test]
    fn the_default_streams_a_write_once_job_from_one_page() {
        without_sanitizer(|m, hooks| {
            // 64 KiB of struct pages (a 4 MiB device): written once, so streamed. It was the
            // cached template below a fixed 1 MiB.
            let auto = FillOptions::default();
            assert_eq!(
                auto.resolve(m.config(), hooks, 64 << 10),
                (Strategy::Streaming, StrategyReason::AboveThreshold)
            );
            assert_eq!(
                auto.resolve(m.config(), hooks, 4096),
                (Strategy::Streaming, StrategyReason::AboveThreshold)
            );
            assert_eq!(
                auto.resolve(m.config(), hooks, 4095),
                (Strategy::Template, StrategyReason::BelowThreshold)
            );
        });
    }

    #[test]
    fn read_soon_streams_from_the_cache_threshold_and_an_explicit_one_wins() {
        without_sanitizer(|m, hooks| {
            let auto = FillOptions::default();
            // Read right after: streamed only from the read-soon threshold of this machine's caches.
            let soon = auto.with_reuse(Reuse::ReadSoon);
            let t = stream_hal::auto_threshold(Reuse::ReadSoon);
            assert_eq!(soon.threshold(), t);
            assert_eq!(
                soon.resolve(m.config(), hooks, t as u64 - 1),
                (Strategy::Template, StrategyReason::ReadBackSoon)
            );
            assert_eq!(
                soon.resolve(m.config(), hooks, t as u64),
                (Strategy::Streaming, StrategyReason::AboveThreshold)
            );
            // An explicit threshold replaces the rule for either hint.
            for opts in [auto, soon] {
                let fixed = opts.with_threshold(1 << 20);
                assert_eq!(fixed.threshold(), 1 << 20);
                assert_eq!(fixed.resolve(m.config(), hooks, (1 << 20) - 1).0, Strategy::Template);
                assert_eq!(fixed.resolve(m.config(), hooks, 1 << 20).0, Strategy::Streaming);
            }
            // The fused boot's read-back runs: the read-soon threshold whatever the options say.
            assert_eq!(Job::read_back_soon(t as u64 - 1, false).threshold_bytes, t);
            assert_eq!(Job::read_back_soon(0, true).reuse, Reuse::ReadSoon);
        });
    }

    #[test]
    fn the_tracepoint_counts_only_with_debug_page_ref() {
        let mut pages = vec![Page64::ZEROED; 4];
        let mut pb = vec![0; 1];
        for (debug_page_ref, expect) in [(false, Strategy::Template), (true, Strategy::Slow)] {
            let cfg = KernelConfig { debug_page_ref, ..KernelConfig::X86_64 };
            let m = Memmap::new(cfg, 0, &mut pages, &mut pb).unwrap();
            let opts = FillOptions::new(Strategy::Template).with_threshold(100);
            assert_eq!(opts.resolve(m.config(), &CountingHooks::new(true), 1000).0, expect);
        }
    }
}
