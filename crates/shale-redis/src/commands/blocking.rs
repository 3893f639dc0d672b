//! BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BZPOPMIN, BZPOPMAX.
//!
//! A blocking command first tries its non-blocking form under its keys'
//! locks. When every key is empty it registers a [`Waiter`] in the queue of
//! each key **before** releasing those locks, so a push that commits after
//! the check finds it. A command that writes a key with waiters (a push, a
//! ZADD, an EXEC) serves them right after its commit, before its reply is
//! sent: the first waiter of the key (FIFO, as Redis serves blocked clients)
//! is claimed, its pop runs in a new transaction, and its reply is handed
//! over. Serving passes are serialised by one mutex, so two pushers cannot
//! serve a later waiter ahead of an earlier one. A waiter whose pop finds
//! nothing (another waiter took the element) stays queued.
//!
//! The blocked connection's thread sleeps on its waiter's condition
//! variable; every [`PROBE`] it checks its socket for EOF (a client that
//! disconnects while blocked is dropped from every queue) and the server's
//! stop flag. A waiter is claimed under its mutex, so a timeout and a
//! serve cannot both happen: the element is never popped for nobody.

use super::{arg, is_opt, lists, zsets, CmdError, CmdResult, Conn, Shared};
use crate::resp::Reply;
use crate::store::{DbKey, Type};
use crate::tx::Tx;
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a blocked connection looks for a closed socket or shutdown.
const PROBE: Duration = Duration::from_millis(100);

/// What a waiter does once one of its keys has data.
#[derive(Debug, Clone)]
enum Op {
    /// BLPOP (left) / BRPOP.
    Pop { left: bool },
    /// BLMOVE / BRPOPLPUSH.
    Move {
        dst: Vec<u8>,
        from: Vec<u8>,
        to: Vec<u8>,
    },
    /// BZPOPMIN / BZPOPMAX (max).
    ZPop { max: bool },
    /// BLMPOP / BZMPOP.
    MPop(super::mpop::MPop),
}

enum State {
    Waiting,
    /// A pusher is running this waiter's pop.
    Claimed,
    Done(Reply),
    /// Timed out or disconnected: no longer servable.
    Gone,
}

pub struct Waiter {
    db: u8,
    keys: Vec<Vec<u8>>,
    op: Op,
    state: Mutex<State>,
    cv: Condvar,
}

/// The queues of blocked clients, per key.
#[derive(Default)]
pub struct Blocking {
    count: AtomicU64,
    queues: Mutex<HashMap<DbKey, VecDeque<Arc<Waiter>>>>,
    /// Serialises serving passes (FIFO across concurrent pushers).
    serving: Mutex<()>,
}

impl Blocking {
    /// Blocked clients (INFO `blocked_clients`).
    pub fn blocked(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }

    /// True when some client is blocked (writes skip the rest otherwise).
    pub fn any(&self) -> bool {
        self.count.load(Ordering::SeqCst) > 0
    }

