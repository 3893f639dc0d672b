//! Pipelined requests in one engine write.
//!
//! A client that pipelines (redis-benchmark `-P 16`, or any client sending
//! requests without waiting for replies) leaves several complete requests
//! in the input buffer. Run one by one, each write command is its own
//! engine commit (one WAL record, one memtable insert per record, and a
//! turn at the key's lock stripe). Redis itself runs the whole buffer in
//! one event-loop turn, with no other client in between, and writes the
//! replies afterwards. [`Pipeline`] does the same on the engine: the
//! consecutive data commands of one read share one [`Tx`] (as EXEC's
//! commands do), which commits once, as one `WriteBatch`, before any of
//! their replies is written. Five `INCR n` in one read become one engine
//! write of the final value.
//!
//! Example: a buffer holding `SET a 1`, `INCR a`, `GET a`, `CLIENT ID`,
//! `GET a` runs the first three in one batch (replies `+OK`, `:2`, `$1 2`
//! held back), commits `a = 2` once, appends the three replies, runs
//! `CLIENT ID` alone (not a data command), then opens a new batch for the
//! last `GET`, committed (nothing to write) at the end of the buffer.
//!
//! Invariants:
//! - A reply is written only after the batch that produced it committed
//!   (and, under `appendfsync always`, is durable), so nothing acknowledged
//!   can be lost, and a failed commit turns every reply of the batch into
//!   the error.
//! - Locks: a batch holds the stripes its commands took until it commits
//!   at the end of the buffer (never across a socket read). A command
//!   needing a stripe while the batch holds others only *tries* it
//!   ([`Tx::lock`]); on failure the command is rolled back, the batch
//!   commits, and the command runs alone, the ordinary way. A thread so
//!   never waits for a stripe while holding one out of order: no deadlock.
//! - A command that fails (WRONGTYPE, syntax) is rolled back alone, as
//!   when it runs alone; the others keep their effects.
//! - Only data commands whose every effect goes through the [`Tx`] are
//!   batched ([`batchable`]); a connection in MULTI, subscribed, or with
//!   CLIENT TRACKING on is not batched at all (their replies interleave
//!   with pushes that must follow the write they report).

use super::{acl, arity, durable_reply, run, Conn, Shared};
use crate::pubsub::Sink;
use crate::resp::Reply;
use crate::tx::Tx;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Most commands in one batch: bounds how long a batch holds its stripes
/// and how many replies wait for its commit.
pub const MAX_BATCH: usize = 256;

/// The current batch: one connection's pipeline, or (on an event loop) the
/// requests of every connection that was ready in one turn of the loop.
#[derive(Default)]
pub struct Pipeline<'a> {
    tx: Option<Tx<'a>>,
    /// The batched commands' replies, in order, until the commit.
    replies: Vec<Pending>,
    /// When the last batched command of this input ended: the next one's
    /// start, so a command costs one clock read, not two (with two,
    /// `clock_gettime` was ~6% of the server's CPU under GET -P 16).
    clock: Option<Instant>,
}

/// A batched command's reply and where it goes.
struct Pending {
    sink: Arc<Sink>,
    resp3: bool,
    reply: Reply,
    /// From the transaction (a refused command's error does not depend on
    /// the commit).
    from_tx: bool,
}

impl<'a> Pipeline<'a> {
    /// Commands waiting for the batch's commit.
    pub fn len(&self) -> usize {
        self.replies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.replies.is_empty()
    }

    /// Runs `args` in the batch when it is a batchable data command on a
    /// connection that allows batching; `false` means the caller must
    /// [`Pipeline::finish`] the batch and run the request the ordinary way.
    pub fn try_run(&mut self, shared: &'a Shared, conn: &mut Conn, args: &[Vec<u8>]) -> bool {
        let Some(first) = args.first() else {
            return false;
        };
        let mut lower = [0u8; 24];
        // A name longer than any batchable command's, or not ASCII, takes
        // the ordinary path.
        let Some(name) = lowercase(first, &mut lower) else {
            return false;
        };
        if !batchable(name) || !conn_allows(shared, conn) {
            return false;
        }
        let n = args.len() as i32;
        match arity(name) {
            Some(ar) if (ar > 0 && n == ar) || (ar < 0 && n >= -ar) => {}
            _ => return false, // the ordinary path gives the error
        }
        let start = self.clock.take().unwrap_or_else(Instant::now);
        conn.started_at(args, name, start);
        if let Some(denied) = acl::check(shared, conn, name, args) {
            self.push(conn, denied, false);
            return true;
        }
        let rest = args.get(1..).unwrap_or_default();
        let tx = self
            .tx
            .get_or_insert_with(|| Tx::new_batch(&shared.store, conn.id));
        let mark = tx.mark();
        let result = run(shared, conn, tx, name, rest);
        tx.end_command();
        if tx.take_lock_failed() {
            // It ran without a stripe another client holds: undo it, and
            // let the caller commit the batch and run it alone.
            tx.rollback_to(mark);
            return false;
        }
        let reply = match result {
            Ok(r) => r,
            Err(e) => {
                tx.rollback_to(mark);
                Reply::Error(e.to_string())
            }
        };
        let end = Instant::now();
        self.clock = Some(end);
        let micros = u64::try_from(end.duration_since(start).as_micros()).unwrap_or(u64::MAX);
        if shared.slowlog.would_log(micros) {
            let cname = conn.name.clone().unwrap_or_default();
            shared.slowlog.record(args, micros, &conn.info.addr, &cname);
        }
        self.push(conn, reply, true);
        true
    }

