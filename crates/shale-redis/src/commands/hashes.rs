//! Hash commands: metadata (field count, version) plus one sub-record per field.

use super::{arg, parse_i64, CmdError, CmdResult};
use crate::resp::Reply;
use crate::store::{sub_key, sub_prefix, Meta, Type};
use crate::tx::Tx;

/// The live hash `key` (None when absent); WRONGTYPE for another type.
fn hash_meta(tx: &Tx, db: u8, key: &[u8]) -> Result<Option<Meta>, CmdError> {
    super::typed_meta(tx, db, key, Type::Hash)
}

pub fn run(tx: &mut Tx, db: u8, name: &str, a: &[Vec<u8>]) -> CmdResult {
    let key = arg(a, 0);
    match name {
        // HMSET: HSET's effect with Redis 2's reply (deprecated, but what
        // clients such as redis-rs's `hset_multiple` send).
        "hset" | "hmset" => {
            if a.len().is_multiple_of(2) {
                return Ok(super::wrong_args(name));
            }
            tx.lock(db, [key]);
            let mut m = super::meta_or_new(tx, db, key, Type::Hash)?;
            let mut added = 0i64;
            let mut seen = std::collections::HashSet::new();
            for fv in a.get(1..).unwrap_or_default().chunks(2) {
                if let [f, v] = fv {
                    let sk = sub_key(db, key, m.version, f);
                    if seen.insert(f.as_slice()) && tx.get(&sk)?.is_none() {
                        added += 1;
                    }
                    tx.put(sk, v.clone());
                }
            }
            m.size += added as u64;
            tx.put_meta(db, key, &m);
            Ok(if name == "hmset" {
                Reply::ok()
            } else {
                Reply::Int(added)
            })
        }
        "hdel" => {
            tx.lock(db, [key]);
            let Some(mut m) = hash_meta(tx, db, key)? else {
                return Ok(Reply::Int(0));
            };
            let mut removed = 0u64;
            let mut seen = std::collections::HashSet::new();
            for f in a.get(1..).unwrap_or_default() {
                let sk = sub_key(db, key, m.version, f);
                if seen.insert(f.as_slice()) && tx.get(&sk)?.is_some() {
                    removed += 1;
                    tx.delete(sk);
                }
            }
            m.size = m.size.saturating_sub(removed);
            if m.size == 0 {
                tx.delete_meta(db, key);
            } else if removed > 0 {
                tx.put_meta(db, key, &m);
            }
            Ok(Reply::Int(removed as i64))
        }
        "hsetnx" => {
            tx.lock(db, [key]);
            let mut m = super::meta_or_new(tx, db, key, Type::Hash)?;
            let sk = sub_key(db, key, m.version, arg(a, 1));
            if tx.get(&sk)?.is_some() {
                return Ok(Reply::Int(0));
            }
            m.size += 1;
            tx.put(sk, arg(a, 2).to_vec());
            tx.put_meta(db, key, &m);
            Ok(Reply::Int(1))
        }
        "hincrby" => {
            let by = parse_i64(arg(a, 2))?;
            tx.lock(db, [key]);
            let mut m = super::meta_or_new(tx, db, key, Type::Hash)?;
            let sk = sub_key(db, key, m.version, arg(a, 1));
            let cur = match tx.get(&sk)? {
                Some(v) => super::parse_int_strict(&v).ok_or(CmdError::HashNotInteger)?,
                None => {
                    m.size += 1;
                    0
                }
            };
            let n = cur.checked_add(by).ok_or(CmdError::Overflow)?;
            tx.put(sk, n.to_string().into_bytes());
            tx.put_meta(db, key, &m);
            Ok(Reply::Int(n))
        }
        "hincrbyfloat" => {
            let by = super::strings::parse_ld(arg(a, 2), CmdError::NotFloat)?;
            if by.is_infinite() {
                return Err(CmdError::Other("value is NaN or Infinity".into()));
            }
            tx.lock(db, [key]);
            let mut m = super::meta_or_new(tx, db, key, Type::Hash)?;
            let sk = sub_key(db, key, m.version, arg(a, 1));
            let cur = match tx.get(&sk)? {
                Some(v) => super::strings::parse_ld(&v, CmdError::HashNotFloat)?,
                None => {
                    m.size += 1;
                    super::strings::parse_ld(b"0", CmdError::HashNotFloat)?
                }
            };
            let text = crate::ldouble::incr(&cur, &by).ok_or(CmdError::NanOrInfinity)?;
            tx.put(sk, text.clone().into_bytes());
            tx.put_meta(db, key, &m);
            Ok(Reply::bulk(text))
        }
        "hrandfield" => super::random::run(tx, db, name, a),
        _ => read(tx, db, name, a),
    }
}

