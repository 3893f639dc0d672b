//! Sorted-set commands. A sorted set is a metadata record (member count),
//! one `S` sub-record per member holding its score (f64 bits, big-endian)
//! and one `Z` index record per member, `score_bytes(score) | member`, so
//! walking the index is walking in (score, member) order (docs/redis.md).

mod algebra;
mod range;

use super::{arg, typed_meta, CmdError, CmdResult, Shared};
use crate::resp::Reply;
use crate::store::{score_bytes, score_from_bytes, score_prefix, sub_key, Meta, Type};
use crate::tx::Tx;

fn zmeta(tx: &Tx, db: u8, key: &[u8]) -> Result<Option<Meta>, CmdError> {
    typed_meta(tx, db, key, Type::ZSet)
}

fn not_float() -> CmdError {
    CmdError::Other("value is not a valid float".into())
}

/// Redis's `getDoubleFromObject`: strtod over the whole string, no leading
/// blank, not NaN.
pub fn parse_float(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let lower = s.to_ascii_lowercase();
    let v: f64 = match lower.trim_start_matches(['+', '-']) {
        "inf" | "infinity" => {
            if lower.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }
        }
        "nan" => return None,
        _ => s.parse().ok()?,
    };
    (!v.is_nan()).then_some(v)
}

fn score_reply(d: f64) -> Reply {
    Reply::Double(d)
}

/// The score of `member`, if present.
fn get_score(
    tx: &Tx,
    db: u8,
    key: &[u8],
    m: &Meta,
    member: &[u8],
) -> Result<Option<f64>, CmdError> {
    Ok(tx
        .get(&sub_key(db, key, m.version, member))?
        .and_then(|v| score_from_raw(&v)))
}

fn score_from_raw(v: &[u8]) -> Option<f64> {
    let mut a = [0u8; 8];
    a.copy_from_slice(v.get(..8)?);
    Some(f64::from_bits(u64::from_be_bytes(a)))
}

fn index_key(db: u8, key: &[u8], m: &Meta, score: f64, member: &[u8]) -> Vec<u8> {
    let mut k = score_prefix(db, key, m.version);
    k.extend_from_slice(&score_bytes(score));
    k.extend_from_slice(member);
    k
}

/// Sets `member`'s score (replacing `old`'s index record); -0.0 is stored
/// as 0.0, which is what Redis replies.
fn put_member(
    tx: &mut Tx,
    db: u8,
    key: &[u8],
    m: &Meta,
    member: &[u8],
    old: Option<f64>,
    new: f64,
) {
    let new = if new == 0.0 { 0.0 } else { new };
    if let Some(o) = old {
        tx.delete(index_key(db, key, m, o, member));
    }
    tx.put(
        sub_key(db, key, m.version, member),
        new.to_bits().to_be_bytes().to_vec(),
    );
    tx.put(index_key(db, key, m, new, member), Vec::new());
}

fn del_member(tx: &mut Tx, db: u8, key: &[u8], m: &Meta, member: &[u8], score: f64) {
    tx.delete(sub_key(db, key, m.version, member));
    tx.delete(index_key(db, key, m, score, member));
}

/// Writes `m` back with `size` (deleting the key when empty).
fn save(tx: &mut Tx, db: u8, key: &[u8], m: &mut Meta, size: u64) {
    m.size = size;
    tx.save_collection(db, key, m);
}

/// Walks the score index of `m` (ascending, or descending with `reverse`)
/// from `start` (a full index key, inclusive), calling `f(score, member)`
/// until it returns false.
fn walk(
    tx: &Tx,
    db: u8,
    key: &[u8],
    m: &Meta,
    reverse: bool,
    start: Option<&[u8]>,
    mut f: impl FnMut(f64, &[u8]) -> bool,
) -> Result<(), CmdError> {
    let prefix = score_prefix(db, key, m.version);
    let n = prefix.len();
    tx.scan(&prefix, start, reverse, |k, _| {
        let score = k.get(n..).and_then(score_from_bytes).unwrap_or(0.0);
        f(score, k.get(n + 8..).unwrap_or_default())
    })?;
    Ok(())
}

#[derive(Default)]
struct ZaddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

