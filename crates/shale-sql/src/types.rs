//! SQL types and values.
//!
//! A [`Datum`] is one value as the executor handles it; a [`SqlType`] is a
//! column's declared type. Storing a datum in a column goes through
//! [`coerce`], which applies MySQL's strict mode (`STRICT_TRANS_TABLES`):
//! an out-of-range number, a too-long string, a malformed date is an error,
//! never a silent truncation. Strings are `utf8mb4` and compare bytewise
//! (`utf8mb4_bin`).

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::fmt;

/// A column's declared type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SqlType {
    /// TINYINT (1), SMALLINT (2), MEDIUMINT (3), INT (4), BIGINT (8) bytes.
    Int {
        bytes: u8,
        unsigned: bool,
    },
    Float,
    Double,
    /// DECIMAL(precision, scale), exact, precision up to 38.
    Decimal {
        precision: u8,
        scale: u8,
    },
    /// CHAR(n): at most n characters; trailing spaces are not stored.
    Char(u32),
    VarChar(u32),
    /// TEXT types: at most this many bytes.
    Text(u32),
    /// BINARY(n): exactly n bytes, padded with zero bytes.
    Binary(u32),
    VarBinary(u32),
    /// BLOB types: at most this many bytes.
    Blob(u32),
    Date,
    DateTime,
    Timestamp,
}

impl SqlType {
    /// True for the integer types.
    pub fn is_integer(&self) -> bool {
        matches!(self, SqlType::Int { .. })
    }

    /// True for character (not binary) strings.
    pub fn is_text(&self) -> bool {
        matches!(
            self,
            SqlType::Char(_) | SqlType::VarChar(_) | SqlType::Text(_)
        )
    }

    /// True for any string or byte-string type.
    pub fn is_string(&self) -> bool {
        self.is_text()
            || matches!(
                self,
                SqlType::Binary(_) | SqlType::VarBinary(_) | SqlType::Blob(_)
            )
    }

    /// The SQL spelling, as `SHOW CREATE TABLE` and `DESCRIBE` print it.
    pub fn sql_name(&self) -> String {
        match self {
            SqlType::Int { bytes, unsigned } => {
                let base = match bytes {
                    1 => "tinyint",
                    2 => "smallint",
                    3 => "mediumint",
                    4 => "int",
                    _ => "bigint",
                };
                if *unsigned {
                    format!("{base} unsigned")
                } else {
                    base.to_owned()
                }
            }
            SqlType::Float => "float".into(),
            SqlType::Double => "double".into(),
            SqlType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
            SqlType::Char(n) => format!("char({n})"),
            SqlType::VarChar(n) => format!("varchar({n})"),
            SqlType::Text(n) => text_name(*n, "text"),
            SqlType::Binary(n) => format!("binary({n})"),
            SqlType::VarBinary(n) => format!("varbinary({n})"),
            SqlType::Blob(n) => text_name(*n, "blob"),
            SqlType::Date => "date".into(),
            SqlType::DateTime => "datetime".into(),
            SqlType::Timestamp => "timestamp".into(),
        }
    }

    /// The integer range of an integer type, as i128 so every bound fits.
    fn int_range(bytes: u8, unsigned: bool) -> (i128, i128) {
        let bits = u32::from(bytes.clamp(1, 8)) * 8;
        if unsigned {
            (0, (1i128 << bits) - 1)
        } else {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        }
    }

    /// Whether a column of type `self` can become `to` without rewriting
    /// rows (the stored encoding is the same and every old value fits).
    pub fn widens_to(&self, to: &SqlType) -> bool {
        match (self, to) {
            (
                SqlType::Int {
                    bytes: a,
                    unsigned: ua,
                },
                SqlType::Int {
                    bytes: b,
                    unsigned: ub,
                },
            ) => ua == ub && b >= a,
            (SqlType::VarChar(a), SqlType::VarChar(b)) => b >= a,
            (SqlType::VarChar(a), SqlType::Text(b)) => u64::from(*b) >= u64::from(*a) * 4,
            (SqlType::VarBinary(a), SqlType::VarBinary(b)) => b >= a,
            (SqlType::Float, SqlType::Double) => true,
            (a, b) => a == b,
        }
    }
}

