#![doc = include_str!("../README.md")]
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(any(test, feature = "std"))]
extern crate std;

mod padata;
mod policy;

pub use padata::{PadataChunks, PadataError, PadataJob, PadataPlan};
#[cfg(feature = "std")]
pub use padata::{PadataReport, padata_do_multithreaded, padata_do_multithreaded_together};
#[cfg(feature = "std")]
pub use policy::available_cpus;
pub use policy::{AUTO_MIN_BYTES, Threads};
