//! # stream-par: the parallel runtime of the memmap-stream crates
//!
//! Two things, shared by every crate of the family that runs on several threads
//! (`memmap-core`'s ZONE_DEVICE and deferred init, `hugetlb-init`'s gather, `stream-vm-memory`'s
//! guest-memory zeroing) without tying them to the struct-page model:
//!
//! * [`Threads`], the thread-count policy: one thread, a fixed count, one per work item, or
//!   [`Threads::Auto`], the count where this machine's streaming-store bandwidth stops growing
//!   by [`AUTO_MIN_GAIN`] a step (measured once per process, see [`auto_threads`]; the
//!   workspace's one auto-thread rule).
//! * The kernel's `padata_do_multithreaded()` (kernel/padata.c): [`PadataJob`] says how a job is
//!   split ([`PadataJob::plan`], [`PadataJob::chunks`], pure functions, also without `std`), and
//!   [`padata_do_multithreaded`] runs it on scoped threads, the caller participating.
//!
//! ## What to call first
//!
//! A job over `[start, start + size)`, cut at multiples of `align` into chunks of at least
//! `min_chunk` items, on up to `max_threads` threads (the caller one of them):
//!
//! ```
//! use stream_par::{PadataJob, Threads, padata_do_multithreaded};
//! use std::sync::atomic::{AtomicU64, Ordering};
//!
//! let sum = AtomicU64::new(0);
//! let max_threads = Threads::Fixed(4).count(0);
//! let job = PadataJob { start: 0, size: 1000, align: 10, min_chunk: 100, max_threads };
//! let report = padata_do_multithreaded(&job, |start, end| {
//!     sum.fetch_add((start..end).sum(), Ordering::Relaxed);
//! })?;
//! assert_eq!(sum.into_inner(), (0..1000).sum());
//! assert_eq!(report.plan.map(|p| p.nworks), Some(4));
//! # Ok::<(), stream_par::PadataError>(())
//! ```
//!
//! ## Crate features
//!
//! * `std` (default): [`padata_do_multithreaded`], [`available_cpus`], [`auto_threads`] (its
//!   measurement streams with `stream-hal`). Without it the crate is `no_std` without `alloc`
//!   and without dependencies: the split and the policy stay, and every policy counts one
//!   thread.
//!
//! ## MSRV
//!
//! Rust 1.85 (edition 2024), the workspace's `rust-version`.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(any(test, feature = "std"))]
extern crate std;

mod padata;
/// Not part of the API: public only while `memmap_core::parallel` still re-exports
/// `threads::{AUTO_MIN_BYTES, AUTO_MIN_GAIN}` and `auto_threads_steps`; private after.
#[doc(hidden)]
pub mod threads;

pub use padata::{PadataChunks, PadataError, PadataJob, PadataPlan};
#[cfg(feature = "std")]
pub use padata::{PadataReport, padata_do_multithreaded, padata_do_multithreaded_together};
#[cfg(feature = "std")]
#[doc(hidden)]
pub use threads::auto_threads_steps;
pub use threads::{AUTO_MIN_BYTES, AUTO_MIN_GAIN, Threads};
#[cfg(feature = "std")]
pub use threads::{auto_threads, available_cpus};