    fn register(&self, w: &Arc<Waiter>) {
        let mut q = self.queues.lock();
        for k in &w.keys {
            q.entry((w.db, k.clone())).or_default().push_back(w.clone());
        }
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    fn unregister(&self, w: &Arc<Waiter>) {
        let mut q = self.queues.lock();
        for k in &w.keys {
            let dk = (w.db, k.clone());
            if let Some(list) = q.get_mut(&dk) {
                list.retain(|x| !Arc::ptr_eq(x, w));
                if list.is_empty() {
                    q.remove(&dk);
                }
            }
        }
        self.count.fetch_sub(1, Ordering::SeqCst);
    }

    /// The keys clients are blocked on in logical databases `a` and `b`
    /// (SWAPDB: they may have data now).
    pub fn keys_in_dbs(&self, a: u8, b: u8) -> Vec<DbKey> {
        if !self.any() {
            return Vec::new();
        }
        self.queues
            .lock()
            .keys()
            .filter(|(db, _)| *db == a || *db == b)
            .cloned()
            .collect()
    }

    /// The keys written by `tx` that have waiters (call before commit).
    pub fn ready_keys(&self, tx: &Tx) -> Vec<DbKey> {
        if !self.any() {
            return Vec::new();
        }
        let q = self.queues.lock();
        tx.written_keys()
            .into_iter()
            .filter(|k| q.contains_key(k))
            .collect()
    }

    /// Serves the waiters of `ready` (and of the keys their pops write,
    /// BLMOVE's destination), FIFO per key, while the keys have data.
    pub fn serve(&self, shared: &Shared, ready: Vec<DbKey>) {
        if ready.is_empty() {
            return;
        }
        let _pass = self.serving.lock();
        let mut ready: VecDeque<DbKey> = ready.into();
        while let Some(key) = ready.pop_front() {
            let waiters: Vec<Arc<Waiter>> = match self.queues.lock().get(&key) {
                Some(list) => list.iter().cloned().collect(),
                None => continue,
            };
            for w in waiters {
                {
                    let mut st = w.state.lock();
                    if !matches!(*st, State::Waiting) {
                        continue;
                    }
                    *st = State::Claimed;
                }
                let outcome = serve_one(shared, &w, &key.1);
                let mut st = w.state.lock();
                match outcome {
                    Served::Reply(r, more) => {
                        *st = State::Done(r);
                        drop(st);
                        self.unregister(&w);
                        w.cv.notify_all();
                        ready.extend(more);
                    }
                    // Nothing for this waiter: the key is empty or of another
                    // type; a later waiter may want another type (BZPOP vs BLPOP).
                    Served::Nothing => {
                        *st = State::Waiting;
                    }
                }
            }
        }
    }
}

enum Served {
    /// The reply, and the keys the pop wrote that have waiters.
    Reply(Reply, Vec<DbKey>),
    Nothing,
}

/// Runs waiter `w`'s pop on `key` in its own transaction.
fn serve_one(shared: &Shared, w: &Waiter, key: &[u8]) -> Served {
    let mut tx = Tx::new(&shared.store);
    // Waiters are queued by logical database (they stay on it across SWAPDB).
    let db = tx.phys(w.db);
    let reply = match &w.op {
        Op::Pop { left } => {
            let name = if *left { "lpop" } else { "rpop" };
            match lists::run(&mut tx, db, name, &[key.to_vec()]) {
                Ok(Reply::Bulk(e)) => Reply::Array(vec![Reply::bulk(key), Reply::Bulk(e)]),
                _ => return Served::Nothing,
            }
        }
        Op::Move { dst, from, to } => {
            match super::typed_meta(&tx, db, key, Type::List) {
                Ok(Some(_)) => {}
                _ => return Served::Nothing,
            }
            let a = [key.to_vec(), dst.clone(), from.clone(), to.clone()];
            match lists::run(&mut tx, db, "lmove", &a) {
                Ok(Reply::Nil) => return Served::Nothing,
                Ok(r) => r,
                // The destination holds another type: Redis answers the
                // blocked client WRONGTYPE and pops nothing.
                Err(e) => return Served::Reply(Reply::Error(e.to_string()), Vec::new()),
            }
        }
        Op::ZPop { max } => {
            let name = if *max { "zpopmax" } else { "zpopmin" };
            match zsets::run(shared, &mut tx, db, name, &[key.to_vec()]) {
                Ok(Reply::Array(mut v)) if v.len() == 2 => {
                    v.insert(0, Reply::bulk(key));
                    Reply::Array(v)
                }
                _ => return Served::Nothing,
            }
        }
        Op::MPop(p) => match super::mpop::pop_key(shared, &mut tx, db, p, key) {
            Ok(Some(r)) => r,
            _ => return Served::Nothing,
        },
    };
    let more = shared.blocking.ready_keys(&tx);
    match tx.commit() {
        Ok(()) => Served::Reply(reply, more),
        Err(e) => Served::Reply(Reply::Error(CmdError::from(e).to_string()), Vec::new()),
    }
}

/// Redis's blocking timeout: seconds as a float, `0` = forever; `None` in
/// the result means forever.
fn parse_timeout(b: &[u8], now_ms: u64) -> Result<Option<u64>, CmdError> {
    let secs = zsets::parse_float(b)
        .ok_or_else(|| CmdError::Other("timeout is not a float or out of range".into()))?;
    let ms = (secs * 1000.0).ceil();
    // Redis converts to a long long: overflow (and inf) wraps negative.
    if !(0.0..9.223_372_036_854_775e18).contains(&ms) {
        return Err(CmdError::Other("timeout is negative".into()));
    }
    let ms = ms as u64;
    if ms == 0 {
        return Ok(None);
    }
    if ms > i64::MAX as u64 - now_ms {
        return Err(CmdError::Other("timeout is out of range".into()));
    }
    Ok(Some(ms))
}

/// A parsed blocking command: keys, what to do, its timeout argument.
struct Parsed {
    keys: Vec<Vec<u8>>,
    op: Op,
    timeout: Vec<u8>,
}

fn parse(name: &str, a: &[Vec<u8>]) -> Result<Parsed, CmdError> {
    let last = a.len().saturating_sub(1);
    let timeout = arg(a, last).to_vec();
    let keys_until = |n: usize| a.get(..n).unwrap_or_default().to_vec();
    let side = |b: &[u8]| -> Result<Vec<u8>, CmdError> {
        if is_opt(b, "LEFT") || is_opt(b, "RIGHT") {
            Ok(b.to_vec())
        } else {
            Err(CmdError::Syntax)
        }
    };
    Ok(match name {
        "blmpop" | "bzmpop" => {
            // Redis checks numkeys, keys and options before the timeout.
            let p = super::mpop::parse(name == "bzmpop", a.get(1..).unwrap_or_default())?;
            Parsed {
                keys: p.keys.clone(),
                op: Op::MPop(p),
                timeout: arg(a, 0).to_vec(),
            }
        }
        "blpop" | "brpop" => Parsed {
            keys: keys_until(last),
            op: Op::Pop {
                left: name == "blpop",
            },
            timeout,
        },
        "bzpopmin" | "bzpopmax" => Parsed {
            keys: keys_until(last),
            op: Op::ZPop {
                max: name == "bzpopmax",
            },
            timeout,
        },
        "blmove" => Parsed {
            keys: keys_until(1),
            op: Op::Move {
                dst: arg(a, 1).to_vec(),
                from: side(arg(a, 2))?,
                to: side(arg(a, 3))?,
            },
            timeout,
        },
        _ => Parsed {
            keys: keys_until(1),
            op: Op::Move {
                dst: arg(a, 1).to_vec(),
                from: b"RIGHT".to_vec(),
                to: b"LEFT".to_vec(),
            },
            timeout,
        },
    })
}

/// The non-blocking attempt: the first key with data, in argument order
/// (WRONGTYPE for a key of another type met before one with data).
fn try_now(shared: &Shared, tx: &mut Tx, db: u8, p: &Parsed) -> CmdResult {
    match &p.op {
        Op::Pop { left } => {
            tx.lock(db, p.keys.iter().map(Vec::as_slice));
            let name = if *left { "lpop" } else { "rpop" };
            for k in &p.keys {
                if let Reply::Bulk(e) = lists::run(tx, db, name, std::slice::from_ref(k))? {
                    return Ok(Reply::Array(vec![Reply::bulk(k.clone()), Reply::Bulk(e)]));
                }
            }
            Ok(Reply::NilArray)
        }
        Op::Move { dst, from, to } => {
            let src = p.keys.first().cloned().unwrap_or_default();
            let a = [src, dst.clone(), from.clone(), to.clone()];
            // Nil when the source is empty (what EXEC answers, as Redis).
            lists::run(tx, db, "lmove", &a)
        }
        Op::ZPop { max } => {
            tx.lock(db, p.keys.iter().map(Vec::as_slice));
            let name = if *max { "zpopmax" } else { "zpopmin" };
            for k in &p.keys {
                if let Reply::Array(mut v) =
                    zsets::run(shared, tx, db, name, std::slice::from_ref(k))?
                {
                    if v.len() == 2 {
                        v.insert(0, Reply::bulk(k.clone()));
                        return Ok(Reply::Array(v));
                    }
                }
            }
            Ok(Reply::NilArray)
        }
        Op::MPop(mp) => super::mpop::try_all(shared, tx, db, mp),
    }
}

/// Inside EXEC: the non-blocking form (Redis never blocks a transaction):
/// nil array for the pops, nil for BLMOVE, as Redis answers there.
pub fn run_in_exec(shared: &Shared, tx: &mut Tx, db: u8, name: &str, a: &[Vec<u8>]) -> CmdResult {
    let p = parse(name, a)?;
    parse_timeout(&p.timeout, tx.now())?;
    try_now(shared, tx, db, &p)
}

/// A blocking command outside MULTI: may wait for a push.
pub fn run(shared: &Shared, conn: &mut Conn, name: &str, a: &[Vec<u8>]) -> Reply {
    let db = conn.db;
    let mut tx = Tx::new(&shared.store);
    let p = match parse(name, a) {
        Ok(p) => p,
        Err(e) => return Reply::Error(e.to_string()),
    };
    let timeout = match parse_timeout(&p.timeout, tx.now()) {
        Ok(t) => t,
        Err(e) => return Reply::Error(e.to_string()),
    };
    let physical = tx.phys(db);
    let r = match try_now(shared, &mut tx, physical, &p) {
        Ok(r) => r,
        Err(e) => return Reply::Error(e.to_string()),
    };
    if r != Reply::NilArray && r != Reply::Nil {
        let ready = shared.blocking.ready_keys(&tx);
        return match tx.commit() {
            Ok(()) => {
                shared.blocking.serve(shared, ready);
                r
            }
            Err(e) => Reply::Error(CmdError::from(e).to_string()),
        };
    }
    // Every key is empty; still under their locks, queue up.
    let w = Arc::new(Waiter {
        db,
        keys: dedup(p.keys),
        op: p.op,
        state: Mutex::new(State::Waiting),
        cv: Condvar::new(),
    });
    shared.blocking.register(&w);
    drop(tx);
    wait(shared, conn, &w, timeout)
}

fn dedup(mut keys: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut seen = std::collections::HashSet::new();
    keys.retain(|k| seen.insert(k.clone()));
    keys
}

/// Sleeps until `w` is served, times out, or the client goes away.
fn wait(shared: &Shared, conn: &mut Conn, w: &Arc<Waiter>, timeout: Option<u64>) -> Reply {
    // Replies to earlier pipelined requests must not wait behind this one.
    if conn.sink.flush().is_err() {
        conn.quit = true;
    }
    let deadline = timeout.map(|ms| Instant::now() + Duration::from_millis(ms));
    let mut st = w.state.lock();
    loop {
        if matches!(*st, State::Done(_)) {
            if let State::Done(r) = std::mem::replace(&mut *st, State::Gone) {
                return r;
            }
        }
        let now = Instant::now();
        let expired = deadline.is_some_and(|d| now >= d);
        let gone = conn.quit
            || shared.stopping()
            || (!expired && MutexGuard::unlocked(&mut st, || conn.peer_closed()));
        if matches!(*st, State::Done(_)) {
            continue;
        }
        if (expired || gone) && matches!(*st, State::Waiting) {
            *st = State::Gone;
            drop(st);
            shared.blocking.unregister(w);
            if gone {
                conn.quit = true;
            }
            return Reply::NilArray;
        }
        let slice = deadline.map_or(PROBE, |d| d.saturating_duration_since(now).min(PROBE));
        w.cv.wait_for(&mut st, slice.max(Duration::from_millis(1)));
    }
}
