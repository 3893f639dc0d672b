//! Keys and values of the `contest` and `recover` benchmarks: every key is distinct, every value
//! is a function of its key, and a key can be decoded back to who wrote it, so any read can be
//! verified without remembering what was written.
//!
//! A writer is identified by `(domain, thread, index)`: `domain` separates the crash rounds of
//! the correctness phase (round `r` writes domain `r`), `thread` is the writing thread and
//! `index` its `index`-th write. The triple is numbered
//!
//! ```text
//! id  = (domain * threads + thread) * per_thread + index
//! key = big-endian bytes of mix64(id), then '0' up to --key_size (as db_bench pads keys)
//! ```
//!
//! [`mix64`] is the SplitMix64 finalizer, a bijection on `u64` (xor-shifts and multiplications
//! by odd constants are each invertible; [`unmix64`] inverts it), so distinct ids give distinct
//! keys and keys land in random order. Example with `threads = 2, per_thread = 3`: thread 1's
//! write 2 of domain 0 has id `(0 * 2 + 1) * 3 + 2 = 5` and key `mix64(5).to_be_bytes()`.
//!
//! The value of a key (`--value_size` bytes) starts with a word unique to the key,
//! `mix64(prefix + GOLDEN)` (`prefix` = the key's first 8 bytes, big-endian), and continues with
//! bytes of a shared 1 MiB SplitMix64 stream (the *pool*, [`POOL_BYTES`]) from a word offset
//! the key picks, wrapping at the pool's end: incompressible within a value, like the contest's
//! data, unique per key, and checked by a `memcmp`. Why a pool: generating every word with
//! `mix64` cost ~2 us per 4 KiB value, 10-12 % of the CPU of the contest's write phase on a
//! 2-core machine, CPU the engine did not get; db_bench and fio also cut their data from a
//! buffer generated once (docs/benchmarks.md, "The contest's values cut from a pool").

/// The SplitMix64 finalizer: a bijection on `u64` that scatters consecutive inputs.
pub const fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The inverse of `x ^= x >> s` for `s >= 1`: apply the shift until it has covered 64 bits.
const fn unshift_xor(x: u64, s: u32) -> u64 {
    let mut y = x;
    let mut k = s;
    while k < 64 {
        y = x ^ (y >> s);
        k += s;
    }
    y
}

/// The multiplicative inverse of an odd `a` modulo 2^64 (Newton's iteration: each step doubles
/// the number of correct low bits, 1 -> 2 -> ... -> 64 within six steps from `a`, which is
/// already correct to 3 bits because `a * a == 1 mod 8` for odd `a`).
const fn inverse_odd(a: u64) -> u64 {
    let mut x = a;
    let mut i = 0;
    while i < 6 {
        x = x.wrapping_mul(2u64.wrapping_sub(a.wrapping_mul(x)));
        i += 1;
    }
    x
}

/// The inverse of [`mix64`]: `unmix64(mix64(x)) == x` for every `x`.
pub const fn unmix64(mut x: u64) -> u64 {
    x = unshift_xor(x, 31);
    x = unshift_xor(x.wrapping_mul(inverse_odd(0x94d0_49bb_1331_11eb)), 27);
    unshift_xor(x.wrapping_mul(inverse_odd(0xbf58_476d_1ce4_e5b9)), 30)
}

/// Who wrote a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Writer {
    /// Crash round (0 outside the correctness phase).
    pub domain: u64,
    /// Writing thread.
    pub thread: u64,
    /// The thread's write number, from 0.
    pub index: u64,
}

impl std::fmt::Display for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "round {} thread {} write {}",
            self.domain, self.thread, self.index
        )
    }
}

/// The key space of one run: its shape and the key and value sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpace {
    /// Writer threads per domain.
    pub threads: u64,
    /// Writes per thread per domain.
    pub per_thread: u64,
    /// Key size in bytes (at least 8).
    pub key_size: usize,
    /// Value size in bytes.
    pub value_size: usize,
}

