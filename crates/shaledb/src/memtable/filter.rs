//! A bloom filter over the user keys of one memtable's point entries, so a
//! get of a key the memtable does not hold costs one cache line instead of
//! a skiplist walk (docs/architecture.md, "The memtable filter").
//!
//! Cache-line blocked: a key's hash picks one 64-byte line (eight
//! `AtomicU64`) from its low 32 bits, and [`PROBES`] bits inside it from its
//! high 32 bits. Writers set bits with Relaxed `fetch_or`; the memtable
//! sets them before it links the entry with a Release CAS, which is what
//! makes a negative answer safe (see the docs for the argument).
//!
//! Worked example: with 2 lines, a hash `0x0123_4567_8000_0000` has low half
//! `0x8000_0000`, so line `(0x8000_0000 * 2) >> 32 = 1`; its first bit is the
//! top 9 bits of the high half, `0x0123_4567 >> 23 = 2`, i.e. bit 2 of the
//! line's first word.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::extent::filter::filter_hash;

/// Bits set per key. Four bits in one line: with 16 bits per key (a 64 MiB
/// buffer of ~250-byte entries) about 0.2 % false positives.
pub const PROBES: u32 = 4;
const WORDS_PER_LINE: usize = 8;
/// Smallest and largest filter, in bytes.
const MIN_BYTES: usize = 4 << 10;
const MAX_BYTES: usize = 64 << 20;

/// The filter of one memtable; `Send + Sync`.
pub struct MemFilter {
    words: Box<[AtomicU64]>,
    /// Number of 64-byte lines (a power of two, >= 1).
    lines: u64,
}

impl MemFilter {
    /// A filter for a memtable of up to `write_buffer_size` bytes:
    /// 1/64 of it, rounded up to a power of two and clamped to
    /// 4 KiB .. 64 MiB.
    pub fn for_buffer(write_buffer_size: usize) -> MemFilter {
        let bytes = (write_buffer_size / 64)
            .clamp(MIN_BYTES, MAX_BYTES)
            .next_power_of_two();
        let words = bytes / 8;
        MemFilter {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
            lines: u64::try_from(words / WORDS_PER_LINE).unwrap_or(1),
        }
    }

    /// Size of the filter in bytes.
    #[cfg(test)]
    fn size_bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// The first word of `h`'s line and the probe seed.
    #[inline]
    fn locate(&self, h: u64) -> (usize, u32) {
        // `lines` fits in 32 bits (64 MiB / 64 B = 2^20), so the product
        // fits in 64 and the line index is below `lines`.
        let line = ((h & 0xffff_ffff) * self.lines) >> 32;
        let first = usize::try_from(line).unwrap_or(0) * WORDS_PER_LINE;
        (first, (h >> 32) as u32)
    }

    /// Marks `user_key` as present. Callers do this before the entry is
    /// published (see the module docs).
    #[inline]
    pub fn add(&self, user_key: &[u8]) {
        let (first, mut g) = self.locate(filter_hash(user_key));
        for _ in 0..PROBES {
            let bit = (g >> 23) as usize; // 0..512
            if let Some(w) = self.words.get(first + bit / 64) {
                w.fetch_or(1 << (bit % 64), Ordering::Relaxed);
            }
            g = g.wrapping_mul(0x9e37_79b9);
        }
    }

    /// False only if no entry of `user_key` was added before the caller
    /// became ordered after it.
    #[inline]
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        let (first, mut g) = self.locate(filter_hash(user_key));
        for _ in 0..PROBES {
            let bit = (g >> 23) as usize;
            match self.words.get(first + bit / 64) {
                Some(w) if w.load(Ordering::Relaxed) & (1 << (bit % 64)) != 0 => {}
                Some(_) => return false,
                None => return true,
            }
            g = g.wrapping_mul(0x9e37_79b9);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_the_buffer() {
        assert_eq!(MemFilter::for_buffer(64 << 20).size_bytes(), 1 << 20);
        assert_eq!(MemFilter::for_buffer(0).size_bytes(), MIN_BYTES);
        assert_eq!(MemFilter::for_buffer(usize::MAX).size_bytes(), MAX_BYTES);
        // 3 MiB / 64 = 48 KiB, rounded up to 64 KiB.
        assert_eq!(MemFilter::for_buffer(3 << 20).size_bytes(), 64 << 10);
    }

    #[test]
    fn added_keys_are_always_found_and_others_mostly_not() {
        let f = MemFilter::for_buffer(64 << 20);
        let n = 500_000u32;
        for i in 0..n {
            f.add(&i.to_be_bytes());
        }
        for i in 0..n {
            assert!(f.may_contain(&i.to_be_bytes()), "false negative for {i}");
        }
        let false_positives = (n..2 * n)
            .filter(|i| f.may_contain(&i.to_be_bytes()))
            .count();
        // ~16.8 bits per key with 4 probes in a line: well under 1 %.
        assert!(
            false_positives < n as usize / 100,
            "{false_positives} false positives of {n}"
        );
    }

    #[test]
    fn an_empty_filter_contains_nothing() {
        let f = MemFilter::for_buffer(1 << 20);
        assert!(!f.may_contain(b"a"));
        assert!(!f.may_contain(b""));
    }
}
