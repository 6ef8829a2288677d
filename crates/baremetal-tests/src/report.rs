//! Check bookkeeping: one line per check on the console, a summary, and the exit status.

use core::fmt;

/// Counts passed and failed checks and prints a line for each.
pub(crate) struct Report {
    passed: u32,
    failed: u32,
    /// Printed before every check name (`[pass 1] `), empty by default.
    prefix: &'static str,
    /// The architecture's clock in nanoseconds, where it has one of known frequency.
    now_ns: fn() -> Option<u64>,
}

/// How the kernel ends the QEMU run.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Every check passed.
    Pass,
    /// A check failed, the kernel panicked or took an unexpected exception.
    Fail,
}

impl Report {
    /// An empty report that times each check with `now_ns`.
    pub(crate) const fn new(now_ns: fn() -> Option<u64>) -> Self {
        Report { passed: 0, failed: 0, prefix: "", now_ns }
    }

    /// Sets the text printed before every following check name (aarch64 runs the checks twice).
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
    pub(crate) fn set_prefix(&mut self, prefix: &'static str) {
        self.prefix = prefix;
    }

    /// Runs one check and prints `check NAME: ok (DETAIL) [T ms]` or `check NAME: FAIL: ERROR`
    /// (the time where the architecture has a clock of known frequency).
    pub(crate) fn run<D: fmt::Display, E: fmt::Display>(
        &mut self,
        name: fmt::Arguments<'_>,
        check: impl FnOnce() -> Result<D, E>,
    ) {
        let start = (self.now_ns)();
        let result = check();
        let elapsed = match (start, (self.now_ns)()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        match result {
            Ok(detail) => {
                self.passed += 1;
                print!("check {}{name}: ok ({detail})", self.prefix);
                if let Some(ns) = elapsed {
                    print!(" [{}.{:03} ms]", ns / 1_000_000, ns / 1_000 % 1_000);
                }
                println!();
            }
            Err(err) => {
                self.failed += 1;
                println!("check {}{name}: FAIL: {err}", self.prefix);
            }
        }
    }

    /// Counts a failed expectation about the machine itself (a wrong backend, a `DCZID_EL0`
    /// that did not change) and prints it.
    pub(crate) fn fail(&mut self, what: fmt::Arguments<'_>) {
        self.failed += 1;
        println!("check {}{what}: FAIL", self.prefix);
    }

    /// Counts a met expectation about the machine itself and prints it.
    pub(crate) fn pass(&mut self, what: fmt::Arguments<'_>) {
        self.passed += 1;
        println!("check {}{what}: ok", self.prefix);
    }

    /// Prints the summary line (`summary: N passed, M failed`) and the result: a pass when no
    /// check failed and at least one ran.
    pub(crate) fn finish(&self) -> Status {
        println!("summary: {} passed, {} failed", self.passed, self.failed);
        if self.failed == 0 && self.passed > 0 {
            println!("result: PASS");
            Status::Pass
        } else {
            println!("result: FAIL");
            Status::Fail
        }
    }
}
