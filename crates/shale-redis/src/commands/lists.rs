//! List commands. A list is a metadata record with `head` / `tail` and one
//! sub-record per element at positions `head .. tail` (contiguous), so
//! pushes and pops at either end, LINDEX and LSET are O(1) record accesses;
//! LREM / LINSERT rewrite the elements after the change (docs/redis.md).

use super::{arg, is_opt, parse_i64, typed_meta, CmdError, CmdResult};
use crate::resp::Reply;
use crate::store::{list_index, meta_key, sub_key, sub_prefix, Meta, Type};
use crate::tx::{Tx, PREFETCH_WINDOW};

fn list_meta(tx: &Tx, db: u8, key: &[u8]) -> Result<Option<Meta>, CmdError> {
    typed_meta(tx, db, key, Type::List)
}

fn elem_key(db: u8, key: &[u8], m: &Meta, pos: i64) -> Vec<u8> {
    sub_key(db, key, m.version, &list_index(m.head + pos))
}

fn len(m: &Meta) -> i64 {
    m.tail - m.head
}

/// Writes `m` back with its size (or deletes the key when it is empty).
fn save(tx: &mut Tx, db: u8, key: &[u8], m: &mut Meta) {
    m.size = u64::try_from(len(m)).unwrap_or(0);
    tx.save_collection(db, key, m);
}

/// Elements at positions `start ..= stop` (already clamped to the list).
fn range(
    tx: &Tx,
    db: u8,
    key: &[u8],
    m: &Meta,
    start: i64,
    stop: i64,
) -> Result<Vec<Vec<u8>>, CmdError> {
    let mut out = Vec::new();
    scan_range(tx, db, key, m, start, stop, |v| out.push(v.to_vec()))?;
    Ok(out)
}

/// Calls `f` with each element at positions `start ..= stop` (already
/// clamped to the list), in order, without copying it.
fn scan_range(
    tx: &Tx,
    db: u8,
    key: &[u8],
    m: &Meta,
    start: i64,
    stop: i64,
    mut f: impl FnMut(&[u8]),
) -> Result<(), CmdError> {
    if start > stop {
        return Ok(());
    }
    let want = usize::try_from(stop - start + 1).unwrap_or(0);
    let mut seen = 0;
    tx.scan(
        &sub_prefix(db, key, m.version),
        Some(&elem_key(db, key, m, start)),
        false,
        |_, v| {
            f(v);
            seen += 1;
            seen < want
        },
    )?;
    Ok(())
}

/// Replaces the elements from position `from` to the end with `tail`.
fn rewrite_from(tx: &mut Tx, db: u8, key: &[u8], m: &mut Meta, from: i64, tail: Vec<Vec<u8>>) {
    for p in from..len(m) {
        tx.delete(elem_key(db, key, m, p));
    }
    let mut p = from;
    for e in tail {
        tx.put(elem_key(db, key, m, p), e);
        p += 1;
    }
    m.tail = m.head + p;
    save(tx, db, key, m);
}

/// Pushes `elems` at the left or right end; creates the list when
/// `create` (the caller holds the key's lock).
fn push(tx: &mut Tx, db: u8, key: &[u8], elems: &[Vec<u8>], left: bool, create: bool) -> CmdResult {
    if !create && list_meta(tx, db, key)?.is_none() {
        return Ok(Reply::Int(0));
    }
    let mut m = super::meta_or_new(tx, db, key, Type::List)?;
    for e in elems {
        let overflow = || CmdError::Other("list index overflow".into());
        if left {
            m.head = m.head.checked_sub(1).ok_or_else(overflow)?;
            tx.put(elem_key(db, key, &m, 0), e.clone());
        } else {
            let at = len(&m);
            m.tail = m.tail.checked_add(1).ok_or_else(overflow)?;
            tx.put(elem_key(db, key, &m, at), e.clone());
        }
    }
    save(tx, db, key, &mut m);
    Ok(Reply::Int(len(&m)))
}

