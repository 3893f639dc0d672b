//! The binary protocol of prepared statements (docs/mysql-protocol.md,
//! "Prepared statements"): COM_STMT_EXECUTE parameters in, binary result
//! rows out.
//!
//! Each value's layout follows its type: TINY 1 byte, SHORT/YEAR 2,
//! LONG/INT24 4, LONGLONG 8, FLOAT 4, DOUBLE 8 (all little-endian), DATE /
//! DATETIME / TIMESTAMP and TIME a length byte (0, 4, 7 or 11; 0, 8 or 12)
//! then the fields present, and everything else (strings, blobs, DECIMAL) a
//! `string<lenenc>`. NULLs are not sent; a bitmap marks them.
//!
//! Worked example: executing a statement with parameters `(42, NULL)` bound
//! as LONGLONG and VARCHAR sends, after the statement id, flags and
//! iteration count: null bitmap `02`, new-params-bound `01`, types
//! `08 00  0f 00`, then the one non-NULL value `2a 00 00 00 00 00 00 00`.

use super::consts::ColumnType;
use super::wire::{put_lenenc_bytes, Reader};
use super::ProtocolError;
use crate::backend::{DateTime, Duration, Value};

/// A parameter type as bound by the client: the type byte and whether the
/// integer is unsigned (the flag byte's 0x80 bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamType {
    pub code: u8,
    pub unsigned: bool,
}

/// A decoded COM_STMT_EXECUTE (after its command byte).
#[derive(Debug)]
pub struct Execute {
    pub stmt_id: u32,
    pub flags: u8,
    pub params: Vec<Value>,
    /// The types, when the client (re)bound them in this packet.
    pub new_types: Option<Vec<ParamType>>,
}

/// Decodes COM_STMT_EXECUTE for a statement with `num_params` parameters.
/// `bound` holds the types from an earlier execute (clients send them
/// once); `long_data[i]`, when present, is parameter `i`'s value from
/// COM_STMT_SEND_LONG_DATA, and its bytes are then not in this packet.
pub fn decode_execute(
    body: &[u8],
    num_params: usize,
    bound: Option<&[ParamType]>,
    long_data: &[Option<Vec<u8>>],
) -> Result<Execute, ProtocolError> {
    decode_execute_reusing(body, num_params, bound, long_data, Vec::new())
}

/// As [`decode_execute`], the parameters decoded into `params` (cleared
/// first): a connection hands back the vector of its last execute, so an
/// execute allocates no parameter list once one is sized.
pub fn decode_execute_reusing(
    body: &[u8],
    num_params: usize,
    bound: Option<&[ParamType]>,
    long_data: &[Option<Vec<u8>>],
    mut params: Vec<Value>,
) -> Result<Execute, ProtocolError> {
    params.clear();
    let mut r = Reader::new(body);
    let stmt_id = r.u32("statement id")?;
    let flags = r.u8("cursor flags")?;
    let _iterations = r.u32("iteration count")?;
    if num_params == 0 {
        return Ok(Execute {
            stmt_id,
            flags,
            params,
            new_types: None,
        });
    }
    let bitmap = r.bytes(num_params.div_ceil(8), "null bitmap")?;
    let new_bound = r.u8("new params bound flag")? == 1;
    let new_types = if new_bound {
        let mut t = Vec::with_capacity(num_params);
        for _ in 0..num_params {
            let code = r.u8("parameter type")?;
            let flag = r.u8("parameter flag")?;
            t.push(ParamType {
                code,
                unsigned: flag & 0x80 != 0,
            });
        }
        Some(t)
    } else {
        None
    };
    let Some(types) = new_types.as_deref().or(bound) else {
        return Err(ProtocolError::Malformed(
            "parameters sent before their types",
        ));
    };
    params.reserve(num_params);
    for i in 0..num_params {
        let is_null = bitmap.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0);
        // let-else: `ok_or` built and dropped an error per parameter.
        let Some(&ty) = types.get(i) else {
            return Err(ProtocolError::Malformed("parameter types"));
        };
        let value = if let Some(Some(data)) = long_data.get(i) {
            Value::Bytes(data.clone())
        } else if is_null || ty.code == ColumnType::Null as u8 {
            Value::Null
        } else {
            decode_value(&mut r, ty)?
        };
        params.push(value);
    }
    Ok(Execute {
        stmt_id,
        flags,
        params,
        new_types,
    })
}