/// Why a [`KeySpace`] cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeySpaceError {
    /// Keys shorter than 8 bytes cannot hold a distinct 64-bit id.
    KeyTooShort(usize),
    /// `domains * threads * per_thread` does not fit in 64 bits, or is zero.
    BadShape,
}

impl std::fmt::Display for KeySpaceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeySpaceError::KeyTooShort(n) => {
                write!(
                    f,
                    "--key_size={n}: these benchmarks need keys of at least 8 bytes"
                )
            }
            KeySpaceError::BadShape => write!(f, "threads * writes per thread must be in 1..2^64"),
        }
    }
}

impl std::error::Error for KeySpaceError {}

impl KeySpace {
    /// A key space for `domains` domains of `threads * per_thread` keys each.
    pub fn new(
        threads: u64,
        per_thread: u64,
        key_size: usize,
        value_size: usize,
        domains: u64,
    ) -> Result<Self, KeySpaceError> {
        if key_size < 8 {
            return Err(KeySpaceError::KeyTooShort(key_size));
        }
        let total = domains
            .checked_mul(threads)
            .and_then(|n| n.checked_mul(per_thread))
            .ok_or(KeySpaceError::BadShape)?;
        if total == 0 {
            return Err(KeySpaceError::BadShape);
        }
        Ok(KeySpace {
            threads,
            per_thread,
            key_size,
            value_size,
        })
    }

    /// Keys per domain.
    pub fn keys_per_domain(&self) -> u64 {
        self.threads * self.per_thread
    }

    /// Writes the key of `w` into `out`. `w` must be inside the space the constructor checked
    /// (`thread < threads`, `index < per_thread`, `domain < domains`), so the id cannot overflow;
    /// wrapping arithmetic keeps even a misuse panic-free.
    pub fn key(&self, w: Writer, out: &mut Vec<u8>) {
        let id = w
            .domain
            .wrapping_mul(self.threads)
            .wrapping_add(w.thread)
            .wrapping_mul(self.per_thread)
            .wrapping_add(w.index);
        out.clear();
        out.extend_from_slice(&mix64(id).to_be_bytes());
        out.resize(self.key_size, b'0');
    }

    /// Decodes a key back to its writer; `None` if it is not a key of this space (wrong length
    /// or padding).
    pub fn decode(&self, key: &[u8]) -> Option<Writer> {
        if key.len() != self.key_size || key.get(8..)?.iter().any(|&b| b != b'0') {
            return None;
        }
        let prefix: [u8; 8] = key.get(..8)?.try_into().ok()?;
        let id = unmix64(u64::from_be_bytes(prefix));
        let per_domain = self.keys_per_domain();
        let within = id % per_domain;
        Some(Writer {
            domain: id / per_domain,
            thread: within / self.per_thread,
            index: within % self.per_thread,
        })
    }

    /// The stream state a key's value starts from: its first 8 bytes, big-endian.
    fn value_seed(key: &[u8]) -> u64 {
        let mut prefix = [0u8; 8];
        for (d, s) in prefix.iter_mut().zip(key) {
            *d = *s;
        }
        u64::from_be_bytes(prefix)
    }

    /// Writes the value of `key` into `out` (resized to `value_size`): the key's word, then
    /// the pool from the key's offset (module docs); the first word is cut if the value is
    /// shorter.
    pub fn value(&self, key: &[u8], out: &mut Vec<u8>) {
        out.clear();
        out.resize(self.value_size, 0);
        let seed = Self::value_seed(key);
        let head = key_word(seed);
        let n = self.value_size.min(8);
        if let (Some(dst), Some(src)) = (out.get_mut(..n), head.get(..n)) {
            dst.copy_from_slice(src);
        }
        let mut at = pool_start(seed);
        for chunk in out.get_mut(n..).unwrap_or_default().chunks_mut(POOL_BYTES) {
            at = copy_pool(at, chunk);
        }
    }

