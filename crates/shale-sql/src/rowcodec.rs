//! Row values (docs/tables.md, "Rows"). The primary index maps a key to
//!
//! ```text
//! u8 format (1) | varint schema_version | null bitmap (ceil(n/8) bytes)
//! | the non-NULL columns of that schema version, in its order
//! ```
//!
//! Column values by storage class: signed integers zigzag varint; unsigned
//! varint; FLOAT/DOUBLE 8 bytes little-endian; DECIMAL u8 scale + i128
//! little-endian; strings varint length + bytes; DATE/DATETIME varint of
//! the packed value. The class of a column never changes across schema
//! versions (only widening DDL is instant), so a row written under an old
//! version decodes with today's column types.

use crate::types::{DateTime, Datum, Decimal, SqlType};

const ROW_FORMAT: u8 = 1;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
fn get_varint(buf: &[u8]) -> Option<(u64, &[u8])> {
    // One byte (lengths and small integers) in line, without the loop.
    if let Some((&b, rest)) = buf.split_first() {
        if b < 0x80 {
            return Some((u64::from(b), rest));
        }
    }
    let mut v = 0u64;
    for (i, &b) in buf.iter().enumerate().take(10) {
        v |= u64::from(b & 0x7F) << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, buf.get(i + 1..)?));
        }
    }
    None
}

/// Encodes `values` (one per column of the schema version, coerced to
/// `types`) as a row of `version`.
pub fn encode(version: u32, values: &[Datum], types: &[&SqlType]) -> Vec<u8> {
    // An upper bound of the encoded size, so the row is written into one
    // allocation (grown from one byte it was reallocated 4-5 times).
    let room = 1 + 5 + values.len().div_ceil(8) + values.iter().map(encoded_bound).sum::<usize>();
    let mut out = Vec::with_capacity(room);
    out.push(ROW_FORMAT);
    put_varint(&mut out, u64::from(version));
    let bitmap_at = out.len();
    out.resize(bitmap_at + values.len().div_ceil(8), 0);
    for (i, v) in values.iter().enumerate() {
        if v.is_null() {
            if let Some(b) = out.get_mut(bitmap_at + i / 8) {
                *b |= 1 << (i % 8);
            }
            continue;
        }
        match (types.get(i), v) {
            (_, Datum::Int(n)) => put_varint(&mut out, ((n << 1) ^ (n >> 63)) as u64),
            (_, Datum::UInt(n)) => put_varint(&mut out, *n),
            (_, Datum::Double(f)) => out.extend_from_slice(&f.to_le_bytes()),
            (_, Datum::Decimal(d)) => {
                out.push(d.scale);
                out.extend_from_slice(&d.value.to_le_bytes());
            }
            (_, Datum::Date(d) | Datum::DateTime(d)) => put_varint(&mut out, d.pack()),
            (_, Datum::Bytes(b)) => {
                put_varint(&mut out, b.len() as u64);
                out.extend_from_slice(b);
            }
            (_, Datum::Null) => {}
        }
    }
    out
}

/// At least the bytes [`encode`] writes for `v`.
fn encoded_bound(v: &Datum) -> usize {
    match v {
        Datum::Null => 0,
        Datum::Int(_) | Datum::UInt(_) | Datum::Date(_) | Datum::DateTime(_) => 10,
        Datum::Double(_) => 8,
        Datum::Decimal(_) => 17,
        Datum::Bytes(b) => 10 + b.len(),
    }
}

/// The schema version a row was written with.
pub fn version_of(row: &[u8]) -> Option<u32> {
    let (&fmt, rest) = row.split_first()?;
    if fmt != ROW_FORMAT {
        return None;
    }
    get_varint(rest).and_then(|(v, _)| u32::try_from(v).ok())
}

/// Decodes a row whose schema version has columns of `types`. None if the
/// bytes are not a valid row of that shape.
/// A column whose `keep` entry is false (all are kept without `keep`)
/// reads as NULL without its value being copied (scans decode only what a
/// query reads).
pub fn decode_projected(
    row: &[u8],
    types: &[&SqlType],
    keep: Option<&[bool]>,
) -> Option<Vec<Datum>> {
    let mut out = vec![Datum::Null; types.len()];
    decode_into(row, types, keep, &mut out)?;
    Some(out)
}