    /// New input is about to be parsed (another socket read, another
    /// connection): the time since the last command is not the next one's.
    pub fn restart_clock(&mut self) {
        self.clock = None;
    }

    fn push(&mut self, conn: &Conn, reply: Reply, from_tx: bool) {
        self.replies.push(Pending {
            sink: conn.sink.clone(),
            resp3: conn.resp3,
            reply,
            from_tx,
        });
    }

    /// Commits the batch and appends its replies to their connections'
    /// sinks (nothing when there is no batch).
    pub fn finish(&mut self, shared: &Shared) {
        self.clock = None;
        if self.replies.is_empty() {
            // A command rolled back for a lock may have opened the batch.
            self.tx = None;
            return;
        }
        let failed = self.tx.take().and_then(|tx| commit(shared, tx).err());
        for p in self.replies.drain(..) {
            let reply = match &failed {
                Some(e) if p.from_tx => Reply::Error(e.clone()),
                _ => p.reply,
            };
            let counter = match reply {
                Reply::Error(_) => &shared.stats.errors,
                _ => &shared.stats.commands,
            };
            counter.fetch_add(1, Ordering::Relaxed);
            p.sink.append(&reply, p.resp3);
        }
    }
}

/// Commits a batch like one command (`super::commit`): blocked clients
/// are served, and under `appendfsync always` the replies wait until
/// everything they may have read is durable.
fn commit(shared: &Shared, tx: Tx) -> Result<(), String> {
    crate::tx::take_commit_waited();
    if !tx.is_empty() {
        let ready = shared.blocking.ready_keys(&tx);
        tx.commit()
            .map_err(|e| super::CmdError::from(e).to_string())?;
        shared.blocking.serve(shared, ready);
    }
    durable_reply(shared).map_err(|e| format!("ERR {e}"))
}

/// `name` in lower case in `buf`; None when it does not fit or is not
/// ASCII.
fn lowercase<'b>(name: &[u8], buf: &'b mut [u8; 24]) -> Option<&'b str> {
    let out = buf.get_mut(..name.len())?;
    for (o, c) in out.iter_mut().zip(name) {
        if !c.is_ascii() {
            return None;
        }
        *o = c.to_ascii_lowercase();
    }
    std::str::from_utf8(out).ok()
}

/// A connection whose requests may be batched: authenticated, not in
/// MULTI, not subscribed (RESP2), not tracking.
fn conn_allows(shared: &Shared, conn: &Conn) -> bool {
    let t = shared.store.tracking();
    conn.authed
        && !conn.in_multi()
        && conn.sink.subscriptions() == 0
        && (!t.any() || t.get(conn.id).is_none())
}

/// Data commands whose every effect goes through the [`Tx`] and whose
/// only connection state is the selected database. Not here: blocking
/// commands, FLUSHDB/FLUSHALL (every lock), PUBLISH (delivered at once,
/// before the batch commits), SELECT, and everything about the connection
/// or the server.
pub fn batchable(name: &str) -> bool {
    matches!(
        name,
        "get"
            | "set"
            | "mget"
            | "mset"
            | "setnx"
            | "getset"
            | "getdel"
            | "incr"
            | "decr"
            | "incrby"
            | "decrby"
            | "append"
            | "strlen"
            | "setex"
            | "psetex"
            | "msetnx"
            | "incrbyfloat"
            | "hset"
            | "hmset"
            | "hget"
            | "hmget"
            | "hgetall"
            | "hdel"
            | "hlen"
            | "hexists"
            | "hincrby"
            | "hkeys"
            | "hvals"
            | "hsetnx"
            | "hstrlen"
            | "hincrbyfloat"
            | "lpush"
            | "rpush"
            | "lpushx"
            | "rpushx"
            | "lpop"
            | "rpop"
            | "lrange"
            | "llen"
            | "lindex"
            | "lset"
            | "lrem"
            | "ltrim"
            | "linsert"
            | "lpos"
            | "sadd"
            | "srem"
            | "smembers"
            | "sismember"
            | "smismember"
            | "scard"
            | "zadd"
            | "zrem"
            | "zscore"
            | "zmscore"
            | "zincrby"
            | "zcard"
            | "zcount"
            | "zrange"
            | "zrangebyscore"
            | "zrevrange"
            | "zrevrangebyscore"
            | "zrank"
            | "zrevrank"
            | "zpopmin"
            | "zpopmax"
            | "del"
            | "unlink"
            | "exists"
            | "expire"
            | "pexpire"
            | "expireat"
            | "pexpireat"
            | "ttl"
            | "pttl"
            | "persist"
            | "type"
    )
}
