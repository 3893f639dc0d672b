//! Range reads and removals over the score index: ZRANGE (rank, BYSCORE,
//! BYLEX, REV, LIMIT, WITHSCORES), ZRANGEBYSCORE, ZREVRANGE[BYSCORE],
//! ZRANGEBYLEX, ZREVRANGEBYLEX,
//! ZRANGESTORE, ZCOUNT, ZLEXCOUNT, ZREMRANGEBYSCORE / RANK / LEX, with
//! Redis 7.0's parsing order and error strings.

use super::{del_member, parse_float, save, score_reply, walk, zmeta};
use crate::commands::{arg, is_opt, parse_i64, CmdError, CmdResult};
use crate::resp::Reply;
use crate::store::{prefix_end, score_bytes, score_prefix};
use crate::tx::Tx;

/// A score bound: value and whether it is excluded (`(`).
#[derive(Clone, Copy)]
struct Bound {
    v: f64,
    ex: bool,
}

/// Redis's `zslParseRange` item: `(x`, `x`, `-inf`, `+inf`; strtod quirks
/// (an empty string is 0) kept.
fn parse_bound(b: &[u8]) -> Option<Bound> {
    let (ex, rest) = match b.strip_prefix(b"(") {
        Some(r) => (true, r),
        None => (false, b),
    };
    let v = if rest.is_empty() {
        0.0
    } else {
        parse_float(rest)?
    };
    Some(Bound { v, ex })
}

fn score_range(min: &[u8], max: &[u8]) -> Result<(Bound, Bound), CmdError> {
    match (parse_bound(min), parse_bound(max)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(CmdError::Other("min or max is not a float".into())),
    }
}

fn above_min(s: f64, min: Bound) -> bool {
    if min.ex {
        s > min.v
    } else {
        s >= min.v
    }
}

fn below_max(s: f64, max: Bound) -> bool {
    if max.ex {
        s < max.v
    } else {
        s <= max.v
    }
}

/// A lex bound: `-`, `+`, `[x`, `(x`.
#[derive(Clone)]
enum Lex {
    Min,
    Max,
    Incl(Vec<u8>),
    Excl(Vec<u8>),
}

fn parse_lex(b: &[u8]) -> Option<Lex> {
    match b.split_first() {
        Some((b'-', [])) => Some(Lex::Min),
        Some((b'+', [])) => Some(Lex::Max),
        Some((b'[', r)) => Some(Lex::Incl(r.to_vec())),
        Some((b'(', r)) => Some(Lex::Excl(r.to_vec())),
        _ => None,
    }
}

fn lex_range(min: &[u8], max: &[u8]) -> Result<(Lex, Lex), CmdError> {
    match (parse_lex(min), parse_lex(max)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(CmdError::Other(
            "min or max not valid string range item".into(),
        )),
    }
}

/// Redis's `zslIsInLexRange`: false when the range is empty by itself, or
/// when the last member is below `min` or the first above `max`.
fn lex_range_may_match(
    tx: &Tx,
    db: u8,
    key: &[u8],
    m: &crate::store::Meta,
    min: &Lex,
    max: &Lex,
) -> Result<bool, CmdError> {
    let rank = |l: &Lex| match l {
        Lex::Min => 0,
        Lex::Incl(_) | Lex::Excl(_) => 1,
        Lex::Max => 2,
    };
    let cmp = match (min, max) {
        (Lex::Incl(a) | Lex::Excl(a), Lex::Incl(b) | Lex::Excl(b)) => a.cmp(b),
        _ => rank(min).cmp(&rank(max)),
    };
    let exclusive = matches!(min, Lex::Excl(_)) || matches!(max, Lex::Excl(_));
    if cmp.is_gt() || (cmp.is_eq() && exclusive) {
        return Ok(false);
    }
    let end = |rev: bool| -> Result<Option<Vec<u8>>, CmdError> {
        let mut found = None;
        walk(tx, db, key, m, rev, None, |_, mem| {
            found = Some(mem.to_vec());
            false
        })?;
        Ok(found)
    };
    let (Some(first), Some(last)) = (end(false)?, end(true)?) else {
        return Ok(false);
    };
    Ok(lex_ge_min(&last, min) && lex_le_max(&first, max))
}

fn lex_ge_min(m: &[u8], min: &Lex) -> bool {
    match min {
        Lex::Min => true,
        Lex::Max => false,
        Lex::Incl(x) => m >= x.as_slice(),
        Lex::Excl(x) => m > x.as_slice(),
    }
}

fn lex_le_max(m: &[u8], max: &Lex) -> bool {
    match max {
        Lex::Min => false,
        Lex::Max => true,
        Lex::Incl(x) => m <= x.as_slice(),
        Lex::Excl(x) => m < x.as_slice(),
    }
}

