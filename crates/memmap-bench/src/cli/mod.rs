//! The command line: clap types ([`args`]), their validation into an [`Invocation`] (every
//! size and memory need checked before any work; timing commands fitted to the memory budget,
//! [`suite`]), and running it ([`run`], and `dump` for dump and diff). Each subcommand accepts
//! only the flags it uses.
//!
//! Exit status: 0 success (or identical dumps), 1 dumps differ or the machine failed after the
//! checks, 2 bad input (including a timing command the memory budget leaves nothing of, and a
//! `--plot` FILE that cannot be written). A panic (101) on any input is a bug.

pub mod args;
mod dump;
pub mod error;
pub mod invocation;
pub mod named;
mod plan_sweep;
pub mod run;
pub mod suite;
mod timing;
mod values;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{CommandFactory as _, FromArgMatches as _};

pub use args::Cli;
use args::{Command, GlobalArgs, TimingArgs};
pub use error::CliError;
pub use invocation::Invocation;
pub use named::named;
pub use suite::Suite;

use crate::memory::MemInfo;

/// The whole command line: [`args`] with the catalog's timing subcommands and `all`'s sizes.
#[must_use]
pub fn command() -> clap::Command {
    timing::augment(Cli::command())
}

/// Refuses the output flags for a command that has no output of that kind (`dump`, `diff`).
fn no_global_flags(command: &str, g: &GlobalArgs, allowed: &[&str]) -> Result<(), CliError> {
    match g.given().into_iter().find(|f| !allowed.contains(f)) {
        Some(flag) => {
            let msg = format!("the subcommand '{command}' cannot be used with '{flag}'");
            Err(CliError::Clap(command_error(clap::error::ErrorKind::ArgumentConflict, msg)))
        }
        None => Ok(()),
    }
}

/// A clap error of `kind` saying `msg`, formatted as the command line's own.
fn command_error(kind: clap::error::ErrorKind, msg: String) -> clap::Error {
    command().error(kind, msg)
}

/// Refuses `all`'s options before a subcommand, which would otherwise be silently ignored.
fn nothing_before_the_subcommand(cmd: &clap::Command, matches: &clap::ArgMatches) -> Result<(), CliError> {
    let Some((sub, _)) = matches.subcommand() else { return Ok(()) };
    let top = cmd.get_arguments().filter(|a| !a.is_global_set());
    for a in top {
        let id = a.get_id().as_str();
        if matches.value_source(id) == Some(ValueSource::CommandLine) {
            let msg = format!(
                "the argument '--{}' cannot be used before the subcommand '{sub}' (put it after it)",
                a.get_long().unwrap_or(id)
            );
            return Err(CliError::Clap(command_error(clap::error::ErrorKind::ArgumentConflict, msg)));
        }
    }
    Ok(())
}

/// Parses and validates `args` (the program name first) against the machine `info`: every
/// size and memory need is checked here, before any work.
///
/// # Errors
///
/// [`CliError`].
pub fn parse<I, T>(args: I, info: &MemInfo) -> Result<Invocation, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let mut cmd = command();
    let matches = cmd.try_get_matches_from_mut(args).map_err(CliError::Clap)?;
    nothing_before_the_subcommand(&cmd, &matches)?;
    let cli = Cli::from_arg_matches(&matches).map_err(CliError::Clap)?;
    let g = cli.global;
    let timing = |name: &str, t: &TimingArgs, sel: &timing::Selection| {
        suite::suite(name, t, &g, sel, info).map(Invocation::Suite)
    };
    match matches.subcommand() {
        None => return timing("all", &cli.timing, &timing::all(&matches)),
        Some((name, m)) => {
            if let Some(spec) = timing::spec(name) {
                let t = TimingArgs::from_arg_matches(m).map_err(CliError::Clap)?;
                return timing(name, &t, &timing::selection(spec, m));
            }
        }
    }
    let Some(command) = cli.command else {
        return Err(CliError::Usage("no such subcommand".into()));
    };
    match command {
        Command::Dump { .. } => no_global_flags(command.name(), &g, &[])?,
        Command::Diff { .. } => no_global_flags(command.name(), &g, &["--json"])?,
        _ => {}
    }
    match command {
        Command::All(t) => {
            let m = matches.subcommand_matches("all").unwrap_or(&matches);
            timing("all", &t, &timing::all(m))
        }
        Command::Sweep(a) => plan_sweep::plan(&a, &g, info).map(Invocation::Sweep),
        Command::Limits(a) => {
            let t = TimingArgs { memory_budget: a.memory_budget, ..TimingArgs::default() };
            let mut s = suite::suite("limits", &t, &g, &timing::Selection::default(), info)?;
            s.limits_only = true;
            Ok(Invocation::Suite(s))
        }
        Command::Dump { kind: args::DumpKind::ZoneDevice(a) } => dump::zone_device(&a, info),
        Command::Dump { kind: args::DumpKind::Hugetlb(a) } => dump::hugetlb(&a, info),
        Command::Dump { kind: args::DumpKind::Hotplug(a) } => dump::hotplug(&a, info),
        Command::Dump { kind: args::DumpKind::Node(a) } => dump::node(&a, info),
        Command::Diff { a, b } => Ok(Invocation::Diff(a, b, g.json)),
    }
}