fn decode_value(r: &mut Reader<'_>, ty: ParamType) -> Result<Value, ProtocolError> {
    const TINY: u8 = ColumnType::Tiny as u8;
    const SHORT: u8 = ColumnType::Short as u8;
    const YEAR: u8 = ColumnType::Year as u8;
    const LONG: u8 = ColumnType::Long as u8;
    const INT24: u8 = ColumnType::Int24 as u8;
    const LONGLONG: u8 = ColumnType::LongLong as u8;
    const FLOAT: u8 = ColumnType::Float as u8;
    const DOUBLE: u8 = ColumnType::Double as u8;
    const DATE: u8 = ColumnType::Date as u8;
    const DATETIME: u8 = ColumnType::DateTime as u8;
    const TIMESTAMP: u8 = ColumnType::Timestamp as u8;
    const TIME: u8 = ColumnType::Time as u8;
    let int = |n: i64, u: u64| {
        if ty.unsigned {
            Value::UInt(u)
        } else {
            Value::Int(n)
        }
    };
    Ok(match ty.code {
        TINY => {
            let b = r.u8("TINY value")?;
            int(i64::from(i8::from_le_bytes([b])), u64::from(b))
        }
        SHORT | YEAR => {
            let v = r.u16("SHORT value")?.to_le_bytes();
            int(
                i64::from(i16::from_le_bytes(v)),
                u64::from(u16::from_le_bytes(v)),
            )
        }
        LONG | INT24 => {
            let v = r.u32("LONG value")?.to_le_bytes();
            int(
                i64::from(i32::from_le_bytes(v)),
                u64::from(u32::from_le_bytes(v)),
            )
        }
        LONGLONG => {
            let v = r.u64("LONGLONG value")?.to_le_bytes();
            int(i64::from_le_bytes(v), u64::from_le_bytes(v))
        }
        FLOAT => Value::Float(f32::from_bits(r.u32("FLOAT value")?)),
        DOUBLE => Value::Double(f64::from_bits(r.u64("DOUBLE value")?)),
        DATE | DATETIME | TIMESTAMP => {
            let d = decode_datetime(r)?;
            if ty.code == DATE {
                Value::Date(d)
            } else {
                Value::DateTime(d)
            }
        }
        TIME => Value::Time(decode_time(r)?),
        _ => Value::Bytes(r.lenenc_bytes("string value")?.to_vec()),
    })
}

fn decode_datetime(r: &mut Reader<'_>) -> Result<DateTime, ProtocolError> {
    let len = r.u8("DATETIME length")?;
    let mut d = DateTime::default();
    if !matches!(len, 0 | 4 | 7 | 11) {
        return Err(ProtocolError::Malformed("DATETIME length"));
    }
    if len >= 4 {
        d.year = r.u16("year")?;
        d.month = r.u8("month")?;
        d.day = r.u8("day")?;
    }
    if len >= 7 {
        d.hour = r.u8("hour")?;
        d.minute = r.u8("minute")?;
        d.second = r.u8("second")?;
    }
    if len == 11 {
        d.micros = r.u32("microseconds")?;
    }
    Ok(d)
}

fn decode_time(r: &mut Reader<'_>) -> Result<Duration, ProtocolError> {
    let len = r.u8("TIME length")?;
    let mut t = Duration::default();
    if !matches!(len, 0 | 8 | 12) {
        return Err(ProtocolError::Malformed("TIME length"));
    }
    if len >= 8 {
        t.negative = r.u8("sign")? == 1;
        t.days = r.u32("days")?;
        t.hour = r.u8("hour")?;
        t.minute = r.u8("minute")?;
        t.second = r.u8("second")?;
    }
    if len == 12 {
        t.micros = r.u32("microseconds")?;
    }
    Ok(t)
}

/// Encodes one binary result row for columns of `types`. A value is
/// converted to its column's type (an `Int` in a DOUBLE column is sent as a
/// double); one that cannot be is an error, never silently wrong bytes.
pub fn binary_row(types: &[ColumnType], values: &[Value]) -> Result<Vec<u8>, ProtocolError> {
    let mut out = Vec::new();
    binary_row_into(&mut out, types, values)?;
    Ok(out)
}

/// As [`binary_row`], appended to `out`.
pub fn binary_row_into(
    out: &mut Vec<u8>,
    types: &[ColumnType],
    values: &[Value],
) -> Result<(), ProtocolError> {
    out.push(0x00);
    let bitmap_at = out.len();
    // Offset 2: the first two bits of a result row's bitmap are reserved.
    out.resize(bitmap_at + (values.len() + 2).div_ceil(8), 0);
    for (i, (v, &t)) in values.iter().zip(types).enumerate() {
        if matches!(v, Value::Null) {
            let bit = i + 2;
            if let Some(b) = out.get_mut(bitmap_at + bit / 8) {
                *b |= 1 << (bit % 8);
            }
            continue;
        }
        encode_value(out, t, v)?;
    }
    Ok(())
}

