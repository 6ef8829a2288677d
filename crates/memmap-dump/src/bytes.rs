//! [`Bytes`]: the one way this workspace's messages show a size in bytes.

use std::fmt;

/// A size formatted with a binary suffix (`16 GiB`, `1.50 GiB`, `123 B`); a size two decimals
/// would show as a whole number is shown as that number and the difference (`16 MiB + 1 B`), so a
/// message never presents an inexact size as an exact one.
#[derive(Debug, Clone, Copy)]
pub struct Bytes(pub u64);

impl Bytes {
    /// `a` and `b` shown so that two different sizes never read the same (a need and the limit it
    /// exceeds): in their units, or both in bytes where two decimals show them alike.
    #[must_use]
    pub fn distinct(a: u64, b: u64) -> (String, String) {
        let (x, y) = (Bytes(a).to_string(), Bytes(b).to_string());
        if a != b && x == y { (format!("{a} B"), format!("{b} B")) } else { (x, y) }
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let units = [(60, "EiB"), (50, "PiB"), (40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")];
        for (shift, name) in units {
            let unit = 1u64 << shift;
            if self.0 >= unit {
                if self.0 % unit == 0 {
                    return write!(f, "{} {name}", self.0 >> shift);
                }
                let two = format!("{:.2}", self.0 as f64 / unit as f64);
                if !two.ends_with(".00") {
                    return write!(f, "{two} {name}");
                }
                // Within 0.5% of a whole number of units: that number and the difference.
                let whole = self.0 / unit;
                let (below, above) = (self.0 % unit, unit - self.0 % unit);
                return if below <= above {
                    write!(f, "{whole} {name} + {}", Bytes(below))
                } else {
                    // The whole number above, in its own unit (1 GiB - 1 B, not 1024 MiB - 1 B);
                    // 2^64 itself is no u64.
                    match self.0.checked_add(above) {
                        Some(up) => write!(f, "{} - {}", Bytes(up), Bytes(above)),
                        None => write!(f, "{} {name} - {}", whole + 1, Bytes(above)),
                    }
                };
            }
        }
        write!(f, "{} B", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_display() {
        assert_eq!(Bytes(16 << 30).to_string(), "16 GiB");
        assert_eq!(Bytes(1536 << 20).to_string(), "1.50 GiB");
        assert_eq!(Bytes(123).to_string(), "123 B");
        assert_eq!(Bytes(1 << 50).to_string(), "1 PiB");
        // Two decimals that would read as a whole number: that number and the difference.
        assert_eq!(Bytes((16 << 20) + 1).to_string(), "16 MiB + 1 B");
        assert_eq!(Bytes(u64::MAX).to_string(), "16 EiB - 1 B");
        assert_eq!(Bytes(u64::MAX - (2 << 20) + 1).to_string(), "16 EiB - 2 MiB");
        assert_eq!(Bytes((1 << 30) - 1).to_string(), "1 GiB - 1 B");
        assert_eq!(Bytes((384 << 20) + 288).to_string(), "384 MiB + 288 B");
        assert_eq!(Bytes((64 << 20) + (64 << 10)).to_string(), "64.06 MiB");
        // Two different sizes never read alike.
        assert_eq!(Bytes::distinct(16 << 20, 16 << 20), ("16 MiB".into(), "16 MiB".into()));
        assert_eq!(Bytes((1 << 30) + (11 << 20)).to_string(), Bytes((1 << 30) + (12 << 20)).to_string());
        let (a, b) = Bytes::distinct((1 << 30) + (11 << 20), (1 << 30) + (12 << 20));
        assert_eq!((a.as_str(), b.as_str()), ("1085276160 B", "1086324736 B"));
        assert_eq!(Bytes::distinct(4 << 30, 2 << 30), ("4 GiB".into(), "2 GiB".into()));
    }

    /// Every pair of different sizes near the places where rounding merges them (whole units,
    /// two-decimal steps, the top of `u64`) reads as two different strings.
    #[test]
    fn different_sizes_never_read_alike() {
        let mut sizes = Vec::new();
        for shift in [10u32, 20, 30, 40, 50, 60] {
            let unit = 1u64 << shift;
            for base in [unit, 3 * unit / 2, unit + unit / 100, 2 * unit - 1] {
                for delta in [0u64, 1, 2, 1023, 1024, unit / 200, unit / 100] {
                    sizes.extend([base.saturating_add(delta), base.saturating_sub(delta)]);
                }
            }
        }
        sizes.extend([0, 1, 1023, u64::MAX, u64::MAX - 1]);
        for &a in &sizes {
            for &b in &sizes {
                let (x, y) = Bytes::distinct(a, b);
                assert_eq!(x == y, a == b, "{a} and {b} read {x:?} and {y:?}");
            }
        }
    }
}
