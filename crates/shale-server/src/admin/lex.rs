//! A small tokenizer for the server-level statements [`super`] handles
//! (accounts, process list, status). The SQL layer has a real parser; these
//! statements are few and flat, so words, quoted names, numbers and
//! punctuation are all they need.
//!
//! Also splits a `COM_QUERY` text into statements at `;` outside quotes and
//! comments, as the mysql client's multi-statement mode expects.

/// One token. Words keep their case; compare with [`Token::is`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Token {
    /// A bare word: keyword or unquoted name.
    Word(String),
    /// `'...'` or `"..."`, with `\x` and doubled-quote escapes resolved.
    Str(String),
    /// `` `...` `` (a quoted identifier).
    Ident(String),
    /// A run of digits.
    Number(u64),
    /// Any other single character (`@`, `,`, `.`, `=`, `*`, `(`, `)`).
    Punct(char),
}

impl Token {
    /// True for the word `kw` (any case).
    pub fn is(&self, kw: &str) -> bool {
        matches!(self, Token::Word(w) if w.eq_ignore_ascii_case(kw))
    }

    /// The text of a word, string or quoted identifier.
    pub fn text(&self) -> Option<&str> {
        match self {
            Token::Word(s) | Token::Str(s) | Token::Ident(s) => Some(s),
            _ => None,
        }
    }
}

/// Tokens of `s`, or `None` if a quote is left open.
pub fn tokens(s: &str) -> Option<Vec<Token>> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '\'' || c == '"' || c == '`' {
            chars.next();
            let mut text = String::new();
            loop {
                let ch = chars.next()?;
                if ch == c {
                    if chars.peek() == Some(&c) {
                        chars.next();
                        text.push(c);
                        continue;
                    }
                    break;
                }
                if ch == '\\' && c != '`' {
                    text.push(chars.next()?);
                    continue;
                }
                text.push(ch);
            }
            out.push(if c == '`' {
                Token::Ident(text)
            } else {
                Token::Str(text)
            });
        } else if c.is_ascii_digit() {
            let mut n: u64 = 0;
            while let Some(d) = chars.peek().and_then(|ch| ch.to_digit(10)) {
                n = n.checked_mul(10)?.checked_add(u64::from(d))?;
                chars.next();
            }
            out.push(Token::Number(n));
        } else if c.is_alphanumeric() || c == '_' || c == '$' {
            let mut w = String::new();
            while let Some(&ch) = chars.peek() {
                if ch.is_alphanumeric() || ch == '_' || ch == '$' {
                    w.push(ch);
                    chars.next();
                } else {
                    break;
                }
            }
            out.push(Token::Word(w));
        } else {
            chars.next();
            out.push(Token::Punct(c));
        }
    }
    Some(out)
}

/// The first `n` words of `s`, upper-cased, as [`tokens`] would start:
/// it stops at the first token that is not a word. Reads only as far as
/// it needs, so the server classifies a multi-megabyte INSERT by its first
/// word without lexing the rest.
pub fn first_words(s: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    while out.len() < n {
        rest = rest.trim_start();
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
            .unwrap_or(rest.len());
        // `tokens` reads a leading digit as a number, not a word.
        let Some((w, r)) = rest
            .split_at_checked(end)
            .filter(|(w, _)| !w.is_empty() && !w.starts_with(|c: char| c.is_ascii_digit()))
        else {
            break;
        };
        out.push(w.to_ascii_uppercase());
        rest = r;
    }
    out
}

/// Longest word [`FirstWords`] keeps: no statement the server classifies
/// by its first words has a longer one (the longest, `PRIVILEGES`, has 10).
const WORD_MAX: usize = 16;

/// The first `N` words of a statement, upper-cased, as [`first_words`]
/// finds them, without allocating: every statement is classified by its
/// first words three times (server statement?, privilege, SELECT without
/// FROM?). A word longer than `WORD_MAX` bytes reads as "".
pub struct FirstWords<const N: usize> {
    words: [[u8; WORD_MAX]; N],
    lens: [u8; N],
    count: usize,
}

