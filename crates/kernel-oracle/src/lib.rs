//! # kernel-oracle
//!
//! Real Linux as the oracle for the memmap model, in four stages (`docs/kernel-oracle.md`):
//!
//! * what we boot ([`kernel`]): Debian kernel packages or a kernel a user built, and a busybox
//!   initramfs;
//! * what we do in the guest ([`guest`]): a memory configuration ([`guest::scenario`]) under QEMU,
//!   the guest stopped to be read;
//! * the facts we read ([`facts`]): pfn ranges and real `struct page` bytes, written as raw dumps
//!   and a [`facts::Facts`] file per configuration;
//! * the comparison ([`compare`]): the bytes against the memmap-core model of the same pfns
//!   ([`compare::model`]); [`compare::golden`] keeps the small extracts under `golden/`.
#![deny(unsafe_code)]

pub mod cmd;
pub mod compare;
pub mod facts;
pub mod files;
pub mod guest;
pub mod kernel;