fn text_name(n: u32, base: &str) -> String {
    match n {
        0..=255 => format!("tiny{base}"),
        256..=65_535 => base.to_owned(),
        65_536..=16_777_215 => format!("medium{base}"),
        _ => format!("long{base}"),
    }
}

/// An exact decimal: `value * 10^-scale`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decimal {
    pub value: i128,
    pub scale: u8,
}

/// The largest scale kept by arithmetic (MySQL keeps at most 30).
const MAX_SCALE: u8 = 30;

impl Decimal {
    /// Parses `[-+]digits[.digits][e[-+]n]`.
    pub fn parse(s: &str) -> Option<Decimal> {
        let s = s.trim();
        let (mantissa, exp) = match s.find(['e', 'E']) {
            Some(p) => (s.get(..p)?, s.get(p + 1..)?.parse::<i32>().ok()?),
            None => (s, 0),
        };
        let (neg, digits) = match mantissa.as_bytes().first() {
            Some(b'-') => (true, mantissa.get(1..)?),
            Some(b'+') => (false, mantissa.get(1..)?),
            _ => (false, mantissa),
        };
        let (int, frac) = match digits.find('.') {
            Some(p) => (digits.get(..p)?, digits.get(p + 1..)?),
            None => (digits, ""),
        };
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
            return None;
        }
        let mut value: i128 = 0;
        for b in int.bytes().chain(frac.bytes()) {
            value = value.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
        }
        let mut scale = i32::try_from(frac.len()).ok()? - exp;
        while scale < 0 {
            value = value.checked_mul(10)?;
            scale += 1;
        }
        let mut d = Decimal {
            value: if neg { -value } else { value },
            scale: u8::try_from(scale).ok()?,
        };
        if d.scale > MAX_SCALE {
            d = d.rescale(MAX_SCALE)?;
        }
        Some(d)
    }

    /// The same number at `scale` (rounding half away from zero), or None
    /// if it overflows.
    pub fn rescale(self, scale: u8) -> Option<Decimal> {
        let mut v = self.value;
        match scale.cmp(&self.scale) {
            Ordering::Equal => {}
            Ordering::Greater => {
                for _ in self.scale..scale {
                    v = v.checked_mul(10)?;
                }
            }
            Ordering::Less => {
                let drop = u32::from(self.scale - scale);
                let div = 10i128.checked_pow(drop)?;
                let q = v / div;
                let r = v % div;
                v = if r.abs() * 2 >= div {
                    q + v.signum()
                } else {
                    q
                };
            }
        }
        Some(Decimal { value: v, scale })
    }

    /// Number of digits before the decimal point.
    pub fn int_digits(&self) -> u32 {
        let int = (self.value / 10i128.pow(u32::from(self.scale))).unsigned_abs();
        if int == 0 {
            0
        } else {
            int.ilog10() + 1
        }
    }

    pub fn to_f64(self) -> f64 {
        // Nearest double, as MySQL converts DECIMAL to DOUBLE.
        self.value as f64 / 10f64.powi(i32::from(self.scale))
    }

    pub fn from_i128(v: i128) -> Decimal {
        Decimal { value: v, scale: 0 }
    }

    fn align(a: Decimal, b: Decimal) -> Option<(i128, i128, u8)> {
        let s = a.scale.max(b.scale);
        Some((a.rescale(s)?.value, b.rescale(s)?.value, s))
    }

    pub fn checked_add(a: Decimal, b: Decimal) -> Option<Decimal> {
        let (x, y, s) = Self::align(a, b)?;
        Some(Decimal {
            value: x.checked_add(y)?,
            scale: s,
        })
    }

    pub fn checked_sub(a: Decimal, b: Decimal) -> Option<Decimal> {
        let (x, y, s) = Self::align(a, b)?;
        Some(Decimal {
            value: x.checked_sub(y)?,
            scale: s,
        })
    }

    pub fn checked_mul(a: Decimal, b: Decimal) -> Option<Decimal> {
        let d = Decimal {
            value: a.value.checked_mul(b.value)?,
            scale: a.scale.checked_add(b.scale)?,
        };
        if d.scale > MAX_SCALE {
            d.rescale(MAX_SCALE)
        } else {
            Some(d)
        }
    }

    /// `a / b` with four more decimals than `a` (MySQL's
    /// `div_precision_increment`); None on overflow; caller checks b != 0.
    pub fn checked_div(a: Decimal, b: Decimal) -> Option<Decimal> {
        let scale = a.scale.saturating_add(4).min(MAX_SCALE);
        // value = a * 10^(scale + b.scale - a.scale) / b, rounded.
        let shift = u32::from(scale) + u32::from(b.scale) - u32::from(a.scale);
        let num = a.value.checked_mul(10i128.checked_pow(shift + 1)?)?;
        let q = num.checked_div(b.value)?;
        let rounded = (q + 5 * q.signum()) / 10;
        Some(Decimal {
            value: rounded,
            scale,
        })
    }

    pub fn compare(a: Decimal, b: Decimal) -> Ordering {
        match Self::align(a, b) {
            Some((x, y, _)) => x.cmp(&y),
            None => a.to_f64().total_cmp(&b.to_f64()),
        }
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let neg = self.value < 0;
        let digits = self.value.unsigned_abs().to_string();
        let scale = usize::from(self.scale);
        let (int, frac) = if digits.len() > scale {
            let (i, fr) = digits.split_at(digits.len() - scale);
            (i.to_owned(), fr.to_owned())
        } else {
            ("0".to_owned(), format!("{digits:0>scale$}"))
        };
        if neg {
            f.write_str("-")?;
        }
        f.write_str(&int)?;
        if scale > 0 {
            write!(f, ".{frac}")?;
        }
        Ok(())
    }
}

