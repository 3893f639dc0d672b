//! ZUNION / ZINTER / ZDIFF and their STORE forms over sorted sets and sets
//! (a set member scores 1), with WEIGHTS, AGGREGATE and (not STORE)
//! WITHSCORES, following Redis 7.0's `zunionInterDiffGenericCommand`:
//! numkeys, then the types of every source, then the options.

use super::{parse_float, put_member, save};
use crate::commands::{arg, is_opt, parse_i64, CmdError, CmdResult};
use crate::resp::Reply;
use crate::store::{sub_prefix, Meta, Type};
use crate::tx::Tx;
use std::collections::BTreeMap;

#[derive(Clone, Copy, PartialEq)]
enum Agg {
    Sum,
    Min,
    Max,
}

/// (member -> score) of one source: a sorted set, a set, or nothing.
fn source(tx: &Tx, db: u8, key: &[u8]) -> Result<BTreeMap<Vec<u8>, f64>, CmdError> {
    let mut out = BTreeMap::new();
    let Some(m) = tx.get_meta(db, key)? else {
        return Ok(out);
    };
    let prefix = sub_prefix(db, key, m.version);
    let n = prefix.len();
    tx.scan(&prefix, None, false, |k, v| {
        let score = match m.ty {
            Type::ZSet => super::score_from_raw(v).unwrap_or(0.0),
            _ => 1.0,
        };
        out.insert(k.get(n..).unwrap_or_default().to_vec(), score);
        true
    })?;
    Ok(out)
}

fn combine(agg: Agg, acc: f64, v: f64) -> f64 {
    match agg {
        Agg::Sum => {
            let s = acc + v;
            if s.is_nan() {
                0.0
            } else {
                s
            }
        }
        Agg::Min => acc.min(v),
        Agg::Max => acc.max(v),
    }
}

pub fn run(tx: &mut Tx, db: u8, name: &str, a: &[Vec<u8>]) -> CmdResult {
    let store = name.ends_with("store");
    let (dst, a) = match (store, a.split_first()) {
        (true, Some((d, rest))) => (Some(d.as_slice()), rest),
        _ => (None, a),
    };
    let n = parse_i64(arg(a, 0))?;
    if n < 1 {
        return Err(CmdError::Other(format!(
            "at least 1 input key is needed for '{name}' command"
        )));
    }
    let keys_end = usize::try_from(n).ok().and_then(|n| n.checked_add(1));
    let Some(keys) = keys_end.and_then(|e| a.get(1..e)) else {
        return Err(CmdError::Syntax);
    };
    let opts = a.get(1 + keys.len()..).unwrap_or_default();
    match dst {
        Some(d) => tx.lock(db, std::iter::once(d).chain(keys.iter().map(Vec::as_slice))),
        None => tx.consistent_reads(),
    }
    for k in keys {
        if let Some(m) = tx.get_meta(db, k)? {
            if m.ty != Type::ZSet && m.ty != Type::Set {
                return Err(CmdError::WrongType);
            }
        }
    }
    let diff = name.starts_with("zdiff");
    let mut withscores = false;
    let mut weights = vec![1.0; keys.len()];
    let mut agg = Agg::Sum;
    let mut j = 0;
    while let Some(o) = opts.get(j) {
        let remaining = opts.len() - j;
        if !diff && remaining > keys.len() && is_opt(o, "WEIGHTS") {
            for (i, w) in weights.iter_mut().enumerate() {
                *w = parse_float(arg(opts, j + 1 + i))
                    .ok_or_else(|| CmdError::Other("weight value is not a float".into()))?;
            }
            j += 1 + keys.len();
        } else if !diff && remaining >= 2 && is_opt(o, "AGGREGATE") {
            let v = arg(opts, j + 1);
            agg = if is_opt(v, "SUM") {
                Agg::Sum
            } else if is_opt(v, "MIN") {
                Agg::Min
            } else if is_opt(v, "MAX") {
                Agg::Max
            } else {
                return Err(CmdError::Syntax);
            };
            j += 2;
        } else if dst.is_none() && is_opt(o, "WITHSCORES") {
            withscores = true;
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let mut sources = Vec::with_capacity(keys.len());
    for k in keys {
        sources.push(source(tx, db, k)?);
    }
    let weighted = |s: f64, w: f64| {
        let x = s * w;
        if x.is_nan() {
            0.0
        } else {
            x
        }
    };
    let mut result: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
    match name {
        "zunion" | "zunionstore" => {
            for (src, &w) in sources.iter().zip(&weights) {
                for (mem, &s) in src {
                    let v = weighted(s, w);
                    result
                        .entry(mem.clone())
                        .and_modify(|acc| *acc = combine(agg, *acc, v))
                        .or_insert(v);
                }
            }
        }
        "zinter" | "zinterstore" => {
            if let Some((first, rest)) = sources.split_first() {
                'member: for (mem, &s) in first {
                    let mut acc = weighted(s, weights.first().copied().unwrap_or(1.0));
                    for (src, &w) in rest.iter().zip(weights.iter().skip(1)) {
                        match src.get(mem) {
                            Some(&s) => acc = combine(agg, acc, weighted(s, w)),
                            None => continue 'member,
                        }
                    }
                    result.insert(mem.clone(), acc);
                }
            }
        }
        _ => {
            if let Some((first, rest)) = sources.split_first() {
                for (mem, &s) in first {
                    if !rest.iter().any(|r| r.contains_key(mem)) {
                        result.insert(mem.clone(), s);
                    }
                }
            }
        }
    }
    let Some(dst) = dst else {
        return Ok(reply(result, withscores));
    };
    tx.delete_if_live(db, dst)?;
    let count = result.len();
    if count > 0 {
        let mut m = Meta::new(Type::ZSet, tx.new_version());
        for (mem, s) in &result {
            put_member(tx, db, dst, &m, mem, None, *s);
        }
        save(tx, db, dst, &mut m, count as u64);
    }
    Ok(Reply::Int(i64::try_from(count).unwrap_or(i64::MAX)))
}

/// The non-STORE reply: members by score, ties by member bytes (Redis's
/// skiplist order), with their scores as [member, score] pairs in RESP3.
fn reply(result: BTreeMap<Vec<u8>, f64>, withscores: bool) -> Reply {
    let mut v: Vec<(Vec<u8>, f64)> = result.into_iter().collect();
    // Stable, and the map iterated in member order: ties (-0 and 0 too,
    // as Redis compares them) stay by member.
    v.sort_by(|x, y| x.1.partial_cmp(&y.1).unwrap_or(std::cmp::Ordering::Equal));
    if withscores {
        Reply::Pairs(
            v.into_iter()
                .map(|(m, s)| (Reply::Bulk(m), Reply::Double(s)))
                .collect(),
        )
    } else {
        Reply::Array(v.into_iter().map(|(m, _)| Reply::Bulk(m)).collect())
    }
}
