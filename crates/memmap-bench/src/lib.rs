//! # memmap-bench
//!
//! The command-line program of the workspace: it reproduces the linux-mm memmap-init
//! experiments against the machine's own fill limit measured in the same run, and it dumps and
//! diffs memmaps (`memmap-bench --help`; `docs/bench-cli.md`, `METHODOLOGY.md`).
//!
//! The program is data: [`scenarios::CATALOG`] lists every timing scenario, and the subcommands,
//! `all`, the memory budget ([`budget`]), `--json` and `--plot` are built from it. [`compare`]
//! times an initializer of yours the same way. The modules form layers without a cycle
//! (`tests/module_graph.rs`).
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod budget;
pub mod cgroup;
pub mod cli;
pub mod compare;
pub mod guest_layout;
pub mod limits;
pub mod machine;
pub mod measure;
pub mod memory;
pub mod progress;
pub mod report;
pub mod scenarios;
pub mod size;
pub mod sweep;
pub mod threads;
pub mod vmm_prefault;
