//! One adapter from the library's [`Named`] types (`--strategy`, `--memory-type`, `--hstate`,
//! `--hvo`, `--config`) to clap: [`named`].

use std::marker::PhantomData;

use clap::builder::{PossibleValue, TypedValueParser};
use memmap_core::Named;

/// The clap value parser of a [`Named`] type: accepts exactly the names, lists them in help
/// and in the error for anything else.
#[derive(Debug)]
pub struct NamedParser<T>(PhantomData<fn() -> T>);

impl<T> Clone for NamedParser<T> {
    fn clone(&self) -> Self {
        NamedParser(PhantomData)
    }
}

/// [`NamedParser`] for `T`.
#[must_use]
pub fn named<T: Named + Send + Sync>() -> NamedParser<T> {
    NamedParser(PhantomData)
}

impl<T: Named + Send + Sync> TypedValueParser for NamedParser<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        let names = clap::builder::PossibleValuesParser::new(T::ALL.iter().map(|v| v.name()));
        let s = names.parse_ref(cmd, arg, value)?;
        T::from_name(&s).ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(T::ALL.iter().map(|v| PossibleValue::new(v.name()))))
    }
}
