//! Scalar functions (`CONCAT`, `COALESCE`, `ROUND`, ...). Arguments are
//! already evaluated; a NULL argument gives NULL unless the function says
//! otherwise (COALESCE, IFNULL, IF, CONCAT_WS).

use crate::error::{Error, Result};
use crate::types::{compare, sort_order, DateTime, Datum, Decimal};
use std::cmp::Ordering;

fn text(d: &Datum) -> Option<String> {
    d.to_text()
}

fn int_arg(d: &Datum) -> Option<i64> {
    d.to_i128()
        .or_else(|| d.to_f64().map(|f| f.round() as i128))
        .map(|v| v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
}

/// Calls scalar function `name` (upper case) on `args`.
pub fn call(name: &str, args: Vec<Datum>) -> Result<Datum> {
    let a0 = args.first().cloned().unwrap_or(Datum::Null);
    let a1 = args.get(1).cloned().unwrap_or(Datum::Null);
    let a2 = args.get(2).cloned().unwrap_or(Datum::Null);
    Ok(match name {
        "COALESCE" => args
            .into_iter()
            .find(|a| !a.is_null())
            .unwrap_or(Datum::Null),
        "IFNULL" => {
            if a0.is_null() {
                a1
            } else {
                a0
            }
        }
        "NULLIF" => {
            if compare(&a0, &a1) == Some(Ordering::Equal) {
                Datum::Null
            } else {
                a0
            }
        }
        "IF" => {
            if a0.truth() == Some(true) {
                a1
            } else {
                a2
            }
        }
        "ISNULL" => Datum::from_bool(a0.is_null()),
        "CONCAT" => {
            let mut out = Vec::new();
            for a in &args {
                match a.to_bytes() {
                    Some(b) => out.extend_from_slice(&b),
                    None => return Ok(Datum::Null),
                }
            }
            Datum::Bytes(out)
        }
        "CONCAT_WS" => {
            let Some(sep) = a0.to_bytes() else {
                return Ok(Datum::Null);
            };
            let parts: Vec<Vec<u8>> = args.iter().skip(1).filter_map(Datum::to_bytes).collect();
            Datum::Bytes(parts.join(sep.as_slice()))
        }
        "LENGTH" | "OCTET_LENGTH" => a0
            .to_bytes()
            .map_or(Datum::Null, |b| Datum::Int(b.len() as i64)),
        "CHAR_LENGTH" | "CHARACTER_LENGTH" => {
            text(&a0).map_or(Datum::Null, |s| Datum::Int(s.chars().count() as i64))
        }
        "LOWER" | "LCASE" => text(&a0).map_or(Datum::Null, |s| {
            Datum::text(&simple_case(&s, char::to_lowercase))
        }),
        "UPPER" | "UCASE" => text(&a0).map_or(Datum::Null, |s| {
            Datum::text(&simple_case(&s, char::to_uppercase))
        }),
        "TRIM" => text(&a0).map_or(Datum::Null, |s| Datum::text(s.trim_matches(' '))),
        "LTRIM" => text(&a0).map_or(Datum::Null, |s| Datum::text(s.trim_start_matches(' '))),
        "RTRIM" => text(&a0).map_or(Datum::Null, |s| Datum::text(s.trim_end_matches(' '))),
        "HEX" => match &a0 {
            Datum::Null => Datum::Null,
            Datum::Bytes(b) => {
                Datum::text(&b.iter().map(|x| format!("{x:02X}")).collect::<String>())
            }
            other => Datum::text(&format!("{:X}", int_arg(other).unwrap_or(0))),
        },
        "SUBSTRING" => {
            let (Some(s), Some(pos)) = (text(&a0), int_arg(&a1)) else {
                return Ok(Datum::Null);
            };
            let chars: Vec<char> = s.chars().collect();
            let n = chars.len() as i64;
            let start = if pos > 0 {
                pos - 1
            } else if pos < 0 {
                n + pos
            } else {
                return Ok(Datum::text(""));
            };
            if start < 0 || start >= n {
                return Ok(Datum::text(""));
            }
            let len = if args.len() > 2 {
                match int_arg(&a2) {
                    Some(l) => l.max(0),
                    None => return Ok(Datum::Null),
                }
            } else {
                n
            };
            let end = (start + len).min(n);
            Datum::text(
                &chars
                    .get(start as usize..end as usize)
                    .unwrap_or(&[])
                    .iter()
                    .collect::<String>(),
            )
        }
        "LEFT" | "RIGHT" => {
            let (Some(s), Some(k)) = (text(&a0), int_arg(&a1)) else {
                return Ok(Datum::Null);
            };
            let chars: Vec<char> = s.chars().collect();
            let k = (k.max(0) as usize).min(chars.len());
            let part = if name == "LEFT" {
                chars.get(..k)
            } else {
                chars.get(chars.len() - k..)
            };
            Datum::text(&part.unwrap_or(&[]).iter().collect::<String>())
        }
        "REPEAT" => {
            let (Some(s), Some(k)) = (text(&a0), int_arg(&a1)) else {
                return Ok(Datum::Null);
            };
            let k = usize::try_from(k.max(0)).unwrap_or(0);
            if s.len().saturating_mul(k) > 64 << 20 {
                return Err(Error::WrongArguments(
                    "REPEAT (result larger than max_allowed_packet)".into(),
                ));
            }
            Datum::text(&s.repeat(k))
        }
        "REPLACE" => {
            let (Some(s), Some(from), Some(to)) = (text(&a0), text(&a1), text(&a2)) else {
                return Ok(Datum::Null);
            };
            if from.is_empty() {
                Datum::text(&s)
            } else {
                Datum::text(&s.replace(&from, &to))
            }
        }
        "ABS" => match a0 {
            Datum::Int(v) => Datum::Int(
                v.checked_abs()
                    .ok_or_else(|| Error::OutOfRange("BIGINT value".into(), 0))?,
            ),
            Datum::Decimal(d) => Datum::Decimal(Decimal {
                value: d.value.abs(),
                scale: d.scale,
            }),
            Datum::Null => Datum::Null,
            Datum::UInt(v) => Datum::UInt(v),
            other => Datum::Double(other.to_f64().unwrap_or(0.0).abs()),
        },
        "SIGN" => a0.to_f64().map_or(Datum::Null, |f| {
            Datum::Int(if f > 0.0 {
                1
            } else if f < 0.0 {
                -1
            } else {
                0
            })
        }),
        "FLOOR" | "CEIL" | "CEILING" => match &a0 {
            Datum::Null => Datum::Null,
            Datum::Int(_) | Datum::UInt(_) => a0,
            Datum::Decimal(d) => {
                let p = 10i128.pow(u32::from(d.scale));
                let q = d.value.div_euclid(p);
                let up = name != "FLOOR" && d.value.rem_euclid(p) != 0;
                Datum::Int(
                    i64::try_from(q + i128::from(up))
                        .map_err(|_| Error::OutOfRange("BIGINT value".into(), 0))?,
                )
            }
            other => {
                let f = other.to_f64().unwrap_or(0.0);
                Datum::Double(if name == "FLOOR" { f.floor() } else { f.ceil() })
            }
        },
        "ROUND" | "TRUNCATE" => {
            let places = if args.len() > 1 {
                int_arg(&a1).unwrap_or(0)
            } else {
                0
            };
            match &a0 {
                Datum::Null => Datum::Null,
                Datum::Int(_) | Datum::UInt(_) if places >= 0 => a0,
                Datum::Int(_) | Datum::UInt(_) | Datum::Decimal(_) if places < 0 => {
                    // To tens, hundreds, ...: on the integer part.
                    let d = a0.to_decimal().unwrap_or(Decimal::from_i128(0));
                    let whole = if name == "ROUND" {
                        d.rescale(0)
                    } else {
                        d.value
                            .checked_div(10i128.pow(u32::from(d.scale)))
                            .map(Decimal::from_i128)
                    }
                    .ok_or_else(|| Error::OutOfRange("DECIMAL value".into(), 0))?;
                    let k = 10i128.pow(u32::try_from((-places).min(38)).unwrap_or(38));
                    let v = whole.value;
                    let q = if name == "ROUND" {
                        (v + v.signum() * (k / 2)) / k
                    } else {
                        v / k
                    };
                    let r = q
                        .checked_mul(k)
                        .ok_or_else(|| Error::OutOfRange("DECIMAL value".into(), 0))?;
                    match a0 {
                        Datum::Decimal(_) => Datum::Decimal(Decimal::from_i128(r)),
                        _ => i64::try_from(r)
                            .map_or(Datum::Decimal(Decimal::from_i128(r)), Datum::Int),
                    }
                }
                Datum::Double(f) => {
                    let m = 10f64.powi(places.clamp(-30, 30) as i32);
                    let v = if name == "ROUND" {
                        (f * m).round() / m
                    } else {
                        (f * m).trunc() / m
                    };
                    Datum::Double(v)
                }
                other => {
                    let d = other.to_decimal().unwrap_or(Decimal::from_i128(0));
                    let s = u8::try_from(places.clamp(0, 30)).unwrap_or(0);
                    let r = if name == "ROUND" {
                        d.rescale(s)
                    } else {
                        let drop = u32::from(d.scale.saturating_sub(s));
                        Some(Decimal {
                            value: d.value / 10i128.pow(drop),
                            scale: d.scale.min(s),
                        })
                    };
                    Datum::Decimal(r.ok_or_else(|| Error::OutOfRange("DECIMAL value".into(), 0))?)
                }
            }
        }
        "MOD" => crate::expr::binary(crate::expr::BinOp::Mod, &a0, &a1)?,
        "GREATEST" | "LEAST" => {
            if args.iter().any(Datum::is_null) {
                return Ok(Datum::Null);
            }
            let want = if name == "GREATEST" {
                Ordering::Greater
            } else {
                Ordering::Less
            };
            let mut best = a0;
            for a in args.into_iter().skip(1) {
                if sort_order(&a, &best) == want {
                    best = a;
                }
            }
            best
        }
        "NOW" | "CURRENT_TIMESTAMP" | "SYSDATE" | "UTC_TIMESTAMP" => {
            Datum::DateTime(DateTime::now())
        }
        "CURDATE" | "CURRENT_DATE" => Datum::Date(DateTime::now().date_only()),
        "DATE" => match &a0 {
            Datum::Date(d) | Datum::DateTime(d) => Datum::Date(d.date_only()),
            other => text(other)
                .and_then(|t| DateTime::parse(&t))
                .map_or(Datum::Null, |d| Datum::Date(d.date_only())),
        },
        "LAST_INSERT_ID" => a0,
        other => return Err(Error::Unsupported(format!("function {other}"))),
    })
}

/// Case mapping character by character, as MySQL's collations do: a
/// character whose full mapping is several characters (ß -> SS) is kept.
fn simple_case<I: ExactSizeIterator<Item = char>>(s: &str, map: impl Fn(char) -> I) -> String {
    s.chars()
        .map(|c| {
            let mut m = map(c);
            match (m.len(), m.next()) {
                (1, Some(one)) => one,
                _ => c,
            }
        })
        .collect()
}
