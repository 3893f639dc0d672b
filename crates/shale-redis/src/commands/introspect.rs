//! SLOWLOG, LATENCY, OBJECT, MEMORY USAGE and DEBUG SLEEP (Redis 7.0's
//! replies and errors; docs/redis.md, "Server commands").

use super::{arg, is_opt, lossy, parse_int_strict, wrong_args, CmdError, CmdResult, Shared};
use crate::resp::Reply;
use crate::store::{sub_prefix, Meta, Type};
use crate::tx::Tx;

fn unknown(cmd: &str, a: &[Vec<u8>]) -> CmdResult {
    Err(CmdError::Other(format!(
        "unknown subcommand '{}'. Try {cmd} HELP.",
        lossy(arg(a, 0), 128)
    )))
}

fn int(n: usize) -> Reply {
    Reply::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

/// SLOWLOG GET [count] | LEN | RESET
pub(super) fn slowlog(shared: &Shared, a: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(arg(a, 0)).to_ascii_lowercase();
    let log = &shared.slowlog;
    match (sub.as_str(), a.len()) {
        ("get", 1 | 2) => {
            let count = match a.get(1) {
                None => Some(10),
                Some(c) => match parse_int_strict(c) {
                    Some(-1) => None,
                    Some(n) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                    _ => {
                        return Err(CmdError::Other(
                            "count should be greater than or equal to -1".into(),
                        ))
                    }
                },
            };
            Ok(Reply::Array(
                log.get(count)
                    .into_iter()
                    .map(|e| {
                        Reply::Array(vec![
                            Reply::Int(i64::try_from(e.id).unwrap_or(i64::MAX)),
                            Reply::Int(i64::try_from(e.time).unwrap_or(i64::MAX)),
                            Reply::Int(i64::try_from(e.micros).unwrap_or(i64::MAX)),
                            Reply::Array(e.args.into_iter().map(Reply::Bulk).collect()),
                            Reply::bulk(e.addr),
                            Reply::Bulk(e.name),
                        ])
                    })
                    .collect(),
            ))
        }
        ("len", 1) => Ok(int(log.len())),
        ("reset", 1) => {
            log.reset();
            Ok(Reply::ok())
        }
        ("get" | "len" | "reset", _) => Ok(wrong_args(&format!("slowlog|{sub}"))),
        _ => unknown("SLOWLOG", a),
    }
}

/// LATENCY LATEST | HISTORY event | RESET [event ...]: this server keeps
/// no latency events (no latency-monitor-threshold), so the replies are
/// Redis's for an empty monitor.
pub(super) fn latency(a: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(arg(a, 0)).to_ascii_lowercase();
    match (sub.as_str(), a.len()) {
        ("latest", 1) | ("history", 2) => Ok(Reply::Array(Vec::new())),
        ("reset", _) => Ok(Reply::Int(0)),
        ("latest" | "history", _) => Ok(wrong_args(&format!("latency|{sub}"))),
        _ => unknown("LATENCY", a),
    }
}

/// DEBUG SLEEP seconds (for tests); other DEBUG subcommands are not here.
pub(super) fn debug(a: &[Vec<u8>]) -> CmdResult {
    if is_opt(arg(a, 0), "sleep") && a.len() == 2 {
        let secs = super::zsets::parse_float(arg(a, 1))
            .filter(|s| s.is_finite())
            .unwrap_or(0.0)
            .max(0.0);
        std::thread::sleep(std::time::Duration::from_secs_f64(secs.min(3600.0)));
        return Ok(Reply::ok());
    }
    unknown("DEBUG", a)
}

/// Redis's `string2ll` over the whole value: how `tryObjectEncoding`
/// decides on the `int` encoding.
fn is_int(v: &[u8]) -> Option<i64> {
    if v.len() > 20 {
        return None;
    }
    parse_int_strict(v)
}

/// The encoding Redis 7.0 would give the value as it is now (Redis's
/// depends on its history too: APPEND makes `raw`, and a collection
/// never converts back to its compact form).
fn encoding(tx: &Tx, db: u8, key: &[u8], m: &Meta) -> Result<&'static str, CmdError> {
    Ok(match m.ty {
        Type::String => match (is_int(&m.value), m.value.len()) {
            (Some(_), _) => "int",
            (None, 0..=44) => "embstr",
            _ => "raw",
        },
        Type::List => "quicklist",
        Type::Hash | Type::ZSet | Type::Set => {
            let (small, compact, big) = match m.ty {
                Type::Set => (512, "intset", "hashtable"),
                Type::Hash => (128, "listpack", "hashtable"),
                _ => (128, "listpack", "skiplist"),
            };
            if m.size > small {
                return Ok(big);
            }
            let prefix = sub_prefix(db, key, m.version);
            let mut fits = true;
            tx.scan(&prefix, None, false, |k, v| {
                let member = k.get(prefix.len()..).unwrap_or_default();
                fits = match m.ty {
                    Type::Set => is_int(member).is_some(),
                    Type::Hash => member.len() <= 64 && v.len() <= 64,
                    _ => member.len() <= 64,
                };
                fits
            })?;
            if fits {
                compact
            } else {
                big
            }
        }
    })
}

