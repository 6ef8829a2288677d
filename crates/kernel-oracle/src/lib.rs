//! # kernel-oracle
//!
//! Real Linux as the oracle for the memmap model. The tool fetches Debian kernel packages by
//! name through a private apt configuration (no installation), builds a busybox initramfs with
//! the nvdimm/dax modules and `ndctl`, boots the kernel under QEMU (TCG), sets up a memory
//! configuration in the guest (pmem namespaces in fsdax/devdax mode with either map, hugetlb
//! pages with and without HVO, NUMA), learns the pfn ranges from the guest, and reads the
//! guest's real `struct page` bytes through QMP `memsave` of the vmemmap.
//!
//! The guest-facing part ([`run`]) writes raw dumps plus a [`facts::Facts`] file per
//! configuration; the host-facing part ([`compare`]) normalizes pointers by class and compares
//! the bytes with `memmap-bench dump` of the same pfns ([`model`]); [`golden`] writes and
//! checks the small compressed extracts committed under `golden/`.
#![deny(unsafe_code)]

pub mod apt;
pub mod boot;
pub mod boot_golden;
pub mod boot_model;
pub mod cmd;
pub mod compare;
pub mod facts;
pub mod files;
pub mod golden;
pub mod guest;
pub mod initramfs;
pub mod kbuild;
pub mod kernel;
pub mod model;
pub mod qemu;
pub mod run;
pub mod scenario;
pub mod vm;
