//! String commands.

use super::{arg, is_opt, parse_i64, CmdError, CmdResult};
use crate::ldouble::LongDouble;
use crate::resp::Reply;
use crate::store::{Meta, Type};
use crate::tx::Tx;

pub fn run(tx: &mut Tx, db: u8, name: &str, a: &[Vec<u8>]) -> CmdResult {
    match name {
        "get" => {
            let m = tx.get_meta(db, arg(a, 0))?;
            Ok(Reply::opt_bulk(string_value(m)?))
        }
        "mget" => {
            tx.consistent_reads();
            let mut out = Vec::with_capacity(a.len());
            for k in a {
                out.push(match tx.get_meta(db, k)? {
                    Some(m) if m.ty == Type::String => Reply::Bulk(m.value),
                    _ => Reply::Nil,
                });
            }
            Ok(Reply::Array(out))
        }
        "strlen" => {
            let m = tx.get_meta(db, arg(a, 0))?;
            Ok(Reply::Int(string_value(m)?.map_or(0, |v| v.len() as i64)))
        }
        "set" => set(tx, db, a, "set"),
        "setex" | "psetex" => {
            // SETEX key seconds value == SET key value EX seconds (error names 'setex').
            let unit = if name == "setex" { "EX" } else { "PX" };
            let args = [
                arg(a, 0).to_vec(),
                arg(a, 2).to_vec(),
                unit.as_bytes().to_vec(),
                arg(a, 1).to_vec(),
            ];
            set(
                tx,
                db,
                &args,
                if name == "setex" { "setex" } else { "psetex" },
            )
        }
        "msetnx" => {
            if !a.len().is_multiple_of(2) {
                return Ok(super::wrong_args("msetnx"));
            }
            tx.lock(db, a.iter().step_by(2).map(|k| k.as_slice()));
            for k in a.iter().step_by(2) {
                if tx.get_meta(db, k)?.is_some() {
                    return Ok(Reply::Int(0));
                }
            }
            for kv in a.chunks(2) {
                if let [k, v] = kv {
                    put(tx, db, k, &new_string(tx, v.clone(), 0))?;
                }
            }
            Ok(Reply::Int(1))
        }
        "mset" => {
            if !a.len().is_multiple_of(2) {
                return Ok(super::wrong_args("mset"));
            }
            tx.lock(db, a.iter().step_by(2).map(|k| k.as_slice()));
            for kv in a.chunks(2) {
                if let [k, v] = kv {
                    put(tx, db, k, &new_string(tx, v.clone(), 0))?;
                }
            }
            Ok(Reply::ok())
        }
        "setnx" => {
            tx.lock(db, [arg(a, 0)]);
            if tx.get_meta(db, arg(a, 0))?.is_some() {
                return Ok(Reply::Int(0));
            }
            let m = new_string(tx, arg(a, 1).to_vec(), 0);
            put(tx, db, arg(a, 0), &m)?;
            Ok(Reply::Int(1))
        }
        "getset" => {
            tx.lock(db, [arg(a, 0)]);
            let old = string_value(tx.get_meta(db, arg(a, 0))?)?;
            let m = new_string(tx, arg(a, 1).to_vec(), 0);
            put(tx, db, arg(a, 0), &m)?;
            Ok(Reply::opt_bulk(old))
        }
        "getdel" => {
            tx.lock(db, [arg(a, 0)]);
            let old = string_value(tx.get_meta(db, arg(a, 0))?)?;
            if old.is_some() {
                tx.delete_meta(db, arg(a, 0));
            }
            Ok(Reply::opt_bulk(old))
        }
        "incr" => incr_by(tx, db, arg(a, 0), 1),
        "decr" => incr_by(tx, db, arg(a, 0), -1),
        "incrby" => incr_by(tx, db, arg(a, 0), parse_i64(arg(a, 1))?),
        "decrby" => {
            let n = parse_i64(arg(a, 1))?;
            let n = n
                .checked_neg()
                .ok_or_else(|| CmdError::Other("decrement would overflow".into()))?;
            incr_by(tx, db, arg(a, 0), n)
        }
        "incrbyfloat" => {
            // Redis's order: the key's type, its value, then the increment.
            let key = arg(a, 0);
            tx.lock(db, [key]);
            let (cur, expire_at) = match tx.get_meta(db, key)? {
                None => (LongDouble::parse(b"0").ok_or(CmdError::NotFloat)?, 0),
                Some(m) if m.ty == Type::String => {
                    (parse_ld(&m.value, CmdError::NotFloat)?, m.expire_at)
                }
                Some(_) => return Err(CmdError::WrongType),
            };
            let by = parse_ld(arg(a, 1), CmdError::NotFloat)?;
            let text = crate::ldouble::incr(&cur, &by).ok_or(CmdError::NanOrInfinity)?;
            let m = new_string(tx, text.clone().into_bytes(), expire_at);
            put(tx, db, key, &m)?;
            Ok(Reply::bulk(text))
        }
        "getrange" => {
            let (start, end) = (parse_i64(arg(a, 1))?, parse_i64(arg(a, 2))?);
            let v = string_value(tx.get_meta(db, arg(a, 0))?)?.unwrap_or_default();
            Ok(Reply::bulk(substr(&v, start, end).to_vec()))
        }
        "setrange" => setrange(tx, db, a),
        "getex" => getex(tx, db, a),
        "append" => {
            tx.lock(db, [arg(a, 0)]);
            let key = arg(a, 0);
            let m = match tx.get_meta(db, key)? {
                Some(mut m) if m.ty == Type::String => {
                    m.value.extend_from_slice(arg(a, 1));
                    m.size = m.value.len() as u64;
                    m
                }
                Some(_) => return Err(CmdError::WrongType),
                None => new_string(tx, arg(a, 1).to_vec(), 0),
            };
            put(tx, db, key, &m)?;
            Ok(Reply::Int(m.value.len() as i64))
        }
        _ => Err(CmdError::Other(format!("unknown command '{name}'"))),
    }
}

