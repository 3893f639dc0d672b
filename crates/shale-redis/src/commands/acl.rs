//! ACL (LIST, USERS, GETUSER, SETUSER, DELUSER, WHOAMI, CAT, LOG), AUTH,
//! and the permission check every request passes (Redis 7.0's replies).

use super::{arg, lossy, multi, wrong_args, CmdError, CmdResult, Conn, Shared};
use crate::acl::log::Entry;
use crate::acl::registry::{command_of, keys_of};
use crate::acl::table::{CATEGORIES, COMMANDS};
use crate::acl::{category_bit, valid_username, User};
use crate::resp::Reply;
use std::time::Instant;

fn client_info(conn: &Conn, cmd: &str) -> String {
    let name = conn
        .name
        .as_deref()
        .map(|n| lossy(n, 128))
        .unwrap_or_default();
    format!(
        "id={} name={name} db={} cmd={cmd} user={} resp={}",
        conn.id,
        conn.db,
        conn.user,
        if conn.resp3 { 3 } else { 2 }
    )
}

fn log(
    shared: &Shared,
    conn: &Conn,
    reason: &'static str,
    object: String,
    username: &str,
    cmd: &str,
) {
    shared.acl.log.add(Entry {
        count: 1,
        reason,
        context: if conn.in_multi() { "multi" } else { "toplevel" },
        object,
        username: username.to_string(),
        created: Instant::now(),
        client_info: client_info(conn, cmd),
    });
}

/// The permission check before a request runs: `Some(error)` when the
/// connection's user may not run it (logged in ACL LOG). A connection whose
/// user was deleted is closed (Redis disconnects such clients).
pub(super) fn check(
    shared: &Shared,
    conn: &mut Conn,
    name: &str,
    args: &[Vec<u8>],
) -> Option<Reply> {
    if matches!(name, "auth" | "hello" | "quit") {
        return None;
    }
    let version = shared.acl.version();
    if conn
        .acl_unrestricted
        .as_ref()
        .is_some_and(|(v, u)| *v == version && *u == conn.user)
    {
        return None;
    }
    let Some(user) = shared.acl.get(&conn.user) else {
        conn.quit = true;
        return Some(Reply::Multi(Vec::new()));
    };
    if user.unrestricted() {
        conn.acl_unrestricted = Some((version, conn.user.clone()));
        return None;
    }
    // An unknown subcommand gets the command's own error.
    let (i, full) = command_of(name, args)?;
    let deny = |conn: &mut Conn, reason: &'static str, object: String, msg: String| {
        log(shared, conn, reason, object, &user.name, &full);
        let reply = Reply::err(msg);
        // A refused EXEC discards the transaction (Redis's EXECABORT).
        if name == "exec" {
            if let Some(r) = multi::exec_refused(shared, conn, &reply) {
                return Some(r);
            }
        }
        multi::refused(conn);
        Some(reply)
    };
    if !user.can_run(i) {
        let msg = format!("NOPERM this user has no permissions to run the '{full}' command");
        return deny(conn, "command", full.clone(), msg);
    }
    let (keys, need) = if user.all_keys {
        (Vec::new(), 0)
    } else {
        keys_of(i, name, args)
    };
    if let Some(k) = keys.iter().find(|k| !user.can_key(k, need)) {
        let msg = "NOPERM this user has no permissions to access one of the keys used as arguments";
        return deny(conn, "key", lossy(k, usize::MAX), msg.into());
    }
    let bad_channel = match name {
        _ if user.all_channels => None,
        "publish" => args.get(1).filter(|c| !user.can_channel(c)),
        "subscribe" => args.iter().skip(1).find(|c| !user.can_channel(c)),
        "psubscribe" => args.iter().skip(1).find(|c| !user.can_pattern(c)),
        _ => None,
    };
    if let Some(c) = bad_channel {
        let msg =
            "NOPERM this user has no permissions to access one of the channels used as arguments";
        return deny(conn, "channel", lossy(c, usize::MAX), msg.into());
    }
    None
}

/// AUTH [user] password.
pub(super) fn auth(shared: &Shared, conn: &mut Conn, a: &[Vec<u8>]) -> CmdResult {
    let (user, pw) = match a {
        [pw] => ("default".to_string(), pw),
        [user, pw] => (String::from_utf8_lossy(user).into_owned(), pw),
        _ => return Err(CmdError::Syntax),
    };
    if a.len() == 1 && shared.acl.get("default").is_some_and(|u| u.nopass) {
        return Err(CmdError::Other(
            "AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?"
                .into(),
        ));
    }
    if shared.acl.authenticate(&user, pw) {
        conn.user = user;
        conn.authed = true;
        Ok(Reply::ok())
    } else {
        log(shared, conn, "auth", "AUTH".into(), &user, "auth");
        Ok(Reply::err(
            "WRONGPASS invalid username-password pair or user is disabled.",
        ))
    }
}

