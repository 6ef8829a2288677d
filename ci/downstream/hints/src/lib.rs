//! Empty: the mistakes are the examples (and the features that name removed ones).
#![no_std]