/// The program: parses `args`, checks them against this machine, runs.
#[must_use]
pub fn main<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    match parse(args, &MemInfo::read()) {
        Ok(inv) => execute(inv),
        Err(CliError::Clap(e)) => e.exit(),
        Err(CliError::Usage(m)) => {
            eprintln!("error: {m}");
            ExitCode::from(2)
        }
    }
}

/// Runs a validated invocation.
#[must_use]
pub fn execute(inv: Invocation) -> ExitCode {
    match inv {
        Invocation::Suite(s) => run::run_suite(&s),
        Invocation::DumpZoneDevice(o, dir, force) => dump::run_dump(&dir, force, false, || o.run()),
        Invocation::DumpHugetlb(o, dir, force) => dump::run_dump(&dir, force, true, || o.run()),
        Invocation::DumpHotplug(o, dir, force) => dump::run_dump(&dir, force, false, || o.run()),
        Invocation::DumpNode(o, dir, force) => dump::run_dump(&dir, force, false, || o.run()),
        Invocation::Diff(a, b, json) => dump::run_diff(&a, &b, json),
        Invocation::Sweep(s) => run::run_sweep(&s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::Budget;
    use crate::scenarios;

    const GIB: u64 = 1 << 30;

    /// This project's machine: 24 GiB, 20 available.
    fn machine() -> MemInfo {
        crate::memory::tests::info()
    }

    fn parse_on(args: &[&str], info: &MemInfo) -> Result<Invocation, CliError> {
        parse(std::iter::once("memmap-bench").chain(args.iter().copied()), info)
    }

    fn suite_on(args: &[&str], info: &MemInfo) -> Suite {
        match parse_on(args, info) {
            Ok(Invocation::Suite(s)) => s,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    fn names(args: &[&str]) -> Vec<&'static str> {
        suite_on(args, &machine()).scenarios.iter().map(|s| s.name()).collect()
    }

    /// The words of `line`: a command line written as one string.
    fn words(line: &str) -> Vec<&str> {
        line.split(' ').collect()
    }

    fn refused(args: &[&str]) -> String {
        match parse_on(args, &machine()) {
            Err(e) => e.to_string(),
            Ok(i) => panic!("{args:?} accepted: {i:?}"),
        }
    }

    /// `--threads each` (the library's spelling of one worker per item) used to be accepted and
    /// run the all-core rows on one thread without a word.
    #[test]
    fn threads_is_a_count_or_auto() {
        let e = refused(&["zone-device", "--threads", "each"]);
        assert!(e.contains("`each` is neither `auto` nor a thread count in 1..=1024"), "{e}");
        let s = suite_on(&["zone-device", "--size", "64M", "--threads", "3"], &machine());
        assert_eq!(s.threads, crate::threads::ThreadPolicy::Given(3));
    }

    #[test]
    fn clap_definition_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn subcommands_select_from_the_registry() {
        assert_eq!(names(&["--quick"]), scenarios::CATALOG.iter().map(|e| e.name).collect::<Vec<_>>());
        assert_eq!(names(&["all", "--quick"]).len(), 10);
        assert_eq!(names(&["hotplug", "--size", "256M"]), ["hotplug"]);
        assert_eq!(names(&["zone-device", "--size", "64M"]), ["zone-device-fsdax", "zone-device-devdax-2m"]);
        assert_eq!(names(&["zone-device", "--align", "2M"]), ["zone-device-devdax-2m"]);
        assert_eq!(names(&["hugetlb", "--hvo", "off", "--count", "2"]), ["hugetlb-1g-nohvo"]);
        assert_eq!(names(&["clear", "--alloc", "--quick"]), ["alloc-init-on-alloc"]);
        assert_eq!(names(&["clear", "--quick"]), ["clear-2m"]);
        assert_eq!(names(&["deferred", "--quick"]), ["deferred"]);
        assert_eq!(
            names(&["guest-memory", "--size", "64M"]),
            ["guest-memory-populate", "guest-memory-reset"]
        );
        assert!(names(&["limits"]).is_empty());
    }

    fn sweep_on(args: &[&str], info: &MemInfo) -> crate::sweep::Sweep {
        match parse_on(args, info) {
            Ok(Invocation::Sweep(s)) => s,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn sweep_checks_its_sizes_against_the_budget_before_any_work() {
        let s = sweep_on(&["sweep", "--max-size", "1M", "--step", "4", "--json"], &machine());
        assert_eq!(s.sizes, [64 << 10, 256 << 10, 1 << 20]);
        assert!(s.json && s.skipped.is_empty() && s.rounds.is_none());
        let s = sweep_on(&["sweep", "--min-size", "128K", "--max-size", "512K", "--rounds", "3"], &machine());
        assert_eq!((s.sizes.len(), s.rounds), (3, Some(3)));
        // A budget that holds 1 GiB of memmap beside the flush buffer (twice the host's
        // last-level cache: 64 MiB on one machine, 960 MiB on a Xeon guest with 480 MiB of L3)
        // but not 2 GiB: the larger sizes are skipped with the reason.
        let flush = sweep_on(&["sweep"], &machine()).flush_bytes;
        let budget = format!("{}M", ((1 << 30) + flush + (256 << 20)) >> 20);
        let s = sweep_on(&["sweep", "--memory-budget", &budget], &machine());
        assert_eq!(s.sizes.last(), Some(&(1 << 30)), "flush buffer {} bytes", s.flush_bytes);
        assert_eq!(s.skipped.iter().map(|k| k.memmap_bytes).collect::<Vec<_>>(), [2 << 30, 4 << 30, 8 << 30]);
        assert!(s.skipped[0].reason.contains("memory budget"), "{:?}", s.skipped);
        assert!(refused(&["sweep", "--min-size", "100K"]).contains("64 KiB"));
        assert!(refused(&["sweep", "--min-size", "1M", "--max-size", "64K"]).contains("below --min-size"));
        assert!(refused(&["sweep", "--min-size", "1G", "--memory-budget", "512M"]).contains("no size fits"));
        for args in [&["sweep", "--step", "3"][..], &["sweep", "--threads", "2"], &["sweep", "--force"]] {
            assert!(matches!(parse_on(args, &machine()), Err(CliError::Clap(_))), "{args:?}");
        }
    }

    #[test]
    fn hotplug_sizes_are_whole_memory_blocks() {
        let s = suite_on(&["hotplug", "--size", "512M"], &machine());
        assert_eq!(s.scenarios[0].knob().map(|k| k.value), Some(512 << 20));
        assert!(refused(&["hotplug", "--size", "100M"]).contains("memory blocks"));
        assert!(refused(&["hotplug", "--size", "64G", "--memory-budget", "4G"]).contains("hotplug"));
    }

    #[test]
    fn output_flags_go_before_or_after_the_subcommand() {
        for args in [
            &["--quick", "--json", "zone-device"][..],
            &["zone-device", "--quick", "--json"],
            &["--quick", "zone-device", "--json"],
            &["-v", "--no-progress", "zone-device", "--quick", "--json"],
        ] {
            let s = suite_on(args, &machine());
            assert!(s.common.quick && s.json, "{args:?}");
            assert_eq!(s.scenarios.len(), 2);
        }
        let s = suite_on(&["--verbose", "--no-progress", "limits", "--quick"], &machine());
        assert!(s.verbose && !s.common.progress.enabled && s.limits_only);
    }

    #[test]
    fn flags_belong_to_their_commands() {
        for args in [
            &["--quick", "diff", "a", "b"][..],
            &["diff", "a", "b", "--verbose"],
            &["--quick", "dump", "zone-device", "--memory-type", "fsdax", "--pages", "8", "--out", "x"],
            &["limits", "--threads", "2"],
            &["limits", "--rounds", "3"],
            &["--threads", "2", "zone-device"],
        ] {
            assert!(matches!(parse_on(args, &machine()), Err(CliError::Clap(_))), "{args:?}");
        }
        let e = refused(&["--quick", "diff", "a", "b"]);
        assert!(e.contains("the subcommand 'diff' cannot be used with '--quick'"), "{e}");
        for args in [&["--json", "diff", "a", "b"][..], &["diff", "a", "b", "--json"]] {
            assert!(matches!(parse_on(args, &machine()), Ok(Invocation::Diff(_, _, true))), "{args:?}");
        }
    }

    #[test]
    fn every_scenario_is_checked_against_memory() {
        let e = refused(&["clear", "--alloc", "--size", "100G"]);
        assert!(e.contains("alloc-init-on-alloc") && e.contains("use a smaller --size"), "{e}");
        let e = refused(&["clear", "--alloc", "--size", "22G"]);
        assert!(e.contains("alloc-init-on-alloc needs"), "{e}");
        assert!(refused(&["deferred", "--size", "100T"]).contains("deferred"));
        let e = refused(&["hugetlb", "--hvo", "off", "--count", "1099511627776"]);
        assert!(e.contains("overflows"), "{e}");
        assert!(refused(&["all", "--deferred-size", "2T"]).contains("deferred"));
        let e = refused(&words("dump zone-device --memory-type fsdax --pages 1099511627776 --out x"));
        assert!(e.starts_with("the dump maps 64 TiB"), "{e}");
        let e =
            refused(&["dump", "zone-device", "--memory-type", "fsdax", "--pages", "320000000", "--out", "x"]);
        assert!(e.starts_with("the dump needs 19.07 GiB"), "{e}");
        let e = refused(&["dump", "hugetlb", "--hstate", "1G", "--count", "1099511627776", "--out", "x"]);
        assert!(e.contains("overflows"), "{e}");
        // A size given explicitly is checked against the budget, never scaled.
        let e = refused(&["zone-device", "--size", "100G", "--memory-budget", "4G"]);
        assert!(e.contains("more than the memory budget 4 GiB (--memory-budget)"), "{e}");
        assert!(refused(&["--memory-budget", "30G"]).contains("more than this machine can give"));
        assert!(refused(&["--memory-budget", "100"]).contains("smaller than one 4 KiB page"));
    }

    #[test]
    fn sizes_are_whole_pages() {
        let e = refused(&["clear", "--size", "3M"]);
        assert!(e.contains("not a whole number of 2 MiB pages"), "{e}");
        assert_eq!(names(&["zone-device", "--size", "1.5G"]).len(), 2);
        assert_eq!(names(&["zone-device", "--size", "64MiB"]).len(), 2);
        assert!(refused(&["deferred", "--size", "4097"]).contains("4 KiB pages"));
    }

    /// Every scenario of the default suite, and the limit probe, declare a need within the
    /// budget and the machine; nothing is skipped.
    fn fits(s: &Suite, info: &MemInfo, budget: u64) {
        assert!(s.skipped.is_empty(), "{:?}", s.skipped);
        assert_eq!(s.scenarios.len(), scenarios::CATALOG.len());
        let b = Budget::new(Some(budget), info).unwrap();
        for sc in &s.scenarios {
            let need = sc.memory_needed().unwrap();
            assert!(need.resident + crate::budget::OWN_MEMORY <= budget, "{}: {need:?}", sc.name());
            assert_eq!(b.check(sc.name(), &need, info), Ok(()), "{}", sc.name());
        }
        assert!(crate::limits::memory_needed(s.limit_buffer).resident + crate::budget::OWN_MEMORY <= budget);
    }

    #[test]
    fn the_default_suite_fits_an_8_gib_machine_and_a_4_gib_one() {
        for total in [8 * GIB, 4 * GIB] {
            // What such a machine has available with a desktop running.
            let info = MemInfo::with_available(total / 8 * 7, total);
            let s = suite_on(&[], &info);
            fits(&s, &info, info.default_budget().unwrap());
            assert!(!s.memory.scaled.is_empty(), "the upstream sizes do not fit {total}");
            let line = s.memory.line();
            assert!(
                line.contains("2/3 of MemAvailable") && line.contains("zone-device-fsdax 100 GiB ->"),
                "{line}"
            );
        }
    }

    #[test]
    fn a_4_gib_budget_holds_the_whole_suite() {
        let s = suite_on(&["--memory-budget", "4GiB"], &machine());
        fits(&s, &machine(), 4 * GIB);
        assert_eq!(s.memory.budget_bytes, Some(4 * GIB));
        assert!(s.memory.line().starts_with("memory budget 4 GiB (--memory-budget): scaled to fit"));
        // Where memory allows, the upstream series' sizes: 100 GiB namespace, 64 x 1 GiB pages, 16 GiB clear.
        let full = suite_on(&["--memory-budget", "18G"], &machine());
        assert_eq!(full.memory.scaled, [], "18 GiB holds every scenario at its default size");
        let knobs: Vec<String> =
            full.scenarios.iter().filter_map(|s| s.knob()).map(|k| k.show(k.value)).collect();
        assert_eq!(knobs[..5], ["100 GiB", "100 GiB", "64 x 1 GiB pages", "64 x 1 GiB pages", "16 GiB"]);
    }

    #[test]
    fn a_scenario_that_cannot_shrink_enough_is_skipped_with_the_reason() {
        // 600 MiB: the limit probe (2 x 256 MiB) fits; zone-device at its smallest does not.
        let s = suite_on(&["--quick", "--memory-budget", "600M"], &machine());
        assert!(
            s.skipped.iter().any(|k| k.name == "clear-2m")
                || s.scenarios.iter().any(|x| x.name() == "clear-2m")
        );
        for k in &s.skipped {
            assert!(k.reason.contains("does not fit even at"), "{k:?}");
        }
        let e = refused(&["--memory-budget", "64M"]);
        assert!(
            e.starts_with("the limit probe at its smallest (2 x 32 MiB) needs 64 MiB of memory, 128 MiB"),
            "{e}"
        );
        assert!(e.ends_with("; --memory-budget 128 MiB or more would hold it"), "{e}");
    }

    fn refused_on(args: &[&str], info: &MemInfo) -> String {
        match parse_on(args, info) {
            Err(e) => e.to_string(),
            Ok(i) => panic!("{args:?} accepted: {i:?}"),
        }
    }

    #[test]
    fn a_command_whose_every_scenario_is_skipped_is_refused_with_the_budget_it_needs() {
        let e = refused(&["clear", "--memory-budget", "200M"]);
        assert!(
            e.starts_with("clear: nothing would run, every scenario it selects was left out: clear-2m:"),
            "{e}"
        );
        assert!(
            e.contains(
                "does not fit even at its smallest size (256 MiB): it needs 256 MiB of memory, 320 MiB with \
                 the bench's own 64 MiB: more than the memory budget 200 MiB (--memory-budget)"
            ),
            "{e}"
        );
        assert!(e.ends_with("; --memory-budget 320 MiB or more would hold it"), "{e}");
        assert!(refused(&["guest-memory", "--memory-budget", "200M"]).contains("guest-memory-reset:"));
        // A machine that cannot give that much: what it can give, and no --memory-budget.
        let small = MemInfo::with_available(300 << 20, 8 << 30);
        let e = refused_on(&["clear"], &small);
        assert!(
            e.ends_with("a budget of 320 MiB is more than this machine can give: 270 MiB (90% of that)"),
            "{e}"
        );
        assert!(!e.contains("--memory-budget 320"), "{e}");
        // Where some fit, the run goes on without the others.
        let s = suite_on(&["--quick", "--memory-budget", "200M"], &machine());
        assert!(!s.scenarios.is_empty() && !s.skipped.is_empty(), "{s:?}");
    }

    /// A 256 MiB container: the tightest cgroup limit leaves 250 MiB.
    fn container() -> MemInfo {
        let dir = std::path::PathBuf::from("/sys/fs/cgroup/ci");
        MemInfo {
            cgroup: Some(crate::cgroup::CgroupMemory { dir, limit: 256 << 20, room: 250 << 20 }),
            ..machine()
        }
    }

    #[test]
    fn the_suite_and_limits_run_by_default_in_a_256_mib_container() {
        let info = container();
        let budget = info.default_budget().unwrap();
        for args in [&[][..], &["--quick"], &["limits"], &["limits", "--quick"]] {
            let s = suite_on(args, &info);
            let probe = crate::limits::memory_needed(s.limit_buffer).resident;
            assert!(probe + crate::budget::OWN_MEMORY <= budget, "{args:?}: {}", s.limit_buffer);
            // `--threads auto` needs no memory of its own: it is chosen from the limits.
            assert_eq!(s.threads, crate::threads::ThreadPolicy::Auto, "{args:?}");
            let b = Budget::new(None, &info).unwrap();
            for sc in &s.scenarios {
                assert_eq!(b.check(sc.name(), &sc.memory_needed().unwrap(), &info), Ok(()), "{}", sc.name());
            }
            assert_eq!(s.scenarios.is_empty(), args.contains(&"limits"), "{args:?}");
        }
        // 128 MiB: not even the limit probe fits, and this machine cannot give what it needs.
        let tiny = MemInfo {
            cgroup: Some(crate::cgroup::CgroupMemory {
                dir: "/sys/fs/cgroup/ci".into(),
                limit: 128 << 20,
                room: 120 << 20,
            }),
            ..machine()
        };
        let e = refused_on(&["limits"], &tiny);
        assert!(e.contains("a budget of 128 MiB is more than this machine can give: 108 MiB"), "{e}");
    }

    /// The long flags `path` (subcommand names) takes, its own and the global ones.
    fn flags_of(path: &[&str]) -> Vec<String> {
        let mut cmd = command();
        cmd.build();
        let mut c = &cmd;
        for p in path {
            c = c.find_subcommand(p).unwrap_or_else(|| panic!("no subcommand {p}"));
        }
        c.get_arguments()
            .filter_map(|a| a.get_long())
            .map(|l| format!("--{l}"))
            .chain(["--help".into()])
            .collect()
    }

    /// The `--flag` words of `text`.
    fn suggested_flags(text: &str) -> Vec<String> {
        let mut v = Vec::new();
        for (i, _) in text.match_indices("--") {
            let rest = &text[i + 2..];
            let len = rest
                .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
                .unwrap_or(rest.len());
            if len > 0 && !text[..i].ends_with(|c: char| c.is_alphanumeric()) {
                v.push(format!("--{}", &rest[..len]));
            }
        }
        v
    }

    /// Every flag a refusal names is one the refused command takes: the advice can be followed.
    #[test]
    fn every_flag_a_message_suggests_is_taken_by_its_command() {
        let small = MemInfo::with_available(300 << 20, 8 << 30);
        let cases: &[(&[&str], &[&str], &MemInfo)] = &[
            (&[], &["--memory-budget", "64M"], &machine()),
            (&[], &["--memory-budget", "30G"], &machine()),
            (&[], &["--zone-device-size", "100G", "--memory-budget", "4G"], &machine()),
            (&[], &["--hugetlb-count", "18446744073709551615"], &machine()),
            (&[], &["--deferred-size", "2T"], &machine()),
            (&[], &[], &MemInfo::with_available(100 << 20, 1 << 30)),
            (&["all"], &["all", "--clear-size", "64G", "--memory-budget", "4G"], &machine()),
            (&["zone-device"], &["zone-device", "--size", "100G", "--memory-budget", "4G"], &machine()),
            (&["zone-device"], &["zone-device", "--size", "8E"], &machine()),
            (&["hugetlb"], &["hugetlb", "--count", "1099511627776"], &machine()),
            (&["hugetlb"], &["hugetlb", "--count", "64", "--memory-budget", "2G"], &machine()),
            (&["clear"], &["clear", "--memory-budget", "200M"], &machine()),
            (&["clear"], &["clear"], &small),
            (&["clear"], &["clear", "--alloc", "--size", "100G"], &machine()),
            (&["deferred"], &["deferred", "--size", "100T"], &machine()),
            (&["guest-memory"], &["guest-memory", "--memory-budget", "200M"], &machine()),
            (&["hotplug"], &["hotplug", "--size", "100M"], &machine()),
            (&["hotplug"], &["hotplug", "--size", "64G", "--memory-budget", "4G"], &machine()),
            (&["limits"], &["limits", "--memory-budget", "64M"], &machine()),
            (&["limits"], &["limits"], &MemInfo::with_available(150 << 20, 1 << 30)),
            (&["limits"], &["limits"], &container()),
            (&["sweep"], &["sweep", "--min-size", "1G", "--memory-budget", "512M"], &machine()),
            (&["sweep"], &["sweep", "--min-size", "100K"], &machine()),
            (&["sweep"], &["sweep", "--max-size", "1E"], &machine()),
        ];
        let mut seen = 0;
        for (path, args, info) in cases {
            let text = match parse_on(args, info) {
                Err(e) => e.to_string(),
                Ok(Invocation::Suite(s)) => {
                    s.skipped.iter().map(|k| k.reason.clone()).collect::<Vec<_>>().join("\n")
                }
                Ok(i) => panic!("{args:?}: {i:?}"),
            };
            let taken = flags_of(path);
            for flag in suggested_flags(&text) {
                assert!(taken.contains(&flag), "{args:?} suggests {flag}, which it does not take: {text}");
                seen += 1;
            }
        }
        assert!(seen > 20, "the messages name flags: {seen}");
        assert_eq!(suggested_flags("a --memory-budget 4 GiB, x--y, (--size)"), ["--memory-budget", "--size"]);
    }
}
