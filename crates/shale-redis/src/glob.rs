//! Redis's glob matching (`stringmatchlen`): `*`, `?`, `[abc]`, `[^a-z]`, `\x`.

/// True when `s` matches `pattern`.
pub fn matches(pattern: &[u8], s: &[u8]) -> bool {
    match_from(pattern, s, 0)
}

fn match_from(p: &[u8], s: &[u8], depth: usize) -> bool {
    // Bound the backtracking like Redis 7 does (nesting of '*').
    if depth > 1000 {
        return false;
    }
    let (mut pi, mut si) = (0usize, 0usize);
    while let Some(&pc) = p.get(pi) {
        match pc {
            b'*' => {
                while p.get(pi + 1) == Some(&b'*') {
                    pi += 1;
                }
                let rest = p.get(pi + 1..).unwrap_or_default();
                if rest.is_empty() {
                    return true;
                }
                return (si..=s.len())
                    .any(|k| match_from(rest, s.get(k..).unwrap_or_default(), depth + 1));
            }
            b'?' => {
                if si >= s.len() {
                    return false;
                }
                si += 1;
            }
            b'[' => {
                let Some(&c) = s.get(si) else { return false };
                pi += 1;
                let negate = p.get(pi) == Some(&b'^');
                if negate {
                    pi += 1;
                }
                let mut hit = false;
                loop {
                    match p.get(pi) {
                        None => {
                            pi = pi.saturating_sub(1); // Redis: unterminated class ends the pattern
                            break;
                        }
                        Some(b']') => break,
                        Some(b'\\') if p.get(pi + 2).is_some() => {
                            pi += 1;
                            hit |= p.get(pi) == Some(&c);
                        }
                        Some(&lo) if p.get(pi + 1) == Some(&b'-') && p.get(pi + 2).is_some() => {
                            let hi = p.get(pi + 2).copied().unwrap_or(lo);
                            let (a, b) = if lo <= hi { (lo, hi) } else { (hi, lo) };
                            hit |= a <= c && c <= b;
                            pi += 2;
                        }
                        Some(&x) => hit |= x == c,
                    }
                    pi += 1;
                }
                if hit == negate {
                    return false;
                }
                si += 1;
            }
            b'\\' if p.get(pi + 1).is_some() => {
                pi += 1;
                if s.get(si) != p.get(pi) {
                    return false;
                }
                si += 1;
            }
            _ => {
                if s.get(si) != Some(&pc) {
                    return false;
                }
                si += 1;
            }
        }
        pi += 1;
    }
    si == s.len()
}