    /// Whether `value` is the value of `key` (compared against the key's word and the pool, no
    /// copy of the expected value).
    pub fn value_matches(&self, key: &[u8], value: &[u8]) -> bool {
        if value.len() != self.value_size {
            return false;
        }
        let seed = Self::value_seed(key);
        let head = key_word(seed);
        let n = self.value_size.min(8);
        if value.get(..n) != head.get(..n) {
            return false;
        }
        let mut at = pool_start(seed);
        value
            .get(n..)
            .unwrap_or_default()
            .chunks(POOL_BYTES)
            .all(|chunk| {
                let (same, next) = pool_matches(at, chunk);
                at = next;
                same
            })
    }
}

/// Bytes of the shared stream values are cut from (a multiple of 8).
pub const POOL_BYTES: usize = 1 << 20;

/// Seeds the pool's stream (any constant: it only has to be the same for every binary).
const POOL_SEED: u64 = 0x5348_414c_4550_4f4f;

/// The pool: word `i` is `mix64(POOL_SEED + (i + 1) * GOLDEN)`, little-endian.
fn pool() -> &'static [u8] {
    static POOL: std::sync::OnceLock<Box<[u8]>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let mut bytes = vec![0u8; POOL_BYTES];
        let mut state = POOL_SEED;
        for w in bytes.chunks_exact_mut(8) {
            state = state.wrapping_add(GOLDEN);
            w.copy_from_slice(&mix64(state).to_le_bytes());
        }
        bytes.into_boxed_slice()
    })
}

/// The first word of a value: unique per key prefix (`mix64` is a bijection).
fn key_word(seed: u64) -> [u8; 8] {
    mix64(seed.wrapping_add(GOLDEN)).to_le_bytes()
}

/// Where in the pool the bytes after a key's word start: a word offset picked by the key.
fn pool_start(seed: u64) -> usize {
    let words = (POOL_BYTES / 8) as u64;
    // `words` divides 2^64, so the remainder is uniform; it is below POOL_BYTES / 8.
    usize::try_from(mix64(seed ^ POOL_SEED) % words).unwrap_or(0) * 8
}

/// Fills `out` (at most [`POOL_BYTES`]) with pool bytes from `at`, wrapping at the end;
/// returns the pool offset after them.
fn copy_pool(at: usize, out: &mut [u8]) -> usize {
    let pool = pool();
    let first = out.len().min(POOL_BYTES - at);
    let (a, b) = out.split_at_mut(first);
    if let (Some(src_a), Some(src_b)) = (pool.get(at..at + first), pool.get(..b.len())) {
        a.copy_from_slice(src_a);
        b.copy_from_slice(src_b);
    }
    (at + out.len()) % POOL_BYTES
}

/// Whether `v` (at most [`POOL_BYTES`]) equals the pool bytes from `at`, wrapping; and the
/// pool offset after them.
fn pool_matches(at: usize, v: &[u8]) -> (bool, usize) {
    let pool = pool();
    let first = v.len().min(POOL_BYTES - at);
    let (a, b) = v.split_at(first);
    let same = pool.get(at..at + first) == Some(a) && pool.get(..b.len()) == Some(b);
    (same, (at + v.len()) % POOL_BYTES)
}

