//! A record type without `Record`: `fill` must say how to implement it.
use core::mem::MaybeUninit;

#[derive(Clone, Copy)]
#[repr(C)]
struct Frame {
    paddr: u64,
    flags: u64,
}

fn main() {
    let mut slots = [MaybeUninit::<Frame>::uninit(); 4];
    let frames = stream_hal::fill(&mut slots, &Frame { paddr: 0, flags: 1 });
    assert_eq!(frames[3].flags, 1);
}