/// As [`decode_projected`], into `out` (one slot per column, reused across
/// rows by a scan): a string lands in the buffer its slot already holds,
/// so a scan allocates per column, not per row.
pub fn decode_into(
    row: &[u8],
    types: &[&SqlType],
    keep: Option<&[bool]>,
    out: &mut [Datum],
) -> Option<()> {
    if out.len() != types.len() {
        return None;
    }
    let (&fmt, rest) = row.split_first()?;
    if fmt != ROW_FORMAT {
        return None;
    }
    let (_, rest) = get_varint(rest)?;
    let (bitmap, mut rest) = rest.split_at_checked(types.len().div_ceil(8))?;
    for (i, (ty, slot)) in types.iter().zip(out.iter_mut()).enumerate() {
        if bitmap.get(i / 8)? & (1 << (i % 8)) != 0 {
            *slot = Datum::Null;
            continue;
        }
        let wanted = keep.is_none_or(|k| k.get(i).copied().unwrap_or(true));
        if wanted && is_varlen(ty) {
            let (len, r) = get_varint(rest)?;
            let (b, r) = r.split_at_checked(usize::try_from(len).ok()?)?;
            match slot {
                Datum::Bytes(buf) => {
                    buf.clear();
                    buf.extend_from_slice(b);
                }
                other => *other = Datum::Bytes(b.to_vec()),
            }
            rest = r;
        } else {
            let (v, r) = decode_value(rest, ty, wanted)?;
            *slot = v;
            rest = r;
        }
    }
    rest.is_empty().then_some(())
}

/// Stored as varint length + bytes (the catch-all arm of `decode_one`).
fn is_varlen(ty: &SqlType) -> bool {
    !matches!(
        ty,
        SqlType::Int { .. }
            | SqlType::Float
            | SqlType::Double
            | SqlType::Decimal { .. }
            | SqlType::Date
            | SqlType::DateTime
            | SqlType::Timestamp
    )
}

/// One value and what follows it; `wanted` false: skipped (NULL), its
/// bytes still checked for length.
fn decode_value<'a>(buf: &'a [u8], ty: &SqlType, wanted: bool) -> Option<(Datum, &'a [u8])> {
    let (v, rest) = decode_one(buf, ty, wanted)?;
    Some((if wanted { v } else { Datum::Null }, rest))
}

fn decode_one<'a>(buf: &'a [u8], ty: &SqlType, copy: bool) -> Option<(Datum, &'a [u8])> {
    Some(match ty {
        SqlType::Int {
            unsigned: false, ..
        } => {
            let (z, r) = get_varint(buf)?;
            (Datum::Int(((z >> 1) as i64) ^ -((z & 1) as i64)), r)
        }
        SqlType::Int { unsigned: true, .. } => {
            let (v, r) = get_varint(buf)?;
            (Datum::UInt(v), r)
        }
        SqlType::Float | SqlType::Double => {
            let (h, r) = buf.split_at_checked(8)?;
            (Datum::Double(f64::from_le_bytes(h.try_into().ok()?)), r)
        }
        SqlType::Decimal { .. } => {
            let (&scale, r) = buf.split_first()?;
            let (h, r) = r.split_at_checked(16)?;
            (
                Datum::Decimal(Decimal {
                    value: i128::from_le_bytes(h.try_into().ok()?),
                    scale,
                }),
                r,
            )
        }
        SqlType::Date => {
            let (v, r) = get_varint(buf)?;
            (Datum::Date(DateTime::unpack(v)?), r)
        }
        SqlType::DateTime | SqlType::Timestamp => {
            let (v, r) = get_varint(buf)?;
            (Datum::DateTime(DateTime::unpack(v)?), r)
        }
        _ => {
            let (len, r) = get_varint(buf)?;
            let (b, r) = r.split_at_checked(usize::try_from(len).ok()?)?;
            (
                if copy {
                    Datum::Bytes(b.to_vec())
                } else {
                    Datum::Null
                },
                r,
            )
        }
    })
}

/// How a column's value is stored, resolved once per scan from its type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// Zigzag varint (signed integers).
    Signed,
    /// Varint (unsigned integers).
    Unsigned,
    /// 8 bytes little-endian (FLOAT, DOUBLE).
    Double,
    /// u8 scale + i128 little-endian (17 bytes).
    Decimal,
    Date,
    DateTime,
    /// Varint length + bytes.
    Bytes,
}

impl Class {
    fn of(ty: &SqlType) -> Class {
        match ty {
            SqlType::Int {
                unsigned: false, ..
            } => Class::Signed,
            SqlType::Int { unsigned: true, .. } => Class::Unsigned,
            SqlType::Float | SqlType::Double => Class::Double,
            SqlType::Decimal { .. } => Class::Decimal,
            SqlType::Date => Class::Date,
            SqlType::DateTime | SqlType::Timestamp => Class::DateTime,
            _ => Class::Bytes,
        }
    }
}

