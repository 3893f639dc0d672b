//! Command dispatch: lookup, arity, authentication, then the command, with
//! Redis's reply types and error strings.

mod acl;
mod blocking;
mod client;
mod command;
mod config;
mod hashes;
mod info;
mod introspect;
mod keys;
mod lists;
mod mpop;
mod multi;
pub mod pipeline;
mod random;
mod rename;
mod scan;
mod sets;
mod strings;
mod zsets;

use crate::pubsub::{Kind, PubSub, Sink};
use crate::resp::Reply;
use crate::store::{Meta, Store, StoreError, Type, DATABASES};
use crate::tx::Tx;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use thiserror::Error;

pub use blocking::Blocking;
pub use keys::CursorTable;

/// A command's failure; `Display` is the exact error line Redis sends.
#[derive(Debug, Error)]
pub enum CmdError {
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    #[error("ERR value is not an integer or out of range")]
    NotInteger,
    #[error("ERR hash value is not an integer")]
    HashNotInteger,
    #[error("ERR increment or decrement would overflow")]
    Overflow,
    #[error("ERR syntax error")]
    Syntax,
    #[error("ERR value is not a valid float")]
    NotFloat,
    #[error("ERR hash value is not a float")]
    HashNotFloat,
    #[error("ERR increment would produce NaN or Infinity")]
    NanOrInfinity,
    #[error("ERR invalid expire time in '{0}' command")]
    InvalidExpire(&'static str),
    #[error("ERR {0}")]
    Other(String),
    #[error("ERR {0}")]
    Store(#[from] StoreError),
}

pub type CmdResult = Result<Reply, CmdError>;

/// What every connection of one server shares.
pub struct Shared {
    pub store: Store,
    /// The users (the default user holds `--requirepass`).
    pub acl: crate::acl::registry::Acl,
    pub cursors: CursorTable,
    pub started: Instant,
    /// Unix seconds at start (LASTSAVE).
    pub started_unix: i64,
    pub port: u16,
    pub clients: AtomicU64,
    next_client_id: AtomicU64,
    pub pubsub: PubSub,
    pub blocking: Blocking,
    /// The connections (CLIENT LIST / KILL).
    pub registry: crate::clients::Clients,
    /// client-output-buffer-limit.
    pub limits: Arc<crate::outbuf::Limits>,
    /// SLOWLOG's entries and settings.
    pub slowlog: crate::slowlog::SlowLog,
    /// INFO `# Stats` counters.
    pub stats: info::Stats,
    /// INFO's `run_id` (and `master_replid`): 40 random hex digits.
    pub run_id: String,
    /// Set when the server shuts down (blocked clients give up).
    stop: Arc<AtomicBool>,
}

impl Shared {
    pub fn new(
        store: Store,
        acl: crate::acl::registry::Acl,
        port: u16,
        stop: Arc<AtomicBool>,
    ) -> Shared {
        Shared {
            store,
            acl,
            cursors: CursorTable::default(),
            started: Instant::now(),
            started_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)),
            port,
            clients: AtomicU64::new(0),
            next_client_id: AtomicU64::new(1),
            pubsub: PubSub::default(),
            blocking: Blocking::default(),
            registry: crate::clients::Clients::default(),
            stats: info::Stats::default(),
            slowlog: crate::slowlog::SlowLog::default(),
            limits: Arc::default(),
            run_id: format!(
                "{:032x}{:08x}",
                rand::random::<u128>(),
                rand::random::<u32>()
            ),
            stop,
        }
    }