impl<const N: usize> FirstWords<N> {
    pub fn of(s: &str) -> Self {
        // Bytes first (a third of the Unicode walk's instructions); a
        // non-ASCII byte where a space or a word may be leaves it to the
        // Unicode rules.
        let b = s.as_bytes();
        let mut fw = Self::empty();
        let mut i = 0;
        while fw.count < N {
            while b
                .get(i)
                .is_some_and(|&c| c == b' ' || (9..=13).contains(&c))
            {
                i += 1;
            }
            let start = i;
            while b
                .get(i)
                .is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'$')
            {
                i += 1;
            }
            if b.get(i).is_some_and(|c| !c.is_ascii()) {
                return Self::of_unicode(s);
            }
            match b.get(start..i) {
                Some(w @ [first, ..]) if !first.is_ascii_digit() => fw.push(w),
                _ => break,
            }
        }
        fw
    }

    fn empty() -> Self {
        FirstWords {
            words: [[0; WORD_MAX]; N],
            lens: [0; N],
            count: 0,
        }
    }

    /// Keeps word `count` (upper-cased; "" if longer than `WORD_MAX`).
    fn push(&mut self, w: &[u8]) {
        let slot = self
            .words
            .get_mut(self.count)
            .zip(self.lens.get_mut(self.count));
        if let Some((word, len)) = slot {
            // Whole characters are copied, so the bytes stay UTF-8.
            if let (Some(dst), Ok(n)) = (word.get_mut(..w.len()), u8::try_from(w.len())) {
                dst.copy_from_slice(w);
                dst.make_ascii_uppercase();
                *len = n;
            }
        }
        self.count += 1;
    }

    /// [`Self::of`] by characters: Unicode letters, digits and spaces.
    fn of_unicode(s: &str) -> Self {
        let mut fw = Self::empty();
        let mut rest = s;
        while fw.count < N {
            rest = rest.trim_start();
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
                .unwrap_or(rest.len());
            let Some((w, r)) = rest
                .split_at_checked(end)
                .filter(|(w, _)| !w.is_empty() && !w.starts_with(|c: char| c.is_ascii_digit()))
            else {
                break;
            };
            fw.push(w.as_bytes());
            rest = r;
        }
        fw
    }

    /// Word `i`: "" past the last word or for a word too long to keep.
    pub fn get(&self, i: usize) -> &str {
        if i >= self.count {
            return "";
        }
        let (Some(word), Some(&len)) = (self.words.get(i), self.lens.get(i)) else {
            return "";
        };
        word.get(..usize::from(len))
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or("")
    }
}

/// Splits `sql` into statements at `;` outside quotes and comments
/// (`-- `, `#`, `/* */`). Empty statements are dropped; each statement is
/// trimmed.
/// The bytes outside quotes and comments at which [`split_statements`]
/// stops: those that may start a quote, a comment or the next statement.
#[allow(clippy::indexing_slicing)] // evaluated at compile time: a bad index fails the build
static STOPS: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    let stops = b"'\"`-#/;";
    while i < stops.len() {
        t[stops[i] as usize] = true;
        i += 1;
    }
    t
};

pub fn split_statements(sql: &str) -> Vec<&str> {
    let bytes = sql.as_bytes();
    let mut out = Vec::new();
    let (mut start, mut i) = (0usize, 0usize);
    let at = |i: usize| bytes.get(i).copied();
    while let Some(b) = at(i) {
        match b {
            b'\'' | b'"' | b'`' => {
                i += 1;
                // Jump from one byte that matters inside the quote (the
                // quote, a backslash outside backticks) to the next.
                let escapes = b != b'`';
                let mut closed = false;
                let next_stop = |r: &[u8]| match escapes {
                    true => memchr::memchr2(b, b'\\', r),
                    false => memchr::memchr(b, r),
                };
                while let Some(p) = bytes.get(i..).and_then(next_stop) {
                    i += p;
                    if at(i) != Some(b) {
                        i += 2; // a backslash and the byte it escapes
                        continue;
                    }
                    i += 1;
                    if at(i) == Some(b) {
                        i += 1; // doubled quote
                        continue;
                    }
                    closed = true;
                    break;
                }
                if !closed {
                    i = bytes.len(); // unterminated: the rest is quoted
                }
            }
            b'-' if at(i + 1) == Some(b'-')
                && at(i + 2).is_none_or(|c| c == b' ' || c == b'\t' || c == b'\n') =>
            {
                while at(i).is_some_and(|c| c != b'\n') {
                    i += 1;
                }
            }
            b'#' => {
                while at(i).is_some_and(|c| c != b'\n') {
                    i += 1;
                }
            }
            b'/' if at(i + 1) == Some(b'*') => {
                i += 2;
                while at(i).is_some() && !(at(i) == Some(b'*') && at(i + 1) == Some(b'/')) {
                    i += 1;
                }
                i += 2;
            }
            b';' => {
                push_trimmed(&mut out, sql, start, i);
                i += 1;
                start = i;
            }
            _ => {
                // Straight to the next byte that can start a quote, a
                // comment or the next statement (per-byte matching was ~13
                // instructions a byte of each INSERT).
                i += 1;
                let rest = bytes.get(i..).unwrap_or_default();
                i += rest
                    .iter()
                    .position(|&c| STOPS.get(usize::from(c)) == Some(&true))
                    .unwrap_or(rest.len());
            }
        }
    }
    push_trimmed(&mut out, sql, start, sql.len());
    out
}

