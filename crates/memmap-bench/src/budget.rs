//! The memory budget of a timing run: `--memory-budget SIZE`, by default two thirds of the room
//! ([`MemInfo::room`]), at most 90% of it ([`MemInfo::usable`]). A scenario whose size was not
//! given is scaled down through its [`Knob`] to fit, or skipped ([`Skipped`]); a size the user
//! gave fits or the command is refused.

use std::fmt;

use crate::memory::{self, MemInfo, MemoryError, MemoryNeed};
use crate::size::Bytes;

/// What the bench itself keeps resident besides a scenario's storage, counted against the budget.
pub const OWN_MEMORY: u64 = 64 << 20;

/// Where the budget came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BudgetSource {
    /// `--memory-budget`.
    Flag,
    /// Two thirds of what is available: [`MemInfo::room_text`].
    Available(String),
    /// `/proc/meminfo` unreadable: the defaults run unscaled.
    Unknown,
}

/// The bytes a run may make resident at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    /// Bytes (`u64::MAX` when unknown).
    pub bytes: u64,
    /// Where it came from.
    pub source: BudgetSource,
    /// The largest budget this machine allows and what it is 90% of, for a refusal's advice.
    pub max: Option<(u64, String)>,
}

impl Budget {
    /// `flag` (`--memory-budget`, at most [`MemInfo::usable`]), else two thirds of
    /// [`MemInfo::room`], else unlimited.
    ///
    /// # Errors
    ///
    /// A flag above what the machine can give ([`MemInfo::usable`]).
    pub fn new(flag: Option<u64>, info: &MemInfo) -> Result<Budget, String> {
        let max = info.usable().map(|u| (u, info.room_text()));
        match (flag, info.usable()) {
            (Some(b), Some(usable)) if b > usable => {
                let (b, usable) = Bytes::distinct(b, usable);
                Err(format!(
                    "--memory-budget {b} is more than this machine can give: {usable} (90% of {})",
                    info.room_text()
                ))
            }
            (Some(b), _) => Ok(Budget { bytes: b, source: BudgetSource::Flag, max }),
            (None, Some(_)) => Ok(Budget {
                bytes: info.default_budget().unwrap_or(0),
                source: BudgetSource::Available(info.room_text()),
                max,
            }),
            (None, None) => Ok(Budget { bytes: u64::MAX, source: BudgetSource::Unknown, max }),
        }
    }

    /// Checks `need` of `who`, with the bench's own memory ([`OWN_MEMORY`]), against the budget,
    /// and `need` against the machine.
    ///
    /// # Errors
    ///
    /// [`MemoryError::Budget`], or the machine's limit it exceeds.
    pub fn check(&self, who: &str, need: &MemoryNeed, info: &MemInfo) -> Result<(), MemoryError> {
        if need.resident.saturating_add(OWN_MEMORY) > self.bytes {
            return Err(MemoryError::Budget {
                who: who.to_string(),
                need: need.resident,
                own: OWN_MEMORY,
                budget: self.bytes,
                source: self.source_text(),
            });
        }
        memory::check(who, need, info)
    }

    /// Where the budget came from, in parentheses.
    fn source_text(&self) -> String {
        match &self.source {
            BudgetSource::Flag => "(--memory-budget)".to_string(),
            BudgetSource::Available(a) => format!("(2/3 of {a}; --memory-budget sets it)"),
            BudgetSource::Unknown => "(unknown: no /proc/meminfo)".to_string(),
        }
    }

    /// What to do when a need of `budget_needed` bytes (the bench's own memory included) does not
    /// fit: `Ok`, the `--memory-budget` that would hold it; `Err`, what this machine allows at most.
    ///
    /// # Errors
    ///
    /// `budget_needed` is more than this machine can give a run (the text says so).
    pub fn advice(&self, budget_needed: u64) -> Result<String, String> {
        match &self.max {
            Some((max, room)) if budget_needed > *max => {
                let (needed, max) = Bytes::distinct(budget_needed, *max);
                // The default budget's text has just named the room.
                let of = if matches!(self.source, BudgetSource::Available(_)) { "that" } else { room };
                Err(format!("a budget of {needed} is more than this machine can give: {max} (90% of {of})"))
            }
            _ => Ok(format!("--memory-budget {} or more would hold it", Bytes(self.suggest(budget_needed)))),
        }
    }

    /// A `--memory-budget` of at least `budget_needed` to suggest, rounded up to whole MiB (so a
    /// value typed from the message does not fall short), at most what the machine allows.
    #[must_use]
    pub fn suggest(&self, budget_needed: u64) -> u64 {
        let mib = 1 << 20;
        let up = budget_needed.div_ceil(mib).saturating_mul(mib);
        self.max.as_ref().map_or(up, |(max, _)| up.min(*max)).max(budget_needed)
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            BudgetSource::Unknown => f.write_str("memory budget unknown (no /proc/meminfo): default sizes"),
            _ => write!(f, "memory budget {} {}", Bytes(self.bytes), self.source_text()),
        }
    }
}

