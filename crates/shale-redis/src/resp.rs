//! RESP: an incremental request parser and a RESP2 / RESP3 reply encoder.
//!
//! Requests are what Redis accepts from clients: a multibulk (`*N` then N
//! `$len` bulk strings) or an inline command (a line split on blanks, with
//! Redis's quoting). Nested arrays and other types inside a request are
//! protocol errors, so the parser never recurses.

use thiserror::Error;

/// Largest bulk string accepted (Redis's proto-max-bulk-len default).
pub const MAX_BULK_LEN: u64 = 512 * 1024 * 1024;
/// Largest multibulk element count (Redis's limit).
pub const MAX_ARRAY_LEN: u64 = 1024 * 1024;
/// Longest inline request or `*`/`$` header line without a CRLF (Redis's PROTO_INLINE_MAX_SIZE).
pub const MAX_INLINE: usize = 64 * 1024;

/// A protocol error; the connection replies `-ERR Protocol error: <msg>` and closes.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    #[error("invalid multibulk length")]
    MultibulkLength,
    #[error("invalid bulk length")]
    BulkLength,
    #[error("expected '$', got '{0}'")]
    ExpectedDollar(char),
    #[error("too big mbulk count string")]
    BigCount,
    #[error("too big bulk count string")]
    BigBulkCount,
    #[error("too big inline request")]
    BigInline,
    #[error("unbalanced quotes in request")]
    UnbalancedQuotes,
    #[error("expected CRLF after bulk data")]
    MissingCrlf,
}

/// The outcome of one parse step.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// More bytes are needed; nothing was consumed.
    Incomplete,
    /// A request (possibly empty: an empty inline line or `*0`) and the bytes it used.
    Request(Vec<Vec<u8>>, usize),
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let tail = buf.get(from..)?;
    tail.windows(2).position(|w| w == b"\r\n").map(|p| p + from)
}

/// Parses a decimal integer the way Redis's `string2ll` does (no blanks, no '+').
fn parse_int(s: &[u8]) -> Option<i64> {
    std::str::from_utf8(s)
        .ok()
        .filter(|t| !t.starts_with('+') && !t.is_empty())
        .and_then(|t| t.parse::<i64>().ok())
}

/// Parses one request from the start of `buf`.
pub fn parse_request(buf: &[u8]) -> Result<Parsed, ProtocolError> {
    match buf.first() {
        None => Ok(Parsed::Incomplete),
        Some(b'*') => parse_multibulk(buf),
        Some(_) => parse_inline(buf),
    }
}

fn parse_multibulk(buf: &[u8]) -> Result<Parsed, ProtocolError> {
    let Some(eol) = find_crlf(buf, 1) else {
        if buf.len() > MAX_INLINE {
            return Err(ProtocolError::BigCount);
        }
        return Ok(Parsed::Incomplete);
    };
    let count = buf
        .get(1..eol)
        .and_then(parse_int)
        .ok_or(ProtocolError::MultibulkLength)?;
    if count > MAX_ARRAY_LEN as i64 {
        return Err(ProtocolError::MultibulkLength);
    }
    let mut pos = eol + 2;
    if count <= 0 {
        return Ok(Parsed::Request(Vec::new(), pos));
    }
    let mut args = Vec::with_capacity(count.min(1024) as usize);
    for _ in 0..count {
        let Some(&first) = buf.get(pos) else {
            return Ok(Parsed::Incomplete);
        };
        if first != b'$' {
            return Err(ProtocolError::ExpectedDollar(first as char));
        }
        let Some(eol) = find_crlf(buf, pos + 1) else {
            if buf.len() - pos > MAX_INLINE {
                return Err(ProtocolError::BigBulkCount);
            }
            return Ok(Parsed::Incomplete);
        };
        let len = buf
            .get(pos + 1..eol)
            .and_then(parse_int)
            .ok_or(ProtocolError::BulkLength)?;
        if len < 0 || len as u64 > MAX_BULK_LEN {
            return Err(ProtocolError::BulkLength);
        }
        let start = eol + 2;
        let end = start + len as usize;
        let Some(data) = buf.get(start..end) else {
            return Ok(Parsed::Incomplete);
        };
        match buf.get(end..end + 2) {
            None if buf.len() <= end + 1 && buf.get(end).is_none_or(|&c| c == b'\r') => {
                return Ok(Parsed::Incomplete)
            }
            Some(b"\r\n") => {}
            _ => return Err(ProtocolError::MissingCrlf),
        }
        args.push(data.to_vec());
        pos = end + 2;
    }
    Ok(Parsed::Request(args, pos))
}

fn parse_inline(buf: &[u8]) -> Result<Parsed, ProtocolError> {
    let Some(nl) = buf.iter().position(|&c| c == b'\n') else {
        if buf.len() > MAX_INLINE {
            return Err(ProtocolError::BigInline);
        }
        return Ok(Parsed::Incomplete);
    };
    let mut line = buf.get(..nl).unwrap_or_default();
    if let Some(stripped) = line.strip_suffix(b"\r") {
        line = stripped;
    }
    let args = split_args(line).ok_or(ProtocolError::UnbalancedQuotes)?;
    Ok(Parsed::Request(args, nl + 1))
}

