//! Key-space commands (any type), SCAN cursors and INFO.

use super::{arg, is_opt, parse_i64, CmdError, CmdResult, Shared};
use crate::glob;
use crate::resp::Reply;
use crate::tx::Tx;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};

/// SCAN cursors: an id handed to the client -> the next key to visit.
/// Bounded: the oldest cursors are forgotten (an unknown cursor restarts).
#[derive(Default)]
pub struct CursorTable {
    inner: Mutex<Cursors>,
}

#[derive(Default)]
struct Cursors {
    next_id: u64,
    map: HashMap<u64, (u8, Vec<u8>)>,
    order: VecDeque<u64>,
}

const MAX_CURSORS: usize = 10_000;

impl CursorTable {
    pub(crate) fn save(&self, db: u8, next_key: Vec<u8>) -> u64 {
        let mut c = self.inner.lock();
        c.next_id += 1;
        let id = c.next_id;
        c.map.insert(id, (db, next_key));
        c.order.push_back(id);
        while c.order.len() > MAX_CURSORS {
            if let Some(old) = c.order.pop_front() {
                c.map.remove(&old);
            }
        }
        id
    }

    pub(crate) fn take(&self, db: u8, id: u64) -> Option<Vec<u8>> {
        let mut c = self.inner.lock();
        match c.map.remove(&id) {
            Some((d, k)) if d == db => Some(k),
            _ => None,
        }
    }
}

pub fn run(shared: &Shared, tx: &mut Tx, db: u8, name: &str, a: &[Vec<u8>]) -> CmdResult {
    let key = arg(a, 0);
    match name {
        "del" | "unlink" => {
            tx.lock(db, a.iter().map(|k| k.as_slice()));
            let mut n = 0;
            for k in a {
                if tx.get_meta(db, k)?.is_some() {
                    tx.delete_meta(db, k);
                    n += 1;
                }
            }
            Ok(Reply::Int(n))
        }
        "exists" => {
            tx.consistent_reads();
            let mut n = 0;
            for k in a {
                n += tx.get_meta(db, k)?.is_some() as i64;
            }
            Ok(Reply::Int(n))
        }
        "type" => Ok(Reply::Simple(
            tx.get_meta(db, key)?.map_or("none", |m| m.ty.name()).into(),
        )),
        "ttl" | "pttl" => {
            let Some(m) = tx.get_meta(db, key)? else {
                return Ok(Reply::Int(-2));
            };
            if m.expire_at == 0 {
                return Ok(Reply::Int(-1));
            }
            let left = m.expire_at.saturating_sub(tx.now()) as i64;
            Ok(Reply::Int(if name == "ttl" {
                (left + 500) / 1000
            } else {
                left
            }))
        }
        "expiretime" | "pexpiretime" => {
            let Some(m) = tx.get_meta(db, key)? else {
                return Ok(Reply::Int(-2));
            };
            if m.expire_at == 0 {
                return Ok(Reply::Int(-1));
            }
            let at = i64::try_from(m.expire_at).unwrap_or(i64::MAX);
            Ok(Reply::Int(if name == "expiretime" {
                at.saturating_add(500) / 1000
            } else {
                at
            }))
        }
        "randomkey" => random_key(tx, db),
        "persist" => {
            tx.lock(db, [key]);
            match tx.get_meta(db, key)? {
                Some(mut m) if m.expire_at != 0 => {
                    m.expire_at = 0;
                    tx.put_meta(db, key, &m);
                    Ok(Reply::Int(1))
                }
                _ => Ok(Reply::Int(0)),
            }
        }
        "expire" => expire(tx, db, "expire", a),
        "pexpire" => expire(tx, db, "pexpire", a),
        "expireat" => expire(tx, db, "expireat", a),
        "pexpireat" => expire(tx, db, "pexpireat", a),
        "dbsize" => {
            let mut n = 0;
            tx.consistent_reads();
            tx.scan_keys(db, None, |_, _| {
                n += 1;
                true
            })?;
            Ok(Reply::Int(n))
        }
        "flushdb" | "flushall" => {
            if a.len() > 1
                || a.first()
                    .is_some_and(|o| !is_opt(o, "SYNC") && !is_opt(o, "ASYNC"))
            {
                return Err(CmdError::Syntax);
            }
            tx.lock_all();
            let dbs = if name == "flushall" {
                0..crate::store::DATABASES
            } else {
                db..db + 1
            };
            for d in dbs {
                for tag in [b'M', b'S', b'Z', b'E'] {
                    tx.delete_prefix(&[tag, d]);
                }
            }
            Ok(Reply::ok())
        }
        "keys" => {
            let mut out = Vec::new();
            tx.consistent_reads();
            tx.scan_keys(db, None, |k, _| {
                if glob::matches(key, k) {
                    out.push(Reply::bulk(k));
                }
                true
            })?;
            Ok(Reply::Array(out))
        }
        "scan" => super::scan::scan(shared, tx, db, a),
        _ => Ok(super::unknown_command(
            &std::iter::once(name.as_bytes().to_vec())
                .chain(a.iter().cloned())
                .collect::<Vec<_>>(),
        )),
    }
}