fn zadd(tx: &mut Tx, db: u8, a: &[Vec<u8>]) -> CmdResult {
    let key = arg(a, 0);
    let mut fl = ZaddFlags::default();
    let mut i = 1;
    while let Some(o) = a.get(i) {
        let flag = match o.to_ascii_lowercase().as_slice() {
            b"nx" => &mut fl.nx,
            b"xx" => &mut fl.xx,
            b"gt" => &mut fl.gt,
            b"lt" => &mut fl.lt,
            b"ch" => &mut fl.ch,
            b"incr" => &mut fl.incr,
            _ => break,
        };
        *flag = true;
        i += 1;
    }
    let pairs = a.get(i..).unwrap_or_default();
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    if fl.nx && fl.xx {
        return Err(CmdError::Other(
            "XX and NX options at the same time are not compatible".into(),
        ));
    }
    if ((fl.gt || fl.lt) && fl.nx) || (fl.gt && fl.lt) {
        return Err(CmdError::Other(
            "GT, LT, and/or NX options at the same time are not compatible".into(),
        ));
    }
    if fl.incr && pairs.len() > 2 {
        return Err(CmdError::Other(
            "INCR option supports a single increment-element pair".into(),
        ));
    }
    let mut items = Vec::with_capacity(pairs.len() / 2);
    for p in pairs.chunks(2) {
        if let [s, mem] = p {
            items.push((parse_float(s).ok_or_else(not_float)?, mem.as_slice()));
        }
    }
    tx.lock(db, [key]);
    let existing = zmeta(tx, db, key)?;
    if existing.is_none() && fl.xx {
        return Ok(if fl.incr { Reply::Nil } else { Reply::Int(0) });
    }
    let mut m = existing.unwrap_or_else(|| Meta::new(Type::ZSet, tx.new_version()));
    let (mut added, mut updated, mut last) = (0u64, 0u64, None);
    for (score, member) in items {
        let cur = get_score(tx, db, key, &m, member)?;
        let new = match cur {
            Some(c) => {
                if fl.nx {
                    continue;
                }
                let new = if fl.incr { c + score } else { score };
                if new.is_nan() {
                    return Err(CmdError::Other(
                        "resulting score is not a number (NaN)".into(),
                    ));
                }
                if (fl.lt && new >= c) || (fl.gt && new <= c) {
                    continue;
                }
                if new != c {
                    updated += 1;
                    put_member(tx, db, key, &m, member, Some(c), new);
                }
                new
            }
            None => {
                if fl.xx {
                    continue;
                }
                added += 1;
                put_member(tx, db, key, &m, member, None, score);
                score
            }
        };
        last = Some(new);
    }
    if added > 0 || updated > 0 {
        let size = m.size + added;
        save(tx, db, key, &mut m, size);
    }
    Ok(if fl.incr {
        last.map_or(Reply::Nil, score_reply)
    } else {
        Reply::Int(i64::try_from(added + if fl.ch { updated } else { 0 }).unwrap_or(i64::MAX))
    })
}