/// What a knob counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KnobUnit {
    /// Bytes (shown as `16 GiB`).
    Bytes,
    /// Items, shown with this noun (`x 1 GiB pages`).
    Count(&'static str),
}

/// A scenario's one scalable parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Knob {
    /// Its value now.
    pub value: u64,
    /// Values are multiples of this.
    pub step: u64,
    /// The smallest value worth running (a multiple of `step`).
    pub min: u64,
    /// Given by the user: never scaled.
    pub fixed: bool,
    /// What it counts.
    pub unit: KnobUnit,
}

impl Knob {
    /// A size at `value`, in multiples of `step`, down to `min`; `fixed` when the user gave it.
    #[must_use]
    pub const fn bytes(value: u64, step: u64, min: u64, fixed: bool) -> Knob {
        Knob { value, step, min, fixed, unit: KnobUnit::Bytes }
    }

    /// `value` shown in its unit.
    #[must_use]
    pub fn show(&self, value: u64) -> String {
        match self.unit {
            KnobUnit::Bytes => Bytes(value).to_string(),
            KnobUnit::Count(noun) => format!("{value} {noun}"),
        }
    }
}

/// What fitting did to one scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fitted {
    /// Runs at its size.
    Unchanged,
    /// Scaled down from `from` to `to` (in the knob's unit, shown).
    Scaled {
        /// The default, shown.
        from: String,
        /// The size it runs at, shown.
        to: String,
    },
}

/// A scenario that is not run, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Its name.
    pub name: &'static str,
    /// Why, with the `--memory-budget` that would run it.
    pub reason: String,
    /// The memory budget that would run it at its smallest size, when the budget is what it
    /// exceeds (`None`: a limit of the machine, which no budget changes).
    pub budget_needed: Option<u64>,
}

impl Skipped {
    /// `name` left out because of `error` (a need as "it"), with `budget`'s advice.
    pub(crate) fn new(name: &'static str, what: &str, error: &MemoryError, budget: &Budget) -> Skipped {
        let budget_needed = match error {
            MemoryError::Budget { need, own, .. } => Some(need.saturating_add(*own)),
            _ => None,
        };
        let advice = budget_needed
            .map_or_else(String::new, |b| format!("; {}", budget.advice(b).unwrap_or_else(|e| e)));
        Skipped { name, reason: format!("{what}{error}{advice}"), budget_needed }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_the_flag_or_most_of_what_is_available() {
        let info = MemInfo::with_available(10 << 30, 16 << 30);
        assert_eq!(Budget::new(None, &info).unwrap().bytes, (10 << 30) / 3 * 2);
        assert_eq!(Budget::new(Some(4 << 30), &info).unwrap().source, BudgetSource::Flag);
        let e = Budget::new(Some(10 << 30), &info).unwrap_err();
        assert!(e.contains("more than this machine can give"), "{e}");
        let unknown = Budget::new(None, &MemInfo::default()).unwrap();
        assert_eq!((unknown.bytes, unknown.source), (u64::MAX, BudgetSource::Unknown));
        let b = Budget::new(Some(1 << 30), &info).unwrap();
        let e = b.check("x", &MemoryNeed::resident(2 << 30), &info).unwrap_err();
        assert_eq!(
            e.to_string(),
            "x needs 2 GiB of memory, 2.06 GiB with the bench's own 64 MiB: more than the memory budget 1 GiB \
             (--memory-budget)"
        );
        // The advice: the budget that would hold a need, or what the machine allows at most.
        assert_eq!(b.advice(2 << 30).unwrap(), "--memory-budget 2 GiB or more would hold it");
        // Rounded up, so that what a person types from the message suffices.
        assert_eq!(
            b.advice((128 << 20) + (64 << 10)).unwrap(),
            "--memory-budget 129 MiB or more would hold it"
        );
        let usable = info.usable().unwrap();
        assert_eq!(usable, 9 << 30);
        assert_eq!(
            b.advice(usable + 1).unwrap_err(),
            "a budget of 9 GiB + 1 B is more than this machine can give: 9 GiB (90% of MemAvailable 10 GiB)"
        );
        // A flag one byte above what the machine can give reads as more than it.
        let e = Budget::new(Some(usable + 1), &info).unwrap_err();
        assert!(
            e.starts_with("--memory-budget 9 GiB + 1 B is more than this machine can give: 9 GiB"),
            "{e}"
        );
        // The bench's own memory counts too.
        assert!(b.check("x", &MemoryNeed::resident((1 << 30) - OWN_MEMORY), &info).is_ok());
        assert!(b.check("x", &MemoryNeed::resident((1 << 30) - OWN_MEMORY + 1), &info).is_err());
    }
}