/// Pops up to `n` elements from one end (the caller holds the lock).
fn pop(
    tx: &mut Tx,
    db: u8,
    key: &[u8],
    m: &mut Meta,
    n: i64,
    left: bool,
) -> Result<Vec<Vec<u8>>, CmdError> {
    let n = n.min(len(m));
    if n == 0 {
        // LPOP key 0 changes nothing (and touches no WATCH), as in Redis.
        return Ok(Vec::new());
    }
    let out = if n == 1 {
        // One element: a point read, cheaper than an iterator, unless the
        // batch pops this list again (a queue consumer's pipeline): then
        // the next elements are read ahead with one iterator.
        let p = if left { 0 } else { len(m) - 1 };
        let k = elem_key(db, key, m, p);
        if tx.repeat_count(&sub_prefix(db, key, m.version)) >= 2 && !tx.is_cached(&k) {
            let far = if left {
                (p + PREFETCH_WINDOW - 1).min(len(m) - 1)
            } else {
                (p - PREFETCH_WINDOW + 1).max(0)
            };
            let far = elem_key(db, key, m, far);
            let (lo, hi) = if left { (&k, &far) } else { (&far, &k) };
            tx.prefetch(lo, hi)?;
        }
        tx.get(&k)?.into_iter().collect()
    } else if left {
        range(tx, db, key, m, 0, n - 1)?
    } else {
        let mut v = range(tx, db, key, m, len(m) - n, len(m) - 1)?;
        v.reverse();
        v
    };
    for i in 0..n {
        let p = if left { i } else { len(m) - 1 - i };
        tx.delete(elem_key(db, key, m, p));
    }
    if left {
        m.head += n;
    } else {
        m.tail -= n;
    }
    save(tx, db, key, m);
    Ok(out)
}

/// Redis's start/stop normalisation for LRANGE: None when empty.
fn clamp(start: i64, stop: i64, n: i64) -> Option<(i64, i64)> {
    let start = if start < 0 { (n + start).max(0) } else { start };
    let stop = if stop < 0 { n + stop } else { stop };
    if start > stop || start >= n {
        return None;
    }
    Some((start, stop.min(n - 1)))
}

