//! The extent's bloom filter: cache-line-blocked ("local") bloom over the
//! distinct user keys, in the style of RocksDB's FastLocalBloom.
//!
//! Each key hashes (with [`filter_hash`], a fixed 64-bit hash that is part of
//! the on-disk format) to one 64-byte cache line; all its `k` probe bits fall
//! in that line, so a negative lookup touches one cache line. Layout (see
//! `docs/format-extent.md` §5):
//!
//! ```text
//! +------------------------------+-----------+---------+----------------+
//! | num_lines x 64-byte lines    | k: u8     | kind: u8| num_lines u32LE|
//! +------------------------------+-----------+---------+----------------+
//! ```
//!
//! Line choice: `line = (low32(h) * num_lines) >> 32`. Probes: `g = high32(h)`;
//! for each of `k` probes, bit `g >> 23` (0..511) of the line is set, then
//! `g = g * 0x9e3779b9` (wrapping).
//!
//! Sizing: `num_lines = ceil(n * bits_per_key / 512)`, `k = bits_per_key *
//! 69 / 100` clamped to `1..=30`. Example: 1000 keys at 10 bits/key give 20
//! lines (1 280 bytes + 6) and `k = 6`; the false-positive rate is ~1%.

/// `kind` byte of the filter trailer: cache-line-blocked bloom, version 1.
pub const FILTER_KIND_BLOCKED_BLOOM: u8 = 1;

/// Bytes of a cache line (the filter's block unit).
const LINE_BYTES: usize = 64;
/// Bits per line.
const LINE_BITS: u64 = 512;
/// Bytes after the lines: k u8, kind u8, num_lines u32 LE.
const TRAILER: usize = 6;
/// Largest number of probes accepted.
const MAX_PROBES: u8 = 30;

/// The 64-bit hash of a user key used by the filter (stable: part of the format).
pub fn filter_hash(key: &[u8]) -> u64 {
    const P0: u64 = 0xa076_1d64_78bd_642f;
    const P1: u64 = 0xe703_7ed1_a0b4_28db;
    const P2: u64 = 0x8ebc_6af0_9c88_c6e3;
    #[inline]
    fn mum(a: u64, b: u64) -> u64 {
        let r = u128::from(a) * u128::from(b);
        (r as u64) ^ ((r >> 64) as u64)
    }
    let len = key.len() as u64;
    let mut h = P2 ^ len.wrapping_mul(P0);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let w = c.try_into().map(u64::from_le_bytes).unwrap_or(0);
        h = mum(h ^ w ^ P0, P1 ^ h.rotate_left(17));
    }
    let mut tail = [0u8; 8];
    let rest = chunks.remainder();
    if let Some(dst) = tail.get_mut(..rest.len()) {
        dst.copy_from_slice(rest);
    }
    h = mum(h ^ u64::from_le_bytes(tail) ^ P1, P0 ^ len);
    mum(h ^ P2, P1)
}

/// Number of probes for `bits_per_key`.
fn num_probes(bits_per_key: u32) -> u8 {
    let k = (u64::from(bits_per_key) * 69 / 100).clamp(1, u64::from(MAX_PROBES));
    u8::try_from(k).unwrap_or(MAX_PROBES)
}

/// Number of cache lines for `num_keys` keys; 0 means "no filter".
fn num_lines(num_keys: usize, bits_per_key: u32) -> u64 {
    if num_keys == 0 || bits_per_key == 0 {
        return 0;
    }
    let bits = (num_keys as u64).saturating_mul(u64::from(bits_per_key));
    bits.div_ceil(LINE_BITS).max(1)
}

/// Exact encoded size of a filter over `num_keys` keys (0 = no filter block).
pub fn encoded_len(num_keys: usize, bits_per_key: u32) -> usize {
    match num_lines(num_keys, bits_per_key) {
        0 => 0,
        n => usize::try_from(n)
            .unwrap_or(usize::MAX)
            .saturating_mul(LINE_BYTES)
            .saturating_add(TRAILER),
    }
}

/// Line index and probe seed of a hash.
#[inline]
fn locate(h: u64, lines: u64) -> (usize, u32) {
    let line = ((h & 0xffff_ffff) * lines) >> 32;
    (usize::try_from(line).unwrap_or(0), (h >> 32) as u32)
}

/// Builds a filter over `hashes` (one per distinct key). Returns `None` when
/// no filter is to be stored (no keys, `bits_per_key == 0`, or more than
/// `u32::MAX` lines).
pub fn build(hashes: &[u64], bits_per_key: u32) -> Option<Vec<u8>> {
    let lines = num_lines(hashes.len(), bits_per_key);
    let lines_u32 = u32::try_from(lines).ok().filter(|&n| n > 0)?;
    let k = num_probes(bits_per_key);
    let mut out = vec![0u8; usize::try_from(lines).ok()?.checked_mul(LINE_BYTES)?];
    for &h in hashes {
        let (line, mut g) = locate(h, lines);
        for _ in 0..k {
            let bit = (g >> 23) as usize;
            if let Some(b) = out.get_mut(line * LINE_BYTES + bit / 8) {
                *b |= 1 << (bit % 8);
            }
            g = g.wrapping_mul(0x9e37_79b9);
        }
    }
    out.push(k);
    out.push(FILTER_KIND_BLOCKED_BLOOM);
    out.extend_from_slice(&lines_u32.to_le_bytes());
    Some(out)
}

