//! # memmap-bench
//!
//! The command-line program of the workspace: it reproduces the linux-mm experiments the
//! project started from, side by side and against the machine's own fill limit measured in the
//! same run, and it dumps and diffs memmaps. Run `memmap-bench --help`.
//!
//! | subcommand | what |
//! |---|---|
//! | `all` (default) | every scenario below, then one summary table |
//! | `zone-device` | `memmap_init_zone_device` for the nd_pmem (fsdax, 4 KiB) and dax_pmem (devdax, 2 MiB compound pages, vmemmap dedup) cases |
//! | `hugetlb` | boot-time 1 GiB pages: tail struct page init without HVO, and with HVO |
//! | `clear` | init_on_alloc: clearing 2 MiB pages page by page versus one `clear_pages` call |
//! | `limits` | the machine's fill limits (zero and non-zero data) and copy bandwidth |
//! | `dump`, `diff` | write a memmap to disk; compare two dumps |
//!
//! The program is data: [`scenarios::CATALOG`] lists every timing scenario (a
//! [`scenarios::Scenario`]: name, memory needed, run, report), and `all`, the memory pre-check,
//! `--json` and `--plot` iterate it. [`cli`] holds the command line; every size and memory need
//! is checked there, with checked arithmetic, before any work.
//!
//! Every timing scenario runs its strategies interleaved round by round in one process; the
//! first round runs on fresh memory ("first binding", page faults included), the later rounds
//! are "rebinds". Results are given in GB/s (10^9 bytes per second) of struct pages (or cleared
//! memory) written and as a fraction of the limit measured in the same run.
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
pub mod cli;
pub mod compare;
pub mod limits;
pub mod machine;
pub mod measure;
pub mod memory;
pub mod progress;
pub mod report;
pub mod scenarios;
pub mod size;
