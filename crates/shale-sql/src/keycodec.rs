//! Memcomparable key encoding (docs/tables.md, "Keys"): the bytewise order
//! of encoded keys is the SQL order of the values, so an index range is one
//! engine key range.
//!
//! Each column: `0x00` for NULL (NULL sorts first), else `0x01` and
//! - signed integer: 8 bytes big-endian with the sign bit flipped;
//! - unsigned integer: 8 bytes big-endian;
//! - FLOAT/DOUBLE: the IEEE bits, all flipped if negative, else sign set;
//! - DECIMAL: the value at the column's scale as i128, sign flipped, 16 bytes BE;
//! - strings: groups of 8 bytes, each padded with zeros and followed by a
//!   marker `0xFF - padding` (a full group: 0xFF, more follow);
//! - DATE/DATETIME: the packed u64 ([`DateTime::pack`]) big-endian.
//!
//! A descending index column ([`encode_dir`]) stores every byte of its
//! encoding inverted. Each encoding is prefix-free (fixed width, or string
//! groups ended by a marker below 0xFF), so inverting the bytes reverses
//! the order of any two of them: NULL (`0xFF` once inverted) sorts last,
//! as in a descending MySQL index.

use crate::types::{DateTime, Datum, Decimal, SqlType};

const GROUP: usize = 8;

/// Appends the encoding of `v` (already coerced to `ty`) to `out`. A value
/// of an unexpected kind for the type encodes as its nearest kind, so an
/// out-of-type search bound still gives a well-formed (if wider) key.
pub fn encode(out: &mut Vec<u8>, v: &Datum, ty: &SqlType) {
    if v.is_null() {
        out.push(0x00);
        return;
    }
    out.push(0x01);
    match (ty, v) {
        (
            SqlType::Int {
                unsigned: false, ..
            },
            Datum::Int(n),
        ) => {
            out.extend_from_slice(&((*n as u64) ^ (1 << 63)).to_be_bytes());
        }
        (SqlType::Int { unsigned: true, .. }, Datum::UInt(n)) => {
            out.extend_from_slice(&n.to_be_bytes())
        }
        (SqlType::Float | SqlType::Double, Datum::Double(f)) => {
            let bits = f.to_bits();
            let k = if bits >> 63 == 1 {
                !bits
            } else {
                bits | (1 << 63)
            };
            out.extend_from_slice(&k.to_be_bytes());
        }
        (SqlType::Decimal { scale, .. }, Datum::Decimal(d)) => {
            let v = d.rescale(*scale).unwrap_or(*d).value;
            out.extend_from_slice(&((v as u128) ^ (1 << 127)).to_be_bytes());
        }
        (_, Datum::Date(d) | Datum::DateTime(d)) => out.extend_from_slice(&d.pack().to_be_bytes()),
        (_, Datum::Bytes(b)) => encode_bytes(out, b),
        (_, other) => encode_bytes(out, &other.to_bytes().unwrap_or_default()),
    }
}

fn encode_bytes(out: &mut Vec<u8>, b: &[u8]) {
    let mut chunks = b.chunks(GROUP);
    loop {
        let chunk = chunks.next().unwrap_or(&[]);
        out.extend_from_slice(chunk);
        let pad = GROUP - chunk.len();
        out.extend(std::iter::repeat_n(0u8, pad));
        // pad < GROUP, so the marker fits a byte.
        out.push(0xFF - pad as u8);
        if pad > 0 {
            break;
        }
    }
}

/// [`encode`], with the bytes inverted if `desc` (a descending column).
pub fn encode_dir(out: &mut Vec<u8>, v: &Datum, ty: &SqlType, desc: bool) {
    let start = out.len();
    encode(out, v, ty);
    if desc {
        if let Some(tail) = out.get_mut(start..) {
            tail.iter_mut().for_each(|b| *b = !*b);
        }
    }
}

/// [`decode`] of a column written by [`encode_dir`] with the same `desc`.
pub fn decode_dir<'a>(buf: &'a [u8], ty: &SqlType, desc: bool) -> Option<(Datum, &'a [u8])> {
    if !desc {
        return decode(buf, ty);
    }
    // Decode an inverted copy; the value's length gives the rest of `buf`.
    // Only descending columns pay for the copy.
    let inverted: Vec<u8> = buf.iter().map(|b| !b).collect();
    let (v, rest) = decode(&inverted, ty)?;
    let used = inverted.len() - rest.len();
    Some((v, buf.get(used..)?))
}