/// A calendar date and time (DATE has zero time fields). Field order makes
/// the derived ordering chronological.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DateTime {
    pub year: u16,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub micros: u32,
}

impl DateTime {
    /// Parses `YYYY-MM-DD[( |T)HH:MM:SS[.ffffff]]`; None if malformed or
    /// not a calendar date (MySQL's zero date is refused, as strict mode does).
    pub fn parse(s: &str) -> Option<DateTime> {
        let s = s.trim();
        let (date, time) = match s.find([' ', 'T']) {
            Some(p) => (s.get(..p)?, Some(s.get(p + 1..)?.trim())),
            None => (s, None),
        };
        let mut it = date.split('-');
        let year: u16 = it.next()?.parse().ok()?;
        let month: u8 = it.next()?.parse().ok()?;
        let day: u8 = it.next()?.parse().ok()?;
        if it.next().is_some() || !valid_date(year, month, day) {
            return None;
        }
        let mut dt = DateTime {
            year,
            month,
            day,
            ..Default::default()
        };
        if let Some(t) = time {
            let (hms, frac) = match t.find('.') {
                Some(p) => (t.get(..p)?, Some(t.get(p + 1..)?)),
                None => (t, None),
            };
            let mut it = hms.split(':');
            dt.hour = it.next()?.parse().ok()?;
            dt.minute = it.next()?.parse().ok()?;
            dt.second = it.next().map_or(Some(0), |x| x.parse().ok())?;
            if it.next().is_some() || dt.hour > 23 || dt.minute > 59 || dt.second > 59 {
                return None;
            }
            if let Some(f) = frac {
                if f.is_empty() || f.len() > 6 || !f.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                dt.micros = format!("{f:0<6}").parse().ok()?;
            }
        }
        Some(dt)
    }

