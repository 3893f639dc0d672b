//! Statements that are not valid UTF-8 because a string literal carries raw
//! bytes.
//!
//! Clients that quote parameters themselves (PyMySQL, and the mysql client
//! given binary data) send a byte string as a quoted literal of raw bytes,
//! e.g. `INSERT INTO t VALUES (_binary'\0<0xff>\'')`. MySQL reads the
//! statement as bytes; the SQL layer here takes text. [`hex_literals`]
//! rewrites each literal whose bytes are not UTF-8 into the equivalent hex
//! literal (`X'00ff27'`), after resolving its backslash escapes, and drops a
//! `_binary` introducer before it (a hex literal is already binary). Bytes
//! outside string literals must still be UTF-8.

/// The statement with raw-byte literals as hex literals, or `None` if a
/// byte outside a string literal is not UTF-8 or a quote is left open.
pub fn hex_literals(sql: &[u8]) -> Option<String> {
    let mut out: Vec<u8> = Vec::with_capacity(sql.len() * 2);
    let mut i = 0;
    while let Some(&b) = sql.get(i) {
        match b {
            b'\'' | b'"' => {
                let (raw, decoded, end) = literal(sql, i)?;
                if std::str::from_utf8(raw).is_ok() {
                    out.extend_from_slice(sql.get(i..end)?);
                } else {
                    drop_introducer(&mut out);
                    out.extend_from_slice(b"X'");
                    for byte in decoded {
                        out.extend_from_slice(format!("{byte:02X}").as_bytes());
                    }
                    out.push(b'\'');
                }
                i = end;
            }
            b'#' | b'-' | b'/' if comment_end(sql, i).is_some() => {
                let end = comment_end(sql, i)?;
                out.extend_from_slice(sql.get(i..end)?);
                i = end;
            }
            b'`' => {
                // A quoted identifier: copied as is (checked as UTF-8 below).
                let close = sql.get(i + 1..)?.iter().position(|&c| c == b'`')?;
                out.extend_from_slice(sql.get(i..i + close + 2)?);
                i += close + 2;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// The end of a comment opening at `i` (`# ...`, `-- ...`, `/* ... */`),
/// or `None` if none opens there (or a `/*` is left open).
fn comment_end(sql: &[u8], i: usize) -> Option<usize> {
    let rest = sql.get(i..)?;
    let line_end = |from: usize| {
        rest.iter()
            .skip(from)
            .position(|&c| c == b'\n')
            .map_or(sql.len(), |p| i + from + p)
    };
    if rest.starts_with(b"#") {
        return Some(line_end(1));
    }
    if rest.starts_with(b"--") && rest.get(2).is_none_or(|c| c.is_ascii_whitespace()) {
        return Some(line_end(2));
    }
    if rest.starts_with(b"/*") {
        let close = rest.get(2..)?.windows(2).position(|w| w == b"*/")?;
        return Some(i + 2 + close + 2);
    }
    None
}

/// The string literal opening at `start` (a quote): its raw bytes between
/// the quotes, its value with escapes resolved, and the index after it.
fn literal(sql: &[u8], start: usize) -> Option<(&[u8], Vec<u8>, usize)> {
    let quote = *sql.get(start)?;
    let mut value = Vec::new();
    let mut i = start + 1;
    loop {
        let b = *sql.get(i)?;
        if b == quote {
            if sql.get(i + 1) == Some(&quote) {
                value.push(quote); // '' inside '...'
                i += 2;
                continue;
            }
            return Some((sql.get(start + 1..i)?, value, i + 1));
        }
        if b == b'\\' {
            let e = *sql.get(i + 1)?;
            match e {
                b'0' => value.push(0),
                b'b' => value.push(8),
                b'n' => value.push(b'\n'),
                b'r' => value.push(b'\r'),
                b't' => value.push(b'\t'),
                b'Z' => value.push(26),
                // MySQL keeps the backslash of \% and \_ (LIKE patterns).
                b'%' | b'_' => value.extend_from_slice(&[b'\\', e]),
                other => value.push(other),
            }
            i += 2;
            continue;
        }
        value.push(b);
        i += 1;
    }
}

/// Removes a trailing `_binary` introducer (and the spaces after it) from
/// `out`, if it ends with one.
fn drop_introducer(out: &mut Vec<u8>) {
    let trimmed = out.trim_ascii_end().len();
    let word = b"_binary";
    let Some(at) = trimmed.checked_sub(word.len()) else {
        return;
    };
    let is_word = out
        .get(at..trimmed)
        .is_some_and(|w| w.eq_ignore_ascii_case(word));
    let starts_word = at == 0
        || out
            .get(at - 1)
            .is_some_and(|&c| !(c.is_ascii_alphanumeric() || c == b'_'));
    if is_word && starts_word {
        out.truncate(at);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::hex_literals;

    #[test]
    fn raw_byte_literals_become_hex() {
        // PyMySQL's escaping of b"\x00\xff'\\" and of text beside it.
        let sql = b"INSERT INTO t VALUES (1, _binary'\\0\xff\\'\\\\', 'na\xc3\xafve \\'q\\'')";
        assert_eq!(
            hex_literals(sql).unwrap(),
            "INSERT INTO t VALUES (1, X'00FF275C', 'na\u{ef}ve \\'q\\'')"
        );
        // Doubled quotes, double-quoted strings, \% kept, no introducer.
        assert_eq!(
            hex_literals(b"SELECT \"\xfe\"\"\", 'x\xfe''\\%'").unwrap(),
            "SELECT X'FE22', X'78FE275C25'"
        );
        // `_BINARY` in any case, with spaces; a word ending in _binary stays.
        assert_eq!(
            hex_literals(b"SELECT _BINARY  '\x80', my_binary'\x80'").unwrap(),
            "SELECT X'80', my_binaryX'80'"
        );
        // A backquoted name is copied; a quote inside it is not a literal.
        assert_eq!(
            hex_literals(b"SELECT `it's` FROM t WHERE b = '\x81'").unwrap(),
            "SELECT `it's` FROM t WHERE b = X'81'"
        );
    }

    #[test]
    fn comments_are_not_literals() {
        assert_eq!(
            hex_literals(b"SELECT 1 -- it's\n, '\xfe' # don't\n/* a'b */").unwrap(),
            "SELECT 1 -- it's\n, X'FE' # don't\n/* a'b */"
        );
        assert_eq!(
            hex_literals(b"SELECT 2-1, '\xfe'").unwrap(),
            "SELECT 2-1, X'FE'"
        );
    }

    #[test]
    fn bad_bytes_outside_literals_or_open_quotes_fail() {
        assert_eq!(hex_literals(b"SELECT \xff"), None);
        assert_eq!(hex_literals(b"SELECT '\xff"), None);
        assert_eq!(hex_literals(b"SELECT `\xff`"), None);
        assert_eq!(hex_literals(b"SELECT 'a\\"), None);
    }
}
