//! What we do in the guest: the memory configurations ([`scenario`]) and what the guest runs for them ([`script`]), the QEMU command line and
//! device tree that boot them ([`vm`]), the QEMU process and its QMP socket ([`qemu`]), and one
//! configuration run from boot to its dumped facts ([`run`]), with the provider configurations'
//! binds ([`provider`]).

pub mod provider;
pub mod qemu;
pub mod run;
pub mod scenario;
pub mod script;
pub mod vm;