/// OBJECT ENCODING | REFCOUNT | IDLETIME | FREQ key
pub(super) fn object(tx: &mut Tx, db: u8, a: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(arg(a, 0)).to_ascii_lowercase();
    if !matches!(sub.as_str(), "encoding" | "refcount" | "idletime" | "freq") {
        return unknown("OBJECT", a);
    }
    if a.len() != 2 {
        return Ok(wrong_args(&format!("object|{sub}")));
    }
    tx.consistent_reads();
    let key = arg(a, 1);
    let Some(m) = tx.get_meta(db, key)? else {
        return Ok(Reply::Nil);
    };
    match sub.as_str() {
        "encoding" => Ok(Reply::bulk(encoding(tx, db, key, &m)?)),
        // Redis shares the integers 0..9999 (refcount INT_MAX).
        "refcount" => Ok(Reply::Int(match is_int(&m.value) {
            Some(n) if m.ty == Type::String && (0..10_000).contains(&n) => 2_147_483_647,
            _ => 1,
        })),
        // No access times are kept.
        "idletime" => Ok(Reply::Int(0)),
        _ => Err(CmdError::Other(
            "An LFU maxmemory policy is not selected, access frequency not tracked. Please \
             note that when switching between policies at runtime LRU and LFU data will take \
             some time to adjust."
                .into(),
        )),
    }
}

/// MEMORY USAGE key [SAMPLES n]: the bytes of the key's records (keys and
/// values), the elements sampled as Redis does (default 5, 0 = all) and
/// extrapolated to the whole collection.
pub(super) fn memory(tx: &mut Tx, db: u8, a: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(arg(a, 0)).to_ascii_lowercase();
    if sub != "usage" {
        return unknown("MEMORY", a);
    }
    if a.len() < 2 {
        return Ok(wrong_args("memory|usage"));
    }
    let mut samples = 5u64;
    let mut j = 2;
    while let Some(o) = a.get(j) {
        if is_opt(o, "samples") && a.len() > j + 1 {
            let n = parse_int_strict(arg(a, j + 1)).ok_or(CmdError::NotInteger)?;
            samples = if n == 0 {
                u64::MAX
            } else {
                u64::try_from(n).unwrap_or(1)
            };
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    tx.consistent_reads();
    let key = arg(a, 1);
    let Some(m) = tx.get_meta(db, key)? else {
        return Ok(Reply::Nil);
    };
    let base = key.len() + 2 + m.encode().len();
    if m.ty == Type::String {
        return Ok(int(base));
    }
    let prefix = sub_prefix(db, key, m.version);
    let (mut seen, mut bytes) = (0u64, 0usize);
    tx.scan(&prefix, None, false, |k, v| {
        seen += 1;
        bytes += k.len() + v.len();
        seen < samples
    })?;
    // A sorted set has a score-index record per member too (about the
    // same size as its member record).
    let per_member = if m.ty == Type::ZSet { 2 } else { 1 };
    let total = if seen == 0 {
        0
    } else {
        let avg = bytes as f64 / seen as f64;
        (avg * m.size as f64) as usize * per_member
    };
    Ok(int(base + total))
}