fn hex_val(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Redis's `sdssplitargs`: blanks separate, "..." with escapes, '...' with \'.
/// `None` on unbalanced quotes (or a closing quote not followed by a blank).
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = 0;
    let at = |i: usize| line.get(i).copied();
    loop {
        while at(i).is_some_and(|c| c.is_ascii_whitespace()) {
            i += 1;
        }
        let Some(c0) = at(i) else { return Some(out) };
        let mut cur = Vec::new();
        if c0 == b'"' {
            i += 1;
            loop {
                match at(i)? {
                    b'\\' => {
                        let n = at(i + 1)?;
                        if n == b'x' {
                            if let (Some(h), Some(l)) =
                                (at(i + 2).and_then(hex_val), at(i + 3).and_then(hex_val))
                            {
                                cur.push(h * 16 + l);
                                i += 4;
                                continue;
                            }
                        }
                        cur.push(match n {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 8,
                            b'a' => 7,
                            other => other,
                        });
                        i += 2;
                    }
                    b'"' => {
                        i += 1;
                        if at(i).is_some_and(|c| !c.is_ascii_whitespace()) {
                            return None;
                        }
                        break;
                    }
                    c => {
                        cur.push(c);
                        i += 1;
                    }
                }
            }
        } else if c0 == b'\'' {
            i += 1;
            loop {
                match at(i)? {
                    b'\\' if at(i + 1) == Some(b'\'') => {
                        cur.push(b'\'');
                        i += 2;
                    }
                    b'\'' => {
                        i += 1;
                        if at(i).is_some_and(|c| !c.is_ascii_whitespace()) {
                            return None;
                        }
                        break;
                    }
                    c => {
                        cur.push(c);
                        i += 1;
                    }
                }
            }
        } else {
            while let Some(c) = at(i).filter(|c| !c.is_ascii_whitespace()) {
                cur.push(c);
                i += 1;
            }
        }
        out.push(cur);
    }
}

/// A reply, encoded as RESP2 or RESP3 (after HELLO 3) by [`Reply::encode`].
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Simple(String),
    /// The full error line without the leading '-', e.g. `ERR syntax error`.
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    /// A missing value: `$-1` in RESP2, `_` in RESP3.
    Nil,
    /// A missing array (EXEC aborted by WATCH, LPOP key count on no key):
    /// `*-1` in RESP2, `_` in RESP3.
    NilArray,
    Array(Vec<Reply>),
    /// Key-value pairs: a flat array in RESP2, a map (`%`) in RESP3.
    Map(Vec<(Reply, Reply)>),
    /// Unordered members: an array in RESP2, a set (`~`) in RESP3.
    Set(Vec<Reply>),
    /// A double: a bulk string in RESP2 and a `,` double in RESP3, both
    /// formatted like Redis 7.0 (`%.17g`, `inf`, `-inf`).
    Double(f64),
    /// (member, score) pairs of WITHSCORES: a flat array in RESP2, an array
    /// of two-element arrays in RESP3.
    Pairs(Vec<(Reply, Reply)>),
    /// An out-of-band message (pub/sub): a `>` push in RESP3, an array in RESP2.
    Push(Vec<Reply>),
    /// Text for humans (CLIENT LIST, INFO ...): a bulk string in RESP2, a
    /// verbatim string of format `txt` (`=`) in RESP3.
    Verbatim(Vec<u8>),
    /// Several replies to one request, in order (SUBSCRIBE a b answers one
    /// confirmation per channel); an empty one sends nothing.
    Multi(Vec<Reply>),
    /// An array of `count` bulk strings whose encoding ([`bulk`] each) is
    /// `body`: the same bytes in RESP2 and RESP3, built straight from the
    /// engine's values with no allocation per element (LRANGE).
    BulkArray {
        count: usize,
        body: Vec<u8>,
    },
}

impl Reply {
    pub fn ok() -> Reply {
        Reply::Simple("OK".into())
    }
    pub fn err(msg: impl Into<String>) -> Reply {
        Reply::Error(msg.into())
    }
    pub fn bulk(b: impl Into<Vec<u8>>) -> Reply {
        Reply::Bulk(b.into())
    }
    pub fn opt_bulk(b: Option<Vec<u8>>) -> Reply {
        b.map_or(Reply::Nil, Reply::Bulk)
    }