fn encode_value(out: &mut Vec<u8>, t: ColumnType, v: &Value) -> Result<(), ProtocolError> {
    let mismatch = || ProtocolError::Unsupported("a value that does not fit its column type");
    let as_i64 = || match v {
        Value::Int(n) => Some(*n),
        Value::UInt(n) => i64::try_from(*n).ok(),
        _ => None,
    };
    match t {
        ColumnType::Tiny => out.extend_from_slice(&int_bytes::<1>(v).ok_or_else(mismatch)?),
        ColumnType::Short | ColumnType::Year => {
            out.extend_from_slice(&int_bytes::<2>(v).ok_or_else(mismatch)?)
        }
        ColumnType::Long | ColumnType::Int24 => {
            out.extend_from_slice(&int_bytes::<4>(v).ok_or_else(mismatch)?)
        }
        ColumnType::LongLong => out.extend_from_slice(&int_bytes::<8>(v).ok_or_else(mismatch)?),
        ColumnType::Float => {
            let f = match v {
                Value::Float(f) => *f,
                Value::Double(d) => *d as f32, // a FLOAT column holds single precision
                _ => as_i64().ok_or_else(mismatch)? as f32, // nearest float, as MySQL converts
            };
            out.extend_from_slice(&f.to_le_bytes());
        }
        ColumnType::Double => {
            let d = match v {
                Value::Float(f) => f64::from(*f),
                Value::Double(d) => *d,
                _ => as_i64().ok_or_else(mismatch)? as f64, // nearest double, as MySQL converts
            };
            out.extend_from_slice(&d.to_le_bytes());
        }
        ColumnType::Date | ColumnType::DateTime | ColumnType::Timestamp => {
            let (Value::Date(d) | Value::DateTime(d)) = v else {
                return Err(mismatch());
            };
            let with_time = d.hour != 0 || d.minute != 0 || d.second != 0 || d.micros != 0;
            let len: u8 = if d.micros != 0 {
                11
            } else if with_time {
                7
            } else {
                4
            };
            out.push(len);
            out.extend_from_slice(&d.year.to_le_bytes());
            out.extend_from_slice(&[d.month, d.day]);
            if len >= 7 {
                out.extend_from_slice(&[d.hour, d.minute, d.second]);
            }
            if len == 11 {
                out.extend_from_slice(&d.micros.to_le_bytes());
            }
        }
        ColumnType::Time => {
            let Value::Time(t) = v else {
                return Err(mismatch());
            };
            let len: u8 = if t.micros != 0 { 12 } else { 8 };
            out.push(len);
            out.push(u8::from(t.negative));
            out.extend_from_slice(&t.days.to_le_bytes());
            out.extend_from_slice(&[t.hour, t.minute, t.second]);
            if len == 12 {
                out.extend_from_slice(&t.micros.to_le_bytes());
            }
        }
        // Strings and decimals go out as they are: no text copy first.
        _ => match v {
            Value::Bytes(b) => put_lenenc_bytes(out, b),
            Value::Decimal(d) => put_lenenc_bytes(out, d.as_bytes()),
            _ => {
                let mut text = Vec::new();
                v.write_text(&mut text);
                put_lenenc_bytes(out, &text);
            }
        },
    }
    Ok(())
}

