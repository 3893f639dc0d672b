//! Hash commands: metadata (field count, version) plus one sub-record per field.

use super::{arg, parse_i64, CmdError, CmdResult};
use crate::resp::Reply;
use crate::store::{sub_key, Meta, Store, Type};
use shaledb::{ReadOptions, WriteBatch};

/// The live hash `key` (None when absent); WRONGTYPE for another type.
fn hash_meta(st: &Store, ro: &ReadOptions, db: u8, key: &[u8]) -> Result<Option<Meta>, CmdError> {
    match st.get_meta(ro, db, key)? {
        Some(m) if m.ty != Type::Hash => Err(CmdError::WrongType),
        m => Ok(m),
    }
}

fn new_hash(st: &Store) -> Meta {
    Meta {
        ty: Type::Hash,
        version: st.new_version(),
        expire_at: 0,
        size: 0,
        value: Vec::new(),
    }
}

pub fn run(st: &Store, db: u8, name: &str, a: &[Vec<u8>]) -> CmdResult {
    let key = arg(a, 0);
    match name {
        "hset" => {
            if a.len().is_multiple_of(2) {
                return Ok(super::wrong_args("hset"));
            }
            let _g = st.lock_keys(db, [key]);
            let ro = st.latest();
            let mut m = hash_meta(st, &ro, db, key)?.unwrap_or_else(|| new_hash(st));
            let mut b = WriteBatch::new();
            let mut added = 0i64;
            let mut seen = std::collections::HashSet::new();
            for fv in a.get(1..).unwrap_or_default().chunks(2) {
                if let [f, v] = fv {
                    let sk = sub_key(db, key, m.version, f);
                    if seen.insert(f.as_slice()) && st.get_field(&ro, &sk)?.is_none() {
                        added += 1;
                    }
                    st.batch_put_field(&mut b, &sk, v);
                }
            }
            m.size += added as u64;
            st.batch_put_meta(&mut b, db, key, &m);
            st.write(b)?;
            Ok(Reply::Int(added))
        }
        "hdel" => {
            let _g = st.lock_keys(db, [key]);
            let ro = st.latest();
            let Some(mut m) = hash_meta(st, &ro, db, key)? else {
                return Ok(Reply::Int(0));
            };
            let mut b = WriteBatch::new();
            let mut removed = 0u64;
            let mut seen = std::collections::HashSet::new();
            for f in a.get(1..).unwrap_or_default() {
                let sk = sub_key(db, key, m.version, f);
                if seen.insert(f.as_slice()) && st.get_field(&ro, &sk)?.is_some() {
                    removed += 1;
                    st.batch_delete_field(&mut b, &sk);
                }
            }
            m.size = m.size.saturating_sub(removed);
            if m.size == 0 {
                st.batch_delete_meta(&mut b, db, key);
            } else {
                st.batch_put_meta(&mut b, db, key, &m);
            }
            if removed > 0 {
                st.write(b)?;
            }
            Ok(Reply::Int(removed as i64))
        }
        "hsetnx" => {
            let _g = st.lock_keys(db, [key]);
            let ro = st.latest();
            let mut m = hash_meta(st, &ro, db, key)?.unwrap_or_else(|| new_hash(st));
            let sk = sub_key(db, key, m.version, arg(a, 1));
            if st.get_field(&ro, &sk)?.is_some() {
                return Ok(Reply::Int(0));
            }
            m.size += 1;
            let mut b = WriteBatch::new();
            st.batch_put_field(&mut b, &sk, arg(a, 2));
            st.batch_put_meta(&mut b, db, key, &m);
            st.write(b)?;
            Ok(Reply::Int(1))
        }
        "hincrby" => {
            let by = parse_i64(arg(a, 2))?;
            let _g = st.lock_keys(db, [key]);
            let ro = st.latest();
            let mut m = hash_meta(st, &ro, db, key)?.unwrap_or_else(|| new_hash(st));
            let sk = sub_key(db, key, m.version, arg(a, 1));
            let cur = match st.get_field(&ro, &sk)? {
                Some(v) => super::parse_int_strict(&v).ok_or(CmdError::HashNotInteger)?,
                None => {
                    m.size += 1;
                    0
                }
            };
            let n = cur.checked_add(by).ok_or(CmdError::Overflow)?;
            let mut b = WriteBatch::new();
            st.batch_put_field(&mut b, &sk, n.to_string().as_bytes());
            st.batch_put_meta(&mut b, db, key, &m);
            st.write(b)?;
            Ok(Reply::Int(n))
        }
        _ => read(st, db, name, a),
    }
}

fn read(st: &Store, db: u8, name: &str, a: &[Vec<u8>]) -> CmdResult {
    let key = arg(a, 0);
    let ro = st.snapshot();
    let m = hash_meta(st, &ro, db, key)?;
    match name {
        "hget" => Ok(match m {
            None => Reply::Nil,
            Some(m) => Reply::opt_bulk(st.get_field(&ro, &sub_key(db, key, m.version, arg(a, 1)))?),
        }),
        "hexists" => Ok(Reply::Int(match m {
            None => 0,
            Some(m) => st
                .get_field(&ro, &sub_key(db, key, m.version, arg(a, 1)))?
                .is_some() as i64,
        })),
        "hmget" => {
            let mut out = Vec::new();
            for f in a.get(1..).unwrap_or_default() {
                out.push(match &m {
                    None => Reply::Nil,
                    Some(m) => Reply::opt_bulk(st.get_field(&ro, &sub_key(db, key, m.version, f))?),
                });
            }
            Ok(Reply::Array(out))
        }
        "hstrlen" => Ok(Reply::Int(match m {
            None => 0,
            Some(m) => st
                .get_field(&ro, &sub_key(db, key, m.version, arg(a, 1)))?
                .map_or(0, |v| v.len() as i64),
        })),
        "hlen" => Ok(Reply::Int(m.map_or(0, |m| m.size as i64))),
        "hgetall" | "hkeys" | "hvals" => {
            let fields = match m {
                None => Vec::new(),
                Some(m) => st.fields(&ro, db, key, m.version)?,
            };
            let mut out = Vec::new();
            for (f, v) in fields {
                if name != "hvals" {
                    out.push(Reply::Bulk(f));
                }
                if name != "hkeys" {
                    out.push(Reply::Bulk(v));
                }
            }
            Ok(Reply::Array(out))
        }
        _ => Err(CmdError::Other(format!("unknown command '{name}'"))),
    }
}
