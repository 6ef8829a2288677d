//! The tests that reach inside the crate (the kernel functions behind `boot()`, the memfd
//! vmemmap's counters), with the integration tests' harness.

#[path = "../../tests/common/mod.rs"]
mod common;

mod gigantic_pages;
mod hostile_input;
mod hvo_rules;
#[cfg(all(feature = "std", target_os = "linux"))]
mod real_hvo;