    /// Appends the encoding to `out`: RESP3 when `resp3`, else RESP2.
    pub fn encode(&self, out: &mut Vec<u8>, resp3: bool) {
        match self {
            Reply::Simple(s) => line(out, b'+', s.as_bytes()),
            Reply::Error(s) => line(out, b'-', &sanitize(s)),
            Reply::Int(n) => num_line(out, b':', *n),
            Reply::Nil | Reply::NilArray if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Bulk(b) => bulk(out, b),
            Reply::Verbatim(b) if resp3 => {
                len_line(out, b'=', b.len() + 4);
                out.extend_from_slice(b"txt:");
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Verbatim(b) => bulk(out, b),
            Reply::Array(items) => {
                len_line(out, b'*', items.len());
                for it in items {
                    it.encode(out, resp3);
                }
            }
            Reply::BulkArray { count, body } => {
                len_line(out, b'*', *count);
                out.extend_from_slice(body);
            }
            Reply::Multi(items) => {
                for it in items {
                    it.encode(out, resp3);
                }
            }
            Reply::Set(items) | Reply::Push(items) => {
                let tag = match self {
                    Reply::Set(_) if resp3 => b'~',
                    Reply::Push(_) if resp3 => b'>',
                    _ => b'*',
                };
                len_line(out, tag, items.len());
                for it in items {
                    it.encode(out, resp3);
                }
            }
            Reply::Map(pairs) | Reply::Pairs(pairs) => {
                let (tag, n) = match self {
                    Reply::Map(_) if resp3 => (b'%', pairs.len()),
                    _ if !resp3 => (b'*', pairs.len() * 2),
                    _ => (b'*', pairs.len()),
                };
                len_line(out, tag, n);
                let nested = resp3 && matches!(self, Reply::Pairs(_));
                for (k, v) in pairs {
                    if nested {
                        out.extend_from_slice(b"*2\r\n");
                    }
                    k.encode(out, resp3);
                    v.encode(out, resp3);
                }
            }
            Reply::Double(d) => {
                let text = format_double(*d);
                if resp3 {
                    line(out, b',', text.as_bytes());
                } else {
                    bulk(out, text.as_bytes());
                }
            }
        }
    }
}

/// Appends `b` as a bulk string (`$len\r\n b \r\n`): also how a
/// [`Reply::BulkArray`]'s body is built.
pub fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    len_line(out, b'$', b.len());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// A double as Redis 7.0 prints it (`%.17g`; `inf` / `-inf`).
pub fn format_double(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if d == 0.0 {
        return if d.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let sci = format!("{d:.16e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let x: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..17).contains(&x) {
        let sign = if x < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mant), x.unsigned_abs())
    } else {
        let prec = usize::try_from(16 - x).unwrap_or(0);
        trim(&format!("{d:.prec$}"))
    }
}

/// Error and status lines cannot hold CR or LF (Redis replaces them with blanks).
fn sanitize(s: &str) -> Vec<u8> {
    s.bytes()
        .map(|c| if c == b'\r' || c == b'\n' { b' ' } else { c })
        .collect()
}

/// `tag`, the decimal `n`, CRLF, formatted by hand into `out`: through
/// `write!` and `fmt::Display` this was ~14% of the server's CPU under
/// redis-benchmark's LRANGE_100 (one length line per element).
fn num_line(out: &mut Vec<u8>, tag: u8, n: i64) {
    unsigned_line(out, tag, n < 0, n.unsigned_abs());
}

/// A length's line (`*3`, `$5`).
fn len_line(out: &mut Vec<u8>, tag: u8, n: usize) {
    unsigned_line(out, tag, false, u64::try_from(n).unwrap_or(u64::MAX));
}

fn unsigned_line(out: &mut Vec<u8>, tag: u8, negative: bool, mut m: u64) {
    out.push(tag);
    if negative {
        out.push(b'-');
    }
    let start = out.len();
    loop {
        let digit = u8::try_from(m % 10).unwrap_or(0);
        out.push(b'0' + digit);
        m /= 10;
        if m == 0 {
            break;
        }
    }
    if let Some(digits) = out.get_mut(start..) {
        digits.reverse();
    }
    out.extend_from_slice(b"\r\n");
}

fn line(out: &mut Vec<u8>, tag: u8, body: &[u8]) {
    out.push(tag);
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(r: &Reply) -> String {
        let mut out = Vec::new();
        r.encode(&mut out, false);
        String::from_utf8_lossy(&out).into_owned()
    }

    /// The hand-written integer lines agree with `Display` at the edges.
    #[test]
    fn integer_and_length_lines() {
        for n in [0, 1, -1, 9, 10, -10, 99, 100, 12_345, i64::MAX, i64::MIN] {
            assert_eq!(enc(&Reply::Int(n)), format!(":{n}\r\n"));
        }
        for len in [0usize, 1, 9, 10, 100, 65_536] {
            let b = vec![b'x'; len];
            let want = format!("${len}\r\n{}\r\n", "x".repeat(len));
            assert_eq!(enc(&Reply::Bulk(b)), want);
        }
        let arr = Reply::Array((0..12).map(Reply::Int).collect());
        assert!(enc(&arr).starts_with("*12\r\n:0\r\n:1\r\n"));
    }
}
