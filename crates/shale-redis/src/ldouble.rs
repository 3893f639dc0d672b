//! INCRBYFLOAT / HINCRBYFLOAT arithmetic exactly as Redis does it on x86-64:
//! in C `long double` (x87 80-bit extended: a 64-bit significand), parsed
//! with `strtold`, printed with `%.17Lf` and trailing zeros cut. An f64
//! would print `10.59999999999999964` where Redis prints `10.6`, and
//! `5000.1` where Redis prints `5000.10000000000000009`, so the value is
//! kept as (sign, 64-bit significand, binary exponent) and every step is
//! rounded to nearest-even from the exact result, which small unsigned
//! big integers (`Big`) compute.

use std::cmp::Ordering;

/// Redis refuses float strings this long (MAX_LONG_DOUBLE_CHARS).
const MAX_CHARS: usize = 5 * 1024;
/// Largest binary exponent of a finite x87 value (value < 2^16384).
const MAX_EXP2: i64 = 16383;
/// Smallest normal exponent; smaller values are refused (see docs/redis.md).
const MIN_EXP2: i64 = -16382;

/// An unsigned big integer, base 2^32, least significant word first.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(v: u64) -> Big {
        let mut b = Big(vec![v as u32, (v >> 32) as u32]);
        b.trim();
        b
    }
    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }
    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }
    fn bits(&self) -> u64 {
        self.0.last().map_or(0, |&w| {
            (self.0.len() as u64 - 1) * 32 + u64::from(32 - w.leading_zeros())
        })
    }
    fn bit(&self, i: u64) -> bool {
        let w = usize::try_from(i / 32).unwrap_or(usize::MAX);
        self.0.get(w).is_some_and(|&x| (x >> (i % 32)) & 1 == 1)
    }
    fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for w in &mut self.0 {
            let v = u64::from(*w) * u64::from(m) + carry;
            *w = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
        self.trim();
    }
    fn add_small(&mut self, a: u32) {
        let mut carry = u64::from(a);
        for w in &mut self.0 {
            if carry == 0 {
                break;
            }
            let v = u64::from(*w) + carry;
            *w = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }
    fn pow10(k: u64) -> Big {
        let mut b = Big::from_u64(1);
        for _ in 0..k / 9 {
            b.mul_small(1_000_000_000);
        }
        for _ in 0..k % 9 {
            b.mul_small(10);
        }
        b
    }
    fn shl(&self, n: u64) -> Big {
        let (words, bits) = (usize::try_from(n / 32).unwrap_or(0), n % 32);
        let mut out = vec![0u32; words];
        let mut carry = 0u32;
        for &w in &self.0 {
            if bits == 0 {
                out.push(w);
            } else {
                out.push((w << bits) | carry);
                carry = w >> (32 - bits);
            }
        }
        out.push(carry);
        let mut b = Big(out);
        b.trim();
        b
    }
    /// `self >> n` and the bits shifted out: (the highest one, any other).
    fn shr(&self, n: u64) -> (Big, bool, bool) {
        if n == 0 {
            return (self.clone(), false, false);
        }
        let (half, lower) = (self.bit(n - 1), self.any_below(n - 1));
        let bits = n % 32;
        let src = self
            .0
            .get(usize::try_from(n / 32).unwrap_or(usize::MAX)..)
            .unwrap_or_default();
        let mut out = Vec::with_capacity(src.len());
        for (i, &w) in src.iter().enumerate() {
            let hi = src.get(i + 1).copied().unwrap_or(0);
            out.push(if bits == 0 {
                w
            } else {
                (w >> bits) | (hi << (32 - bits))
            });
        }
        let mut b = Big(out);
        b.trim();
        (b, half, lower)
    }
    /// Whether any of the lowest `n` bits is set.
    fn any_below(&self, n: u64) -> bool {
        let words = usize::try_from(n / 32).unwrap_or(usize::MAX);
        let bits = n % 32;
        self.0.iter().take(words).any(|&w| w != 0)
            || (bits > 0
                && self
                    .0
                    .get(words)
                    .is_some_and(|&w| w & ((1u32 << bits) - 1) != 0))
    }
    /// `self = 2 * self + bit`, in place.
    fn shl1_add(&mut self, bit: bool) {
        let mut carry = u32::from(bit);
        for w in &mut self.0 {
            let next = *w >> 31;
            *w = (*w << 1) | carry;
            carry = next;
        }
        if carry > 0 {
            self.0.push(carry);
        }
    }
    fn add(&self, o: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len().max(o.0.len()) + 1);
        let mut carry = 0u64;
        for i in 0..self.0.len().max(o.0.len()) {
            let v = u64::from(self.0.get(i).copied().unwrap_or(0))
                + u64::from(o.0.get(i).copied().unwrap_or(0))
                + carry;
            out.push(v as u32);
            carry = v >> 32;
        }
        out.push(carry as u32);
        let mut b = Big(out);
        b.trim();
        b
    }
    /// `self - o`; requires `self >= o`.
    fn sub(&self, o: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len());
        let mut borrow = 0i64;
        for (i, &w) in self.0.iter().enumerate() {
            let mut v = i64::from(w) - i64::from(o.0.get(i).copied().unwrap_or(0)) - borrow;
            borrow = 0;
            if v < 0 {
                v += 1 << 32;
                borrow = 1;
            }
            out.push(v as u32);
        }
        let mut b = Big(out);
        b.trim();
        b
    }
    fn cmp(&self, o: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&o.0.len())
            .then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }
    /// (floor(self / d), remainder != 0), by binary long division.
    fn div(&self, d: &Big) -> (Big, bool) {
        let mut q = Big(Vec::new());
        let mut r = Big(Vec::new());
        for i in (0..self.bits()).rev() {
            r.shl1_add(self.bit(i));
            let fits = r.cmp(d) != Ordering::Less;
            if fits {
                r = r.sub(d);
            }
            q.shl1_add(fits);
        }
        q.trim();
        (q, !r.is_zero())
    }
    fn to_decimal(&self) -> String {
        let mut words = Vec::new();
        let mut cur = self.0.clone();
        while !cur.is_empty() {
            let mut rem = 0u64;
            for w in cur.iter_mut().rev() {
                let v = (rem << 32) | u64::from(*w);
                *w = (v / 1_000_000_000) as u32;
                rem = v % 1_000_000_000;
            }
            words.push(rem);
            while cur.last() == Some(&0) {
                cur.pop();
            }
        }
        let mut s = words
            .pop()
            .map_or_else(|| "0".to_string(), |w| w.to_string());
        for w in words.iter().rev() {
            s.push_str(&format!("{w:09}"));
        }
        s
    }
}