    /// SHUTDOWN: the server stops as on SIGTERM (stop accepting, end every
    /// connection, sync the log).
    pub fn request_shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// Per-connection state.
pub struct Conn {
    pub id: u64,
    pub db: u8,
    pub authed: bool,
    /// The ACL user the connection runs as.
    pub user: String,
    /// Set by QUIT: close after this reply.
    pub quit: bool,
    /// Inside MULTI: the queued requests.
    multi: Option<Vec<Vec<Vec<u8>>>>,
    /// A request was refused while queueing: EXEC answers EXECABORT.
    multi_failed: bool,
    /// WATCHed keys: (logical db, key); whether each was expired at WATCH
    /// is kept in `watches::Watches`.
    watched: Vec<crate::store::DbKey>,
    /// Set by a write to a watched key (see `watches::Watches`).
    dirty: Arc<AtomicBool>,
    /// Replies in RESP3 (after HELLO 3).
    pub resp3: bool,
    /// Set by HELLO ... SETNAME.
    pub name: Option<Vec<u8>>,
    /// Where replies (and pub/sub messages) go.
    pub sink: Arc<Sink>,
    /// A handle on the socket to notice a client that leaves while blocked.
    probe: Option<std::net::TcpStream>,
    /// What CLIENT LIST shows of this connection.
    pub info: Arc<crate::clients::ClientInfo>,
    /// CLIENT NO-EVICT (shown as flag `e`; nothing is evicted here).
    pub no_evict: bool,
    /// `(Acl::version, user)` at which `user` was found unrestricted: while
    /// both hold, the per-request ACL check has nothing to refuse.
    acl_unrestricted: Option<(u64, String)>,
}

impl Conn {
    /// `stream`: the client's socket (None: replies only pile up in the sink).
    pub fn new(shared: &Shared, stream: Option<&std::net::TcpStream>) -> Conn {
        let writer = stream.and_then(|s| s.try_clone().ok());
        let sink = Arc::new(Sink::new(writer, shared.limits.clone()));
        let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
        shared.store.tracking().register(id, &sink);
        let info = shared.registry.register(id, stream, &sink);
        shared.stats.connections.fetch_add(1, Ordering::Relaxed);
        Conn {
            info,
            no_evict: false,
            sink,
            probe: stream.and_then(|s| s.try_clone().ok()),
            id,
            db: 0,
            // Redis: a new connection is the default user, already
            // authenticated when that user is on and has no password.
            authed: shared
                .acl
                .get("default")
                .is_some_and(|u| u.enabled && u.nopass),
            user: "default".into(),
            quit: false,
            multi: None,
            multi_failed: false,
            watched: Vec::new(),
            dirty: Arc::new(AtomicBool::new(false)),
            resp3: false,
            name: None,
            acl_unrestricted: None,
        }
    }

    /// Drops the connection's WATCHes and subscriptions (call when it closes).
    pub fn close(&mut self, shared: &Shared) {
        shared.store.tracking().unregister(self.id);
        multi::unwatch_all(shared, self);
        shared.pubsub.forget(self.id, &self.sink);
        // Last: a client gone from CLIENT LIST has no subscriptions left.
        shared.registry.unregister(self.id);
    }

    /// Refreshes what CLIENT LIST shows of this connection (after each
    /// command, and before CLIENT LIST / INFO shows it).
    pub fn publish(&self, shared: &Shared) {
        let tr = shared.store.tracking().get(self.id);
        let mut flags = String::new();
        let letters = [
            (self.sink.subscriptions() > 0, 'P'),
            (self.multi.is_some(), 'x'),
            (tr.is_some(), 't'),
            (tr.as_ref().is_some_and(|t| t.broken), 'R'),
            (tr.as_ref().is_some_and(|t| t.bcast), 'B'),
            (
                !self.watched.is_empty() && self.dirty.load(Ordering::SeqCst),
                'd',
            ),
            (self.quit, 'c'),
            (self.no_evict, 'e'),
        ];
        flags.extend(letters.iter().filter(|(on, _)| *on).map(|(_, c)| *c));
        if flags.is_empty() {
            flags.push('N');
        }
        let mut s = self.info.shown.lock();
        s.name = self.name.clone().unwrap_or_default();
        s.db = self.db;
        s.user.clone_from(&self.user);
        s.resp = if self.resp3 { 3 } else { 2 };
        s.multi = self
            .multi
            .as_ref()
            .map_or(-1, |q| i64::try_from(q.len()).unwrap_or(i64::MAX));
        s.flags = flags;
        s.redir = tr.map_or(-1, |t| i64::try_from(t.redirect).unwrap_or(i64::MAX));
    }

    /// Marks the start of a command (CLIENT LIST's idle= and cmd=);
    /// returns the time it started.
    fn started(&self, args: &[Vec<u8>], name: &str) -> Instant {
        let now = Instant::now();
        self.started_at(args, name, now);
        now
    }

