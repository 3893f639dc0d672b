//! Redis's glob matching (`stringmatchlen`): `*`, `?`, `[abc]`, `[^a-z]`,
//! `\x`. The pattern is split into tokens that each match one byte (or `*`),
//! then matched with one backtrack point: O(pattern x string), no recursion,
//! so `KEYS *a*a*a*...b` cannot stall the server.

enum Tok {
    Star,
    Any,
    Byte(u8),
    Class { negate: bool, items: Vec<(u8, u8)> },
}

impl Tok {
    fn matches(&self, c: u8) -> bool {
        match self {
            Tok::Star => true,
            Tok::Any => true,
            Tok::Byte(b) => *b == c,
            Tok::Class { negate, items } => {
                items.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negate
            }
        }
    }
}

fn tokenize(p: &[u8]) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&c) = p.get(i) {
        match c {
            b'*' => {
                if !matches!(out.last(), Some(Tok::Star)) {
                    out.push(Tok::Star);
                }
            }
            b'?' => out.push(Tok::Any),
            b'\\' if p.get(i + 1).is_some() => {
                i += 1;
                out.push(Tok::Byte(p.get(i).copied().unwrap_or(b'\\')));
            }
            b'[' => {
                i += 1;
                let negate = p.get(i) == Some(&b'^');
                if negate {
                    i += 1;
                }
                let mut items = Vec::new();
                // Like Redis, an unterminated class runs to the pattern's end.
                while let Some(&x) = p.get(i) {
                    if x == b']' {
                        break;
                    }
                    if x == b'\\' && p.get(i + 1).is_some() {
                        i += 1;
                        let e = p.get(i).copied().unwrap_or(x);
                        items.push((e, e));
                    } else if p.get(i + 1) == Some(&b'-') && p.get(i + 2).is_some() {
                        let hi = p.get(i + 2).copied().unwrap_or(x);
                        items.push((x.min(hi), x.max(hi)));
                        i += 2;
                    } else {
                        items.push((x, x));
                    }
                    i += 1;
                }
                out.push(Tok::Class { negate, items });
            }
            _ => out.push(Tok::Byte(c)),
        }
        i += 1;
    }
    out
}

/// True when `s` matches `pattern`.
pub fn matches(pattern: &[u8], s: &[u8]) -> bool {
    let toks = tokenize(pattern);
    let (mut t, mut i) = (0usize, 0usize);
    let mut backtrack: Option<(usize, usize)> = None; // (token after '*', string position)
    while i < s.len() {
        match toks.get(t) {
            Some(Tok::Star) => {
                backtrack = Some((t + 1, i));
                t += 1;
                continue;
            }
            Some(tok) if s.get(i).is_some_and(|&c| tok.matches(c)) => {
                t += 1;
                i += 1;
                continue;
            }
            _ => {}
        }
        match backtrack {
            Some((bt, bi)) => {
                backtrack = Some((bt, bi + 1));
                t = bt;
                i = bi + 1;
            }
            None => return false,
        }
    }
    toks.get(t..)
        .unwrap_or_default()
        .iter()
        .all(|x| matches!(x, Tok::Star))
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn redis_glob_cases() {
        let yes: &[(&str, &str)] = &[
            ("*", ""),
            ("*", "abc"),
            ("h?llo", "hello"),
            ("h*llo", "heeeello"),
            ("h[ae]llo", "hallo"),
            ("h[^e]llo", "hallo"),
            ("h[a-b]llo", "hbllo"),
            ("h[b-a]llo", "hallo"),
            ("\\*x", "*x"),
            ("a*b*c", "aXbYc"),
            ("user:*", "user:1"),
            ("[\\]]", "]"),
        ];
        for (p, s) in yes {
            assert!(matches(p.as_bytes(), s.as_bytes()), "{p} ~ {s}");
        }
        let no: &[(&str, &str)] = &[
            ("h?llo", "hllo"),
            ("h[ae]llo", "hillo"),
            ("h[^e]llo", "hello"),
            ("\\*x", "ax"),
            ("a*b*c", "aXbY"),
            ("abc", "abcd"),
            ("", "a"),
        ];
        for (p, s) in no {
            assert!(!matches(p.as_bytes(), s.as_bytes()), "{p} !~ {s}");
        }
    }

    #[test]
    fn many_stars_stay_fast() {
        let p = "*a".repeat(50) + "b";
        let s = "a".repeat(5000);
        let t = std::time::Instant::now();
        assert!(!matches(p.as_bytes(), s.as_bytes()));
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
    }
}