/// An x87 extended value: `(-1)^neg * mant * 2^exp`, `mant` normalised
/// (top bit set) unless zero; or an infinity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LongDouble {
    neg: bool,
    mant: u64,
    exp: i64,
    inf: bool,
}

impl LongDouble {
    fn zero(neg: bool) -> LongDouble {
        LongDouble {
            neg,
            mant: 0,
            exp: 0,
            inf: false,
        }
    }

    /// Rounds `n * 2^e` (plus a sticky fraction below it) to 64 bits.
    fn round(neg: bool, n: &Big, e: i64, sticky: bool) -> Option<LongDouble> {
        if n.is_zero() {
            return Some(LongDouble::zero(neg));
        }
        let b = n.bits();
        let (mant, exp) = if b <= 64 {
            let m = n.shl(64 - b);
            (m, e - (64 - b) as i64)
        } else {
            let (m, half, lower) = n.shr(b - 64);
            let mut m = m;
            let odd = m.bit(0);
            if half && (lower || sticky || odd) {
                m.add_small(1);
            }
            (m, e + (b - 64) as i64)
        };
        // A carry out of the rounding makes 65 bits: renormalise.
        let (mant, exp) = if mant.bits() > 64 {
            (mant.shr(1).0, exp + 1)
        } else {
            (mant, exp)
        };
        let top = exp + 63;
        if !(MIN_EXP2..=MAX_EXP2).contains(&top) {
            return None;
        }
        let mut w = [0u32; 2];
        for (i, x) in mant.0.iter().take(2).enumerate() {
            if let Some(slot) = w.get_mut(i) {
                *slot = *x;
            }
        }
        Some(LongDouble {
            neg,
            mant: (u64::from(w[1]) << 32) | u64::from(w[0]),
            exp,
            inf: false,
        })
    }

