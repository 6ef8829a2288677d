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
//! ## Dump format
//!
//! `memmap-bench dump zone-device ... --out DIR` writes two files:
//!
//! * `DIR/memmap.bin`: the raw bytes of the struct pages of PFNs `[start_pfn, start_pfn +
//!   nr_pages)` in PFN order, exactly as they sit in memory (`struct_page_size` bytes each, words
//!   in the byte order named by `endianness`). Field offsets are those of
//!   [`memmap_core::model::page::offsets`]: `flags` @0, `lru.next`/`compound_head`/`pgmap` @8,
//!   `lru.prev`/`zone_device_data` @16, `mapping` @24, `index` @32, `private` @40,
//!   `_mapcount`/`page_type` @48 (4 bytes), `_refcount` @52 (4 bytes), `memcg_data` @56,
//!   `virtual` @64 (72-byte layout only).
//! * `DIR/meta.json`: an object with at least
//!   * `format` (1), `kind` (`"zone-device"` or `"hugetlb"`), `config` (preset name),
//!     `endianness`;
//!   * `start_pfn`, `nr_pages`, `struct_page_size` (64 or 72);
//!   * `page_addr_base`: the modelled kernel address of the struct page of `start_pfn` at init
//!     time (`vmemmap_start + start_pfn * struct_page_size`), so that pointer-valued fields can
//!     be checked: a tail's `compound_head` is `page_addr_base + (head - start_pfn) *
//!     struct_page_size + 1`; also `page_addr_base_hex`;
//!   * `zone` (`ZONE_DEVICE`'s index), `nid`;
//!   * `flags_layout`: `{zones_pgshift, zones_width, nodes_pgshift, nodes_width,
//!     sections_pgshift, sections_width, last_cpupid_pgshift, last_cpupid_width}`;
//!   * `pg_bits`: `{reserved, head, hugetlb_page_type}` (flag bit numbers, and the `page_type`
//!     word of a hugetlb folio);
//!   * `movable_pageblock_pfns`: the first PFN of every pageblock overlapping the range whose
//!     migrate type is MOVABLE;
//!   * `resched_pfns`: number of `cond_resched` hook calls; `page_ref_events`: number of
//!     `page_ref_set` tracepoint events;
//!   * `strategy` (the one actually used), `strategy_requested`, `strategy_reason`, `backend`
//!     (the stream-hal backend's description) and `backend_name` (its short name);
//!   * for `zone-device`: `pgmap_addr` (what `folio->pgmap` holds), `memory_type`,
//!     `vmemmap_shift`, `altmap` (`{base_pfn, reserve, free}` or `null`),
//!     `compound_nr_pages`, `init_start_pfn` (first PFN initialized, after the altmap),
//!     `pages_initialized`, `pr_debug` (the kernel's debug line).
//!
//! `dump` refuses to overwrite an existing dump unless `--force`, never writes through a
//! symbolic link, and writes both files under temporary names before giving them their names
//! ([`dump::output`]). The reader checks `meta.json` (size, JSON, `format`, `kind`,
//! `endianness`, `struct_page_size`) and `memmap.bin`'s length before reading any data
//! ([`dump::reader`]).
//!
//! `memmap-bench diff A B` compares two dumps and prints the first differing PFN and field;
//! its exit status is 0 when they are identical, 1 when they differ, 2 on bad input, including
//! two dumps that differ in `format`, `kind`, `endianness`, `config`, `struct_page_size`,
//! `start_pfn` or `nr_pages` (they cannot be compared).
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod cli;
pub mod diff;
pub mod dump;
pub mod limits;
pub mod machine;
pub mod measure;
pub mod memory;
pub mod progress;
pub mod report;
pub mod scenarios;
pub mod size;
