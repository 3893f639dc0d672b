//! CLIENT ID / TRACKING / CACHING / GETREDIR / TRACKINGINFO / LIST / INFO /
//! KILL / SETNAME / GETNAME / NO-EVICT, and RESET (Redis 7.0's checks, in
//! its order, and its error strings).

use super::{arg, is_opt, lossy, parse_i64, CmdError, CmdResult, Conn, Shared};
use crate::resp::Reply;
use crate::tracking::Tracker;

fn err(msg: &str) -> CmdResult {
    Err(CmdError::Other(msg.into()))
}

pub(super) fn client(shared: &Shared, conn: &mut Conn, a: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(arg(a, 0)).to_ascii_lowercase();
    let t = shared.store.tracking();
    let wrong = |s: &str| Ok(super::wrong_args(&format!("client|{s}")));
    match sub.as_str() {
        "id" if a.len() == 1 => Ok(Reply::Int(i64::try_from(conn.id).unwrap_or(i64::MAX))),
        "getredir" if a.len() == 1 => Ok(Reply::Int(match t.get(conn.id) {
            Some(tr) => i64::try_from(tr.redirect).unwrap_or(i64::MAX),
            None => -1,
        })),
        "trackinginfo" if a.len() == 1 => Ok(trackinginfo(t.get(conn.id))),
        "tracking" if a.len() >= 2 => tracking(shared, conn, a),
        "caching" if a.len() == 2 => {
            let Some(tr) = t.get(conn.id) else {
                return err(
                    "CLIENT CACHING can be called only when the client is in tracking mode with \
                     OPTIN or OPTOUT mode enabled",
                );
            };
            let v = arg(a, 1);
            if is_opt(v, "yes") {
                if !tr.optin {
                    return err(
                        "CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
                    );
                }
            } else if is_opt(v, "no") {
                if !tr.optout {
                    return err(
                        "CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
                    );
                }
            } else {
                return Err(CmdError::Syntax);
            }
            t.set_caching(conn.id, true);
            Ok(Reply::ok())
        }
        "list" => list(shared, conn, a),
        "info" if a.len() == 1 => {
            conn.publish(shared);
            Ok(Reply::Verbatim(
                format!("{}\n", conn.info.line()).into_bytes(),
            ))
        }
        "kill" if a.len() >= 2 => kill(shared, conn, a),
        "setname" if a.len() == 2 => {
            let name = arg(a, 1);
            if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
                return err("Client names cannot contain spaces, newlines or special characters.");
            }
            conn.name = (!name.is_empty()).then(|| name.to_vec());
            Ok(Reply::ok())
        }
        "getname" if a.len() == 1 => Ok(Reply::opt_bulk(conn.name.clone())),
        "no-evict" if a.len() == 2 => {
            let v = arg(a, 1);
            if is_opt(v, "on") {
                conn.no_evict = true;
            } else if is_opt(v, "off") {
                conn.no_evict = false;
            } else {
                return Err(CmdError::Syntax);
            }
            Ok(Reply::ok())
        }
        "id" | "getredir" | "trackinginfo" | "tracking" | "caching" | "info" | "kill"
        | "setname" | "getname" | "no-evict" => wrong(&sub),
        _ => Err(CmdError::Other(format!(
            "unknown subcommand '{}'. Try CLIENT HELP.",
            lossy(arg(a, 0), 128)
        ))),
    }
}

fn trackinginfo(tr: Option<Tracker>) -> Reply {
    let field = |k: &str, v: Reply| (Reply::bulk(k), v);
    let (flags, redirect, prefixes) = match tr {
        None => (vec!["off"], -1, Vec::new()),
        Some(t) => {
            let mut f = vec!["on"];
            let pairs = [
                (t.bcast, "bcast"),
                (t.optin, "optin"),
                (t.optin && t.caching, "caching-yes"),
                (t.optout, "optout"),
                (t.optout && t.caching, "caching-no"),
                (t.noloop, "noloop"),
                (t.broken, "broken_redirect"),
            ];
            f.extend(pairs.iter().filter(|(on, _)| *on).map(|(_, n)| *n));
            let mut p = t.prefixes.clone();
            p.sort();
            (f, i64::try_from(t.redirect).unwrap_or(i64::MAX), p)
        }
    };
    Reply::Map(vec![
        field(
            "flags",
            Reply::Set(flags.into_iter().map(Reply::bulk).collect()),
        ),
        field("redirect", Reply::Int(redirect)),
        field(
            "prefixes",
            Reply::Array(prefixes.into_iter().map(Reply::Bulk).collect()),
        ),
    ])
}