enum Kind {
    Rank(i64, i64),
    Score(Bound, Bound),
    Lex(Lex, Lex),
}

/// Redis's rank normalisation: None when the range is empty.
fn clamp(start: i64, end: i64, n: i64) -> Option<(i64, i64)> {
    let start = if start < 0 { (n + start).max(0) } else { start };
    let end = if end < 0 { n + end } else { end };
    if start > end || start >= n {
        return None;
    }
    Some((start, end.min(n - 1)))
}

pub fn run(tx: &mut Tx, db: u8, name: &str, a: &[Vec<u8>]) -> CmdResult {
    let key = arg(a, 0);
    match name {
        "zcount" => {
            let (min, max) = score_range(arg(a, 1), arg(a, 2))?;
            tx.consistent_reads();
            let Some(m) = zmeta(tx, db, key)? else {
                return Ok(Reply::Int(0));
            };
            let mut n = 0;
            walk(tx, db, key, &m, false, None, |s, _| {
                if !below_max(s, max) {
                    return false;
                }
                n += above_min(s, min) as i64;
                true
            })?;
            Ok(Reply::Int(n))
        }
        "zlexcount" => {
            let (min, max) = lex_range(arg(a, 1), arg(a, 2))?;
            tx.consistent_reads();
            let Some(m) = zmeta(tx, db, key)? else {
                return Ok(Reply::Int(0));
            };
            let hits = select(tx, db, key, &m, &Kind::Lex(min, max), false, 0, -1)?;
            Ok(Reply::Int(hits.len() as i64))
        }
        "zremrangebyscore" | "zremrangebyrank" | "zremrangebylex" => {
            let kind = match name {
                "zremrangebyscore" => {
                    let (min, max) = score_range(arg(a, 1), arg(a, 2))?;
                    Kind::Score(min, max)
                }
                "zremrangebylex" => {
                    let (min, max) = lex_range(arg(a, 1), arg(a, 2))?;
                    Kind::Lex(min, max)
                }
                _ => Kind::Rank(parse_i64(arg(a, 1))?, parse_i64(arg(a, 2))?),
            };
            tx.lock(db, [key]);
            let Some(mut m) = zmeta(tx, db, key)? else {
                return Ok(Reply::Int(0));
            };
            let hits = select(tx, db, key, &m, &kind, false, 0, -1)?;
            for (s, mem) in &hits {
                del_member(tx, db, key, &m, mem, *s);
            }
            if !hits.is_empty() {
                let size = m.size.saturating_sub(hits.len() as u64);
                save(tx, db, key, &mut m, size);
            }
            Ok(Reply::Int(hits.len() as i64))
        }
        _ => zrange(tx, db, name, a),
    }
}