pub fn run(shared: &Shared, tx: &mut Tx, db: u8, name: &str, a: &[Vec<u8>]) -> CmdResult {
    let key = arg(a, 0);
    match name {
        "zadd" => zadd(tx, db, a),
        "zincrby" => {
            let by = parse_float(arg(a, 1)).ok_or_else(not_float)?;
            tx.lock(db, [key]);
            let mut m = super::meta_or_new(tx, db, key, Type::ZSet)?;
            let member = arg(a, 2);
            let cur = get_score(tx, db, key, &m, member)?;
            let new = cur.unwrap_or(0.0) + by;
            if new.is_nan() {
                return Err(CmdError::Other(
                    "resulting score is not a number (NaN)".into(),
                ));
            }
            // An unchanged score writes nothing (and touches no WATCH), as in Redis.
            if cur != Some(new) {
                put_member(tx, db, key, &m, member, cur, new);
                let size = m.size + u64::from(cur.is_none());
                save(tx, db, key, &mut m, size);
            }
            Ok(score_reply(new))
        }
        "zrem" => {
            tx.lock(db, [key]);
            let Some(mut m) = zmeta(tx, db, key)? else {
                return Ok(Reply::Int(0));
            };
            let mut removed = 0u64;
            for member in a.get(1..).unwrap_or_default() {
                if let Some(s) = get_score(tx, db, key, &m, member)? {
                    del_member(tx, db, key, &m, member, s);
                    removed += 1;
                }
            }
            if removed > 0 {
                let size = m.size.saturating_sub(removed);
                save(tx, db, key, &mut m, size);
            }
            Ok(Reply::Int(removed as i64))
        }
        "zscore" => {
            let Some(m) = zmeta(tx, db, key)? else {
                return Ok(Reply::Nil);
            };
            Ok(get_score(tx, db, key, &m, arg(a, 1))?.map_or(Reply::Nil, score_reply))
        }
        "zmscore" => {
            tx.consistent_reads();
            let m = zmeta(tx, db, key)?;
            let mut out = Vec::new();
            for member in a.get(1..).unwrap_or_default() {
                out.push(match &m {
                    Some(m) => get_score(tx, db, key, m, member)?.map_or(Reply::Nil, score_reply),
                    None => Reply::Nil,
                });
            }
            Ok(Reply::Array(out))
        }
        "zcard" => Ok(Reply::Int(zmeta(tx, db, key)?.map_or(0, |m| m.size as i64))),
        "zrank" | "zrevrank" => {
            tx.consistent_reads();
            let Some(m) = zmeta(tx, db, key)? else {
                return Ok(Reply::Nil);
            };
            let member = arg(a, 1);
            if get_score(tx, db, key, &m, member)?.is_none() {
                return Ok(Reply::Nil);
            }
            let (mut rank, mut found) = (0i64, false);
            walk(tx, db, key, &m, name == "zrevrank", None, |_, mem| {
                found = mem == member;
                if !found {
                    rank += 1;
                }
                !found
            })?;
            Ok(if found { Reply::Int(rank) } else { Reply::Nil })
        }
        "zpopmin" | "zpopmax" => {
            if a.len() > 2 {
                return Err(CmdError::Syntax);
            }
            let count = match a.get(1) {
                None => 1,
                Some(c) => super::parse_count(c)?,
            };
            if count == 0 {
                return Ok(Reply::Array(vec![]));
            }
            tx.lock(db, [key]);
            let Some(mut m) = zmeta(tx, db, key)? else {
                return Ok(Reply::Array(vec![]));
            };
            let mut popped = Vec::new();
            walk(tx, db, key, &m, name == "zpopmax", None, |s, mem| {
                popped.push((s, mem.to_vec()));
                (popped.len() as i64) < count
            })?;
            let mut out = Vec::with_capacity(popped.len());
            for (s, mem) in &popped {
                del_member(tx, db, key, &m, mem, *s);
                out.push((Reply::bulk(mem.clone()), score_reply(*s)));
            }
            let size = m.size.saturating_sub(popped.len() as u64);
            save(tx, db, key, &mut m, size);
            // RESP3: (member, score) pairs with a count, one flat pair without.
            Ok(if a.len() > 1 {
                Reply::Pairs(out)
            } else {
                Reply::Array(out.into_iter().flat_map(|(k, v)| [k, v]).collect())
            })
        }
        "zcount" | "zlexcount" | "zrange" | "zrangestore" | "zrangebyscore" | "zrevrange"
        | "zrevrangebyscore" | "zremrangebyscore" | "zremrangebyrank" | "zremrangebylex"
        | "zrangebylex" | "zrevrangebylex" => range::run(tx, db, name, a),
        "zunionstore" | "zinterstore" | "zdiffstore" | "zunion" | "zinter" | "zdiff" => {
            algebra::run(tx, db, name, a)
        }
        "zrandmember" => super::random::run(tx, db, name, a),
        "zscan" => {
            let cursor = super::scan::parse_cursor(arg(a, 1))?;
            tx.consistent_reads();
            let Some(m) = zmeta(tx, db, key)? else {
                return Ok(super::scan::empty_scan());
            };
            // Walks the score index, so a small set comes out in score
            // order like Redis's listpack encoding.
            let prefix = score_prefix(db, key, m.version);
            let opts = a.get(2..).unwrap_or_default();
            super::scan::scan_collection(shared, tx, db, &prefix, cursor, opts, 8, |f, _| {
                let score = score_from_bytes(f).unwrap_or(0.0);
                // ZSCAN replies scores as strings in RESP3 too.
                vec![
                    Reply::bulk(f.get(8..).unwrap_or_default()),
                    Reply::bulk(crate::resp::format_double(score)),
                ]
            })
        }
        _ => Err(CmdError::Other(format!("unknown command '{name}'"))),
    }
}