    /// [`Conn::started`] with the start time already read.
    fn started_at(&self, args: &[Vec<u8>], name: &str, now: Instant) {
        let mut s = self.info.shown.lock();
        s.last = now;
        // Same command as last time (the common case): nothing to look up.
        if s.cmd != name {
            if let Some((_, full)) = crate::acl::registry::command_of(name, args) {
                s.cmd = full;
            }
        }
    }

    pub fn in_multi(&self) -> bool {
        self.multi.is_some()
    }

    /// True when the client closed its end (EOF with nothing unread).
    fn peer_closed(&self) -> bool {
        let Some(s) = &self.probe else {
            return false;
        };
        let _ = s.set_read_timeout(Some(std::time::Duration::from_millis(1)));
        let mut b = [0u8; 1];
        let closed = match s.peek(&mut b) {
            Ok(n) => n == 0,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock
                    | std::io::ErrorKind::TimedOut
                    | std::io::ErrorKind::Interrupted
            ),
        };
        let _ = s.set_read_timeout(Some(crate::server::POLL));
        closed
    }
}

/// Redis 7's arity: positive = exact, negative = at least.
fn arity(name: &str) -> Option<i32> {
    Some(match name {
        "ping" | "quit" | "flushdb" | "flushall" | "info" | "command" | "hello" => -1,
        "echo" | "select" | "get" | "getdel" | "incr" | "decr" | "strlen" | "ttl" | "pttl"
        | "persist" | "type" | "keys" | "hgetall" | "hlen" | "hkeys" | "hvals" => 2,
        "auth" | "mget" | "del" | "unlink" | "exists" | "scan" | "config" | "acl" | "client" => -2,
        "set" | "mset" | "msetnx" | "expire" | "pexpire" | "expireat" | "pexpireat" | "hmget"
        | "hdel" => -3,
        "setnx" | "getset" | "incrby" | "decrby" | "append" | "hget" | "hexists" | "hstrlen"
        | "incrbyfloat" => 3,
        "setex" | "psetex" | "hsetnx" => 4,
        "getex" => -2,
        "getrange" | "setrange" => 4,
        "expiretime" | "pexpiretime" => 2,
        "randomkey" | "time" | "lastsave" => 1,
        "shutdown" => -1,
        "move" | "swapdb" => 3,
        "hset" | "hmset" => -4,
        "hincrby" | "hincrbyfloat" => 4,
        "dbsize" | "multi" | "exec" | "discard" | "unwatch" | "reset" => 1,
        "rename" | "renamenx" => 3,
        "copy" | "hscan" => -3,
        "watch" => -2,
        "lpush" | "rpush" | "lpushx" | "rpushx" | "lpos" => -3,
        "lpop" | "rpop" => -2,
        "llen" => 2,
        "lindex" | "rpoplpush" => 3,
        "lrange" | "lset" | "lrem" | "ltrim" => 4,
        "linsert" | "lmove" => 5,
        "sadd" | "srem" | "smismember" | "sintercard" | "sinterstore" | "sunionstore"
        | "sdiffstore" | "sscan" => -3,
        "smembers" | "scard" => 2,
        "sismember" => 3,
        "spop" | "srandmember" | "sinter" | "sunion" | "sdiff" => -2,
        "smove" => 4,
        "zadd" | "zrange" | "zrangebyscore" | "zrevrange" | "zrevrangebyscore" | "zrangebylex"
        | "zrevrangebylex" => -4,
        "zrem" | "zmscore" | "zscan" => -3,
        "zscore" | "zrank" | "zrevrank" => 3,
        "zincrby" | "zcount" | "zremrangebyscore" | "zremrangebyrank" | "zlexcount"
        | "zremrangebylex" => 4,
        "zrangestore" => -5,
        "zunionstore" | "zinterstore" | "zdiffstore" => -4,
        "zunion" | "zinter" | "zdiff" => -3,
        "object" | "memory" | "slowlog" | "latency" | "debug" => -2,
        "zcard" => 2,
        "zpopmin" | "zpopmax" | "hrandfield" | "zrandmember" => -2,
        "blpop" | "brpop" | "bzpopmin" | "bzpopmax" => -3,
        "lmpop" | "zmpop" => -4,
        "blmpop" | "bzmpop" => -5,
        "blmove" => 6,
        "brpoplpush" => 4,
        "subscribe" | "psubscribe" | "pubsub" => -2,
        "unsubscribe" | "punsubscribe" => -1,
        "publish" => 3,
        _ => return None,
    })
}