    /// Redis's `string2ld`: `strtold` over the whole string (decimal or
    /// hex, `inf`), no leading blank, not NaN, not out of range.
    pub fn parse(b: &[u8]) -> Option<LongDouble> {
        if b.is_empty() || b.len() >= MAX_CHARS {
            return None;
        }
        let s = std::str::from_utf8(b).ok()?.to_ascii_lowercase();
        let (neg, body) = match s.as_bytes().first()? {
            b'-' => (true, s.get(1..)?),
            b'+' => (false, s.get(1..)?),
            _ => (false, s.as_str()),
        };
        if body == "inf" || body == "infinity" {
            return Some(LongDouble {
                inf: true,
                ..LongDouble::zero(neg)
            });
        }
        if let Some(hex) = body.strip_prefix("0x") {
            return parse_hex(neg, hex);
        }
        let (int, frac, exp10) = split_number(body, 'e')?;
        if !int.bytes().chain(frac.bytes()).all(|c| c.is_ascii_digit()) {
            return None;
        }
        let digits = format!("{int}{frac}");
        let digits = digits.trim_start_matches('0');
        if digits.is_empty() {
            return Some(LongDouble::zero(neg));
        }
        let e10 = exp10 - frac.len() as i64;
        // Out of range whatever the digits: no big powers needed to say so.
        let magnitude = e10 + digits.len() as i64;
        if !(-4952..=4934).contains(&magnitude) {
            return None;
        }
        let mut d = Big(Vec::new());
        for c in digits.bytes() {
            d.mul_small(10);
            d.add_small(u32::from(c - b'0'));
        }
        if e10 >= 0 {
            let mut n = d;
            let p = Big::pow10(e10.unsigned_abs());
            n = mul(&n, &p);
            LongDouble::round(neg, &n, 0, false)
        } else {
            let p = Big::pow10(e10.unsigned_abs());
            let s = (66 + p.bits()).saturating_sub(d.bits());
            let (q, sticky) = d.shl(s).div(&p);
            LongDouble::round(neg, &q, -(s as i64), sticky)
        }
    }

    pub fn is_infinite(&self) -> bool {
        self.inf
    }

    /// `self + o`, rounded; `None` when not finite (Redis's "NaN or Infinity").
    pub fn add(&self, o: &LongDouble) -> Option<LongDouble> {
        if self.inf || o.inf {
            return None;
        }
        if self.mant == 0 {
            return Some(if o.mant == 0 {
                LongDouble::zero(self.neg && o.neg)
            } else {
                *o
            });
        }
        if o.mant == 0 {
            return Some(*self);
        }
        let e = self.exp.min(o.exp);
        // Far apart: the smaller is below half an ulp of the larger.
        if (self.exp - o.exp).abs() > 130 {
            return Some(if self.exp > o.exp { *self } else { *o });
        }
        let a = Big::from_u64(self.mant).shl((self.exp - e).unsigned_abs());
        let b = Big::from_u64(o.mant).shl((o.exp - e).unsigned_abs());
        let (neg, n) = if self.neg == o.neg {
            (self.neg, a.add(&b))
        } else {
            match a.cmp(&b) {
                Ordering::Equal => return Some(LongDouble::zero(false)),
                Ordering::Greater => (self.neg, a.sub(&b)),
                Ordering::Less => (o.neg, b.sub(&a)),
            }
        };
        LongDouble::round(neg, &n, e, false)
    }

    /// Redis's `ld2string(..., LD_STR_HUMAN)`: `%.17Lf`, trailing zeros
    /// (and a bare '.') cut, `-0` printed as `0`.
    pub fn to_human(&self) -> String {
        let scaled = mul(&Big::from_u64(self.mant), &Big::pow10(17));
        let v = if self.exp >= 0 {
            scaled.shl(self.exp.unsigned_abs())
        } else {
            let (mut q, half, lower) = scaled.shr(self.exp.unsigned_abs());
            if half && (lower || q.bit(0)) {
                q.add_small(1);
            }
            q
        };
        let mut digits = v.to_decimal();
        while digits.len() < 18 {
            digits.insert(0, '0');
        }
        let split = digits.len() - 17;
        let (int, frac) = digits.split_at(split);
        let frac = frac.trim_end_matches('0');
        let mut out = String::new();
        if self.neg {
            out.push('-');
        }
        out.push_str(int);
        if !frac.is_empty() {
            out.push('.');
            out.push_str(frac);
        }
        if out == "-0" {
            out = "0".into();
        }
        out
    }
}

