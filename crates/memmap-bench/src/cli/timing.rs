//! The timing subcommands, built from the scenario catalog: one per
//! [`CommandSpec`](crate::scenarios::spec::CommandSpec) with its size and pick flags, and `all`
//! with every command's size flag. [`Selection`] reads a parsed command back.

use clap::builder::{PossibleValuesParser, ValueParser};
use clap::{Arg, ArgAction, ArgMatches, Args as _, Command};

use super::args::TimingArgs;
use super::values::count;
use crate::scenarios::scenario::CatalogEntry;
use crate::scenarios::spec::{CommandSpec, PickKind, Rounds, SizeSpec, SizeUnit};
use crate::scenarios::{CATALOG, commands, rows_of};

/// What a timing command runs: the sizes given, by command, and the catalog rows picked.
#[derive(Debug, Clone, Default)]
pub(super) struct Selection {
    /// `(command, size)` for each size given.
    pub(super) sizes: Vec<(&'static str, u64)>,
    /// The rows it runs, in run order.
    pub(super) rows: Vec<&'static CatalogEntry>,
}

impl Selection {
    /// The size given to `command`'s scenarios.
    pub(super) fn size_of(&self, command: &str) -> Option<u64> {
        self.sizes.iter().find(|(c, _)| *c == command).map(|&(_, v)| v)
    }
}

/// The value parser of a size flag: bytes in whole units, or a count.
fn size_parser(spec: &SizeSpec) -> ValueParser {
    match spec.unit {
        SizeUnit::Bytes(unit) => ValueParser::new(move |s: &str| crate::size::parse_pages(s, unit)),
        SizeUnit::Count => ValueParser::new(count::<u64>),
    }
}

/// The size flag `--long` of `spec`, with `help`.
fn size_arg(spec: &SizeSpec, long: &'static str, help: String) -> Arg {
    // The default heading, whatever heading the command's flags before it were under.
    Arg::new(long)
        .long(long)
        .value_name(spec.value_name())
        .value_parser(size_parser(spec))
        .help(help)
        .help_heading(None::<&str>)
}

/// The size flags of `all` (and of the command line without a subcommand): one per command.
pub(super) fn all_size_args() -> Vec<Arg> {
    commands().into_iter().map(|c| size_arg(&c.size, c.size.all, c.size.all_help_text(c.name))).collect()
}

/// `spec`'s pick flag, its values those of its rows.
fn pick_arg(spec: &CommandSpec) -> Option<Arg> {
    let p = spec.pick?;
    let arg = Arg::new(p.long).long(p.long).help(p.help);
    Some(match p.kind {
        PickKind::Switch => arg.action(ArgAction::SetTrue),
        PickKind::Value { every, value_name } => {
            let mut values: Vec<&'static str> = rows_of(spec.name).iter().filter_map(|e| e.pick).collect();
            values.extend(every);
            let arg = arg.value_name(value_name).value_parser(PossibleValuesParser::new(values));
            match every {
                Some(v) => arg.default_value(v),
                None => arg,
            }
        }
    })
}

/// `spec`'s subcommand: its size, its pick flag, the timing flags.
fn subcommand(spec: &'static CommandSpec) -> Command {
    let c = Command::new(spec.name)
        .about(spec.about)
        .arg(size_arg(&spec.size, spec.size.own, spec.size.help_text()))
        .args(pick_arg(spec));
    // Augmenting with the flags' struct sets its doc as the about: the command's own goes after.
    TimingArgs::augment_args(c)
        .about(spec.about)
        .long_about(None::<&str>)
        .mut_arg("rounds", |a| a.help(rounds_help(&rows_of(spec.name))))
}

/// The `--rounds` help for `rows`: their defaults, by command where its rows agree.
fn rounds_help(rows: &[&CatalogEntry]) -> String {
    let mut parts: Vec<(&str, Rounds)> = Vec::new();
    for e in rows {
        let c = e.command.name;
        let agree = rows.iter().filter(|r| r.command.name == c).all(|r| r.rounds == e.rounds);
        let label = if agree { c } else { e.name };
        if !parts.iter().any(|(l, _)| *l == label) {
            parts.push((label, e.rounds));
        }
    }
    match &parts[..] {
        [(_, r)] => format!("Rounds per strategy (default {}; {} with --quick)", r.normal, r.quick),
        _ => {
            let list: Vec<String> =
                parts.iter().map(|(l, r)| format!("{l} {}, {}", r.normal, r.quick)).collect();
            format!("Rounds per strategy (default, then with --quick: {})", list.join("; "))
        }
    }
}

/// The command line: the derived one with the catalog's timing subcommands and `all`'s size
/// flags added, the subcommands in order (`all`, the catalog's, `sweep`, `limits`, `dump`, `diff`).
pub(super) fn augment(cmd: Command) -> Command {
    let all_rounds = rounds_help(CATALOG);
    let mut cmd = cmd
        .args(all_size_args())
        .mut_arg("rounds", |a| a.help(all_rounds.clone()))
        .mut_subcommand("all", |c| c.args(all_size_args()).mut_arg("rounds", |a| a.help(all_rounds.clone())));
    let specs = commands();
    for spec in &specs {
        cmd = cmd.subcommand(subcommand(spec));
    }
    let order =
        std::iter::once("all").chain(specs.iter().map(|c| c.name)).chain(["sweep", "limits", "dump", "diff"]);
    for (i, name) in order.enumerate() {
        cmd = cmd.mut_subcommand(name, |c| c.display_order(i));
    }
    cmd
}

/// What `all` runs: every row, each command's size from its `all` flag.
pub(super) fn all(m: &ArgMatches) -> Selection {
    let sizes =
        commands().into_iter().filter_map(|c| m.get_one::<u64>(c.size.all).map(|&v| (c.name, v))).collect();
    Selection { sizes, rows: CATALOG.to_vec() }
}

/// The catalog command named `name`, if it is one.
pub(super) fn spec(name: &str) -> Option<&'static CommandSpec> {
    commands().into_iter().find(|c| c.name == name)
}

/// What the catalog subcommand `spec` runs: its size and the rows its pick flag picks.
pub(super) fn selection(spec: &CommandSpec, m: &ArgMatches) -> Selection {
    let sizes = m.get_one::<u64>(spec.size.own).map(|&v| vec![(spec.name, v)]).unwrap_or_default();
    let given: Option<&str> = spec.pick.and_then(|p| match p.kind {
        PickKind::Switch => m.get_flag(p.long).then_some(p.long),
        PickKind::Value { .. } => m.get_one::<String>(p.long).map(String::as_str),
    });
    let rows =
        rows_of(spec.name).into_iter().filter(|e| spec.pick.is_none_or(|p| p.picks(e.pick, given))).collect();
    Selection { sizes, rows }
}
