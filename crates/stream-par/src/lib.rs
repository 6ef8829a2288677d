#![doc = include_str!("../README.md")]
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