/// EXPIRE/PEXPIRE key n [NX|XX|GT|LT]
fn expire(tx: &mut Tx, db: u8, name: &'static str, a: &[Vec<u8>]) -> CmdResult {
    let key = arg(a, 0);
    let n = parse_i64(arg(a, 1))?;
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for o in a.get(2..).unwrap_or_default() {
        if is_opt(o, "NX") {
            nx = true;
        } else if is_opt(o, "XX") {
            xx = true;
        } else if is_opt(o, "GT") {
            gt = true;
        } else if is_opt(o, "LT") {
            lt = true;
        } else {
            return Err(CmdError::Other(format!(
                "Unsupported option {}",
                String::from_utf8_lossy(o)
            )));
        }
    }
    if nx && (xx || gt || lt) {
        return Err(CmdError::Other(
            "NX and XX, GT or LT options at the same time are not compatible".into(),
        ));
    }
    if gt && lt {
        return Err(CmdError::Other(
            "GT and LT options at the same time are not compatible".into(),
        ));
    }
    let now = tx.now() as i64;
    let ms = if name == "expire" || name == "expireat" {
        n.checked_mul(1000)
    } else {
        Some(n)
    };
    let absolute = name.ends_with("at");
    let Some(when) = ms.and_then(|m| {
        if absolute {
            Some(m)
        } else {
            m.checked_add(now)
        }
    }) else {
        return Err(CmdError::InvalidExpire(name));
    };
    tx.lock(db, [key]);
    let Some(mut m) = tx.get_meta(db, key)? else {
        return Ok(Reply::Int(0));
    };
    let cur = m.expire_at as i64; // 0 = none (infinite)
    let skip = (nx && cur != 0)
        || (xx && cur == 0)
        || (gt && (cur == 0 || when <= cur))
        || (lt && cur != 0 && when >= cur);
    if skip {
        return Ok(Reply::Int(0));
    }
    if when <= now {
        tx.delete_meta(db, key);
    } else {
        m.expire_at = when as u64;
        tx.put_meta(db, key, &m);
    }
    Ok(Reply::Int(1))
}

/// RANDOMKEY: the first live key at or after a random point between the
/// db's first and last keys, wrapping to the start. The point shares the two
/// keys' common prefix and draws its next byte between theirs, so keys that
/// differ only in a suffix (`user:1` .. `user:99`) are all chosen; keys after
/// long gaps are likelier, where Redis samples its hash table.
fn random_key(tx: &Tx, db: u8) -> CmdResult {
    let first_live = |from: Option<&[u8]>| -> Result<Option<Vec<u8>>, CmdError> {
        let mut found = None;
        tx.scan_keys(db, from, |k, _| {
            found = Some(k.to_vec());
            false
        })?;
        Ok(found)
    };
    let Some(first) = first_live(None)? else {
        return Ok(Reply::Nil);
    };
    let now = tx.now();
    let mut last = None;
    tx.scan(
        &[b'M', db],
        None,
        true,
        |k, v| match crate::store::Meta::decode(v) {
            Ok(m) if m.expired(now) => true,
            _ => {
                last = Some(k.get(2..).unwrap_or_default().to_vec());
                false
            }
        },
    )?;
    let last = last.unwrap_or_else(|| first.clone());
    let common = first.iter().zip(&last).take_while(|(a, b)| a == b).count();
    let mut point = first.get(..common).unwrap_or_default().to_vec();
    let lo = first.get(common).copied().unwrap_or(0);
    let hi = last.get(common).copied().unwrap_or(u8::MAX);
    point.push(rand::Rng::gen_range(&mut rand::thread_rng(), lo..=hi));
    point.extend(rand::random::<[u8; 8]>());
    Ok(Reply::opt_bulk(first_live(Some(&point))?.or(Some(first))))
}