/// A float as INCRBYFLOAT reads it (C `long double`), or `err`.
pub fn parse_ld(b: &[u8], err: CmdError) -> Result<LongDouble, CmdError> {
    LongDouble::parse(b).ok_or(err)
}

/// A string's value; WRONGTYPE for another type.
fn string_value(m: Option<Meta>) -> Result<Option<Vec<u8>>, CmdError> {
    match m {
        None => Ok(None),
        Some(m) if m.ty == Type::String => Ok(Some(m.value)),
        Some(_) => Err(CmdError::WrongType),
    }
}

fn new_string(tx: &Tx, value: Vec<u8>, expire_at: u64) -> Meta {
    let mut m = Meta::new(Type::String, tx.new_version());
    m.expire_at = expire_at;
    m.size = value.len() as u64;
    m.value = value;
    m
}

/// Stores the string `m` as `key`, replacing whatever was there (an old
/// collection's sub-records become unreachable: new version).
pub fn put(tx: &mut Tx, db: u8, key: &[u8], m: &Meta) -> Result<(), CmdError> {
    tx.put_meta(db, key, m);
    Ok(())
}

fn incr_by(tx: &mut Tx, db: u8, key: &[u8], by: i64) -> CmdResult {
    tx.lock(db, [key]);
    let (cur, expire_at) = match tx.get_meta(db, key)? {
        None => (0, 0),
        Some(m) if m.ty == Type::String => (
            super::parse_int_strict(&m.value).ok_or(CmdError::NotInteger)?,
            m.expire_at,
        ),
        Some(_) => return Err(CmdError::WrongType),
    };
    let n = cur.checked_add(by).ok_or(CmdError::Overflow)?;
    let m = new_string(tx, n.to_string().into_bytes(), expire_at);
    put(tx, db, key, &m)?;
    Ok(Reply::Int(n))
}

