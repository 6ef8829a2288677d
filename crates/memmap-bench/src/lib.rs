//! # memmap-bench
//!
//! The command-line program of the workspace: it reproduces the linux-mm memmap-init
//! experiments side by side, against the machine's own fill limit measured in the same run,
//! and it dumps and diffs memmaps. `cargo run --release -p memmap-bench` runs the whole suite,
//! sized to the memory it may use; `memmap-bench --help` lists every subcommand and flag.
//!
//! The program is data: [`scenarios::CATALOG`] lists every timing scenario, and the timing
//! subcommands, `all`, the memory budget ([`budget`]), `--json` and `--plot` are built from it.
//! [`cli`] checks every size before any work; `--threads` is decided once per run
//! ([`threads`]). Each scenario runs its strategies interleaved round by round on storage
//! faulted in beforehand: round 0 is the first initialization with cold caches, the figures are
//! the medians of the later rounds, in GB/s and as a fraction of the limit ([`limits`]).
//! [`compare`] times an initializer of yours the same way (`examples/custom_strategy.rs`).
//! The modules form layers without a cycle (`tests/module_graph.rs`).
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
