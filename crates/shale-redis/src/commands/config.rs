//! CONFIG GET / SET / RESETSTAT: the parameters this endpoint has
//! (Redis 7.0's replies and error strings).

use super::{arg, lossy, wrong_args, CmdError, CmdResult, Shared};
use crate::durability::Appendfsync;
use crate::resp::Reply;
use crate::store::DATABASES;
use std::sync::atomic::Ordering;

pub(super) fn config(shared: &Shared, a: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(arg(a, 0)).to_ascii_lowercase();
    match sub.as_str() {
        "get" => get(shared, a),
        "set" => set(shared, a),
        "resetstat" if a.len() == 1 => {
            shared.stats.reset();
            shared.store.expired_keys.store(0, Ordering::Relaxed);
            Ok(Reply::ok())
        }
        "resetstat" => Ok(wrong_args("config|resetstat")),
        _ => Err(CmdError::Other(format!(
            "unknown subcommand '{}'. Try CONFIG HELP.",
            lossy(arg(a, 0), 128)
        ))),
    }
}

fn get(shared: &Shared, a: &[Vec<u8>]) -> CmdResult {
    if a.len() < 2 {
        return Ok(wrong_args("config|get"));
    }
    // What redis-benchmark and redis-cli read. `appendonly yes`: every
    // write goes through the WAL.
    let known = [
        ("databases", DATABASES.to_string()),
        ("save", String::new()),
        ("appendonly", "yes".to_string()),
        ("appendfsync", shared.store.appendfsync().name().to_string()),
        ("requirepass", shared.acl.requirepass()),
        (
            "slowlog-log-slower-than",
            shared
                .slowlog
                .slower_than
                .load(Ordering::Relaxed)
                .to_string(),
        ),
        (
            "slowlog-max-len",
            shared.slowlog.max_len.load(Ordering::Relaxed).to_string(),
        ),
        ("client-output-buffer-limit", shared.limits.describe()),
        // Read-only here (CONFIG SET refuses them), what exporters read.
        ("port", shared.port.to_string()),
        ("maxclients", crate::server::MAX_CLIENTS.to_string()),
        ("proto-max-bulk-len", crate::resp::MAX_BULK_LEN.to_string()),
        ("maxmemory", "0".to_string()),
        ("maxmemory-policy", "noeviction".to_string()),
        ("hz", "10".to_string()),
    ];
    let mut out = Vec::new();
    for (name, value) in &known {
        let hit = a
            .get(1..)
            .unwrap_or_default()
            .iter()
            .any(|pat| crate::glob::matches(&pat.to_ascii_lowercase(), name.as_bytes()));
        if hit {
            out.push((Reply::bulk(*name), Reply::bulk(value.clone())));
        }
    }
    Ok(Reply::Map(out))
}

/// CONFIG SET name value [name value ...]: all checked first, then applied
/// together (Redis 7.0 applies all or none).
fn set(shared: &Shared, a: &[Vec<u8>]) -> CmdResult {
    let pairs = a.get(1..).unwrap_or_default();
    if pairs.len() < 2 {
        return Ok(wrong_args("config|set"));
    }
    if pairs.len() % 2 == 1 {
        return Err(CmdError::Syntax);
    }
    let mut fsync = None;
    let mut requirepass: Option<&[u8]> = None;
    let (mut slower_than, mut max_len) = (None, None);
    let mut buffer_limit: Option<&[u8]> = None;
    for pair in pairs.chunks(2) {
        let name = String::from_utf8_lossy(arg(pair, 0)).to_ascii_lowercase();
        let value = arg(pair, 1);
        match name.as_str() {
            "appendfsync" => {
                if fsync.is_some() {
                    return Err(failed(&name, "duplicate parameter"));
                }
                fsync = Some(Appendfsync::parse(value).ok_or_else(|| {
                    failed(
                        &name,
                        "argument(s) must be one of the following: everysec, always, no",
                    )
                })?);
            }
            "requirepass" => {
                if requirepass.is_some() {
                    return Err(failed(&name, "duplicate parameter"));
                }
                requirepass = Some(value);
            }
            "client-output-buffer-limit" => {
                if buffer_limit.is_some() {
                    return Err(failed(&name, "duplicate parameter"));
                }
                // Checked here, applied with the others below.
                crate::outbuf::Limits::default()
                    .set(value)
                    .map_err(|why| failed(&name, why))?;
                buffer_limit = Some(value);
            }
            "slowlog-log-slower-than" | "slowlog-max-len" => {
                let slot = if name == "slowlog-max-len" {
                    &mut max_len
                } else {
                    &mut slower_than
                };
                if slot.is_some() {
                    return Err(failed(&name, "duplicate parameter"));
                }
                let low = if name == "slowlog-max-len" { 0 } else { -1 };
                let v = super::parse_int_strict(value)
                    .ok_or_else(|| failed(&name, "argument couldn't be parsed into an integer"))?;
                if v < low {
                    return Err(failed(
                        &name,
                        &format!("argument must be between {low} and {} inclusive", i64::MAX),
                    ));
                }
                *slot = Some(v);
            }
            _ => {
                return Err(CmdError::Other(format!(
                    "Unknown option or number of arguments for CONFIG SET - '{}'",
                    lossy(arg(pair, 0), 128)
                )))
            }
        }
    }
    if let Some(mode) = fsync {
        shared.store.set_appendfsync(mode);
    }
    if let Some(v) = buffer_limit {
        shared
            .limits
            .set(v)
            .map_err(|why| failed("client-output-buffer-limit", why))?;
    }
    if let Some(v) = slower_than {
        shared.slowlog.slower_than.store(v, Ordering::Relaxed);
    }
    if let Some(v) = max_len {
        let v = u64::try_from(v).unwrap_or(0);
        shared.slowlog.max_len.store(v, Ordering::Relaxed);
        shared.slowlog.trim();
    }
    if let Some(pw) = requirepass {
        shared.acl.set_requirepass(&shared.store, pw)?;
    }
    Ok(Reply::ok())
}

fn failed(name: &str, why: &str) -> CmdError {
    CmdError::Other(format!(
        "CONFIG SET failed (possibly related to argument '{name}') - {why}"
    ))
}