#[derive(PartialEq)]
enum Cond {
    None,
    Nx,
    Xx,
}

/// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]
/// SET's and GETEX's `EX | PX | EXAT | PXAT amount` option at `o` (its
/// amount in `next`): (raw amount, unit is ms, absolute); None when `o` is
/// another option or the amount is missing.
fn expire_option<'a>(o: &[u8], next: Option<&'a Vec<u8>>) -> Option<(&'a [u8], bool, bool)> {
    if !["EX", "PX", "EXAT", "PXAT"].iter().any(|x| is_opt(o, x)) {
        return None;
    }
    let ms = is_opt(o, "PX") || is_opt(o, "PXAT");
    let absolute = is_opt(o, "EXAT") || is_opt(o, "PXAT");
    Some((next?.as_slice(), ms, absolute))
}

fn set(tx: &mut Tx, db: u8, a: &[Vec<u8>], cmd: &'static str) -> CmdResult {
    let (key, value) = (arg(a, 0), arg(a, 1));
    let mut cond = Cond::None;
    let mut get = false;
    let mut keepttl = false;
    // (raw amount, unit is ms, absolute): parsed after the options, like Redis.
    let mut expire: Option<(&[u8], bool, bool)> = None;
    let mut i = 2;
    while let Some(o) = a.get(i) {
        let next = a.get(i + 1);
        if is_opt(o, "NX") && cond != Cond::Xx {
            cond = Cond::Nx;
        } else if is_opt(o, "XX") && cond != Cond::Nx {
            cond = Cond::Xx;
        } else if is_opt(o, "GET") {
            get = true;
        } else if is_opt(o, "KEEPTTL") && expire.is_none() {
            keepttl = true;
        } else if let Some(e) = expire_option(o, next).filter(|_| expire.is_none() && !keepttl) {
            expire = Some(e);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let now = tx.now();
    let expire_at = match expire {
        None => 0,
        Some((raw, ms, absolute)) => expiry_ms(raw, ms, absolute, now, cmd)?,
    };
    tx.lock(db, [key]);
    let old = tx.get_meta(db, key)?;
    let old_val = if get {
        string_value(old.clone())?
    } else {
        None
    };
    let exists = old.is_some();
    if (cond == Cond::Nx && exists) || (cond == Cond::Xx && !exists) {
        return Ok(if get {
            Reply::opt_bulk(old_val)
        } else {
            Reply::Nil
        });
    }
    let expire_at = if keepttl {
        old.as_ref().map_or(0, |m| m.expire_at)
    } else {
        expire_at
    };
    if expire_at != 0 && expire_at <= now {
        // EXAT/PXAT in the past: the key is set and expires at once (deleted).
        tx.delete_meta(db, key);
    } else {
        let m = new_string(tx, value.to_vec(), expire_at);
        put(tx, db, key, &m)?;
    }
    Ok(if get {
        Reply::opt_bulk(old_val)
    } else {
        Reply::ok()
    })
}

/// GETRANGE's slice of `v` (Redis 7.0's `getrangeCommand` clamping: negative
/// indexes count from the end, both ends inclusive).
fn substr(v: &[u8], start: i64, end: i64) -> &[u8] {
    let len = i64::try_from(v.len()).unwrap_or(i64::MAX);
    if (start < 0 && end < 0 && start > end) || len == 0 {
        return &[];
    }
    let start = if start < 0 { len + start } else { start }.max(0);
    let end = if end < 0 { len + end } else { end }.clamp(0, len - 1);
    if start > end {
        return &[];
    }
    let (s, e) = (
        usize::try_from(start).unwrap_or(0),
        usize::try_from(end).unwrap_or(0),
    );
    v.get(s..=e).unwrap_or_default()
}

/// SETRANGE key offset value: overwrites from `offset`, zero-padding a
/// shorter (or missing) string; the length after, as Redis replies it.
fn setrange(tx: &mut Tx, db: u8, a: &[Vec<u8>]) -> CmdResult {
    let (key, value) = (arg(a, 0), arg(a, 2));
    let offset = parse_i64(arg(a, 1))?;
    let offset =
        usize::try_from(offset).map_err(|_| CmdError::Other("offset is out of range".into()))?;
    tx.lock(db, [key]);
    let old = tx.get_meta(db, key)?;
    let m = match old {
        Some(m) if m.ty != Type::String => return Err(CmdError::WrongType),
        Some(m) => Some(m),
        None => None,
    };
    let cur_len = m.as_ref().map_or(0, |m| m.value.len());
    if value.is_empty() {
        return Ok(Reply::Int(i64::try_from(cur_len).unwrap_or(i64::MAX)));
    }
    let needed = offset
        .checked_add(value.len())
        .filter(|n| *n as u64 <= crate::resp::MAX_BULK_LEN)
        .ok_or_else(|| {
            CmdError::Other("string exceeds maximum allowed size (proto-max-bulk-len)".into())
        })?;
    let mut m = m.unwrap_or_else(|| new_string(tx, Vec::new(), 0));
    if m.value.len() < needed {
        m.value.resize(needed, 0);
    }
    if let Some(dst) = m.value.get_mut(offset..needed) {
        dst.copy_from_slice(value);
    }
    m.size = m.value.len() as u64;
    put(tx, db, key, &m)?;
    Ok(Reply::Int(i64::try_from(m.value.len()).unwrap_or(i64::MAX)))
}

/// GETEX key [EX s | PX ms | EXAT s | PXAT ms | PERSIST] (Redis 7.0's
/// order: options, the key's type, then the expiry's validity).
fn getex(tx: &mut Tx, db: u8, a: &[Vec<u8>]) -> CmdResult {
    let key = arg(a, 0);
    // (raw amount, unit is ms, absolute)
    let mut expire: Option<(&[u8], bool, bool)> = None;
    let mut persist = false;
    let mut i = 1;
    while let Some(o) = a.get(i) {
        let next = a.get(i + 1);
        if is_opt(o, "PERSIST") && expire.is_none() && !persist {
            persist = true;
        } else if let Some(e) = expire_option(o, next).filter(|_| expire.is_none() && !persist) {
            expire = Some(e);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    tx.lock(db, [key]);
    let Some(mut m) = tx.get_meta(db, key)? else {
        return Ok(Reply::Nil);
    };
    if m.ty != Type::String {
        return Err(CmdError::WrongType);
    }
    let now = tx.now();
    let at = match expire {
        None => None,
        Some((raw, ms, absolute)) => Some(expiry_ms(raw, ms, absolute, now, "getex")?),
    };
    let reply = Reply::bulk(m.value.clone());
    match at {
        // EXAT/PXAT in the past: the key goes at once.
        Some(at) if at <= now => tx.delete_meta(db, key),
        Some(at) => {
            m.expire_at = at;
            tx.put_meta(db, key, &m);
        }
        None if persist && m.expire_at != 0 => {
            m.expire_at = 0;
            tx.put_meta(db, key, &m);
        }
        None => {}
    }
    Ok(reply)
}

/// An EX / PX / EXAT / PXAT amount as the absolute expiry in unix ms, with
/// Redis's checks: a positive integer whose time fits an i64, else
/// `invalid expire time in '<cmd>' command` (SET and GETEX share it).
fn expiry_ms(
    raw: &[u8],
    ms: bool,
    absolute: bool,
    now: u64,
    cmd: &'static str,
) -> Result<u64, CmdError> {
    let invalid = || CmdError::InvalidExpire(cmd);
    let n = u64::try_from(parse_i64(raw)?)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(invalid)?;
    let ms_val = if ms { Some(n) } else { n.checked_mul(1000) };
    let at = ms_val.and_then(|v| {
        if absolute {
            Some(v)
        } else {
            v.checked_add(now)
        }
    });
    at.filter(|at| i64::try_from(*at).is_ok())
        .ok_or_else(invalid)
}