/// The `N`-byte two's-complement form of an integer value, if it fits in
/// `N` bytes as a signed or an unsigned number (a column of `N` bytes holds
/// either, by its UNSIGNED flag); `None` otherwise, never a truncation.
fn int_bytes<const N: usize>(v: &Value) -> Option<[u8; N]> {
    let n = match v {
        Value::Int(n) => i128::from(*n),
        Value::UInt(n) => i128::from(*n),
        _ => return None,
    };
    let bits = u32::try_from(8 * N).ok()?;
    let min = -(1i128 << (bits - 1));
    let max = (1i128 << bits) - 1;
    if n < min || n > max {
        return None;
    }
    let all = n.to_le_bytes();
    let mut out = [0u8; N];
    out.copy_from_slice(all.get(..N)?);
    Some(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn the_worked_example_decodes() {
        let mut b = vec![7, 0, 0, 0, 0, 1, 0, 0, 0];
        b.extend_from_slice(&[0x02, 0x01, 0x08, 0x00, 0x0f, 0x00]);
        b.extend_from_slice(&42i64.to_le_bytes());
        let e = decode_execute(&b, 2, None, &[]).unwrap();
        assert_eq!(e.stmt_id, 7);
        assert_eq!(e.params, vec![Value::Int(42), Value::Null]);
        // The next execute reuses the types.
        let types = e.new_types.unwrap();
        let mut b2 = vec![7, 0, 0, 0, 0, 1, 0, 0, 0, 0x00, 0x00];
        b2.extend_from_slice(&(-1i64).to_le_bytes());
        b2.extend_from_slice(&[3, b'a', b'b', b'c']);
        let e = decode_execute(&b2, 2, Some(&types), &[]).unwrap();
        assert_eq!(
            e.params,
            vec![Value::Int(-1), Value::Bytes(b"abc".to_vec())]
        );
    }

    #[test]
    fn a_reused_parameter_list_holds_only_this_execute() {
        let mut b = vec![7, 0, 0, 0, 0, 1, 0, 0, 0];
        b.extend_from_slice(&[0x00, 0x01, 0x08, 0x00]);
        b.extend_from_slice(&5i64.to_le_bytes());
        let old = vec![Value::Bytes(b"stale".to_vec()), Value::Int(1), Value::Null];
        let cap = old.capacity();
        let e = decode_execute_reusing(&b, 1, None, &[], old).unwrap();
        assert_eq!(e.params, vec![Value::Int(5)]);
        assert_eq!(e.params.capacity(), cap, "the list was reused");
        // No parameters: the list comes back empty.
        let e = decode_execute_reusing(&b[..9], 0, None, &[], e.params).unwrap();
        assert!(e.params.is_empty());
    }

    #[test]
    fn values_round_trip_through_binary_rows() {
        let dt = DateTime {
            year: 2026,
            month: 11,
            day: 24,
            hour: 11,
            minute: 5,
            second: 44,
            micros: 120,
        };
        let cases = [
            (
                ColumnType::Tiny,
                Value::Int(-3),
                ParamType {
                    code: 1,
                    unsigned: false,
                },
            ),
            (
                ColumnType::Short,
                Value::Int(-300),
                ParamType {
                    code: 2,
                    unsigned: false,
                },
            ),
            (
                ColumnType::Long,
                Value::UInt(4_000_000_000),
                ParamType {
                    code: 3,
                    unsigned: true,
                },
            ),
            (
                ColumnType::LongLong,
                Value::Int(i64::MIN),
                ParamType {
                    code: 8,
                    unsigned: false,
                },
            ),
            (
                ColumnType::Double,
                Value::Double(2.5),
                ParamType {
                    code: 5,
                    unsigned: false,
                },
            ),
            (
                ColumnType::Float,
                Value::Float(-0.5),
                ParamType {
                    code: 4,
                    unsigned: false,
                },
            ),
            (
                ColumnType::DateTime,
                Value::DateTime(dt),
                ParamType {
                    code: 12,
                    unsigned: false,
                },
            ),
            (
                ColumnType::VarString,
                Value::Bytes(b"x".to_vec()),
                ParamType {
                    code: 0xfd,
                    unsigned: false,
                },
            ),
        ];
        for (t, v, pt) in cases {
            let row = binary_row(&[t], std::slice::from_ref(&v)).unwrap();
            // Reuse the parameter decoder: row values use the same layouts.
            let mut r = Reader::new(&row[2..]);
            assert_eq!(decode_value(&mut r, pt).unwrap(), v, "{t:?}");
            assert!(r.is_empty());
        }
    }

    #[test]
    fn null_bitmap_of_rows_starts_at_bit_two() {
        let row = binary_row(
            &[ColumnType::LongLong, ColumnType::LongLong],
            &[Value::Null, Value::Int(1)],
        )
        .unwrap();
        assert_eq!(row[0], 0);
        assert_eq!(row[1], 0b0000_0100);
        assert_eq!(&row[2..], &1i64.to_le_bytes());
    }

    #[test]
    fn bad_parameters_are_errors_not_panics() {
        let base = [7u8, 0, 0, 0, 0, 1, 0, 0, 0];
        for tail in [
            &[][..],
            &[0x00][..],
            &[0x00, 0x01, 0x08][..],
            &[0x00, 0x01, 0x08, 0x00, 1, 2][..],
            &[0x00, 0x01, 0x0c, 0x00, 5, 0][..],
        ] {
            let b = [&base[..], tail].concat();
            assert!(decode_execute(&b, 1, None, &[]).is_err(), "{tail:?}");
        }
        // Values before any types were bound.
        let b = [&base[..], &[0x00, 0x00, 1, 0, 0, 0, 0, 0, 0, 0][..]].concat();
        assert!(decode_execute(&b, 1, None, &[]).is_err());
        // A string in an integer column, or a number too wide for it, is
        // refused rather than truncated.
        assert!(binary_row(&[ColumnType::Long], &[Value::Bytes(b"x".to_vec())]).is_err());
        assert!(binary_row(&[ColumnType::Tiny], &[Value::Int(300)]).is_err());
        assert!(binary_row(&[ColumnType::Tiny], &[Value::Int(-129)]).is_err());
        assert!(binary_row(&[ColumnType::Tiny], &[Value::UInt(255)]).is_ok());
    }
}