/// CLIENT TRACKING on|off [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN]
/// [OPTOUT] [NOLOOP].
fn tracking(shared: &Shared, conn: &mut Conn, a: &[Vec<u8>]) -> CmdResult {
    let t = shared.store.tracking();
    let mut new = Tracker::default();
    let mut prefixes: Vec<Vec<u8>> = Vec::new();
    let mut j = 2;
    while let Some(opt) = a.get(j) {
        let more = a.len() - 1 - j;
        if is_opt(opt, "redirect") && more > 0 {
            j += 1;
            if new.redirect != 0 {
                return err("A client can only redirect to a single other client");
            }
            let id = parse_i64(arg(a, j))?;
            let id = u64::try_from(id).unwrap_or(0);
            if !t.client_exists(id) {
                return err("The client ID you want redirect to does not exist");
            }
            new.redirect = id;
        } else if is_opt(opt, "bcast") {
            new.bcast = true;
        } else if is_opt(opt, "optin") {
            new.optin = true;
        } else if is_opt(opt, "optout") {
            new.optout = true;
        } else if is_opt(opt, "noloop") {
            new.noloop = true;
        } else if is_opt(opt, "prefix") && more > 0 {
            j += 1;
            prefixes.push(arg(a, j).to_vec());
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let cur = t.get(conn.id);
    if is_opt(arg(a, 1), "off") {
        t.set(conn.id, None);
        return Ok(Reply::ok());
    }
    if !is_opt(arg(a, 1), "on") {
        return Err(CmdError::Syntax);
    }
    if !new.bcast && !prefixes.is_empty() {
        return err("PREFIX option requires BCAST mode to be enabled");
    }
    if cur.as_ref().is_some_and(|c| c.bcast != new.bcast) {
        return err(
            "You can't switch BCAST mode on/off before disabling tracking for this client, and \
             then re-enabling it with a different mode.",
        );
    }
    if new.bcast && (new.optin || new.optout) {
        return err("OPTIN and OPTOUT are not compatible with BCAST");
    }
    if new.optin && new.optout {
        return err("You can't specify both OPTIN mode and OPTOUT mode");
    }
    if cur
        .as_ref()
        .is_some_and(|c| (new.optin && c.optout) || (new.optout && c.optin))
    {
        return err(
            "You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and \
             then re-enabling it with a different mode.",
        );
    }
    let old_prefixes = cur.as_ref().map(|c| c.prefixes.clone()).unwrap_or_default();
    if new.bcast {
        for (i, p) in prefixes.iter().enumerate() {
            let overlaps = |q: &Vec<u8>| p.starts_with(q) || q.starts_with(p);
            if let Some(q) = old_prefixes.iter().find(|q| overlaps(q) && *q != p) {
                return err(&format!(
                    "Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single \
                     client must not overlap.",
                    lossy(p, usize::MAX),
                    lossy(q, usize::MAX)
                ));
            }
            if let Some(q) = prefixes.iter().skip(i + 1).find(|q| overlaps(q) && *q != p) {
                return err(&format!(
                    "Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a \
                     single client must not overlap.",
                    lossy(p, usize::MAX),
                    lossy(q, usize::MAX)
                ));
            }
        }
    }
    // Re-enabling keeps the earlier flags (Redis ORs them in) and prefixes.
    if let Some(c) = &cur {
        new.optin |= c.optin;
        new.optout |= c.optout;
        new.noloop |= c.noloop;
    }
    let mut all = old_prefixes;
    for p in prefixes {
        if !all.contains(&p) {
            all.push(p);
        }
    }
    if new.bcast && all.is_empty() {
        all.push(Vec::new());
    }
    new.prefixes = all;
    t.set(conn.id, Some(new));
    Ok(Reply::ok())
}

/// Redis's `getClientTypeByName` for the classes this server has (a
/// replica or master name is valid and matches nobody).
fn client_type(b: &[u8]) -> Option<&'static str> {
    let t = String::from_utf8_lossy(b).to_ascii_lowercase();
    match t.as_str() {
        "normal" => Some("normal"),
        "pubsub" => Some("pubsub"),
        "slave" | "replica" => Some("replica"),
        "master" => Some("master"),
        _ => None,
    }
}

fn unknown_type(b: &[u8]) -> CmdResult {
    Err(CmdError::Other(format!(
        "Unknown client type '{}'",
        String::from_utf8_lossy(b)
    )))
}

/// CLIENT LIST [TYPE type | ID id ...]
fn list(shared: &Shared, conn: &Conn, a: &[Vec<u8>]) -> CmdResult {
    conn.publish(shared);
    let mut out = String::new();
    let mut add = |c: &crate::clients::ClientInfo| {
        out.push_str(&c.line());
        out.push('\n');
    };
    if a.len() == 3 && is_opt(arg(a, 1), "type") {
        let Some(ty) = client_type(arg(a, 2)) else {
            return unknown_type(arg(a, 2));
        };
        shared
            .registry
            .all()
            .iter()
            .filter(|c| c.kind() == ty)
            .for_each(|c| add(c));
    } else if a.len() > 2 && is_opt(arg(a, 1), "id") {
        for idb in a.get(2..).unwrap_or_default() {
            let id = super::parse_int_strict(idb)
                .ok_or_else(|| CmdError::Other("Invalid client ID".into()))?;
            if let Some(c) = u64::try_from(id).ok().and_then(|i| shared.registry.get(i)) {
                add(&c);
            }
        }
    } else if a.len() != 1 {
        return Err(CmdError::Syntax);
    } else {
        shared.registry.all().iter().for_each(|c| add(c));
    }
    Ok(Reply::Verbatim(out.into_bytes()))
}

/// CLIENT KILL addr | CLIENT KILL [ID id] [TYPE t] [ADDR a] [LADDR a]
/// [USER u] [SKIPME yes|no] ... (Redis 7.0's `clientKillCommand`).
fn kill(shared: &Shared, conn: &mut Conn, a: &[Vec<u8>]) -> CmdResult {
    let old_form = a.len() == 2;
    let (mut id, mut ty, mut addr, mut laddr, mut user) = (None, None, None, None, None);
    let mut skipme = !old_form;
    if old_form {
        addr = Some(arg(a, 1).to_vec());
    } else {
        let mut i = 1;
        while let Some(opt) = a.get(i) {
            let Some(v) = a.get(i + 1) else {
                return Err(CmdError::Syntax);
            };
            if is_opt(opt, "id") {
                match super::parse_int_strict(v) {
                    Some(n) if n >= 1 => id = u64::try_from(n).ok(),
                    _ => return err("client-id should be greater than 0"),
                }
            } else if is_opt(opt, "type") {
                let Some(t) = client_type(v) else {
                    return unknown_type(v);
                };
                ty = Some(t);
            } else if is_opt(opt, "addr") {
                addr = Some(v.clone());
            } else if is_opt(opt, "laddr") {
                laddr = Some(v.clone());
            } else if is_opt(opt, "user") {
                let name = String::from_utf8_lossy(v).into_owned();
                if shared.acl.get(&name).is_none() {
                    return Err(CmdError::Other(format!("No such user '{name}'")));
                }
                user = Some(name);
            } else if is_opt(opt, "skipme") {
                if is_opt(v, "yes") {
                    skipme = true;
                } else if is_opt(v, "no") {
                    skipme = false;
                } else {
                    return Err(CmdError::Syntax);
                }
            } else {
                return Err(CmdError::Syntax);
            }
            i += 2;
        }
    }
    conn.publish(shared);
    let mut killed = 0i64;
    for c in shared.registry.all() {
        let shown_user = c.shown.lock().user.clone();
        let matches = addr
            .as_ref()
            .is_none_or(|x| c.addr.as_bytes() == x.as_slice())
            && laddr
                .as_ref()
                .is_none_or(|x| c.laddr.as_bytes() == x.as_slice())
            && ty.is_none_or(|t| c.kind() == t)
            && id.is_none_or(|i| c.id == i)
            && user.as_ref().is_none_or(|u| *u == shown_user)
            && !(skipme && c.id == conn.id);
        if !matches {
            continue;
        }
        if c.id == conn.id {
            // Closed once this reply is written (CLOSE_AFTER_REPLY).
            conn.quit = true;
        } else {
            c.kill();
        }
        killed += 1;
    }
    if old_form {
        return if killed == 0 {
            err("No such client")
        } else {
            Ok(Reply::ok())
        };
    }
    Ok(Reply::Int(killed))
}

/// RESET: back to a new connection's state (Redis 7.0's
/// `clearClientConnectionState`): tracking off, db 0, RESP2, the default
/// user, MULTI and WATCH dropped, every subscription dropped without
/// confirmations, no name, no NO-EVICT.
pub(super) fn reset(shared: &Shared, conn: &mut Conn) -> Reply {
    shared.store.tracking().set(conn.id, None);
    conn.db = 0;
    conn.resp3 = false;
    conn.user = "default".into();
    conn.authed = shared
        .acl
        .get("default")
        .is_some_and(|u| u.enabled && u.nopass);
    conn.multi = None;
    conn.multi_failed = false;
    super::multi::unwatch_all(shared, conn);
    shared.pubsub.forget(conn.id, &conn.sink);
    conn.name = None;
    conn.no_evict = false;
    Reply::Simple("RESET".into())
}
