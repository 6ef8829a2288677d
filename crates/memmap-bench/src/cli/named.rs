//! One adapter from the library's [`Named`] types (`--strategy`, `--memory-type`, `--hvo`,
//! `--config`) to clap: [`named`].

use clap::builder::{PossibleValuesParser, TypedValueParser};
use memmap_core::Named;

/// The clap value parser of a [`Named`] type, listing the names in help and errors.
#[must_use]
pub fn named<T: Named + Send + Sync>() -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(T::ALL.iter().map(|v| v.name()))
        .try_map(|s| T::from_name(&s).ok_or(format!("no value is named {s}")))
}
