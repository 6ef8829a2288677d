//! How the report states numbers, ratios and times: with three significant digits ([`num`],
//! [`times`], [`ms`]), in the verdicts ([`super::scenario::verdict`]) and the tables.

/// `5.8x`, `60x`, `1.02x`: two significant decimals below 10, one below 100, none above.
#[must_use]
pub fn times(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}x")
    } else if x >= 10.0 {
        format!("{x:.1}x")
    } else {
        format!("{x:.2}x")
    }
}

/// A number with three significant digits, no unit.
#[must_use]
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let digits = match v.abs() {
        a if a >= 100.0 => 0,
        a if a >= 10.0 => 1,
        a if a >= 1.0 => 2,
        a if a >= 0.1 => 3,
        _ => 4,
    };
    format!("{v:.digits$}")
}

/// A ratio with two decimals (`0.99`).
#[must_use]
pub fn ratio(v: f64) -> String {
    if v.is_finite() { format!("{v:.2}") } else { "-".into() }
}

/// A time in ms with three significant digits (`0.0312 ms`, `5.21 ms`, `812 ms`).
#[must_use]
pub fn ms(v: f64) -> String {
    format!("{} ms", num(v))
}

#[cfg(test)]
mod tests {
    use super::super::scenario::tests::{limits, samples, spec};
    use super::super::scenario::{Figure, ScenarioReport, ScenarioSpec, verdict};
    use super::*;

    #[test]
    fn the_verdict_names_the_fastest_against_the_baseline_and_the_limit() {
        let sc = ScenarioReport::from_samples(
            spec(1),
            &limits(),
            &[samples("slow", 580), samples("template", 200), samples("streaming", 101)],
        );
        assert_eq!(verdict(&sc), "streaming: 5.74x slow, 0.99x of this machine's non-zero fill limit");
        let time = ScenarioSpec { figure: Figure::Time, ..spec(1) };
        let sc =
            ScenarioReport::from_samples(time, &limits(), &[samples("eager", 55), samples("on-demand", 1)]);
        assert_eq!(verdict(&sc), "on-demand: 55.0x eager (1.00 ms against 55.0 ms)");
        let one = ScenarioReport::from_samples(spec(2), &limits(), &[samples("batch", 50)]);
        assert_eq!(verdict(&one), "batch: 1.00x of this machine's non-zero fill limit");
        let fast =
            ScenarioReport::from_samples(spec(1), &limits(), &[samples("slow", 500), samples("s", 50)]);
        assert!(
            verdict(&fast).ends_with(
                "2.00x of this machine's non-zero fill limit (above the limit: a measurement error)"
            )
        );
    }

    #[test]
    fn figures_keep_three_digits() {
        assert_eq!(
            (times(5.8123), times(60.14), times(1014.1)),
            ("5.81x".into(), "60.1x".into(), "1014x".into())
        );
        assert_eq!(
            (ms(0.03123), ms(5.214), ms(812.4)),
            ("0.0312 ms".into(), "5.21 ms".into(), "812 ms".into())
        );
    }
}