/// The SplitMix64 stream increment (2^64 / golden ratio).
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn mix_is_inverted() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for v in [0u64, 1, 2, u64::MAX, 1 << 63, 0xdead_beef] {
            assert_eq!(unmix64(mix64(v)), v);
            assert_eq!(mix64(unmix64(v)), v);
        }
        for _ in 0..10_000 {
            x = mix64(x.wrapping_add(1));
            assert_eq!(unmix64(mix64(x)), x);
        }
        assert_eq!(inverse_odd(3).wrapping_mul(3), 1);
    }

    #[test]
    fn keys_are_distinct_and_decode() {
        let ks = KeySpace::new(3, 50, 10, 33, 2).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        let mut k = Vec::new();
        for domain in 0..2 {
            for thread in 0..3 {
                for index in 0..50 {
                    let w = Writer {
                        domain,
                        thread,
                        index,
                    };
                    ks.key(w, &mut k);
                    assert_eq!(k.len(), 10);
                    assert_eq!(&k[8..], b"00");
                    assert_eq!(ks.decode(&k), Some(w));
                    assert!(seen.insert(k.clone()));
                }
            }
        }
        // Wrong length or padding is not a key of the space.
        assert_eq!(ks.decode(&k[..9]), None);
        k[9] = b'1';
        assert_eq!(ks.decode(&k), None);
    }

    #[test]
    fn values_depend_on_the_key_only() {
        let ks = KeySpace::new(1, 10, 8, 4096, 1).unwrap();
        let (mut a, mut k1, mut k2) = (Vec::new(), Vec::new(), Vec::new());
        ks.key(
            Writer {
                domain: 0,
                thread: 0,
                index: 1,
            },
            &mut k1,
        );
        ks.key(
            Writer {
                domain: 0,
                thread: 0,
                index: 2,
            },
            &mut k2,
        );
        ks.value(&k1, &mut a);
        assert_eq!(a.len(), 4096);
        assert!(ks.value_matches(&k1, &a));
        assert!(!ks.value_matches(&k2, &a));
        let mut bad = a.clone();
        bad[4095] ^= 1;
        assert!(!ks.value_matches(&k1, &bad));
        assert!(!ks.value_matches(&k1, &a[..4095]));
        // Odd sizes are cut to fit.
        let odd = KeySpace::new(1, 1, 8, 13, 1).unwrap();
        odd.value(&k1, &mut a);
        assert_eq!(a.len(), 13);
    }

    /// The value as defined in the module docs, built byte by byte: `value` must produce the
    /// same bytes, and `value_matches` accept exactly them, for any size (a definition change
    /// would only show as verify failures of a run mixing binaries).
    fn value_as_defined(key: &[u8], size: usize) -> Vec<u8> {
        let mut prefix = [0u8; 8];
        for (d, s) in prefix.iter_mut().zip(key) {
            *d = *s;
        }
        let seed = u64::from_be_bytes(prefix);
        let head = mix64(seed.wrapping_add(0x9e37_79b9_7f4a_7c15)).to_le_bytes();
        let pool_word = |i: u64| {
            mix64(POOL_SEED.wrapping_add((i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15))).to_le_bytes()
        };
        let words = (POOL_BYTES / 8) as u64;
        let mut byte = (mix64(seed ^ POOL_SEED) % words) * 8;
        let mut out: Vec<u8> = head.iter().copied().take(size).collect();
        while out.len() < size {
            out.push(pool_word(byte / 8)[(byte % 8) as usize]);
            byte = (byte + 1) % POOL_BYTES as u64;
        }
        out
    }

    #[test]
    fn values_are_the_defined_stream_and_any_changed_byte_fails_the_match() {
        let mut v = vec![1u8; 9]; // longer than some sizes below: `value` must cut it
        for size in (0..=33).chain([4095, 4096, 4100, POOL_BYTES + 100]) {
            let ks = KeySpace::new(1, 4, 8, size, 1).unwrap();
            for key in [
                &b"k\x00\x01\x02\x03\x04\x05\x06pad"[..],
                b"12345678",
                b"\xff",
            ] {
                let want = value_as_defined(key, size);
                ks.value(key, &mut v);
                assert_eq!(v, want, "size {size}, key {key:?}");
                assert!(ks.value_matches(key, &want), "size {size}");
                for at in [0, size / 2, size.saturating_sub(1)]
                    .into_iter()
                    .filter(|&i| i < size)
                {
                    let mut bad = want.clone();
                    bad[at] ^= 0x80;
                    assert!(!ks.value_matches(key, &bad), "size {size}, byte {at}");
                }
                let mut long = want.clone();
                long.push(0);
                assert!(!ks.value_matches(key, &long), "size {size}: one byte more");
            }
        }
    }

    #[test]
    fn bad_shapes() {
        assert_eq!(
            KeySpace::new(1, 1, 7, 1, 1),
            Err(KeySpaceError::KeyTooShort(7))
        );
        assert_eq!(KeySpace::new(0, 1, 8, 1, 1), Err(KeySpaceError::BadShape));
        assert_eq!(
            KeySpace::new(u64::MAX, 2, 8, 1, 1),
            Err(KeySpaceError::BadShape)
        );
    }
}
