//! Set commands: a metadata record (member count) plus one empty-valued
//! sub-record per member.

use super::{arg, is_opt, parse_i64, scan, typed_meta, CmdError, CmdResult, Shared};
use crate::resp::Reply;
use crate::store::{sub_key, sub_prefix, Meta, Type};
use crate::tx::Tx;
use std::collections::BTreeSet;

fn set_meta(tx: &Tx, db: u8, key: &[u8]) -> Result<Option<Meta>, CmdError> {
    typed_meta(tx, db, key, Type::Set)
}

/// Every member of the set at `key` (empty when absent), in byte order.
fn members(tx: &Tx, db: u8, key: &[u8]) -> Result<BTreeSet<Vec<u8>>, CmdError> {
    let Some(m) = set_meta(tx, db, key)? else {
        return Ok(BTreeSet::new());
    };
    let prefix = sub_prefix(db, key, m.version);
    let mut out = BTreeSet::new();
    tx.scan(&prefix, None, false, |k, _| {
        out.insert(k.get(prefix.len()..).unwrap_or_default().to_vec());
        true
    })?;
    Ok(out)
}

/// Adds `items` to the set `key` (created if absent); returns how many were new.
fn add(tx: &mut Tx, db: u8, key: &[u8], items: &[Vec<u8>]) -> Result<i64, CmdError> {
    let mut m = super::meta_or_new(tx, db, key, Type::Set)?;
    let mut added = 0;
    for it in items {
        let sk = sub_key(db, key, m.version, it);
        if tx.get(&sk)?.is_none() {
            tx.put(sk, Vec::new());
            added += 1;
        }
    }
    if added > 0 {
        m.size += added;
        tx.put_meta(db, key, &m);
    }
    Ok(added as i64)
}

/// Removes `items` from the set `m` at `key`; returns how many were there.
fn remove(
    tx: &mut Tx,
    db: u8,
    key: &[u8],
    m: &mut Meta,
    items: &[Vec<u8>],
) -> Result<i64, CmdError> {
    let mut removed = 0;
    for it in items {
        let sk = sub_key(db, key, m.version, it);
        if tx.get(&sk)?.is_some() {
            tx.delete(sk);
            removed += 1;
        }
    }
    m.size = m.size.saturating_sub(removed);
    if m.size == 0 {
        tx.delete_meta(db, key);
    } else if removed > 0 {
        tx.put_meta(db, key, m);
    }
    Ok(removed as i64)
}

/// Replaces `dst` by a set holding `items` (deleted when empty).
fn store(tx: &mut Tx, db: u8, dst: &[u8], items: BTreeSet<Vec<u8>>) -> CmdResult {
    // Replacing a missing key with an empty result writes nothing.
    tx.delete_if_live(db, dst)?;
    let n = items.len() as i64;
    if n > 0 {
        let mut m = Meta::new(Type::Set, tx.new_version());
        m.size = n as u64;
        for it in items {
            tx.put(sub_key(db, dst, m.version, &it), Vec::new());
        }
        tx.put_meta(db, dst, &m);
    }
    Ok(Reply::Int(n))
}

/// A set reply (`~` in RESP3).
fn bulks(items: impl IntoIterator<Item = Vec<u8>>) -> Reply {
    Reply::Set(items.into_iter().map(Reply::Bulk).collect())
}

/// The set algebra of SINTER / SUNION / SDIFF over `keys` (types checked first).
fn combine(tx: &Tx, db: u8, op: &str, keys: &[Vec<u8>]) -> Result<BTreeSet<Vec<u8>>, CmdError> {
    let mut sets = Vec::with_capacity(keys.len());
    for k in keys {
        sets.push(members(tx, db, k)?);
    }
    let mut it = sets.into_iter();
    let mut acc = it.next().unwrap_or_default();
    for s in it {
        match op {
            "inter" => acc.retain(|x| s.contains(x)),
            "union" => acc.extend(s),
            _ => acc.retain(|x| !s.contains(x)),
        }
    }
    Ok(acc)
}