/// Skips one varint; None if it runs past the buffer or past 10 bytes.
#[inline]
fn skip_varint(buf: &[u8]) -> Option<&[u8]> {
    let n = buf.iter().take(10).position(|&b| b & 0x80 == 0)?;
    buf.get(n + 1..)
}

/// A decode plan for the rows of one schema version: each column's storage
/// class and whether the query reads it, resolved once per scan rather than
/// per row and column (a scan decodes a million rows through one plan).
/// Decodes exactly as [`decode_into`] with the same `types` and `keep`.
#[derive(Clone, Debug)]
pub struct RowLayout {
    columns: Vec<(Class, bool)>,
    bitmap_len: usize,
}

impl RowLayout {
    pub fn new(types: &[&SqlType], keep: Option<&[bool]>) -> RowLayout {
        let columns = types
            .iter()
            .enumerate()
            .map(|(i, ty)| {
                let wanted = keep.is_none_or(|k| k.get(i).copied().unwrap_or(true));
                (Class::of(ty), wanted)
            })
            .collect();
        RowLayout {
            columns,
            bitmap_len: types.len().div_ceil(8),
        }
    }

    /// Decodes `row` into `out` (one slot per column): a read string lands
    /// in the buffer its slot already holds, a column not read is skipped
    /// over and its slot set to NULL. None if the bytes are not a row of
    /// this shape.
    pub fn decode(&self, row: &[u8], out: &mut [Datum]) -> Option<()> {
        if out.len() != self.columns.len() {
            return None;
        }
        let (&fmt, rest) = row.split_first()?;
        if fmt != ROW_FORMAT {
            return None;
        }
        let rest = skip_varint(rest)?;
        let (bitmap, mut rest) = rest.split_at_checked(self.bitmap_len)?;
        for (i, (&(class, wanted), slot)) in self.columns.iter().zip(out.iter_mut()).enumerate() {
            if bitmap.get(i / 8)? & (1 << (i % 8)) != 0 {
                *slot = Datum::Null;
                continue;
            }
            if !wanted {
                rest = match class {
                    Class::Double => rest.get(8..)?,
                    Class::Decimal => rest.get(17..)?,
                    Class::Bytes => {
                        let (len, r) = get_varint(rest)?;
                        r.get(usize::try_from(len).ok()?..)?
                    }
                    Class::Signed | Class::Unsigned => skip_varint(rest)?,
                    // A date is checked even when skipped, as `decode_into`
                    // checks it.
                    Class::Date | Class::DateTime => {
                        let (v, r) = get_varint(rest)?;
                        DateTime::unpack(v)?;
                        r
                    }
                };
                if !matches!(slot, Datum::Null) {
                    *slot = Datum::Null;
                }
                continue;
            }
            rest = match class {
                Class::Signed => {
                    let (z, r) = get_varint(rest)?;
                    *slot = Datum::Int(((z >> 1) as i64) ^ -((z & 1) as i64));
                    r
                }
                Class::Unsigned => {
                    let (v, r) = get_varint(rest)?;
                    *slot = Datum::UInt(v);
                    r
                }
                Class::Bytes => {
                    let (len, r) = get_varint(rest)?;
                    let (b, r) = r.split_at_checked(usize::try_from(len).ok()?)?;
                    match slot {
                        Datum::Bytes(buf) => {
                            buf.clear();
                            buf.extend_from_slice(b);
                        }
                        other => *other = Datum::Bytes(b.to_vec()),
                    }
                    r
                }
                _ => {
                    let ty = match class {
                        Class::Double => SqlType::Double,
                        Class::Date => SqlType::Date,
                        Class::DateTime => SqlType::DateTime,
                        _ => SqlType::Decimal {
                            precision: 38,
                            scale: 0,
                        },
                    };
                    let (v, r) = decode_one(rest, &ty, true)?;
                    *slot = v;
                    r
                }
            };
        }
        rest.is_empty().then_some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(a: Option<i64>, b: Option<u64>, s: Option<Vec<u8>>, f: Option<f64>, v in 0u32..1000) {
            let types = [
                SqlType::Int { bytes: 8, unsigned: false },
                SqlType::Int { bytes: 8, unsigned: true },
                SqlType::Blob(1 << 20),
                SqlType::Double,
            ];
            let t: Vec<&SqlType> = types.iter().collect();
            let row = vec![
                a.map_or(Datum::Null, Datum::Int),
                b.map_or(Datum::Null, Datum::UInt),
                s.map_or(Datum::Null, Datum::Bytes),
                f.filter(|x| !x.is_nan()).map_or(Datum::Null, Datum::Double),
            ];
            let enc = encode(v, &row, &t);
            // Written into the one allocation sized up front.
            let bound = 6 + 1 + row.iter().map(encoded_bound).sum::<usize>();
            prop_assert!(enc.len() <= bound && enc.capacity() == bound, "{} {} {}", enc.len(), enc.capacity(), bound);
            prop_assert_eq!(version_of(&enc), Some(v));
            prop_assert_eq!(decode_projected(&enc, &t, None), Some(row.clone()));
            // Only the kept columns are read; the others are NULL.
            let keep = [true, false, false, true];
            let projected: Vec<Datum> = row
                .iter()
                .zip(keep)
                .map(|(d, k)| if k { d.clone() } else { Datum::Null })
                .collect();
            prop_assert_eq!(decode_projected(&enc, &t, Some(&keep)), Some(projected.clone()));
            // Into a reused buffer whose slots hold other values.
            let mut buf = vec![Datum::Bytes(b"old".to_vec()); 4];
            prop_assert_eq!(decode_into(&enc, &t, Some(&keep), &mut buf), Some(()));
            prop_assert_eq!(&buf, &projected);
            prop_assert_eq!(decode_into(&enc, &t, None, &mut buf), Some(()));
            prop_assert_eq!(&buf, &row);
            prop_assert_eq!(decode_into(&enc, &t, None, &mut buf[..3]), None);
        }

        /// The per-scan plan decodes every row as `decode_into` does, for
        /// every keep mask, over reused slots, and rejects what it rejects.
        #[test]
        fn layout_matches_decode_into(
            a: Option<i64>, b: Option<u64>, s: Option<Vec<u8>>, f: Option<f64>,
            d: Option<i128>, day in proptest::option::of(0u64..4_000_000_000_000),
            mask in 0u8..64, cut in 0usize..64, garbage: Vec<u8>,
        ) {
            let types = [
                SqlType::Int { bytes: 8, unsigned: false },
                SqlType::Int { bytes: 8, unsigned: true },
                SqlType::Char(200),
                SqlType::Double,
                SqlType::Decimal { precision: 38, scale: 2 },
                SqlType::DateTime,
            ];
            let t: Vec<&SqlType> = types.iter().collect();
            let row = vec![
                a.map_or(Datum::Null, Datum::Int),
                b.map_or(Datum::Null, Datum::UInt),
                s.map_or(Datum::Null, Datum::Bytes),
                f.filter(|x| !x.is_nan()).map_or(Datum::Null, Datum::Double),
                d.map_or(Datum::Null, |value| Datum::Decimal(Decimal { value, scale: 2 })),
                day.and_then(DateTime::unpack).map_or(Datum::Null, Datum::DateTime),
            ];
            let keep: Vec<bool> = (0..6).map(|i| mask & (1 << i) != 0).collect();
            let enc = encode(3, &row, &t);
            let truncated = &enc[..cut.min(enc.len())];
            for (bytes, k) in [(&enc[..], Some(&keep[..])), (&enc[..], None), (truncated, Some(&keep[..])), (&garbage[..], None)] {
                let layout = RowLayout::new(&t, k);
                let mut want = vec![Datum::Bytes(b"old".to_vec()); 6];
                let mut got = want.clone();
                let w = decode_into(bytes, &t, k, &mut want);
                prop_assert_eq!(layout.decode(bytes, &mut got), w);
                if w.is_some() {
                    prop_assert_eq!(&got, &want);
                }
                prop_assert_eq!(layout.decode(bytes, &mut got[..5]), None);
            }
        }

        #[test]
        fn garbage_never_panics(buf: Vec<u8>) {
            let types = [SqlType::Text(10), SqlType::Decimal { precision: 5, scale: 2 }, SqlType::Date];
            let t: Vec<&SqlType> = types.iter().collect();
            let _ = decode_projected(&buf, &t, None);
            let _ = decode_projected(&buf, &t, Some(&[false, true, false]));
            let _ = version_of(&buf);
            let mut out = vec![Datum::Bytes(vec![1]); 3];
            let _ = decode_into(&buf, &t, None, &mut out);
        }
    }
}
