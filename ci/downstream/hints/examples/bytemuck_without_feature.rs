//! `bytemuck_record!` with stream-hal's `bytemuck` feature off: the error must name the feature.
#[derive(Clone, Copy)]
#[repr(C)]
struct Frame {
    paddr: u64,
    flags: u64,
}
stream_hal::bytemuck_record!(Frame);

fn main() {}