fn user_reply(u: &User) -> Reply {
    let field = |k: &str, v: Reply| (Reply::bulk(k), v);
    Reply::Map(vec![
        field(
            "flags",
            Reply::Set(u.flags().into_iter().map(Reply::bulk).collect()),
        ),
        field(
            "passwords",
            Reply::Array(u.passwords.iter().map(|p| Reply::bulk(p.clone())).collect()),
        ),
        field("commands", Reply::bulk(u.describe_commands())),
        field("keys", Reply::bulk(u.describe_keys())),
        field("channels", Reply::bulk(u.describe_channels())),
        field("selectors", Reply::Array(Vec::new())),
    ])
}

fn help_error(sub: &[u8]) -> CmdError {
    CmdError::Other(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
        lossy(sub, 128)
    ))
}

pub(super) fn acl(shared: &Shared, conn: &mut Conn, a: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(arg(a, 0)).to_ascii_lowercase();
    let rest = a.get(1..).unwrap_or_default();
    let store = &shared.store;
    match (sub.as_str(), rest.len()) {
        ("whoami", 0) => Ok(Reply::bulk(conn.user.clone())),
        ("users", 0) => Ok(Reply::Array(
            shared.acl.names().into_iter().map(Reply::bulk).collect(),
        )),
        ("list", 0) => Ok(Reply::Array(
            shared
                .acl
                .all()
                .iter()
                .map(|u| Reply::bulk(format!("user {} {}", u.name, u.describe())))
                .collect(),
        )),
        ("getuser", 1) => Ok(shared
            .acl
            .get(&String::from_utf8_lossy(arg(rest, 0)))
            .map_or(Reply::Nil, |u| user_reply(&u))),
        ("setuser", n) if n >= 1 => {
            let name = arg(rest, 0);
            if !valid_username(name) {
                return Err(CmdError::Other(
                    "Usernames can't contain spaces or null characters".into(),
                ));
            }
            let name = String::from_utf8_lossy(name).into_owned();
            let mut u = shared
                .acl
                .get(&name)
                .map_or_else(|| User::new(&name), |u| (*u).clone());
            for rule in rest.iter().skip(1) {
                if let Err(e) = u.apply(rule) {
                    return Err(CmdError::Other(format!(
                        "Error in ACL SETUSER modifier '{}': {e}",
                        lossy(rule, usize::MAX)
                    )));
                }
            }
            shared.acl.put(store, u)?;
            Ok(Reply::ok())
        }
        ("deluser", n) if n >= 1 => {
            let names: Vec<String> = rest
                .iter()
                .map(|n| String::from_utf8_lossy(n).into_owned())
                .collect();
            if names.iter().any(|n| n == "default") {
                return Err(CmdError::Other(
                    "The 'default' user cannot be removed".into(),
                ));
            }
            Ok(Reply::Int(shared.acl.delete(store, &names)?))
        }
        ("cat", 0) => Ok(Reply::Array(
            CATEGORIES.iter().map(|c| Reply::bulk(*c)).collect(),
        )),
        ("cat", 1) => {
            let cat = String::from_utf8_lossy(arg(rest, 0)).into_owned();
            let bit = category_bit(&cat)
                .ok_or_else(|| CmdError::Other(format!("Unknown category '{cat}'")))?;
            Ok(Reply::Array(
                COMMANDS
                    .iter()
                    .filter(|c| c.1 & bit != 0)
                    .map(|c| Reply::bulk(c.0))
                    .collect(),
            ))
        }
        ("log", 0 | 1) => {
            if rest.len() == 1 && super::is_opt(arg(rest, 0), "reset") {
                shared.acl.log.reset();
                return Ok(Reply::ok());
            }
            let n = match rest.first() {
                Some(v) => Some(usize::try_from(super::parse_i64(v)?.max(0)).unwrap_or(0)),
                // Redis shows the last 10 entries by default.
                None => Some(10),
            };
            let field = |k: &str, v: Reply| (Reply::bulk(k), v);
            Ok(Reply::Array(
                shared
                    .acl
                    .log
                    .recent(n)
                    .into_iter()
                    .map(|e| {
                        Reply::Map(vec![
                            field(
                                "count",
                                Reply::Int(i64::try_from(e.count).unwrap_or(i64::MAX)),
                            ),
                            field("reason", Reply::bulk(e.reason)),
                            field("context", Reply::bulk(e.context)),
                            field("object", Reply::bulk(e.object)),
                            field("username", Reply::bulk(e.username)),
                            field(
                                "age-seconds",
                                Reply::Double(e.created.elapsed().as_secs_f64()),
                            ),
                            field("client-info", Reply::bulk(e.client_info)),
                        ])
                    })
                    .collect(),
            ))
        }
        ("setuser" | "deluser" | "whoami" | "users" | "list" | "getuser", _) => {
            Ok(wrong_args(&format!("acl|{sub}")))
        }
        ("cat" | "log", _) => Err(help_error(arg(a, 0))),
        _ => Err(CmdError::Other(format!(
            "unknown subcommand '{}'. Try ACL HELP.",
            lossy(arg(a, 0), 128)
        ))),
    }
}
