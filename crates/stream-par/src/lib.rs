#![doc = include_str!("../README.md")]
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(any(test, feature = "std"))]
extern crate std;

mod padata;
mod policy;

/// Not part of the API: the old path of two constants, kept only while
/// `memmap_core::parallel` re-exports them from here. Delete it with that re-export.
#[doc(hidden)]
pub mod threads {
    pub use crate::policy::{AUTO_MIN_BYTES, AUTO_MIN_GAIN};
}

pub use padata::{PadataChunks, PadataError, PadataJob, PadataPlan};
#[cfg(feature = "std")]
pub use padata::{PadataReport, padata_do_multithreaded, padata_do_multithreaded_together};
#[cfg(feature = "std")]
#[doc(hidden)]
pub use policy::auto_threads_steps;
pub use policy::{AUTO_MIN_BYTES, AUTO_MIN_GAIN, Threads};
#[cfg(feature = "std")]
pub use policy::{auto_threads, available_cpus};
