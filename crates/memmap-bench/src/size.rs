//! Byte sizes on the command line: `16G`, `100G`, `512M`, `4K`, `2M`, or plain bytes. The
//! suffixes are binary (K = 1024), as `ndctl` and the kernel's `memmap=`/`hugepagesz=` use them.

use std::fmt;

/// Parses a size.
///
/// # Errors
///
/// A message naming the bad input.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(format!("bad size {s:?}: unknown suffix {c:?} (use K, M, G or T)")),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("bad size {s:?}: expected a number with an optional K/M/G/T suffix"))?;
    n.checked_mul(1u64 << shift).ok_or_else(|| format!("bad size {s:?}: too large"))
}

/// A size formatted with a binary suffix (`16 GiB`, `256 MiB`, `4 KiB`, `123 B`).
#[derive(Debug, Clone, Copy)]
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let units = [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")];
        for (shift, name) in units {
            if self.0 >= 1 << shift {
                let v = self.0 as f64 / (1u64 << shift) as f64;
                return if v.fract() == 0.0 {
                    write!(f, "{v:.0} {name}")
                } else {
                    write!(f, "{v:.2} {name}")
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
    fn sizes() {
        assert_eq!(parse_size("16G"), Ok(16 << 30));
        assert_eq!(parse_size("100g"), Ok(100 << 30));
        assert_eq!(parse_size("2M"), Ok(2 << 20));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("12X").is_err());
        assert!(parse_size("G").is_err());
        assert!(parse_size("-1G").is_err());
        assert!(parse_size("99999999999T").is_err());
        assert_eq!(Bytes(16 << 30).to_string(), "16 GiB");
        assert_eq!(Bytes(1536 << 20).to_string(), "1.50 GiB");
    }
}