pub fn wrong_args(name: &str) -> Reply {
    Reply::err(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

pub(crate) fn unknown_command(args: &[Vec<u8>]) -> Reply {
    let name = args.first().map(|a| lossy(a, 128)).unwrap_or_default();
    let mut rest = String::new();
    for a in args.iter().skip(1) {
        if rest.len() >= 128 {
            break;
        }
        let room = 128 - rest.len();
        rest.push_str(&format!("'{}' ", lossy(a, room)));
    }
    Reply::err(format!(
        "ERR unknown command '{name}', with args beginning with: {rest}"
    ))
}

fn lossy(b: &[u8], max: usize) -> String {
    String::from_utf8_lossy(b.get(..b.len().min(max)).unwrap_or_default()).into_owned()
}

/// Runs one request.
pub fn dispatch(shared: &Shared, conn: &mut Conn, args: &[Vec<u8>]) -> Reply {
    let Some(first) = args.first() else {
        return Reply::Array(vec![]);
    };
    let name = String::from_utf8_lossy(first).to_ascii_lowercase();
    let start = conn.started(args, &name);
    let skip_slowlog = name == "exec";
    // Only these change what CLIENT LIST shows of the connection (and any
    // command queued in MULTI, which changes multi=).
    let republish = conn.multi.is_some()
        || matches!(
            name.as_str(),
            "select"
                | "client"
                | "hello"
                | "auth"
                | "multi"
                | "exec"
                | "discard"
                | "watch"
                | "unwatch"
                | "subscribe"
                | "psubscribe"
                | "unsubscribe"
                | "punsubscribe"
                | "reset"
                | "quit"
        );
    crate::tx::take_commit_waited();
    let reply = dispatch_inner(shared, conn, args, name);
    let reply = match durable_reply(shared) {
        Ok(()) => reply,
        Err(e) => Reply::err(format!("ERR {e}")),
    };
    let micros = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
    if !skip_slowlog && shared.slowlog.would_log(micros) {
        let name = conn.name.clone().unwrap_or_default();
        shared.slowlog.record(args, micros, &conn.info.addr, &name);
    }
    if republish {
        conn.publish(shared);
    }
    let counter = match reply {
        Reply::Error(_) => &shared.stats.errors,
        _ => &shared.stats.commands,
    };
    counter.fetch_add(1, Ordering::Relaxed);
    reply
}

/// Under `appendfsync always` a reply shows nothing that is not durable:
/// the engine makes a write visible before its fsync ends (so that the
/// next writer of the key can go ahead, docs/architecture.md, "Pipelined
/// group commit"), so a command that may have read another client's
/// write waits for the fsync covering it, as Redis sends every reply of an
/// event-loop iteration after that iteration's fsync. A command whose own
/// commit waited is covered already (`tx::take_commit_waited`).
fn durable_reply(shared: &Shared) -> Result<(), shaledb::Error> {
    if crate::tx::take_commit_waited()
        || shared.store.appendfsync() != crate::durability::Appendfsync::Always
    {
        return Ok(());
    }
    shared.store.engine().sync_wal()
}

fn dispatch_inner(shared: &Shared, conn: &mut Conn, args: &[Vec<u8>], name: String) -> Reply {
    let Some(ar) = arity(&name) else {
        multi::refused(conn);
        return unknown_command(args);
    };
    let n = args.len() as i32;
    if (ar > 0 && n != ar) || (ar < 0 && n < -ar) {
        if name == "exec" {
            if let Some(r) = multi::exec_refused(shared, conn, &wrong_args(&name)) {
                return r;
            }
        }
        multi::refused(conn);
        return wrong_args(&name);
    }
    if name == "reset" {
        return client::reset(shared, conn);
    }
    // Redis's authRequired: judged per request, so CONFIG SET requirepass ""
    // opens unauthenticated connections at once.
    if !conn.authed
        && !matches!(name.as_str(), "auth" | "quit" | "hello")
        && !shared
            .acl
            .get("default")
            .is_some_and(|u| u.enabled && u.nopass)
    {
        let noauth = Reply::err("NOAUTH Authentication required.");
        if name == "exec" {
            if let Some(r) = multi::exec_refused(shared, conn, &noauth) {
                return r;
            }
        }
        multi::refused(conn);
        return noauth;
    }
    if let Some(denied) = acl::check(shared, conn, &name, args) {
        return denied;
    }
    let rest = args.get(1..).unwrap_or_default();
    let subscribed = !conn.resp3 && conn.sink.subscriptions() > 0;
    if subscribed && !SUBSCRIBED_OK.contains(&name.as_str()) {
        return Reply::err(format!(
            "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / \
             RESET are allowed in this context"
        ));
    }
    // Inside MULTI they are queued (Redis 7.0) and run by EXEC.
    if conn.multi.is_none() {
        if let Some(r) = subscription_or_ping(shared, conn, &name, rest) {
            return r;
        }
    }
    if let Some(reply) = multi::intercept(shared, conn, &name, args) {
        return reply;
    }
    if is_blocking(&name) {
        return blocking::run(shared, conn, &name, rest);
    }
    let mut tx = if name == "swapdb" {
        Tx::new_swapping(&shared.store)
    } else {
        Tx::new(&shared.store)
    };
    tx.set_client(conn.id);
    let reply = match run(shared, conn, &mut tx, &name, rest) {
        Ok(r) => commit(shared, tx, r),
        Err(e) => Reply::Error(e.to_string()),
    };
    track_reads(shared, conn, &name, args);
    reply
}

/// CLIENT TRACKING: remembers the keys of a read-only command.
fn track_reads(shared: &Shared, conn: &Conn, name: &str, args: &[Vec<u8>]) {
    let t = shared.store.tracking();
    if !t.any() {
        return;
    }
    let caching_cmd = name == "client" && args.get(1).is_some_and(|s| is_opt(s, "caching"));
    let Some((i, _)) = crate::acl::registry::command_of(name, args) else {
        return;
    };
    let readonly = crate::acl::table::COMMANDS
        .get(i)
        .is_some_and(|c| c.1 & READ_CATEGORY != 0);
    let keys = if readonly {
        crate::acl::registry::keys_of(i, name, args).0
    } else {
        Vec::new()
    };
    t.after_command(conn.id, &keys, readonly, caching_cmd);
}

/// Bit of `@read` in `acl::table::CATEGORIES`.
const READ_CATEGORY: u32 = 1 << 1;

/// Commits `tx`, then serves the clients blocked on the keys it filled;
/// answers `r`, or the commit's error.
fn commit(shared: &Shared, tx: Tx, r: Reply) -> Reply {
    let ready = shared.blocking.ready_keys(&tx);
    match tx.commit() {
        Ok(()) => {
            shared.blocking.serve(shared, ready);
            r
        }
        Err(e) => Reply::Error(CmdError::from(e).to_string()),
    }
}

/// (P)(UN)SUBSCRIBE, and PING on a subscribed RESP2 connection: their
/// reply (confirmations go to the sink, or to EXEC's array when it
/// collects them); None for any other command.
pub(crate) fn subscription_or_ping(
    shared: &Shared,
    conn: &Conn,
    name: &str,
    rest: &[Vec<u8>],
) -> Option<Reply> {
    if let Some(kind) = subscription_kind(name) {
        let (id, sink) = (conn.id, conn.sink.clone());
        if name.ends_with("unsubscribe") {
            shared.pubsub.unsubscribe(id, &sink, kind, rest);
        } else {
            shared.pubsub.subscribe(id, &sink, kind, rest);
        }
        // The confirmations are in the sink already.
        return Some(Reply::Multi(Vec::new()));
    }
    if name == "ping" && !conn.resp3 && conn.sink.subscriptions() > 0 {
        let msg = rest.first().cloned().unwrap_or_default();
        return Some(Reply::Array(vec![Reply::bulk("pong"), Reply::Bulk(msg)]));
    }
    None
}

/// Commands a RESP2 connection may send while subscribed.
const SUBSCRIBED_OK: &[&str] = &[
    "subscribe",
    "psubscribe",
    "unsubscribe",
    "punsubscribe",
    "ping",
    "quit",
    "reset",
];

fn subscription_kind(name: &str) -> Option<Kind> {
    match name {
        "subscribe" | "unsubscribe" => Some(Kind::Channel),
        "psubscribe" | "punsubscribe" => Some(Kind::Pattern),
        _ => None,
    }
}

pub(crate) fn is_blocking(name: &str) -> bool {
    matches!(
        name,
        "blpop" | "brpop" | "blmove" | "brpoplpush" | "bzpopmin" | "bzpopmax" | "blmpop" | "bzmpop"
    )
}

/// The live metadata of `key` if it has type `ty` (None when absent);
/// WRONGTYPE for another type.
pub fn typed_meta(tx: &Tx, db: u8, key: &[u8], ty: Type) -> Result<Option<Meta>, CmdError> {
    match tx.get_meta(db, key)? {
        Some(m) if m.ty != ty => Err(CmdError::WrongType),
        m => Ok(m),
    }
}

/// The live value of `key` if it has type `ty`, else a new empty one
/// under a new version (the add commands: LPUSH, SADD, ZADD, HSET ...).
pub fn meta_or_new(tx: &Tx, db: u8, key: &[u8], ty: Type) -> Result<Meta, CmdError> {
    Ok(typed_meta(tx, db, key, ty)?.unwrap_or_else(|| Meta::new(ty, tx.new_version())))
}

/// Runs one command inside `tx` (the caller commits it).
fn run(shared: &Shared, conn: &mut Conn, tx: &mut Tx, name: &str, a: &[Vec<u8>]) -> CmdResult {
    // Commands work on the physical database: the `db` byte of record keys.
    let db = tx.phys(conn.db);
    match name {
        "ping" => match a {
            [] => Ok(Reply::Simple("PONG".into())),
            [m] => Ok(Reply::bulk(m.clone())),
            _ => Ok(wrong_args("ping")),
        },
        "echo" => Ok(Reply::bulk(a.first().cloned().unwrap_or_default())),
        "quit" => {
            conn.quit = true;
            Ok(Reply::ok())
        }
        "auth" => acl::auth(shared, conn, a),
        "acl" => acl::acl(shared, conn, a),
        "client" => client::client(shared, conn, a),
        "hello" => hello(shared, conn, a),
        "select" => {
            let i = parse_i64(arg(a, 0))?;
            if !(0..DATABASES as i64).contains(&i) {
                return Err(CmdError::Other("DB index is out of range".into()));
            }
            conn.db = i as u8;
            Ok(Reply::ok())
        }
        "swapdb" => swapdb(shared, tx, a),
        "command" => command::command(a),
        "publish" => Ok(Reply::Int(shared.pubsub.publish(arg(a, 0), arg(a, 1)))),
        "pubsub" => pubsub(shared, a),
        n if is_blocking(n) => blocking::run_in_exec(shared, tx, db, name, a),
        "lmpop" | "zmpop" => mpop::run(shared, tx, db, name, a),
        "config" => config::config(shared, a),
        "slowlog" => introspect::slowlog(shared, a),
        "latency" => introspect::latency(a),
        "debug" => introspect::debug(a),
        "object" => introspect::object(tx, db, a),
        "memory" => introspect::memory(tx, db, a),
        "info" => info::info(shared, tx, a),
        "get" | "set" | "mget" | "mset" | "setnx" | "getset" | "getdel" | "incr" | "decr"
        | "incrby" | "decrby" | "append" | "strlen" | "setex" | "psetex" | "msetnx"
        | "incrbyfloat" | "getex" | "getrange" | "setrange" => strings::run(tx, db, name, a),
        "time" => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            Ok(Reply::Array(vec![
                Reply::bulk(now.as_secs().to_string()),
                Reply::bulk(now.subsec_micros().to_string()),
            ]))
        }
        // No RDB saves: the last "save" is the server's start, as for a
        // Redis that has not saved since it started.
        "lastsave" => Ok(Reply::Int(shared.started_unix)),
        "hset" | "hmset" | "hget" | "hmget" | "hgetall" | "hdel" | "hlen" | "hexists"
        | "hincrby" | "hkeys" | "hvals" | "hsetnx" | "hstrlen" | "hincrbyfloat" | "hrandfield" => {
            hashes::run(tx, db, name, a)
        }
        "unwatch" => Ok(multi::unwatch(shared, conn)),
        "rename" | "renamenx" | "copy" | "move" => rename::run(tx, db, name, a),
        "shutdown" => shutdown(shared, conn, a),
        "hscan" => hashes::hscan(shared, tx, db, a),
        n if n.starts_with('l') || n.starts_with("rp") => lists::run(tx, db, name, a),
        n if n.starts_with('s') && n != "scan" && n != "select" => {
            sets::run(shared, tx, db, name, a)
        }
        n if n.starts_with('z') => zsets::run(shared, tx, db, name, a),
        _ => keys::run(shared, tx, db, name, a),
    }
}

/// SWAPDB index1 index2: the two logical databases exchange their data in
/// O(1): only the database map changes (`crate::dbmap`). WATCHes and
/// blocked clients stay on their database number, as in Redis: the
/// watchers of keys either database holds are dirtied, and clients blocked
/// in either are served if their key has data now. Runs in a transaction
/// from `Tx::new_swapping` (every other command waits meanwhile).
fn swapdb(shared: &Shared, tx: &mut Tx, a: &[Vec<u8>]) -> CmdResult {
    // Redis's getIntFromObjectOrReply: an integer that fits a C int.
    let index = |i: usize, which: &str| {
        parse_int_strict(arg(a, i))
            .filter(|n| i32::try_from(*n).is_ok())
            .ok_or_else(|| CmdError::Other(format!("invalid {which} DB index")))
    };
    let (first, second) = (index(0, "first")?, index(1, "second")?);
    let db = |n: i64| u8::try_from(n).ok().filter(|d| *d < DATABASES);
    let (Some(first), Some(second)) = (db(first), db(second)) else {
        return Err(CmdError::Other("DB index is out of range".into()));
    };
    let ready = shared.blocking.keys_in_dbs(first, second);
    tx.swap_dbs(first, second, ready)?;
    Ok(Reply::ok())
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]. Every acknowledged write
/// is already in the log, so SAVE and NOSAVE stop the same way (the log is
/// synced as on SIGTERM); NOW and FORCE change nothing (no replicas, no
/// RDB to fail). On success the connection closes without a reply, as in
/// Redis; no shutdown is ever pending, so ABORT is an error.
fn shutdown(shared: &Shared, conn: &mut Conn, a: &[Vec<u8>]) -> CmdResult {
    let (mut save, mut nosave, mut abort, mut others) = (false, false, false, false);
    for o in a {
        if is_opt(o, "NOSAVE") {
            nosave = true;
        } else if is_opt(o, "SAVE") {
            save = true;
        } else if is_opt(o, "NOW") || is_opt(o, "FORCE") {
            others = true;
        } else if is_opt(o, "ABORT") {
            abort = true;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if (save && nosave) || (abort && (save || nosave || others)) {
        return Err(CmdError::Syntax);
    }
    if abort {
        return Err(CmdError::Other("No shutdown in progress.".into()));
    }
    shared.request_shutdown();
    conn.quit = true;
    Ok(Reply::Multi(Vec::new()))
}

/// HELLO [protover [AUTH user pass] [SETNAME name]] (Redis 7.0's checks, in its order).
fn hello(shared: &Shared, conn: &mut Conn, a: &[Vec<u8>]) -> CmdResult {
    let mut ver = None;
    if let Some(v) = a.first() {
        let v = parse_int_strict(v).ok_or_else(|| {
            CmdError::Other("Protocol version is not an integer or out of range".into())
        })?;
        if !(2..=3).contains(&v) {
            return Ok(Reply::err("NOPROTO unsupported protocol version"));
        }
        ver = Some(v);
    }
    let mut j = 1;
    while let Some(opt) = a.get(j) {
        let more = a.len() - 1 - j;
        if is_opt(opt, "AUTH") && more >= 2 {
            let creds = [arg(a, j + 1).to_vec(), arg(a, j + 2).to_vec()];
            match acl::auth(shared, conn, &creds)? {
                Reply::Error(e) => return Ok(Reply::Error(e)),
                _ => j += 3,
            }
        } else if is_opt(opt, "SETNAME") && more >= 1 {
            let name = arg(a, j + 1);
            if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
                return Err(CmdError::Other(
                    "Client names cannot contain spaces, newlines or special characters.".into(),
                ));
            }
            conn.name = Some(name.to_vec());
            j += 2;
        } else {
            return Err(CmdError::Other(format!(
                "Syntax error in HELLO option '{}'",
                lossy(opt, 128)
            )));
        }
    }
    // Redis checks the connection's own flag here, not authRequired.
    if !conn.authed {
        return Ok(Reply::err(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO AUTH <user> <pass> option can be used to authenticate the client and \
             select the RESP protocol version at the same time",
        ));
    }
    if let Some(v) = ver {
        conn.resp3 = v == 3;
    }
    let field = |k: &str, v: Reply| (Reply::bulk(k), v);
    Ok(Reply::Map(vec![
        field("server", Reply::bulk("redis")),
        // The Redis version whose replies this endpoint reproduces.
        field("version", Reply::bulk("7.0.15")),
        field("proto", Reply::Int(if conn.resp3 { 3 } else { 2 })),
        field("id", Reply::Int(i64::try_from(conn.id).unwrap_or(i64::MAX))),
        field("mode", Reply::bulk("standalone")),
        field("role", Reply::bulk("master")),
        field("modules", Reply::Array(vec![])),
    ]))
}

/// PUBSUB CHANNELS [pattern] | NUMSUB [channel ...] | NUMPAT
fn pubsub(shared: &Shared, a: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(arg(a, 0)).to_ascii_lowercase();
    let ps = &shared.pubsub;
    match (sub.as_str(), a.len()) {
        ("channels", 1 | 2) => Ok(Reply::Array(
            ps.channels(a.get(1).map(Vec::as_slice))
                .into_iter()
                .map(Reply::Bulk)
                .collect(),
        )),
        ("numsub", _) => Ok(Reply::Array(
            a.iter()
                .skip(1)
                .flat_map(|c| [Reply::bulk(c.clone()), Reply::Int(ps.numsub(c))])
                .collect(),
        )),
        ("numpat", 1) => Ok(Reply::Int(ps.numpat())),
        ("channels" | "numpat", _) => Ok(wrong_args(&format!("pubsub|{sub}"))),
        _ => Err(CmdError::Other(format!(
            "unknown subcommand '{}'. Try PUBSUB HELP.",
            lossy(arg(a, 0), 128)
        ))),
    }
}

/// The i-th argument (arity was checked, so a missing one reads as empty).
pub fn arg(a: &[Vec<u8>], i: usize) -> &[u8] {
    a.get(i).map(|v| v.as_slice()).unwrap_or_default()
}

/// Redis's `string2ll`: optional '-', digits, no '+', no leading zeros, no blanks.
pub fn parse_int_strict(b: &[u8]) -> Option<i64> {
    let digits = b.strip_prefix(b"-").unwrap_or(b);
    if digits.is_empty()
        || !digits.iter().all(u8::is_ascii_digit)
        || (digits.len() > 1 && digits.first() == Some(&b'0'))
        || b == b"-0"
    {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

pub fn parse_i64(b: &[u8]) -> Result<i64, CmdError> {
    parse_int_strict(b).ok_or(CmdError::NotInteger)
}

/// A count that must be >= 0 (LPOP, SPOP, ZPOPMIN ...): Redis answers
/// anything else, non-integers included, with "must be positive".
pub fn parse_count(b: &[u8]) -> Result<i64, CmdError> {
    match parse_int_strict(b) {
        Some(n) if n >= 0 => Ok(n),
        _ => Err(CmdError::Other(
            "value is out of range, must be positive".into(),
        )),
    }
}

/// Case-insensitive option comparison.
pub fn is_opt(b: &[u8], opt: &str) -> bool {
    b.eq_ignore_ascii_case(opt.as_bytes())
}
