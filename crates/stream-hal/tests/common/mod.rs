//! Helpers shared by the integration tests: guarded, aligned buffers.
#![allow(dead_code, unreachable_pub)]

/// Bytes checked on each side of every destination.
pub const GUARD: usize = 64;
/// The guard pattern.
pub const GUARD_BYTE: u8 = 0xA5;

/// A 64-byte-aligned byte buffer.
pub struct Aligned {
    words: Vec<[u64; 8]>,
    len: usize,
}

impl Aligned {
    pub fn new(len: usize, fill: u8) -> Self {
        let mut a = Aligned { words: vec![[0; 8]; len.div_ceil(64) + 1], len };
        a.bytes_mut().fill(fill);
        a
    }
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the Vec owns at least `len` initialized bytes (u64 words reinterpreted).
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<u8>(), self.len) }
    }
}

/// A deterministic non-zero byte pattern (never equal to the guard byte).
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| {
            let b = (i as u8).wrapping_mul(31).wrapping_add(seed) | 1;
            if b == GUARD_BYTE { 0x11 } else { b }
        })
        .collect()
}

/// Copies `src[src_off..src_off+len]` to offset `dst_off` of a fresh guarded, 64-aligned
/// destination with `copy` and checks the copy and both guards. `scratch` is reused across calls.
pub fn check_copy(
    copy: unsafe fn(*mut u8, *const u8, usize),
    scratch: &mut Aligned,
    src: &Aligned,
    src_off: usize,
    dst_off: usize,
    len: usize,
) {
    let start = GUARD + dst_off;
    let region = &mut scratch.bytes_mut()[..start + len + GUARD];
    region.fill(GUARD_BYTE);
    // SAFETY: `start + len` is inside `scratch`, `src_off + len` inside `src`; distinct buffers.
    unsafe { copy(region.as_mut_ptr().add(start), src.bytes().as_ptr().add(src_off), len) };
    stream_hal::drain();
    let region = &scratch.bytes()[..start + len + GUARD];
    assert!(
        region[..start].iter().all(|&b| b == GUARD_BYTE),
        "guard before destination changed (src_off {src_off}, dst_off {dst_off}, len {len})"
    );
    assert!(
        region[start..start + len] == src.bytes()[src_off..src_off + len],
        "copy differs from source (src_off {src_off}, dst_off {dst_off}, len {len})"
    );
    assert!(
        region[start + len..].iter().all(|&b| b == GUARD_BYTE),
        "guard after destination changed (src_off {src_off}, dst_off {dst_off}, len {len})"
    );
}
