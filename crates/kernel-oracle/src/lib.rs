//! # kernel-oracle
//!
//! Real Linux as the oracle for the memmap model, in four stages:
//!
//! * what we boot ([`kernel`]): Debian kernel packages fetched by name through a private apt
//!   configuration (no installation) or a kernel a user built, and a busybox initramfs with the
//!   nvdimm/dax modules and `ndctl`;
//! * what we do in the guest ([`guest`]): a memory configuration ([`guest::scenario`]: pmem
//!   namespaces in fsdax/devdax mode with either map, hugetlb pages with and without HVO,
//!   hot-added memory, NUMA, a booted node) under QEMU (TCG), the guest stopped to be read;
//! * the facts we read ([`facts`]): the pfn ranges the guest reports and its real
//!   `struct page` bytes read through QMP `memsave` of the vmemmap, written as raw dumps and a
//!   [`facts::Facts`] file per configuration;
//! * the comparison ([`compare`]): pointers normalized by class, the bytes compared with the
//!   memmap-core model of the same pfns ([`compare::model`]) on the model's configuration of the
//!   kernel ([`facts::model_config`]); [`compare::golden`] writes and checks the small
//!   compressed extracts committed under `golden/`.
#![deny(unsafe_code)]

pub mod cmd;
pub mod compare;
pub mod facts;
pub mod files;
pub mod guest;
pub mod kernel;