fn side(b: &[u8]) -> Result<bool, CmdError> {
    if is_opt(b, "LEFT") {
        Ok(true)
    } else if is_opt(b, "RIGHT") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

pub fn run(tx: &mut Tx, db: u8, name: &str, a: &[Vec<u8>]) -> CmdResult {
    let key = arg(a, 0);
    let rest = a.get(1..).unwrap_or_default();
    if matches!(name, "lpush" | "rpush" | "lpushx" | "rpushx") {
        tx.lock(db, [key]);
    }
    match name {
        "lpush" => push(tx, db, key, rest, true, true),
        "rpush" => push(tx, db, key, rest, false, true),
        "lpushx" => push(tx, db, key, rest, true, false),
        "rpushx" => push(tx, db, key, rest, false, false),
        "lpop" | "rpop" => {
            if a.len() > 2 {
                return Ok(super::wrong_args(name));
            }
            let count = match a.get(1) {
                None => None,
                Some(c) => Some(super::parse_count(c)?),
            };
            tx.lock(db, [key]);
            let Some(mut m) = list_meta(tx, db, key)? else {
                return Ok(if count.is_some() {
                    Reply::NilArray
                } else {
                    Reply::Nil
                });
            };
            let out = pop(tx, db, key, &mut m, count.unwrap_or(1), name == "lpop")?;
            Ok(match count {
                Some(_) => Reply::Array(out.into_iter().map(Reply::Bulk).collect()),
                None => Reply::opt_bulk(out.into_iter().next()),
            })
        }
        "llen" => Ok(Reply::Int(list_meta(tx, db, key)?.map_or(0, |m| len(&m)))),
        "lrange" => {
            let (start, stop) = (parse_i64(arg(a, 1))?, parse_i64(arg(a, 2))?);
            // In a batch: under the list's lock, and identical LRANGEs of
            // the batch share one reply (tx/reply_cache.rs).
            let id = if tx.is_batch() {
                tx.lock(db, [key]);
                let mut id = meta_key(db, key);
                id.extend_from_slice(&start.to_be_bytes());
                id.extend_from_slice(&stop.to_be_bytes());
                if let Some(r) = tx.cached_reply(&id) {
                    return Ok(r);
                }
                Some(id)
            } else {
                tx.consistent_reads();
                None
            };
            let Some(m) = list_meta(tx, db, key)? else {
                return Ok(Reply::Array(vec![]));
            };
            let (mut count, mut body) = (0, Vec::new());
            if let Some((s, e)) = clamp(start, stop, len(&m)) {
                scan_range(tx, db, key, &m, s, e, |v| {
                    crate::resp::bulk(&mut body, v);
                    count += 1;
                })?;
            }
            let reply = Reply::BulkArray { count, body };
            if let Some(id) = id {
                tx.cache_reply(&meta_key(db, key), id, &reply);
            }
            Ok(reply)
        }
        "lindex" => {
            // Redis looks the key up (and checks its type) before the index.
            tx.consistent_reads();
            let Some(m) = list_meta(tx, db, key)? else {
                return Ok(Reply::Nil);
            };
            let i = parse_i64(arg(a, 1))?;
            let p = if i < 0 { len(&m) + i } else { i };
            if p < 0 || p >= len(&m) {
                return Ok(Reply::Nil);
            }
            Ok(Reply::opt_bulk(tx.get(&elem_key(db, key, &m, p))?))
        }
        "lset" => {
            tx.lock(db, [key]);
            let Some(m) = list_meta(tx, db, key)? else {
                return Err(CmdError::Other("no such key".into()));
            };
            let i = parse_i64(arg(a, 1))?;
            let p = if i < 0 { len(&m) + i } else { i };
            if p < 0 || p >= len(&m) {
                return Err(CmdError::Other("index out of range".into()));
            }
            tx.put(elem_key(db, key, &m, p), arg(a, 2).to_vec());
            Ok(Reply::ok())
        }
        "ltrim" => {
            let (start, stop) = (parse_i64(arg(a, 1))?, parse_i64(arg(a, 2))?);
            tx.lock(db, [key]);
            let Some(mut m) = list_meta(tx, db, key)? else {
                return Ok(Reply::ok());
            };
            let n = len(&m);
            let (keep_from, keep_to) = clamp(start, stop, n).unwrap_or((n, n - 1));
            for p in (0..keep_from).chain(keep_to + 1..n) {
                tx.delete(elem_key(db, key, &m, p));
            }
            let head = m.head;
            m.head = head + keep_from;
            m.tail = head + keep_to + 1;
            if m.tail < m.head {
                m.tail = m.head;
            }
            save(tx, db, key, &mut m);
            Ok(Reply::ok())
        }
        "lrem" => {
            let count = parse_i64(arg(a, 1))?;
            let elem = arg(a, 2);
            tx.lock(db, [key]);
            let Some(mut m) = list_meta(tx, db, key)? else {
                return Ok(Reply::Int(0));
            };
            let all = range(tx, db, key, &m, 0, len(&m) - 1)?;
            let limit = if count == 0 {
                usize::MAX
            } else {
                usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX)
            };
            let mut hits: Vec<usize> = all
                .iter()
                .enumerate()
                .filter(|(_, e)| e.as_slice() == elem)
                .map(|(i, _)| i)
                .collect();
            if count < 0 {
                hits.reverse();
            }
            hits.truncate(limit);
            hits.sort_unstable();
            let Some(&first) = hits.first() else {
                return Ok(Reply::Int(0));
            };
            let removed = hits.len();
            let kept: Vec<Vec<u8>> = all
                .into_iter()
                .enumerate()
                .skip(first)
                .filter(|(i, _)| hits.binary_search(i).is_err())
                .map(|(_, e)| e)
                .collect();
            rewrite_from(tx, db, key, &mut m, first as i64, kept);
            Ok(Reply::Int(removed as i64))
        }
        "linsert" => {
            let before = if is_opt(arg(a, 1), "BEFORE") {
                true
            } else if is_opt(arg(a, 1), "AFTER") {
                false
            } else {
                return Err(CmdError::Syntax);
            };
            tx.lock(db, [key]);
            let Some(mut m) = list_meta(tx, db, key)? else {
                return Ok(Reply::Int(0));
            };
            let all = range(tx, db, key, &m, 0, len(&m) - 1)?;
            let Some(pivot) = all.iter().position(|e| e.as_slice() == arg(a, 2)) else {
                return Ok(Reply::Int(-1));
            };
            let at = if before { pivot } else { pivot + 1 };
            let mut tail: Vec<Vec<u8>> = all.into_iter().skip(at).collect();
            tail.insert(0, arg(a, 3).to_vec());
            rewrite_from(tx, db, key, &mut m, at as i64, tail);
            Ok(Reply::Int(len(&m)))
        }
        "lpos" => lpos(tx, db, a),
        "lmove" | "rpoplpush" => {
            let (from_left, to_left) = if name == "lmove" {
                (side(arg(a, 2))?, side(arg(a, 3))?)
            } else {
                (false, true)
            };
            let dst = arg(a, 1);
            tx.lock(db, [key, dst]);
            let Some(mut m) = list_meta(tx, db, key)? else {
                return Ok(Reply::Nil);
            };
            list_meta(tx, db, dst)?;
            let out = pop(tx, db, key, &mut m, 1, from_left)?;
            push(tx, db, dst, &out, to_left, true)?;
            Ok(Reply::opt_bulk(out.into_iter().next()))
        }
        _ => Err(CmdError::Other(format!("unknown command '{name}'"))),
    }
}

