//! # memmap-bench
//!
//! The command-line program of the workspace: it reproduces the linux-mm memmap-init
//! experiments side by side, against the machine's own fill limit measured in the same run,
//! and it dumps and diffs memmaps. `cargo run --release -p memmap-bench` runs the whole suite,
//! sized to the memory it may use; `memmap-bench --help` lists every flag.
//!
//! | subcommand | what |
//! |---|---|
//! | `all` (default) | every scenario below, then a summary |
//! | `zone-device` | `memmap_init_zone_device` for the nd_pmem (fsdax, 4 KiB) and dax_pmem (devdax, 2 MiB compound pages, vmemmap dedup) cases |
//! | `hugetlb` | boot-time 1 GiB pages: tail struct page init without HVO, and the gather with HVO |
//! | `clear` | init_on_alloc: clearing 2 MiB pages page by page versus one `clear_pages` call (`--alloc`: through the buddy allocator) |
//! | `deferred` | boot-time init of a zone: eager, deferred (`deferred_init_memmap`), on demand; the allocator's check on demand |
//! | `hotplug` | `online_pages()` of a hot-added range, memory block by memory block |
//! | `guest-memory` | populate and reset guest memory for VMMs (`stream-vm-memory`) |
//! | `sweep` | cost against size: ZONE_DEVICE init and the eager node boot, cold and warm |
//! | `limits` | the machine's fill limits (zero and non-zero data) and copy bandwidth |
//! | `dump`, `diff` | write a memmap to disk; compare two dumps |
//!
//! The program is data: [`scenarios::CATALOG`] lists every timing scenario (a
//! [`scenarios::Scenario`]: name, memory needed, the size the suite may scale, run, report;
//! its row names its subcommand, a [`scenarios::CommandSpec`]), and the timing subcommands,
//! their help, `all`, the memory budget, `--json` and `--plot` are built from it. [`cli`] holds
//! the command line; every size and memory need is checked there, with checked arithmetic,
//! before any work, and the sizes not given are fitted to the memory budget ([`budget`]).
//! `--threads` is decided once per run ([`threads`]) and handed to every scenario. A scenario
//! hands the [`report`] everything it shows of it. The modules form layers without a cycle
//! (`tests/module_graph.rs`): size, memory, measure, limits, budget, threads; the scenarios;
//! the report and the sweep; the command line.
//!
//! Every timing scenario runs its strategies interleaved round by round in one process. Each
//! strategy's storage is mapped and faulted in before the rounds (the fault time is reported
//! apart), so round 0 ("first", the first binding) is the first initialization of resident
//! memory with cold caches, the same for every strategy; the later rounds are "rebinds" and
//! the figures are their medians. Results are given in GB/s (10^9 bytes per second) of struct
//! pages (or cleared memory) written and as a fraction of the limit measured in the same run,
//! next to each round on the strategy's own storage where the scenario pairs them.
//!
//! ## Your own strategy
//!
//! [`compare`] times an initializer of yours against slow, template, streaming and the limit on
//! the same memory, with the same methodology (`examples/custom_strategy.rs`).
//!
//! ## Dumps
//!
//! `memmap-bench dump zone-device|hugetlb ... --out DIR` runs the model and writes
//! `DIR/memmap.bin` and `DIR/meta.json`; `memmap-bench diff A B` compares two dumps. The format,
//! the safe writer, the bounded reader and the diff are the `memmap-dump` library, which
//! `kernel-oracle` uses too.
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