fn parse_exp(e: &str) -> Option<i64> {
    let (neg, d) = match e.as_bytes().first()? {
        b'-' => (true, e.get(1..)?),
        b'+' => (false, e.get(1..)?),
        _ => (false, e),
    };
    if d.is_empty() || !d.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    // Beyond any range anyway: clamp instead of overflowing.
    let v: i64 = d.parse().unwrap_or(1_000_000);
    Some(if neg {
        -v.min(1_000_000)
    } else {
        v.min(1_000_000)
    })
}

/// `int[.frac][<exp_char>±exp]` split into its parts (not both empty).
fn split_number(s: &str, exp_char: char) -> Option<(&str, &str, i64)> {
    let (mant, exp) = match s.split_once(exp_char) {
        Some((m, e)) => (m, parse_exp(e)?),
        None => (s, 0),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    Some((int, frac, exp))
}

/// `0x` hex floats: `hhh[.hhh][p±ddd]`.
fn parse_hex(neg: bool, s: &str) -> Option<LongDouble> {
    let (int, frac, exp2) = split_number(s, 'p')?;
    let mut n = Big(Vec::new());
    for c in int.chars().chain(frac.chars()) {
        n.mul_small(16);
        n.add_small(c.to_digit(16)?);
    }
    LongDouble::round(neg, &n, exp2 - 4 * frac.len() as i64, false)
}

fn mul(a: &Big, b: &Big) -> Big {
    let mut out = vec![0u64; a.0.len() + b.0.len() + 1];
    for (i, &x) in a.0.iter().enumerate() {
        let mut carry = 0u64;
        for (j, &y) in b.0.iter().enumerate() {
            if let Some(slot) = out.get_mut(i + j) {
                let v = *slot + u64::from(x) * u64::from(y) + carry;
                *slot = v & 0xffff_ffff;
                carry = v >> 32;
            }
        }
        if let Some(slot) = out.get_mut(i + b.0.len()) {
            *slot += carry;
        }
    }
    let mut r = Big(out.into_iter().map(|w| w as u32).collect());
    r.trim();
    r
}

/// INCRBYFLOAT's step: `cur + by` printed as Redis stores it; `None` when
/// the result is not finite.
pub fn incr(cur: &LongDouble, by: &LongDouble) -> Option<String> {
    cur.add(by).map(|v| v.to_human())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn step(a: &str, b: &str) -> Option<String> {
        incr(
            &LongDouble::parse(a.as_bytes()).unwrap(),
            &LongDouble::parse(b.as_bytes()).unwrap(),
        )
    }

    /// Replies of redis-server 7.0.15 (x86-64) to SET k A; INCRBYFLOAT k B.
    #[test]
    fn matches_redis_on_x86_64() {
        for (a, b, want) in [
            ("10.50", "0.1", "10.6"),
            ("5000", "0.1", "5000.10000000000000009"),
            ("123456789", "0.3", "123456789.30000000000291038"),
            ("0.1", "0.2", "0.3"),
            ("0.3", "1e-20", "0.3"),
            ("5.0e3", "2.0e2", "5200"),
            ("3", "0x10", "19"),
            ("19", "-3.0000", "16"),
            ("0", "1.5", "1.5"),
            ("1.5", "1e2", "101.5"),
            ("1", "-1", "0"),
            ("-0", "-0", "0"),
            (
                "0.3",
                "1e300",
                "1000000000000000000008997324079559193870523944273290747938260082321265646596180935755849152083750497190350372508614274835903592556184672983913096260520748646287327135641843653294084255107606016789726652932370030551382947620994540294772781889620606179267611627097410650567187386105690089424915104006144",
            ),
        ] {
            assert_eq!(step(a, b).as_deref(), Some(want), "{a} + {b}");
        }
        assert_eq!(step("3", "inf"), None);
    }

    #[test]
    fn refuses_what_strtold_refuses() {
        for bad in [
            "", "abc", " 1", "1 ", "nan", "1e", "1.2.3", "--1", "e5", ".", "0x", "1e99999",
        ] {
            assert_eq!(LongDouble::parse(bad.as_bytes()), None, "{bad:?}");
        }
        assert!(LongDouble::parse(&vec![b'1'; MAX_CHARS]).is_none());
        assert!(LongDouble::parse(b".5").is_some());
        assert!(LongDouble::parse(b"5.").is_some());
        assert!(LongDouble::parse(b"-Infinity").is_some());
    }
}