/// ZRANGE and its older forms and ZRANGESTORE, following Redis 7.0's
/// `zrangeGenericCommand`.
fn zrange(tx: &mut Tx, db: u8, name: &str, a: &[Vec<u8>]) -> CmdResult {
    // ZRANGESTORE dst src min max ...: the same arguments after `dst`.
    let store = name == "zrangestore";
    let (dst, a) = if store {
        (arg(a, 0), a.get(1..).unwrap_or_default())
    } else {
        (&[][..], a)
    };
    let key = arg(a, 0);
    let (mut rev, mut by) = match name {
        "zrangebyscore" => (Some(false), Some("score")),
        "zrevrangebyscore" => (Some(true), Some("score")),
        "zrangebylex" => (Some(false), Some("lex")),
        "zrevrangebylex" => (Some(true), Some("lex")),
        "zrevrange" => (Some(true), Some("rank")),
        _ => (None, None),
    };
    let (mut withscores, mut offset, mut limit) = (false, 0i64, -1i64);
    let mut j = 3;
    while let Some(o) = a.get(j) {
        let left = a.len() - j - 1;
        if !store && is_opt(o, "WITHSCORES") {
            withscores = true;
        } else if is_opt(o, "LIMIT") && left >= 2 {
            offset = parse_i64(arg(a, j + 1))?;
            limit = parse_i64(arg(a, j + 2))?;
            j += 2;
        } else if rev.is_none() && is_opt(o, "REV") {
            rev = Some(true);
        } else if by.is_none() && is_opt(o, "BYLEX") {
            by = Some("lex");
        } else if by.is_none() && is_opt(o, "BYSCORE") {
            by = Some("score");
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    let by = by.unwrap_or("rank");
    if limit != -1 && by == "rank" {
        return Err(CmdError::Other(
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
                .into(),
        ));
    }
    if withscores && by == "lex" {
        return Err(CmdError::Other(
            "syntax error, WITHSCORES not supported in combination with BYLEX".into(),
        ));
    }
    let (lo, hi) = if rev && by != "rank" {
        (arg(a, 2), arg(a, 1))
    } else {
        (arg(a, 1), arg(a, 2))
    };
    let kind = match by {
        "rank" => Kind::Rank(parse_i64(lo)?, parse_i64(hi)?),
        "score" => {
            let (min, max) = score_range(lo, hi)?;
            Kind::Score(min, max)
        }
        _ => {
            let (min, max) = lex_range(lo, hi)?;
            Kind::Lex(min, max)
        }
    };
    if store {
        tx.lock(db, [key, dst]);
    } else {
        tx.consistent_reads();
    }
    let Some(m) = zmeta(tx, db, key)? else {
        if store {
            tx.delete_if_live(db, dst)?;
            return Ok(Reply::Int(0));
        }
        return Ok(Reply::Array(vec![]));
    };
    let hits = select(tx, db, key, &m, &kind, rev, offset, limit)?;
    if store {
        tx.delete_if_live(db, dst)?;
        let n = hits.len();
        if n > 0 {
            let mut dm = crate::store::Meta::new(crate::store::Type::ZSet, tx.new_version());
            for (s, mem) in &hits {
                super::put_member(tx, db, dst, &dm, mem, None, *s);
            }
            save(tx, db, dst, &mut dm, n as u64);
        }
        return Ok(Reply::Int(n as i64));
    }
    Ok(if withscores {
        Reply::Pairs(
            hits.into_iter()
                .map(|(s, mem)| (Reply::Bulk(mem), score_reply(s)))
                .collect(),
        )
    } else {
        Reply::Array(hits.into_iter().map(|(_, mem)| Reply::Bulk(mem)).collect())
    })
}

/// The (score, member) pairs of `kind`, in walk order, after `offset` and
/// up to `limit` (negative: no limit; a negative offset selects nothing,
/// like Redis).
#[allow(clippy::too_many_arguments)]
fn select(
    tx: &Tx,
    db: u8,
    key: &[u8],
    m: &crate::store::Meta,
    kind: &Kind,
    rev: bool,
    offset: i64,
    limit: i64,
) -> Result<Vec<(f64, Vec<u8>)>, CmdError> {
    let n = i64::try_from(m.size).unwrap_or(i64::MAX);
    let mut out = Vec::new();
    let (skip, take) = match kind {
        Kind::Rank(s, e) => match clamp(*s, *e, n) {
            Some((s, e)) => (s, e - s + 1),
            None => return Ok(out),
        },
        _ if offset < 0 || (offset > 0 && offset >= n) => return Ok(out),
        _ => (offset, if limit < 0 { i64::MAX } else { limit }),
    };
    if take == 0 {
        return Ok(out);
    }
    // Score ranges start at their first candidate: seek to the bound's
    // score (past it when reversed; the filter below drops any overshoot).
    let start = match kind {
        Kind::Score(min, max) => {
            let mut k = score_prefix(db, key, m.version);
            if rev {
                k.extend_from_slice(&score_bytes(max.v));
                prefix_end(&k)
            } else {
                k.extend_from_slice(&score_bytes(min.v));
                Some(k)
            }
        }
        _ => None,
    };
    if let Kind::Lex(min, max) = kind {
        if !lex_range_may_match(tx, db, key, m, min, max)? {
            return Ok(out);
        }
    }
    let mut skipped = 0;
    // BYLEX: Redis walks from the chosen end to the first member on the
    // near side of the range, then takes members until one is past the far
    // side: with several scores (undefined in Redis) the same members come out.
    let mut lex_started = false;
    walk(tx, db, key, m, rev, start.as_deref(), |s, mem| {
        let (inside, past) = match kind {
            Kind::Rank(..) => (true, false),
            Kind::Score(min, max) => {
                let (lo_ok, hi_ok) = (above_min(s, *min), below_max(s, *max));
                (lo_ok && hi_ok, if rev { !lo_ok } else { !hi_ok })
            }
            Kind::Lex(min, max) => {
                let (near, far) = if rev {
                    (lex_le_max(mem, max), lex_ge_min(mem, min))
                } else {
                    (lex_ge_min(mem, min), lex_le_max(mem, max))
                };
                if !lex_started && !near {
                    return true;
                }
                lex_started = true;
                (far, !far)
            }
        };
        if past {
            return false;
        }
        if inside {
            if skipped < skip {
                skipped += 1;
            } else {
                out.push((s, mem.to_vec()));
            }
        }
        (out.len() as i64) < take
    })?;
    Ok(out)
}