/// LPOS key element [RANK rank] [COUNT num] [MAXLEN len]
fn lpos(tx: &mut Tx, db: u8, a: &[Vec<u8>]) -> CmdResult {
    let (key, elem) = (arg(a, 0), arg(a, 1));
    let (mut rank, mut count, mut maxlen) = (1i64, None, 0i64);
    let mut i = 2;
    while let Some(o) = a.get(i) {
        let Some(v) = a.get(i + 1) else {
            return Err(CmdError::Syntax);
        };
        if is_opt(o, "RANK") {
            rank = parse_i64(v)?;
            if rank == 0 {
                return Err(CmdError::Other(
                    "RANK can't be zero: use 1 to start from the first match, 2 from the second ... \
                     or use negative to start from the end of the list"
                        .into(),
                ));
            }
            if rank == i64::MIN {
                return Err(CmdError::Other(
                    "value is out of range, value must between -9223372036854775807 and 9223372036854775807".into(),
                ));
            }
        } else if is_opt(o, "COUNT") {
            let c = parse_i64(v)?;
            if c < 0 {
                return Err(CmdError::Other("COUNT can't be negative".into()));
            }
            count = Some(c);
        } else if is_opt(o, "MAXLEN") {
            maxlen = parse_i64(v)?;
            if maxlen < 0 {
                return Err(CmdError::Other("MAXLEN can't be negative".into()));
            }
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    tx.consistent_reads();
    let Some(m) = list_meta(tx, db, key)? else {
        return Ok(if count.is_some() {
            Reply::Array(vec![])
        } else {
            Reply::Nil
        });
    };
    let n = len(&m);
    let mut hits = Vec::new();
    let mut skip = rank.unsigned_abs() - 1;
    let want = match count {
        Some(0) => u64::MAX,
        Some(c) => c.unsigned_abs(),
        None => 1,
    };
    let mut seen = 0i64;
    let mut pos = if rank > 0 { 0 } else { n - 1 };
    let start = elem_key(db, key, &m, pos);
    tx.scan(
        &sub_prefix(db, key, m.version),
        Some(&start),
        rank < 0,
        |_, v| {
            if maxlen != 0 && seen >= maxlen {
                return false;
            }
            seen += 1;
            if v == elem {
                if skip > 0 {
                    skip -= 1;
                } else {
                    hits.push(Reply::Int(pos));
                }
            }
            pos += if rank > 0 { 1 } else { -1 };
            (hits.len() as u64) < want
        },
    )?;
    Ok(match count {
        Some(_) => Reply::Array(hits),
        None => hits.into_iter().next().unwrap_or(Reply::Nil),
    })
}