fn push_trimmed<'a>(out: &mut Vec<&'a str>, sql: &'a str, start: usize, end: usize) {
    // Quote and comment skipping may step past the end; every boundary
    // used here is an ASCII byte or the end, so `get` only fails past it.
    let end = end.min(sql.len());
    if let Some(s) = sql.get(start..end) {
        let s = s.trim();
        if !s.is_empty() {
            out.push(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_outside_quotes_and_comments() {
        assert_eq!(
            split_statements("select 'a;b'; select \"c;\" ;; -- x;y\nselect 1 /* ; */"),
            vec!["select 'a;b'", "select \"c;\"", "-- x;y\nselect 1 /* ; */"]
        );
        assert_eq!(split_statements("select 'it''s;'"), vec!["select 'it''s;'"]);
        assert_eq!(split_statements("select 'a\\';'"), vec!["select 'a\\';'"]);
        assert!(split_statements(" ; ").is_empty());
        // An unterminated quote or comment keeps the rest as one statement.
        assert_eq!(split_statements("select 'x; y"), vec!["select 'x; y"]);
        assert_eq!(
            split_statements("select 1 /* x; y"),
            vec!["select 1 /* x; y"]
        );
    }

    /// The jumps over plain bytes and quoted text split exactly where the
    /// byte-at-a-time reading did, on quotes, escapes and comments mixed.
    #[test]
    fn split_statements_edge_cases() {
        for (sql, want) in [
            ("select 'it''s; x", vec!["select 'it''s; x"]),
            ("select 'a\\'; b", vec!["select 'a\\'; b"]),
            ("select 'a\\", vec!["select 'a\\"]),
            ("select `a\\`; b", vec!["select `a\\`", "b"]),
            ("select \"x''y\"; z", vec!["select \"x''y\"", "z"]),
            ("a-b; c#d; e\n; f/g; h", vec!["a-b", "c#d; e", "f/g", "h"]),
            (
                "insert into t values (1, 'x;y', \"z\"); select 2",
                vec!["insert into t values (1, 'x;y', \"z\")", "select 2"],
            ),
            ("'''' ; ''", vec!["''''", "''"]),
        ] {
            assert_eq!(split_statements(sql), want, "{sql}");
        }
    }

    /// The reading before the jumps (byte at a time), kept as the model.
    fn split_byte_at_a_time(sql: &str) -> Vec<&str> {
        let bytes = sql.as_bytes();
        let mut out = Vec::new();
        let (mut start, mut i) = (0usize, 0usize);
        let at = |i: usize| bytes.get(i).copied();
        while let Some(b) = at(i) {
            match b {
                b'\'' | b'"' | b'`' => {
                    i += 1;
                    while let Some(c) = at(i) {
                        if c == b'\\' && b != b'`' {
                            i += 2;
                            continue;
                        }
                        i += 1;
                        if c == b {
                            if at(i) == Some(b) {
                                i += 1; // doubled quote
                                continue;
                            }
                            break;
                        }
                    }
                }
                b'-' if at(i + 1) == Some(b'-')
                    && at(i + 2).is_none_or(|c| c == b' ' || c == b'\t' || c == b'\n') =>
                {
                    while at(i).is_some_and(|c| c != b'\n') {
                        i += 1;
                    }
                }
                b'#' => {
                    while at(i).is_some_and(|c| c != b'\n') {
                        i += 1;
                    }
                }
                b'/' if at(i + 1) == Some(b'*') => {
                    i += 2;
                    while at(i).is_some() && !(at(i) == Some(b'*') && at(i + 1) == Some(b'/')) {
                        i += 1;
                    }
                    i += 2;
                }
                b';' => {
                    push_trimmed(&mut out, sql, start, i);
                    i += 1;
                    start = i;
                }
                _ => i += 1,
            }
        }
        push_trimmed(&mut out, sql, start, sql.len());
        out
    }

    proptest::proptest! {
        /// On text made of the bytes that matter (quotes, escapes, comment
        /// starts, `;`) the jumping reader splits as the model does.
        #[test]
        fn split_matches_byte_at_a_time(s in "[ab'\"`\\\\;#/*\\- \n]{0,40}") {
            proptest::prop_assert_eq!(split_statements(&s), split_byte_at_a_time(&s));
        }
    }

    proptest::proptest! {
        /// The byte walk (and its Unicode fallback) finds the words the
        /// allocating reader finds.
        #[test]
        fn first_words_match_the_allocating_reader(s in "[aZ09_$ \t\n\u{0b}\u{a0}\u{fc}\u{2192};(]{0,24}") {
            let fw = FirstWords::<3>::of(&s);
            let words = first_words(&s, 3);
            for i in 0..3 {
                // A word longer than WORD_MAX bytes is kept as "".
                let want = words.get(i).filter(|w| w.len() <= WORD_MAX);
                proptest::prop_assert_eq!(fw.get(i), want.map_or("", String::as_str));
            }
        }
    }

    #[test]
    fn first_words_without_allocating_agree() {
        for s in [
            "  insert INTO t VALUES ('x')",
            "SELECT*FROM t",
            "/* c */ SELECT 1",
            "create user",
            "7 x",
            "show grants for x",
            "create unique index i on t (a)",
            "grüße welt x",
            "SELECT\u{a0}x y",
            "\u{2003}SHOW TABLES",
            "x\u{2192}y z",
            "ab\u{0b}cd ef",
            "a_zaüzzüüzaüa x",
            "",
        ] {
            let words = first_words(s, 3);
            let fw = FirstWords::<3>::of(s);
            for i in 0..3 {
                let want = words.get(i).filter(|w| w.len() <= WORD_MAX);
                assert_eq!(fw.get(i), want.map_or("", String::as_str), "{s} {i}");
            }
        }
        // Longer than WORD_MAX: kept as "", still counted as a word.
        let fw = FirstWords::<2>::of("averyveryverylongword select");
        assert_eq!((fw.get(0), fw.get(1)), ("", "SELECT"));
    }

    #[test]
    fn first_words_stop_at_the_first_other_token() {
        assert_eq!(
            first_words("  insert INTO t VALUES ('x')", 2),
            ["INSERT", "INTO"]
        );
        assert_eq!(first_words("SELECT*FROM t", 3), ["SELECT"]);
        assert_eq!(first_words("/* c */ SELECT 1", 2), Vec::<String>::new());
        assert_eq!(first_words("create user", 5), ["CREATE", "USER"]);
        assert_eq!(first_words("7 x", 1), Vec::<String>::new());
        for s in [
            "KILL 7",
            "SHOW GRANTS",
            "SET PASSWORD = 'x'",
            "DROP TABLE t",
        ] {
            let t: Vec<String> = tokens(s)
                .unwrap()
                .iter()
                .map_while(|t| match t {
                    Token::Word(w) => Some(w.to_ascii_uppercase()),
                    _ => None,
                })
                .take(2)
                .collect();
            assert_eq!(first_words(s, 2), t, "{s}");
        }
    }

    #[test]
    fn tokens_of_an_account_statement() {
        let t = tokens("CREATE USER 'a''b'@`h%` IDENTIFIED BY \"p\\\"w\"").unwrap();
        assert_eq!(
            t,
            vec![
                Token::Word("CREATE".into()),
                Token::Word("USER".into()),
                Token::Str("a'b".into()),
                Token::Punct('@'),
                Token::Ident("h%".into()),
                Token::Word("IDENTIFIED".into()),
                Token::Word("BY".into()),
                Token::Str("p\"w".into()),
            ]
        );
        assert!(tokens("KILL 18446744073709551616").is_none());
        assert!(tokens("select 'open").is_none());
        assert_eq!(tokens("KILL 7").unwrap().get(1), Some(&Token::Number(7)));
    }
}