fn read(tx: &mut Tx, db: u8, name: &str, a: &[Vec<u8>]) -> CmdResult {
    let key = arg(a, 0);
    tx.consistent_reads();
    let m = hash_meta(tx, db, key)?;
    match name {
        "hget" => Ok(match m {
            None => Reply::Nil,
            Some(m) => Reply::opt_bulk(tx.get(&sub_key(db, key, m.version, arg(a, 1)))?),
        }),
        "hexists" => Ok(Reply::Int(match m {
            None => 0,
            Some(m) => tx.get(&sub_key(db, key, m.version, arg(a, 1)))?.is_some() as i64,
        })),
        "hmget" => {
            let mut out = Vec::new();
            for f in a.get(1..).unwrap_or_default() {
                out.push(match &m {
                    None => Reply::Nil,
                    Some(m) => Reply::opt_bulk(tx.get(&sub_key(db, key, m.version, f))?),
                });
            }
            Ok(Reply::Array(out))
        }
        "hstrlen" => Ok(Reply::Int(match m {
            None => 0,
            Some(m) => tx
                .get(&sub_key(db, key, m.version, arg(a, 1)))?
                .map_or(0, |v| v.len() as i64),
        })),
        "hlen" => Ok(Reply::Int(m.map_or(0, |m| m.size as i64))),
        "hgetall" | "hkeys" | "hvals" => {
            let fields = match m {
                None => Vec::new(),
                Some(m) => fields(tx, &sub_prefix(db, key, m.version))?,
            };
            let it = fields.into_iter();
            Ok(match name {
                "hgetall" => {
                    Reply::Map(it.map(|(f, v)| (Reply::Bulk(f), Reply::Bulk(v))).collect())
                }
                "hkeys" => Reply::Array(it.map(|(f, _)| Reply::Bulk(f)).collect()),
                _ => Reply::Array(it.map(|(_, v)| Reply::Bulk(v)).collect()),
            })
        }
        _ => Err(CmdError::Other(format!("unknown command '{name}'"))),
    }
}

/// A (field, value) pair.
pub type Pair = (Vec<u8>, Vec<u8>);

/// The (suffix, value) pairs under `prefix`, in key order.
pub fn fields(tx: &Tx, prefix: &[u8]) -> Result<Vec<Pair>, CmdError> {
    let mut out = Vec::new();
    tx.scan(prefix, None, false, |k, v| {
        out.push((
            k.get(prefix.len()..).unwrap_or_default().to_vec(),
            v.to_vec(),
        ));
        true
    })?;
    Ok(out)
}

/// HSCAN key cursor [MATCH p] [COUNT n]: field, value pairs.
pub fn hscan(shared: &super::Shared, tx: &mut Tx, db: u8, a: &[Vec<u8>]) -> CmdResult {
    let cursor = super::scan::parse_cursor(arg(a, 1))?;
    tx.consistent_reads();
    let Some(m) = hash_meta(tx, db, arg(a, 0))? else {
        return Ok(super::scan::empty_scan());
    };
    let prefix = sub_prefix(db, arg(a, 0), m.version);
    let opts = a.get(2..).unwrap_or_default();
    super::scan::scan_collection(shared, tx, db, &prefix, cursor, opts, 0, |f, v| {
        vec![Reply::bulk(f), Reply::bulk(v)]
    })
}
