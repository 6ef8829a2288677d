//! Where [`set_cache_info`](super::set_cache_info) and detection keep a [`CacheInfo`]: a
//! sequence lock over atomic words, which a `no_std` crate can share between CPUs without a
//! lock a reader would wait for.

use core::sync::atomic::{AtomicU32, Ordering, fence};

use super::{CacheInfo, CacheSource, MAX_CACHE_LEVELS, NoCacheInfo};

/// Words of an encoded [`CacheInfo`]: the line size, each level's size as two words, the
/// sharers and the source.
const WORDS: usize = 3 + 2 * MAX_CACHE_LEVELS;

/// How often a reader retries a slot that a writer is changing before it gives up on it.
const READ_TRIES: usize = 64;

impl CacheSource {
    pub(super) const fn encode(self) -> u32 {
        match self {
            CacheSource::CpuidLeaf4 => 1,
            CacheSource::CpuidLeaf8000001D => 2,
            CacheSource::CpuidLeaf80000006 => 3,
            CacheSource::Sysfs => 4,
            CacheSource::Caller => 5,
            CacheSource::Unknown(NoCacheInfo::NoCpuid) => 16,
            CacheSource::Unknown(NoCacheInfo::NeedsStd) => 17,
            CacheSource::Unknown(NoCacheInfo::NoSource) => 18,
            CacheSource::Unknown(NoCacheInfo::NotReported) => 19,
        }
    }

    pub(super) const fn decode(code: u32) -> CacheSource {
        match code {
            1 => CacheSource::CpuidLeaf4,
            2 => CacheSource::CpuidLeaf8000001D,
            3 => CacheSource::CpuidLeaf80000006,
            4 => CacheSource::Sysfs,
            5 => CacheSource::Caller,
            16 => CacheSource::Unknown(NoCacheInfo::NoCpuid),
            17 => CacheSource::Unknown(NoCacheInfo::NeedsStd),
            18 => CacheSource::Unknown(NoCacheInfo::NoSource),
            _ => CacheSource::Unknown(NoCacheInfo::NotReported),
        }
    }
}

impl CacheInfo {
    pub(super) const fn encode(&self) -> [u32; WORDS] {
        let mut w = [0; WORDS];
        w[0] = self.line_size;
        let mut i = 0;
        while i < MAX_CACHE_LEVELS {
            w[1 + 2 * i] = self.sizes[i] as u32;
            w[2 + 2 * i] = (self.sizes[i] >> 32) as u32;
            i += 1;
        }
        w[WORDS - 2] = self.shared_by;
        w[WORDS - 1] = self.source.encode();
        w
    }

    pub(super) const fn decode(w: [u32; WORDS]) -> CacheInfo {
        let mut sizes = [0; MAX_CACHE_LEVELS];
        let mut i = 0;
        while i < MAX_CACHE_LEVELS {
            sizes[i] = w[1 + 2 * i] as u64 | (w[2 + 2 * i] as u64) << 32;
            i += 1;
        }
        CacheInfo {
            line_size: w[0],
            sizes,
            shared_by: w[WORDS - 2],
            source: CacheSource::decode(w[WORDS - 1]),
        }
    }
}

/// A [`CacheInfo`] shared between threads: a sequence lock over atomic words, so that a reader
/// never sees half of one value and half of another, and never waits for a writer (it gives
/// up after [`READ_TRIES`] and the caller falls back to another answer). `seq` is 0 until the
/// first write, odd while a write is in progress.
pub(super) struct Slot {
    seq: AtomicU32,
    words: [AtomicU32; WORDS],
}

impl Slot {
    pub(super) const fn new() -> Slot {
        Slot { seq: AtomicU32::new(0), words: [const { AtomicU32::new(0) }; WORDS] }
    }

    /// The value last written, or `None` if nothing was written yet or a write was in
    /// progress at every try.
    pub(super) fn read(&self) -> Option<CacheInfo> {
        for _ in 0..READ_TRIES {
            // Acquire pairs with the Release store that ends a write: the words it wrote are
            // visible to the loads below.
            let before = self.seq.load(Ordering::Acquire);
            if before == 0 {
                return None;
            }
            if before & 1 == 0 {
                let mut w = [0; WORDS];
                for (out, word) in w.iter_mut().zip(&self.words) {
                    *out = word.load(Ordering::Relaxed);
                }
                // Acquire fence: the word loads above happen before the second load of `seq`,
                // so a write that changed any of them has changed `seq` by then (it pairs with
                // the writer's Release fence after it made `seq` odd).
                fence(Ordering::Acquire);
                if self.seq.load(Ordering::Relaxed) == before {
                    return Some(CacheInfo::decode(w));
                }
            }
            core::hint::spin_loop();
        }
        None
    }

    /// Stores `words` once `seq` was moved from `from` (even) to `from + 1` by this thread.
    fn publish(&self, from: u32, words: [u32; WORDS]) {
        // Release fence: the odd `seq` is visible before any of the word stores below, so a
        // reader that loads one of them sees the write in progress (pairs with its Acquire
        // fence).
        fence(Ordering::Release);
        for (word, value) in self.words.iter().zip(words) {
            word.store(value, Ordering::Relaxed);
        }
        let done = from.wrapping_add(2);
        // Release: pairs with the readers' Acquire load of `seq` (the words are visible with
        // it). Never back to 0, which means "never written".
        self.seq.store(if done == 0 { 2 } else { done }, Ordering::Release);
    }

    /// Writes `info` if nothing was ever written; returns whether it did.
    pub(super) fn write_once(&self, info: &CacheInfo) -> bool {
        // Acquire: pairs with the Release store of another writer (only one write can start
        // from 0, so there is none before this one; kept for symmetry with `write`).
        if self.seq.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            return false;
        }
        self.publish(0, info.encode());
        true
    }

    /// Writes `info`, replacing any earlier value; waits for a write of another thread that is
    /// in progress.
    pub(super) fn write(&self, info: &CacheInfo) {
        let words = info.encode();
        let mut seen = self.seq.load(Ordering::Relaxed);
        loop {
            if seen & 1 == 1 {
                core::hint::spin_loop();
                seen = self.seq.load(Ordering::Relaxed);
                continue;
            }
            // Acquire: pairs with the Release store that ended the previous write, so this
            // write's stores come after that one's.
            match self.seq.compare_exchange_weak(seen, seen | 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return self.publish(seen, words),
                Err(now) => seen = now,
            }
        }
    }
}