    /// Packs into a u64 whose order is chronological (for keys and rows).
    pub fn pack(&self) -> u64 {
        let ymd = (u64::from(self.year) * 13 + u64::from(self.month)) * 32 + u64::from(self.day);
        let hms =
            (u64::from(self.hour) << 12) | (u64::from(self.minute) << 6) | u64::from(self.second);
        (((ymd << 17) | hms) << 20) | u64::from(self.micros)
    }

    /// The inverse of [`DateTime::pack`]; None for a value pack never makes.
    pub fn unpack(v: u64) -> Option<DateTime> {
        let micros = u32::try_from(v & 0xF_FFFF).ok()?;
        let rest = v >> 20;
        let hms = rest & 0x1_FFFF;
        let ymd = rest >> 17;
        let day = u8::try_from(ymd % 32).ok()?;
        let ym = ymd / 32;
        let dt = DateTime {
            year: u16::try_from(ym / 13).ok()?,
            month: u8::try_from(ym % 13).ok()?,
            day,
            hour: u8::try_from(hms >> 12).ok()?,
            minute: u8::try_from((hms >> 6) & 63).ok()?,
            second: u8::try_from(hms & 63).ok()?,
            micros,
        };
        if micros > 999_999 || dt.hour > 23 || dt.minute > 59 || dt.second > 59 {
            return None;
        }
        Some(dt)
    }

    /// The current UTC time, to the second.
    pub fn now() -> DateTime {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let days = i64::try_from(secs / 86_400).unwrap_or(0);
        let rem = secs % 86_400;
        let (year, month, day) = civil_from_days(days);
        DateTime {
            year,
            month,
            day,
            hour: u8::try_from(rem / 3600).unwrap_or(0),
            minute: u8::try_from(rem / 60 % 60).unwrap_or(0),
            second: u8::try_from(rem % 60).unwrap_or(0),
            micros: 0,
        }
    }

    pub fn date_only(&self) -> DateTime {
        DateTime {
            year: self.year,
            month: self.month,
            day: self.day,
            ..Default::default()
        }
    }

    pub fn format_date(&self) -> String {
        format!("{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }

    pub fn format_datetime(&self) -> String {
        let mut s = format!(
            "{} {:02}:{:02}:{:02}",
            self.format_date(),
            self.hour,
            self.minute,
            self.second
        );
        if self.micros != 0 {
            s.push_str(&format!(".{:06}", self.micros));
        }
        s
    }
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian).
fn civil_from_days(z: i64) -> (u16, u8, u8) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        u16::try_from(y).unwrap_or(0),
        u8::try_from(m).unwrap_or(1),
        u8::try_from(d).unwrap_or(1),
    )
}

