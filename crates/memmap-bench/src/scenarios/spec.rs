//! What a scenario's file declares about the subcommand that runs it ([`CommandSpec`]): name,
//! help, its one size and a pick flag; the command line and `all`'s sizes are built from these.

use crate::size::Bytes;

/// Rounds per strategy when `--rounds` is not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rounds {
    /// The default.
    pub normal: usize,
    /// Under `--quick`.
    pub quick: usize,
}

/// What a size flag's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeUnit {
    /// Bytes, a whole number of this many (a size such as `16G`).
    Bytes(u64),
    /// A count of at least 1 (`--count 64`).
    Count,
}

/// A command's one size: what the suite scales to the memory budget when it is not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeSpec {
    /// The flag under the subcommand, without dashes (`size`, `count`).
    pub own: &'static str,
    /// The flag under `all` (and without a subcommand), without dashes (`zone-device-size`).
    pub all: &'static str,
    /// What a value is.
    pub unit: SizeUnit,
    /// What it sizes, for the help (`namespace size, whole 2 MiB pages`); the default, the
    /// `--quick` value and the scaling are added to it.
    pub help: &'static str,
    /// The default.
    pub default: u64,
    /// The default under `--quick`.
    pub quick: u64,
}

impl Rounds {
    /// `normal` rounds, `quick` under `--quick`.
    #[must_use]
    pub const fn new(normal: usize, quick: usize) -> Rounds {
        Rounds { normal, quick }
    }
}

impl SizeSpec {
    /// `--size` (`--{all}` under `all`) in whole `unit`s of bytes, described by `help`, with its
    /// default and `--quick` values.
    #[must_use]
    pub const fn bytes(all: &'static str, unit: u64, help: &'static str, default: u64, quick: u64) -> Self {
        SizeSpec { own: "size", all, unit: SizeUnit::Bytes(unit), help, default, quick }
    }

    /// `--count` (`--{all}` under `all`), a count of at least 1.
    #[must_use]
    pub const fn count(all: &'static str, help: &'static str, default: u64, quick: u64) -> Self {
        SizeSpec { own: "count", all, unit: SizeUnit::Count, help, default, quick }
    }

    /// `value` as the help shows it (`100 GiB`, `64`).
    #[must_use]
    pub fn show(&self, value: u64) -> String {
        match self.unit {
            SizeUnit::Bytes(_) => Bytes(value).to_string(),
            SizeUnit::Count => value.to_string(),
        }
    }

    /// The help of the flag: what it sizes, its defaults, and that it is scaled.
    #[must_use]
    pub fn help_text(&self) -> String {
        format!(
            "{} (default {}, {} with --quick; scaled to the memory budget when not given)",
            self.help,
            self.show(self.default),
            self.show(self.quick)
        )
    }

    /// The help of the flag under `all`: `command`'s, as [`SizeSpec::help_text`] with the
    /// command's name first (`zone-device: device size, ...`).
    #[must_use]
    pub fn all_help_text(&self, command: &str) -> String {
        let text = self.help_text();
        let mut chars = text.chars();
        let first = chars.next().map(|c| c.to_lowercase().collect::<String>()).unwrap_or_default();
        format!("{command}: {first}{}", chars.as_str())
    }

    /// The value name in the help: `SIZE` or `N`.
    #[must_use]
    pub fn value_name(&self) -> &'static str {
        match self.unit {
            SizeUnit::Bytes(_) => "SIZE",
            SizeUnit::Count => "N",
        }
    }
}

/// How a command's pick flag chooses among its scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PickKind {
    /// A switch (`--alloc`): given, the scenarios whose pick is the flag's name run; not
    /// given, those without a pick.
    Switch,
    /// A value (`--align 2M`): the scenarios whose pick it is run; not given, or `every`
    /// when there is such a value (`--hvo both`), all of them.
    Value {
        /// The value that picks every scenario of the command.
        every: Option<&'static str>,
        /// The value's name in the help (`ALIGN`).
        value_name: &'static str,
    },
}

/// A flag that picks some of a command's scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PickSpec {
    /// The flag, without dashes (`align`).
    pub long: &'static str,
    /// Its help.
    pub help: &'static str,
    /// How it picks.
    pub kind: PickKind,
}

impl PickSpec {
    /// A switch `--{long}`.
    #[must_use]
    pub const fn switch(long: &'static str, help: &'static str) -> PickSpec {
        PickSpec { long, help, kind: PickKind::Switch }
    }

    /// `--{long} VALUE_NAME`, `every` picking every scenario.
    #[must_use]
    pub const fn value(
        long: &'static str,
        value_name: &'static str,
        every: Option<&'static str>,
        help: &'static str,
    ) -> PickSpec {
        PickSpec { long, help, kind: PickKind::Value { every, value_name } }
    }

    /// Whether a scenario whose pick is `pick` runs when the flag is `given` (a switch: its
    /// name when given; a value: the value).
    #[must_use]
    pub fn picks(&self, pick: Option<&str>, given: Option<&str>) -> bool {
        match self.kind {
            PickKind::Switch => pick == given,
            PickKind::Value { every, .. } => given.is_none() || given == every || pick == given,
        }
    }
}

/// The subcommand that runs some of the catalog's scenarios, as their file declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandSpec {
    /// The subcommand (`zone-device`).
    pub name: &'static str,
    /// Its one-line help.
    pub about: &'static str,
    /// Its size.
    pub size: SizeSpec,
    /// A flag that picks some of its scenarios.
    pub pick: Option<PickSpec>,
}

impl CommandSpec {
    /// The subcommand `name` (`about` its help) of one size and no pick flag.
    #[must_use]
    pub const fn new(name: &'static str, about: &'static str, size: SizeSpec) -> CommandSpec {
        CommandSpec { name, about, size, pick: None }
    }

    /// The same with a pick flag.
    #[must_use]
    pub const fn pick(self, pick: PickSpec) -> CommandSpec {
        CommandSpec { pick: Some(pick), ..self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pick_flag_selects_by_switch_or_value() {
        let switch = PickSpec::switch("alloc", "");
        assert!(switch.picks(None, None) && !switch.picks(Some("alloc"), None));
        assert!(switch.picks(Some("alloc"), Some("alloc")) && !switch.picks(None, Some("alloc")));
        let hvo = PickSpec {
            long: "hvo",
            help: "",
            kind: PickKind::Value { every: Some("both"), value_name: "HVO" },
        };
        assert!(hvo.picks(Some("on"), None) && hvo.picks(Some("on"), Some("both")));
        assert!(hvo.picks(Some("on"), Some("on")) && !hvo.picks(Some("off"), Some("on")));
        let size = SizeSpec::bytes("x-size", 4096, "Range size", 4 << 30, 1 << 30);
        assert_eq!(
            size.help_text(),
            "Range size (default 4 GiB, 1 GiB with --quick; scaled to the memory budget when not given)"
        );
        assert!(size.all_help_text("x").starts_with("x: range size (default 4 GiB"));
        assert_eq!(SizeSpec::count("n", "", 1, 1).show(64), "64");
    }
}
