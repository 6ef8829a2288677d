//! `sweep`: cost against size of ZONE_DEVICE init (fsdax) and the eager node boot, per strategy
//! and auto, cold and warm, in ns per struct page; auto is judged against the best strategy
//! ([`TARGET`]) and against the one it used ([`SelfCheck`]). See `METHODOLOGY.md`.

pub mod plan;
pub mod plot;
pub mod result;
mod run;
pub mod text;

pub use plan::{Init, MIN_SIZE, STRATEGIES, Skip, Sweep, flush_bytes, llc_bytes, rounds_for, sizes};
pub use result::{Point, SWEEP_FORMAT, SelfCheck, SizeResult, SweepReport, TARGET, Verdict};
pub use run::measure_all;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::ProgressMode;
    use memmap_core::KernelConfig;

    fn point(name: &str, cold: f64, warm: f64) -> Point {
        Point {
            strategy: name.into(),
            cold_ns_per_page: cold,
            warm_ns_per_page: warm,
            cold_gbps: 64.0 / cold,
            warm_gbps: 64.0 / warm,
            cold_rounds_ms: vec![],
            warm_rounds_ms: vec![],
        }
    }

    #[test]
    fn sizes_step_and_verdicts_compare_auto_with_the_best() {
        assert_eq!(sizes(64 << 10, 1 << 20, 4), [64 << 10, 256 << 10, 1 << 20]);
        assert_eq!(sizes(64 << 10, 200 << 10, 2), [64 << 10, 128 << 10]);
        assert_eq!(sizes(1 << 63, u64::MAX, 2), [1 << 63]);
        let p = [
            point("slow", 10.0, 8.0),
            point("template", 4.0, 2.0),
            point("streaming", 3.0, 3.0),
            point("auto", 3.1, 3.0),
        ];
        let cold = Verdict::of(&p, |x| x.cold_ns_per_page);
        assert_eq!(cold.best, "streaming");
        assert!(cold.within_target);
        assert_eq!(cold.text(), "auto within 3.3% of the best (streaming)");
        let warm = Verdict::of(&p, |x| x.warm_ns_per_page);
        assert_eq!((warm.best.as_str(), warm.within_target), ("template", false));
        assert_eq!(warm.text(), "auto 50.0% slower than the best (template): outside 10%");
        assert_eq!(rounds_for(1 << 20, false), 101);
        assert_eq!(rounds_for(4 << 20, false), 51);
        assert_eq!(rounds_for(64 << 20, false), 31);
        let check = SelfCheck::of(&p, "streaming");
        assert!(check.consistent && (check.cold - 0.1 / 3.0).abs() < 1e-9, "{check:?}");
        assert_eq!(check.text(), "self-check: auto within 3.3% / 0.0% of streaming, the strategy it used");
        let bad = SelfCheck::of(&p, "template");
        assert!(
            !bad.consistent && bad.text().contains("FAILED: auto -22.5% cold, +50.0% warm"),
            "{}",
            bad.text()
        );
        assert_eq!(rounds_for(8 << 30, false), 5);
        assert_eq!(flush_bytes(Some(32 << 20)), 64 << 20);
        assert_eq!(flush_bytes(None), 64 << 20);
    }

    #[test]
    fn a_tiny_sweep_runs_both_initializers_and_draws_them() {
        let s = Sweep {
            sizes: vec![64 << 10, 128 << 10],
            skipped: vec![Skip { memmap_bytes: 1 << 40, reason: "does not fit".into() }],
            rounds: Some(2),
            quick: true,
            config: KernelConfig::X86_64,
            flush_bytes: 1 << 20,
            json: false,
            verbose: true,
            progress: ProgressMode { enabled: false },
            plot: None,
        };
        let r = measure_all(&s).unwrap();
        assert_eq!(r.sizes.len(), 4, "two sizes, two initializers");
        for sz in &r.sizes {
            let names: Vec<&str> = sz.results.iter().map(|p| p.strategy.as_str()).collect();
            assert_eq!(names, ["slow", "template", "streaming", "auto"]);
            assert!(sz.results.iter().all(|p| p.cold_ns_per_page > 0.0 && p.warm_rounds_ms.len() == 2));
            assert_ne!(sz.auto_used, "auto");
            assert!(!sz.cold.best.is_empty() && sz.cold.auto_over_best.is_finite());
        }
        let text = text::render(&r, true);
        assert!(text.lines().all(|l| l.chars().count() <= crate::report::text::WIDTH), "{text}");
        assert!(text.contains("64 KiB: cold: auto") && text.contains("not run: 1 TiB of memmap"), "{text}");
        let mut svg = String::new();
        plot::draw(&r, &mut svg).unwrap();
        assert!(svg.contains("node-boot-eager") && svg.contains("streaming warm"), "{svg:.300}");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["sizes"][0]["results"][3]["strategy"], "auto");
    }
}