fn valid_date(y: u16, m: u8, d: u8) -> bool {
    if !(1..=9999).contains(&y) || !(1..=12).contains(&m) || d == 0 {
        return false;
    }
    let leap = (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400);
    let days = match m {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    d <= days
}

/// One SQL value.
#[derive(Clone, Debug, PartialEq)]
pub enum Datum {
    Null,
    Int(i64),
    UInt(u64),
    Double(f64),
    Decimal(Decimal),
    /// Character and binary strings.
    Bytes(Vec<u8>),
    Date(DateTime),
    DateTime(DateTime),
}

impl Datum {
    pub fn is_null(&self) -> bool {
        matches!(self, Datum::Null)
    }

    /// `*self = src.clone()`, reusing this datum's byte buffer when both are
    /// strings (derived `Clone` has no such `clone_from`).
    pub fn assign(&mut self, src: &Datum) {
        if let (Datum::Bytes(dst), Datum::Bytes(b)) = (&mut *self, src) {
            dst.clear();
            dst.extend_from_slice(b);
            return;
        }
        *self = src.clone();
    }

    pub fn text(s: &str) -> Datum {
        Datum::Bytes(s.as_bytes().to_vec())
    }

    /// The value as text, as the text protocol and string functions see it.
    pub fn to_text(&self) -> Option<String> {
        Some(match self {
            Datum::Null => return None,
            Datum::Int(v) => v.to_string(),
            Datum::UInt(v) => v.to_string(),
            Datum::Double(v) => format_double(*v),
            Datum::Decimal(d) => d.to_string(),
            Datum::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
            Datum::Date(d) => d.format_date(),
            Datum::DateTime(d) => d.format_datetime(),
        })
    }

    /// The value as bytes (strings as stored; others as their text).
    /// The bytes of a string value without copying them (others as text).
    pub fn as_bytes(&self) -> Option<std::borrow::Cow<'_, [u8]>> {
        match self {
            Datum::Null => None,
            Datum::Bytes(b) => Some(std::borrow::Cow::Borrowed(b)),
            other => other
                .to_text()
                .map(|t| std::borrow::Cow::Owned(t.into_bytes())),
        }
    }

    pub fn to_bytes(&self) -> Option<Vec<u8>> {
        match self {
            Datum::Bytes(b) => Some(b.clone()),
            other => other.to_text().map(String::into_bytes),
        }
    }

    /// As a double (strings parsed leniently, as MySQL's numeric context
    /// does: a leading number, else 0).
    pub fn to_f64(&self) -> Option<f64> {
        Some(match self {
            Datum::Null => return None,
            Datum::Int(v) => *v as f64,
            Datum::UInt(v) => *v as f64,
            Datum::Double(v) => *v,
            Datum::Decimal(d) => d.to_f64(),
            Datum::Bytes(b) => leading_number(&String::from_utf8_lossy(b)),
            Datum::Date(d) | Datum::DateTime(d) => d.pack() as f64,
        })
    }

    /// As an exact decimal when the value is exact (integers, decimals,
    /// strings holding a decimal number).
    pub fn to_decimal(&self) -> Option<Decimal> {
        match self {
            Datum::Int(v) => Some(Decimal::from_i128(i128::from(*v))),
            Datum::UInt(v) => Some(Decimal::from_i128(i128::from(*v))),
            Datum::Decimal(d) => Some(*d),
            Datum::Bytes(b) => Decimal::parse(std::str::from_utf8(b).ok()?),
            _ => None,
        }
    }

    /// As an i128 when the value is an integer (or an integral string).
    pub fn to_i128(&self) -> Option<i128> {
        match self {
            Datum::Int(v) => Some(i128::from(*v)),
            Datum::UInt(v) => Some(i128::from(*v)),
            Datum::Decimal(d) => d.rescale(0).map(|d| d.value),
            Datum::Double(f) if f.is_finite() && f.abs() < 1e38 => Some(f.round() as i128),
            Datum::Bytes(b) => {
                let s = std::str::from_utf8(b).ok()?.trim();
                s.parse::<i128>()
                    .ok()
                    .or_else(|| Decimal::parse(s)?.rescale(0).map(|d| d.value))
            }
            _ => None,
        }
    }

    /// Truth value in a boolean context: None for NULL.
    pub fn truth(&self) -> Option<bool> {
        match self {
            Datum::Null => None,
            Datum::Int(v) => Some(*v != 0),
            Datum::UInt(v) => Some(*v != 0),
            Datum::Decimal(d) => Some(d.value != 0),
            other => Some(other.to_f64().is_some_and(|f| f != 0.0)),
        }
    }

    pub fn from_bool(b: bool) -> Datum {
        Datum::Int(i64::from(b))
    }
}