/// A checked view of an encoded filter.
#[derive(Clone, Copy, Debug)]
pub struct FilterView<'a> {
    lines: &'a [u8],
    num_lines: u64,
    k: u8,
}

impl<'a> FilterView<'a> {
    /// Parses and validates an encoded filter; `None` if malformed.
    pub fn parse(data: &'a [u8]) -> Option<FilterView<'a>> {
        let (lines, trailer) = data.split_at_checked(data.len().checked_sub(TRAILER)?)?;
        let (&k, rest) = trailer.split_first()?;
        let (&kind, n) = rest.split_first()?;
        let n = u32::from_le_bytes(n.try_into().ok()?);
        if kind != FILTER_KIND_BLOCKED_BLOOM || k == 0 || k > MAX_PROBES || n == 0 {
            return None;
        }
        if (lines.len() as u64) != u64::from(n) * LINE_BYTES as u64 {
            return None;
        }
        Some(FilterView {
            lines,
            num_lines: u64::from(n),
            k,
        })
    }

    /// False only if the key with this hash was certainly not added.
    #[inline]
    pub fn may_contain_hash(&self, h: u64) -> bool {
        let (line, mut g) = locate(h, self.num_lines);
        let Some(line) = self
            .lines
            .get(line * LINE_BYTES..line * LINE_BYTES + LINE_BYTES)
        else {
            return true;
        };
        for _ in 0..self.k {
            let bit = (g >> 23) as usize;
            match line.get(bit / 8) {
                Some(b) if b & (1 << (bit % 8)) != 0 => {}
                Some(_) => return false,
                None => return true,
            }
            g = g.wrapping_mul(0x9e37_79b9);
        }
        true
    }

    /// False only if `key` was certainly not added.
    pub fn may_contain(&self, key: &[u8]) -> bool {
        self.may_contain_hash(filter_hash(key))
    }

    /// Number of probes per key.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn num_probes(&self) -> u8 {
        self.k
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // tests index fixtures they built
mod tests {
    use super::*;

    fn key(i: u64) -> Vec<u8> {
        format!("user{i:010}").into_bytes()
    }

    #[test]
    fn no_false_negatives_and_about_one_percent_false_positives() {
        let n = 20_000u64;
        let hashes: Vec<u64> = (0..n).map(|i| filter_hash(&key(i))).collect();
        let f = build(&hashes, 10).expect("filter");
        assert_eq!(f.len(), encoded_len(n as usize, 10));
        let v = FilterView::parse(&f).expect("parses");
        assert_eq!(v.num_probes(), 6);
        for i in 0..n {
            assert!(v.may_contain(&key(i)), "false negative for {i}");
        }
        let probes = 100_000u64;
        let fp = (n..n + probes).filter(|&i| v.may_contain(&key(i))).count();
        let rate = fp as f64 / probes as f64;
        assert!(rate < 0.02, "false-positive rate {rate}");
        assert!(rate > 0.002, "suspiciously low false-positive rate {rate}");
    }

    #[test]
    fn sizing_and_no_filter_cases() {
        assert_eq!(encoded_len(0, 10), 0);
        assert_eq!(encoded_len(100, 0), 0);
        assert!(build(&[], 10).is_none());
        assert!(build(&[1, 2], 0).is_none());
        assert_eq!(encoded_len(1, 10), 64 + 6);
        assert_eq!(encoded_len(1000, 10), 20 * 64 + 6);
        assert_eq!(num_probes(1), 1);
        assert_eq!(num_probes(200), 30);
    }

    #[test]
    fn malformed_filters_are_rejected() {
        let f = build(&[filter_hash(b"a")], 10).expect("filter");
        assert!(FilterView::parse(&f).is_some());
        assert!(FilterView::parse(&f[..f.len() - 1]).is_none());
        assert!(FilterView::parse(&[]).is_none());
        let mut bad = f.clone();
        let kind = bad.len() - 5;
        bad[kind] = 9;
        assert!(FilterView::parse(&bad).is_none());
        let mut bad = f.clone();
        let k = bad.len() - 6;
        bad[k] = 0;
        assert!(FilterView::parse(&bad).is_none());
        let mut bad = f;
        let n = bad.len() - 4;
        bad[n..].copy_from_slice(&2u32.to_le_bytes());
        assert!(FilterView::parse(&bad).is_none());
    }

    #[test]
    fn hash_is_stable_and_spreads() {
        // Part of the on-disk format: these values must never change.
        assert_eq!(filter_hash(b""), filter_hash(b""));
        assert_ne!(filter_hash(b"a"), filter_hash(b"b"));
        assert_ne!(filter_hash(b"abcdefgh"), filter_hash(b"abcdefgh\0"));
        let golden = [
            filter_hash(b""),
            filter_hash(b"shale"),
            filter_hash(b"0123456789abcdef!"),
        ];
        assert_eq!(golden, GOLDEN);
    }

    const GOLDEN: [u64; 3] = [
        10921816543801749014,
        17305031374852753180,
        9686505478548459303,
    ];
}
