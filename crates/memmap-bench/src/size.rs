//! Byte sizes on the command line, parsed by `parse-size` with binary units (`16G`, `1.5GiB`,
//! `4096`), as `ndctl` and the kernel's `memmap=` spell them. [`parse_pages`] refuses a size that
//! is not a whole number of pages.

use std::fmt;

pub use memmap_dump::Bytes;

/// The base page size of the modelled kernels (4 KiB).
pub const PAGE_SIZE: u64 = 4096;

/// Why a size was refused. [`fmt::Display`] names the input and what is expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SizeError {
    /// Not a size at all (empty, bad digits or unknown suffix).
    Syntax {
        /// The input.
        input: String,
        /// `parse-size`'s reason.
        reason: String,
    },
    /// More than `u64::MAX` bytes.
    TooLarge {
        /// The input.
        input: String,
    },
    /// Smaller than one page of the unit.
    BelowOnePage {
        /// The input.
        input: String,
        /// The page size the size is counted in.
        unit: u64,
    },
    /// Not a whole number of pages of the unit.
    NotWholePages {
        /// The input.
        input: String,
        /// The size in bytes.
        bytes: u64,
        /// The page size the size is counted in.
        unit: u64,
    },
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeError::Syntax { input, reason } => write!(
                f,
                "bad size {input:?} ({reason}): expected a number with an optional binary suffix, \
                 such as 16G, 16GiB, 1.5G, 512M or 4096"
            ),
            SizeError::TooLarge { input } => write!(f, "size {input:?} is larger than 2^64 - 1 bytes"),
            SizeError::BelowOnePage { input, unit } => {
                write!(f, "size {input:?} is smaller than one {} page", Bytes(*unit))
            }
            SizeError::NotWholePages { input, bytes, unit } => {
                write!(
                    f,
                    "size {input:?} ({}) is not a whole number of {} pages (nearest: {}",
                    Bytes(*bytes),
                    Bytes(*unit),
                    Bytes(bytes / unit * unit)
                )?;
                match (bytes / unit).checked_add(1).and_then(|n| n.checked_mul(*unit)) {
                    Some(up) => write!(f, " or {})", Bytes(up)),
                    None => f.write_str(")"),
                }
            }
        }
    }
}

impl std::error::Error for SizeError {}

/// Parses a size in bytes (binary units).
///
/// # Errors
///
/// [`SizeError::Syntax`] or [`SizeError::TooLarge`].
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    parse_size::Config::new().with_binary().parse_size(s).map_err(|e| match e {
        parse_size::Error::PosOverflow => SizeError::TooLarge { input: s.to_string() },
        e => SizeError::Syntax { input: s.to_string(), reason: e.to_string() },
    })
}

/// Parses a size that must be a whole, non-zero number of `unit`-byte pages; returns bytes.
///
/// # Errors
///
/// As [`parse_size()`], and [`SizeError::BelowOnePage`] or [`SizeError::NotWholePages`].
///
/// # Panics
///
/// If `unit` is 0 (a programming error: every caller passes a page size).
pub fn parse_pages(s: &str, unit: u64) -> Result<u64, SizeError> {
    assert!(unit > 0, "page unit must be positive");
    let bytes = parse_size(s)?;
    if bytes < unit {
        return Err(SizeError::BelowOnePage { input: s.to_string(), unit });
    }
    if bytes % unit != 0 {
        return Err(SizeError::NotWholePages { input: s.to_string(), bytes, unit });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_as_people_type_them() {
        assert_eq!(parse_size("16G"), Ok(16 << 30));
        assert_eq!(parse_size("16GiB"), Ok(16 << 30));
        assert_eq!(parse_size("16gb"), Ok(16 << 30));
        assert_eq!(parse_size("100g"), Ok(100 << 30));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("2M"), Ok(2 << 20));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        for bad in ["12X", "G", "-1G", "", "1..5G", "0x10"] {
            assert!(matches!(parse_size(bad), Err(SizeError::Syntax { .. })), "{bad}");
        }
        assert!(matches!(parse_size("99999999999T"), Err(SizeError::TooLarge { .. })));
        assert!(matches!(parse_size("16E"), Err(SizeError::TooLarge { .. })));
    }

    #[test]
    fn page_counts_must_be_whole() {
        assert_eq!(parse_pages("4M", 2 << 20), Ok(4 << 20));
        assert_eq!(parse_pages("1.5G", 2 << 20), Ok(3 << 29));
        let e = parse_pages("3M", 2 << 20).unwrap_err();
        assert_eq!(e, SizeError::NotWholePages { input: "3M".into(), bytes: 3 << 20, unit: 2 << 20 });
        assert_eq!(
            e.to_string(),
            "size \"3M\" (3 MiB) is not a whole number of 2 MiB pages (nearest: 2 MiB or 4 MiB)"
        );
        assert!(matches!(parse_pages("0", 4096), Err(SizeError::BelowOnePage { .. })));
        assert!(matches!(parse_pages("1K", 4096), Err(SizeError::BelowOnePage { .. })));
        assert!(matches!(parse_pages("4097", 4096), Err(SizeError::NotWholePages { .. })));
        // The largest u64 that is whole 4 KiB pages, and the error's "nearest" saturating.
        assert_eq!(parse_pages("18446744073709547520", 4096), Ok(u64::MAX - 4095));
        assert!(parse_pages("18446744073709551615", 4096).unwrap_err().to_string().contains("nearest"));
    }
}