/// A double in MySQL's shortest round-trip form.
pub fn format_double(v: f64) -> String {
    if v.is_finite() && v == v.trunc() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn leading_number(s: &str) -> f64 {
    let s = s.trim_start();
    let mut end = 0;
    for (i, c) in s.char_indices() {
        let ok = c.is_ascii_digit() || c == '.' || ((c == '-' || c == '+') && i == 0);
        if !ok {
            break;
        }
        end = i + c.len_utf8();
    }
    s.get(..end).and_then(|p| p.parse().ok()).unwrap_or(0.0)
}

/// Compares two non-NULL values as MySQL does: numbers numerically (a
/// string beside a number is read as a number), dates chronologically (a
/// string beside a date is parsed as one), strings bytewise. None if either
/// is NULL.
pub fn compare(a: &Datum, b: &Datum) -> Option<Ordering> {
    use Datum::*;
    Some(match (a, b) {
        (Null, _) | (_, Null) => return None,
        (Int(x), Int(y)) => x.cmp(y),
        (UInt(x), UInt(y)) => x.cmp(y),
        (Int(x), UInt(y)) => i128::from(*x).cmp(&i128::from(*y)),
        (UInt(x), Int(y)) => i128::from(*x).cmp(&i128::from(*y)),
        (Bytes(x), Bytes(y)) => x.cmp(y),
        (Date(x) | DateTime(x), Date(y) | DateTime(y)) => x.cmp(y),
        (Date(x) | DateTime(x), Bytes(s)) => match parse_dt_bytes(s) {
            Some(y) => x.cmp(&y),
            None => return compare(&Bytes(a.to_bytes()?), b),
        },
        (Bytes(s), Date(y) | DateTime(y)) => match parse_dt_bytes(s) {
            Some(x) => x.cmp(y),
            None => return compare(a, &Bytes(b.to_bytes()?)),
        },
        (Double(_), _) | (_, Double(_)) | (Bytes(_), _) | (_, Bytes(_)) => {
            match (a.to_decimal(), b.to_decimal()) {
                (Some(x), Some(y)) if !matches!(a, Double(_)) && !matches!(b, Double(_)) => {
                    self::Decimal::compare(x, y)
                }
                _ => a.to_f64()?.total_cmp(&b.to_f64()?),
            }
        }
        _ => match (a.to_decimal(), b.to_decimal()) {
            (Some(x), Some(y)) => self::Decimal::compare(x, y),
            _ => a.to_f64()?.total_cmp(&b.to_f64()?),
        },
    })
}

fn parse_dt_bytes(s: &[u8]) -> Option<DateTime> {
    DateTime::parse(std::str::from_utf8(s).ok()?)
}

/// A total order for sorting and grouping: NULL first, then [`compare`].
pub fn sort_order(a: &Datum, b: &Datum) -> Ordering {
    // The common ORDER BY keys first, as `compare` orders them.
    match (a, b) {
        (Datum::Bytes(x), Datum::Bytes(y)) => return x.cmp(y),
        (Datum::Int(x), Datum::Int(y)) => return x.cmp(y),
        _ => {}
    }
    match (a.is_null(), b.is_null()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        _ => compare(a, b).unwrap_or(Ordering::Equal),
    }
}

/// Converts `v` for storage in a column of type `ty` under strict mode.
/// `column` and `row` (1-based) name the failure.
pub fn coerce(v: Datum, ty: &SqlType, column: &str, row: u64) -> Result<Datum> {
    if v.is_null() {
        return Ok(Datum::Null);
    }
    let bad = |kind: &'static str, v: &Datum| Error::BadValue {
        kind,
        value: v.to_text().unwrap_or_default(),
        column: column.to_owned(),
        row,
    };
    match ty {
        SqlType::Int { bytes, unsigned } => {
            let n = match &v {
                Datum::Bytes(b) => {
                    let s = String::from_utf8_lossy(b);
                    let s = s.trim();
                    if s.is_empty() {
                        return Err(bad("integer", &v));
                    }
                    match s.parse::<i128>() {
                        Ok(n) => n,
                        Err(_) => match Decimal::parse(s).and_then(|d| d.rescale(0)) {
                            Some(d) => d.value,
                            None => match s.parse::<f64>() {
                                Ok(f) if f.is_finite() && f.abs() < 1e38 => f.round() as i128,
                                _ => return Err(bad("integer", &v)),
                            },
                        },
                    }
                }
                Datum::Double(f) if !f.is_finite() || f.abs() >= 1e38 => {
                    return Err(Error::OutOfRange(column.to_owned(), row))
                }
                Datum::Date(_) | Datum::DateTime(_) => return Err(bad("integer", &v)),
                other => other
                    .to_i128()
                    .ok_or_else(|| Error::OutOfRange(column.to_owned(), row))?,
            };
            let (lo, hi) = SqlType::int_range(*bytes, *unsigned);
            if n < lo || n > hi {
                return Err(Error::OutOfRange(column.to_owned(), row));
            }
            Ok(if *unsigned {
                Datum::UInt(
                    u64::try_from(n).map_err(|_| Error::OutOfRange(column.to_owned(), row))?,
                )
            } else {
                Datum::Int(i64::try_from(n).map_err(|_| Error::OutOfRange(column.to_owned(), row))?)
            })
        }
        SqlType::Float | SqlType::Double => {
            let f = match &v {
                Datum::Bytes(b) => String::from_utf8_lossy(b)
                    .trim()
                    .parse::<f64>()
                    .map_err(|_| bad("double", &v))?,
                Datum::Date(_) | Datum::DateTime(_) => return Err(bad("double", &v)),
                other => other.to_f64().unwrap_or(0.0),
            };
            if !f.is_finite() || (matches!(ty, SqlType::Float) && f.abs() > f64::from(f32::MAX)) {
                return Err(Error::OutOfRange(column.to_owned(), row));
            }
            Ok(Datum::Double(if matches!(ty, SqlType::Float) {
                f64::from(f as f32)
            } else {
                f
            }))
        }
        SqlType::Decimal { precision, scale } => {
            let d = match &v {
                Datum::Double(f) => Decimal::parse(&format!("{f:.*}", usize::from(*scale) + 1))
                    .ok_or_else(|| bad("decimal", &v))?,
                Datum::Date(_) | Datum::DateTime(_) => return Err(bad("decimal", &v)),
                other => other.to_decimal().ok_or_else(|| bad("decimal", &v))?,
            };
            let d = d
                .rescale(*scale)
                .ok_or_else(|| Error::OutOfRange(column.to_owned(), row))?;
            if d.int_digits() > u32::from(precision.saturating_sub(*scale)) {
                return Err(Error::OutOfRange(column.to_owned(), row));
            }
            Ok(Datum::Decimal(d))
        }
        SqlType::Char(n) | SqlType::VarChar(n) | SqlType::Text(n) => {
            let mut b = v.to_bytes().unwrap_or_default();
            let s = std::str::from_utf8(&b).map_err(|_| bad("string", &v))?;
            let too_long = match ty {
                SqlType::Text(max) => b.len() > *max as usize,
                _ => s.chars().count() > *n as usize,
            };
            if too_long {
                return Err(Error::DataTooLong(column.to_owned(), row));
            }
            if matches!(ty, SqlType::Char(_)) {
                while b.last() == Some(&b' ') {
                    b.pop();
                }
            }
            Ok(Datum::Bytes(b))
        }
        SqlType::Binary(n) | SqlType::VarBinary(n) | SqlType::Blob(n) => {
            let mut b = v.to_bytes().unwrap_or_default();
            if b.len() > *n as usize {
                return Err(Error::DataTooLong(column.to_owned(), row));
            }
            if let SqlType::Binary(n) = ty {
                b.resize(*n as usize, 0);
            }
            Ok(Datum::Bytes(b))
        }
        SqlType::Date | SqlType::DateTime | SqlType::Timestamp => {
            let dt = match &v {
                Datum::Date(d) | Datum::DateTime(d) => *d,
                Datum::Bytes(b) => parse_dt_bytes(b).ok_or_else(|| bad("datetime", &v))?,
                _ => return Err(bad("datetime", &v)),
            };
            Ok(if matches!(ty, SqlType::Date) {
                Datum::Date(dt.date_only())
            } else {
                Datum::DateTime(dt)
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assign_copies_into_the_old_string_buffer() {
        let mut slot = Datum::text("a string of some length");
        let Datum::Bytes(b) = &slot else {
            panic!("text is bytes")
        };
        let buf = b.as_ptr();
        slot.assign(&Datum::text("short"));
        assert_eq!(slot, Datum::text("short"));
        assert!(
            matches!(&slot, Datum::Bytes(b) if b.as_ptr() == buf),
            "buffer reused"
        );
        for src in [
            Datum::Int(-3),
            Datum::Null,
            Datum::text("again"),
            Datum::UInt(9),
        ] {
            slot.assign(&src);
            assert_eq!(slot, src);
        }
    }

    #[test]
    fn decimal_parse_format_round_trip() {
        for s in [
            "0",
            "-12.50",
            "0.001",
            "12345678901234567890.123456789",
            "-0.5",
        ] {
            assert_eq!(Decimal::parse(s).map(|d| d.to_string()).as_deref(), Some(s));
        }
        assert_eq!(
            Decimal::parse("1e2").map(|d| d.to_string()).as_deref(),
            Some("100")
        );
        assert!(Decimal::parse("1.2.3").is_none());
        assert!(Decimal::parse("").is_none());
        let a = Decimal::parse("10").unwrap_or(Decimal::from_i128(0));
        let b = Decimal::parse("3").unwrap_or(Decimal::from_i128(0));
        assert_eq!(
            Decimal::checked_div(a, b).map(|d| d.to_string()).as_deref(),
            Some("3.3333")
        );
        let half = Decimal::parse("2.5").unwrap_or(Decimal::from_i128(0));
        assert_eq!(half.rescale(0).map(|d| d.value), Some(3));
    }

    #[test]
    fn datetime_pack_orders_and_round_trips() {
        let a = DateTime::parse("2024-02-29 23:59:59.5").expect("valid");
        let b = DateTime::parse("2024-03-01").expect("valid");
        assert!(a.pack() < b.pack());
        assert_eq!(DateTime::unpack(a.pack()), Some(a));
        assert!(DateTime::parse("2023-02-29").is_none());
        assert!(DateTime::parse("0000-00-00").is_none());
        assert_eq!(a.format_datetime(), "2024-02-29 23:59:59.500000");
    }

    #[test]
    fn strict_mode_refuses_what_does_not_fit() {
        let tiny = SqlType::Int {
            bytes: 1,
            unsigned: false,
        };
        assert!(matches!(
            coerce(Datum::Int(128), &tiny, "c", 1),
            Err(Error::OutOfRange(..))
        ));
        assert_eq!(
            coerce(Datum::text("-128"), &tiny, "c", 1).ok(),
            Some(Datum::Int(-128))
        );
        assert!(matches!(
            coerce(Datum::text("abc"), &tiny, "c", 1),
            Err(Error::BadValue { .. })
        ));
        let v = SqlType::VarChar(3);
        assert!(matches!(
            coerce(Datum::text("abcd"), &v, "c", 2),
            Err(Error::DataTooLong(..))
        ));
        assert!(coerce(Datum::text("äöü"), &v, "c", 1).is_ok());
        let d = SqlType::Decimal {
            precision: 4,
            scale: 2,
        };
        assert_eq!(
            coerce(Datum::text("12.345"), &d, "c", 1)
                .ok()
                .and_then(|d| d.to_text())
                .as_deref(),
            Some("12.35")
        );
        assert!(matches!(
            coerce(Datum::text("123.4"), &d, "c", 1),
            Err(Error::OutOfRange(..))
        ));
    }
}