/// Decodes one value of type `ty` from the front of `buf`; returns it and
/// the rest. None if `buf` is not a valid encoding.
pub fn decode<'a>(buf: &'a [u8], ty: &SqlType) -> Option<(Datum, &'a [u8])> {
    let (&tag, rest) = buf.split_first()?;
    if tag == 0x00 {
        return Some((Datum::Null, rest));
    }
    if tag != 0x01 {
        return None;
    }
    let fixed8 = |rest: &'a [u8]| -> Option<(u64, &'a [u8])> {
        let (h, t) = rest.split_at_checked(8)?;
        Some((u64::from_be_bytes(h.try_into().ok()?), t))
    };
    Some(match ty {
        SqlType::Int {
            unsigned: false, ..
        } => {
            let (v, t) = fixed8(rest)?;
            (Datum::Int((v ^ (1 << 63)) as i64), t)
        }
        SqlType::Int { unsigned: true, .. } => {
            let (v, t) = fixed8(rest)?;
            (Datum::UInt(v), t)
        }
        SqlType::Float | SqlType::Double => {
            let (k, t) = fixed8(rest)?;
            let bits = if k >> 63 == 1 { k & !(1 << 63) } else { !k };
            (Datum::Double(f64::from_bits(bits)), t)
        }
        SqlType::Decimal { scale, .. } => {
            let (h, t) = rest.split_at_checked(16)?;
            let v = u128::from_be_bytes(h.try_into().ok()?) ^ (1 << 127);
            (
                Datum::Decimal(Decimal {
                    value: v as i128,
                    scale: *scale,
                }),
                t,
            )
        }
        SqlType::Date => {
            let (v, t) = fixed8(rest)?;
            (Datum::Date(DateTime::unpack(v)?), t)
        }
        SqlType::DateTime | SqlType::Timestamp => {
            let (v, t) = fixed8(rest)?;
            (Datum::DateTime(DateTime::unpack(v)?), t)
        }
        _ => {
            let mut out = Vec::new();
            let mut rest = rest;
            loop {
                let (group, t) = rest.split_at_checked(GROUP + 1)?;
                let (data, marker) = group.split_at(GROUP);
                let pad = 0xFF - usize::from(*marker.first()?);
                if pad > GROUP {
                    return None;
                }
                out.extend_from_slice(data.get(..GROUP - pad)?);
                rest = t;
                if pad > 0 {
                    break;
                }
            }
            (Datum::Bytes(out), rest)
        }
    })
}

/// The smallest key greater than every key that starts with `prefix`
/// (None if `prefix` is all 0xFF: no upper bound).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut k = prefix.to_vec();
    while let Some(last) = k.pop() {
        if last < 0xFF {
            k.push(last + 1);
            return Some(k);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enc(v: &Datum, ty: &SqlType) -> Vec<u8> {
        let mut out = Vec::new();
        encode(&mut out, v, ty);
        out
    }

    proptest! {
        #[test]
        fn signed_order_and_round_trip(a: i64, b: i64) {
            let ty = SqlType::Int { bytes: 8, unsigned: false };
            let (ka, kb) = (enc(&Datum::Int(a), &ty), enc(&Datum::Int(b), &ty));
            prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
            prop_assert_eq!(decode(&ka, &ty).map(|(d, r)| (d, r.len())), Some((Datum::Int(a), 0)));
        }

        #[test]
        fn double_order(a in -1e300f64..1e300, b in -1e300f64..1e300) {
            let (ka, kb) = (enc(&Datum::Double(a), &SqlType::Double), enc(&Datum::Double(b), &SqlType::Double));
            prop_assert_eq!(ka.cmp(&kb), a.total_cmp(&b));
            prop_assert_eq!(decode(&ka, &SqlType::Double).map(|x| x.0), Some(Datum::Double(a)));
        }

        #[test]
        fn bytes_order_and_round_trip(a: Vec<u8>, b: Vec<u8>) {
            let ty = SqlType::VarBinary(1000);
            let (ka, kb) = (enc(&Datum::Bytes(a.clone()), &ty), enc(&Datum::Bytes(b.clone()), &ty));
            prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
            let mut two = ka.clone();
            two.extend_from_slice(&kb);
            let (x, rest) = decode(&two, &ty).expect("decodes");
            prop_assert_eq!(x, Datum::Bytes(a));
            prop_assert_eq!(decode(rest, &ty).map(|x| x.0), Some(Datum::Bytes(b)));
        }

        #[test]
        fn decimal_order(a in -1_000_000i64..1_000_000, b in -1_000_000i64..1_000_000) {
            let ty = SqlType::Decimal { precision: 10, scale: 2 };
            let da = Datum::Decimal(Decimal { value: i128::from(a), scale: 2 });
            let db = Datum::Decimal(Decimal { value: i128::from(b), scale: 2 });
            prop_assert_eq!(enc(&da, &ty).cmp(&enc(&db, &ty)), a.cmp(&b));
        }

        #[test]
        fn descending_reverses_the_order_and_round_trips(
            a in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
            b in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
            x: i64,
        ) {
            let ty = SqlType::VarBinary(100);
            let int = SqlType::Int { bytes: 8, unsigned: false };
            let datum = |v: &Option<Vec<u8>>| v.clone().map_or(Datum::Null, Datum::Bytes);
            let key = |v: &Option<Vec<u8>>| {
                let mut k = Vec::new();
                encode_dir(&mut k, &datum(v), &ty, true);
                encode_dir(&mut k, &Datum::Int(x), &int, true);
                k
            };
            let (ka, kb) = (key(&a), key(&b));
            // NULL (None) sorts first ascending, so last descending.
            prop_assert_eq!(ka.cmp(&kb), b.cmp(&a));
            let (d, rest) = decode_dir(&ka, &ty, true).expect("decodes");
            prop_assert_eq!(d, datum(&a));
            prop_assert_eq!(decode_dir(rest, &int, true), Some((Datum::Int(x), &[][..])));
        }

        #[test]
        fn garbage_never_panics(buf: Vec<u8>) {
            for ty in [SqlType::Int { bytes: 4, unsigned: true }, SqlType::Text(100), SqlType::Date, SqlType::Decimal { precision: 5, scale: 1 }] {
                let _ = decode(&buf, &ty);
                let _ = decode_dir(&buf, &ty, true);
            }
        }
    }

    #[test]
    fn null_sorts_first() {
        let ty = SqlType::Int {
            bytes: 4,
            unsigned: false,
        };
        assert!(enc(&Datum::Null, &ty) < enc(&Datum::Int(i64::MIN), &ty));
    }
}