pub fn run(shared: &Shared, tx: &mut Tx, db: u8, name: &str, a: &[Vec<u8>]) -> CmdResult {
    let key = arg(a, 0);
    let rest = a.get(1..).unwrap_or_default();
    match name {
        "sadd" => {
            tx.lock(db, [key]);
            Ok(Reply::Int(add(tx, db, key, rest)?))
        }
        "srem" => {
            tx.lock(db, [key]);
            let Some(mut m) = set_meta(tx, db, key)? else {
                return Ok(Reply::Int(0));
            };
            Ok(Reply::Int(remove(tx, db, key, &mut m, rest)?))
        }
        "smembers" => {
            tx.consistent_reads();
            Ok(bulks(members(tx, db, key)?))
        }
        "scard" => Ok(Reply::Int(
            set_meta(tx, db, key)?.map_or(0, |m| m.size as i64),
        )),
        "sismember" | "smismember" => {
            tx.consistent_reads();
            let m = set_meta(tx, db, key)?;
            let mut out = Vec::with_capacity(rest.len());
            for it in rest {
                let hit = match &m {
                    Some(m) => tx.get(&sub_key(db, key, m.version, it))?.is_some(),
                    None => false,
                };
                out.push(Reply::Int(hit as i64));
            }
            Ok(if name == "sismember" {
                out.into_iter().next().unwrap_or(Reply::Int(0))
            } else {
                Reply::Array(out)
            })
        }
        "spop" | "srandmember" => {
            if a.len() > 2 {
                return Err(CmdError::Syntax);
            }
            let count = match a.get(1) {
                Some(c) if name == "spop" => Some(super::parse_count(c)?),
                Some(c) => Some(super::random::parse_count(c, false)?),
                None => None,
            };
            if name == "spop" {
                tx.lock(db, [key]);
            } else {
                tx.consistent_reads();
            }
            // RESP3: SPOP with a count replies a set, SRANDMEMBER an array.
            let wrap = |items: Vec<Vec<u8>>| -> Reply {
                if name == "spop" {
                    bulks(items)
                } else {
                    Reply::Array(items.into_iter().map(Reply::Bulk).collect())
                }
            };
            let Some(mut m) = set_meta(tx, db, key)? else {
                return Ok(if count.is_some() {
                    wrap(Vec::new())
                } else {
                    Reply::Nil
                });
            };
            let prefix = sub_prefix(db, key, m.version);
            let picked: Vec<Vec<u8>> = super::random::pick(tx, &prefix, count.unwrap_or(1))?
                .into_iter()
                .map(|(member, _)| member)
                .collect();
            if name == "spop" {
                remove(tx, db, key, &mut m, &picked)?;
            }
            Ok(match count {
                Some(_) => wrap(picked),
                None => Reply::opt_bulk(picked.into_iter().next()),
            })
        }
        "smove" => {
            let (dst, member) = (arg(a, 1), arg(a, 2));
            tx.lock(db, [key, dst]);
            // Redis: a missing source is 0 before any type check.
            let Some(mut sm) = set_meta(tx, db, key)? else {
                return Ok(Reply::Int(0));
            };
            set_meta(tx, db, dst)?;
            if tx.get(&sub_key(db, key, sm.version, member))?.is_none() {
                return Ok(Reply::Int(0));
            }
            if key != dst {
                remove(tx, db, key, &mut sm, &[member.to_vec()])?;
                add(tx, db, dst, &[member.to_vec()])?;
            }
            Ok(Reply::Int(1))
        }
        "sinter" | "sunion" | "sdiff" => {
            tx.consistent_reads();
            Ok(bulks(combine(
                tx,
                db,
                name.get(1..).unwrap_or_default(),
                a,
            )?))
        }
        "sinterstore" | "sunionstore" | "sdiffstore" => {
            tx.lock(db, a.iter().map(Vec::as_slice));
            let op = name.get(1..name.len() - 5).unwrap_or_default();
            let result = combine(tx, db, op, rest)?;
            store(tx, db, key, result)
        }
        "sintercard" => {
            let n = super::parse_int_strict(key).unwrap_or(0);
            if n <= 0 {
                return Err(CmdError::Other("numkeys should be greater than 0".into()));
            }
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            if n > rest.len() {
                return Err(CmdError::Other(
                    "Number of keys can't be greater than number of args".into(),
                ));
            }
            let (keys, opts) = rest.split_at(n);
            let mut limit = 0i64;
            let mut i = 0;
            while let Some(o) = opts.get(i) {
                match opts.get(i + 1) {
                    Some(v) if is_opt(o, "LIMIT") => {
                        limit = parse_i64(v)?;
                        if limit < 0 {
                            return Err(CmdError::Other("LIMIT can't be negative".into()));
                        }
                    }
                    _ => return Err(CmdError::Syntax),
                }
                i += 2;
            }
            tx.consistent_reads();
            let card = combine(tx, db, "inter", keys)?.len() as i64;
            Ok(Reply::Int(if limit > 0 { card.min(limit) } else { card }))
        }
        "sscan" => {
            let cursor = scan::parse_cursor(arg(a, 1))?;
            tx.consistent_reads();
            let Some(m) = set_meta(tx, db, key)? else {
                return Ok(scan::empty_scan());
            };
            let prefix = sub_prefix(db, key, m.version);
            scan::scan_collection(
                shared,
                tx,
                db,
                &prefix,
                cursor,
                a.get(2..).unwrap_or_default(),
                0,
                |f, _| vec![Reply::bulk(f)],
            )
        }
        _ => Err(CmdError::Other(format!("unknown command '{name}'"))),
    }
}
