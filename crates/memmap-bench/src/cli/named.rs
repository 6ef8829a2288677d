//! One adapter from the model's domain enums (`--strategy`, `--memory-type`, `--hstate`,
//! `--hvo`, `--config`, `--align`) to clap: [`named`], from the enums' own `ALL`/`name`/
//! `from_name`.

use std::marker::PhantomData;

use clap::builder::{PossibleValue, TypedValueParser};
use hugetlb_init::{Hstate, HvoMode};
use memmap_core::{KernelConfig, MemoryType, Strategy};

/// A domain enum the command line names values of: every value, each one's name, and the
/// inverse. Implemented from the enums' own `ALL`, `name()` and `from_name()`.
pub trait Named: Sized + Clone + Send + Sync + 'static {
    /// Every value, in the order help lists them.
    fn all() -> &'static [Self];
    /// The value's command-line name.
    fn name(&self) -> &'static str;
    /// The value named `s`.
    fn from_name(s: &str) -> Option<Self>;
}

impl Named for Strategy {
    fn all() -> &'static [Self] {
        &Strategy::ALL
    }
    fn name(&self) -> &'static str {
        Strategy::name(*self)
    }
    fn from_name(s: &str) -> Option<Self> {
        Strategy::from_name(s)
    }
}

impl Named for MemoryType {
    fn all() -> &'static [Self] {
        &MemoryType::ALL
    }
    fn name(&self) -> &'static str {
        MemoryType::name(*self)
    }
    fn from_name(s: &str) -> Option<Self> {
        MemoryType::from_name(s)
    }
}

impl Named for Hstate {
    fn all() -> &'static [Self] {
        &Hstate::ALL
    }
    fn name(&self) -> &'static str {
        Hstate::name(*self)
    }
    fn from_name(s: &str) -> Option<Self> {
        Hstate::from_name(s)
    }
}

impl Named for HvoMode {
    fn all() -> &'static [Self] {
        &HvoMode::ALL
    }
    fn name(&self) -> &'static str {
        HvoMode::name(*self)
    }
    fn from_name(s: &str) -> Option<Self> {
        HvoMode::from_name(s)
    }
}

impl Named for KernelConfig {
    fn all() -> &'static [Self] {
        &KernelConfig::PRESETS
    }
    fn name(&self) -> &'static str {
        self.name
    }
    fn from_name(s: &str) -> Option<Self> {
        KernelConfig::preset(s)
    }
}

/// The clap value parser of a [`Named`] enum: accepts exactly the names, lists them in help
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
pub fn named<T: Named>() -> NamedParser<T> {
    NamedParser(PhantomData)
}

impl<T: Named> TypedValueParser for NamedParser<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        let names = clap::builder::PossibleValuesParser::new(T::all().iter().map(Named::name));
        let s = names.parse_ref(cmd, arg, value)?;
        T::from_name(&s).ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(T::all().iter().map(|v| PossibleValue::new(v.name()))))
    }
}
