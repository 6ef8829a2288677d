//! What the tests of this crate share (and kernel-oracle's `readers_peak` includes `peak`).

pub(crate) mod peak;
