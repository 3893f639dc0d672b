//! MULTI / EXEC / DISCARD / WATCH / UNWATCH.
//!
//! Queued requests run at EXEC in one [`Tx`] holding every key lock, so
//! they are applied as one engine `WriteBatch` (all or nothing, one WAL
//! record) and no other client's write can land between them. WATCH
//! registers the connection's dirty flag in `store::Watches`; every commit
//! that writes a watched key sets it while still holding the key's lock, and
//! EXEC reads it after taking every lock, so a write acknowledged before EXEC
//! started aborts it and one after cannot interleave.

use super::{is_opt, run, CmdError, Conn, Shared};
use crate::resp::Reply;
use crate::tx::Tx;
use std::sync::atomic::Ordering;

/// A request was refused (unknown command, arity, NOAUTH): inside MULTI
/// this dooms the transaction, like Redis's `flagTransaction`.
pub fn refused(conn: &mut Conn) {
    if conn.multi.is_some() {
        conn.multi_failed = true;
    }
}

/// EXEC itself refused (arity, NOAUTH), in MULTI or not: Redis discards
/// the transaction and the WATCHes and answers EXECABORT with the reason.
pub fn exec_refused(shared: &Shared, conn: &mut Conn, why: &Reply) -> Option<Reply> {
    // Redis's rejectCommand: a refused EXEC always answers EXECABORT, in
    // MULTI or not.
    conn.multi = None;
    conn.multi_failed = false;
    unwatch_all(shared, conn);
    let Reply::Error(msg) = why else {
        return None;
    };
    let reason = msg.strip_prefix("ERR ").unwrap_or(msg);
    Some(Reply::err(format!(
        "EXECABORT Transaction discarded because of: {reason}"
    )))
}

/// Handles the transaction commands, and queues everything else while in
/// MULTI. `None`: run the request now.
pub fn intercept(shared: &Shared, conn: &mut Conn, name: &str, args: &[Vec<u8>]) -> Option<Reply> {
    let in_multi = conn.multi.is_some();
    Some(match name {
        "multi" if in_multi => Reply::err("ERR MULTI calls can not be nested"),
        "multi" => {
            conn.multi = Some(Vec::new());
            Reply::ok()
        }
        "exec" => exec(shared, conn),
        "discard" => match conn.multi.take() {
            None => Reply::err("ERR DISCARD without MULTI"),
            Some(_) => {
                conn.multi_failed = false;
                unwatch_all(shared, conn);
                Reply::ok()
            }
        },
        "watch" if in_multi => Reply::err("ERR WATCH inside MULTI is not allowed"),
        "watch" => watch(shared, conn, args.get(1..).unwrap_or_default()),
        "quit" => return None,
        _ => match &mut conn.multi {
            Some(q) => {
                q.push(args.to_vec());
                Reply::Simple("QUEUED".into())
            }
            None => return None,
        },
    })
}

fn watch(shared: &Shared, conn: &mut Conn, keys: &[Vec<u8>]) -> Reply {
    let tx = Tx::new(&shared.store);
    // WATCHes stay on the logical database; the key is read in its physical one.
    let physical = tx.phys(conn.db);
    for k in keys {
        if conn.watched.iter().any(|(d, w)| *d == conn.db && w == k) {
            continue;
        }
        let expired = match tx.expired_present(physical, k) {
            Ok(e) => e,
            Err(e) => return Reply::Error(CmdError::from(e).to_string()),
        };
        shared
            .store
            .watches()
            .watch(conn.db, k, conn.id, &conn.dirty, expired);
        conn.watched.push((conn.db, k.clone()));
    }
    Reply::ok()
}

/// UNWATCH: forget every watched key and the dirty flag.
pub fn unwatch(shared: &Shared, conn: &mut Conn) -> Reply {
    unwatch_all(shared, conn);
    Reply::ok()
}

pub fn unwatch_all(shared: &Shared, conn: &mut Conn) {
    if !conn.watched.is_empty() {
        let keys: Vec<(u8, Vec<u8>)> = conn.watched.drain(..).collect();
        shared.store.watches().unwatch(conn.id, &keys);
    }
    conn.dirty.store(false, Ordering::SeqCst);
}

fn exec(shared: &Shared, conn: &mut Conn) -> Reply {
    let Some(queue) = conn.multi.take() else {
        return Reply::err("ERR EXEC without MULTI");
    };
    if std::mem::take(&mut conn.multi_failed) {
        unwatch_all(shared, conn);
        return Reply::err("EXECABORT Transaction discarded because of previous errors.");
    }
    // A queued SWAPDB needs the database map exclusively, taken before
    // any key lock (see `Tx::new_swapping`).
    let swaps = queue
        .iter()
        .any(|a| a.first().is_some_and(|n| is_opt(n, "swapdb")));
    let mut tx = if swaps {
        Tx::new_swapping(&shared.store)
    } else {
        Tx::new_exclusive(&shared.store)
    };
    tx.set_client(conn.id);
    // Under every lock: no write can set the flag after this check.
    let mut aborted = conn.dirty.load(Ordering::SeqCst);
    let w = shared.store.watches();
    for (db, k) in &conn.watched {
        // A key that expired since WATCH counts as changed (Redis 7.0).
        let was_expired = w.was_expired(*db, k, conn.id);
        match tx.expired_present(tx.phys(*db), k) {
            Ok(now_expired) => aborted |= now_expired && !was_expired,
            Err(e) => return Reply::Error(CmdError::from(e).to_string()),
        }
    }
    unwatch_all(shared, conn);
    if aborted {
        return Reply::NilArray;
    }
    tx.enable_undo();
    let mut replies = Vec::with_capacity(queue.len());
    for args in &queue {
        let name = String::from_utf8_lossy(args.first().map(Vec::as_slice).unwrap_or_default())
            .to_ascii_lowercase();
        let rest = args.get(1..).unwrap_or_default();
        conn.sink.start_collecting();
        let sub = super::subscription_or_ping(shared, conn, &name, rest);
        let confirmations = conn.sink.take_collected();
        if let Some(r) = sub {
            // A (P)(UN)SUBSCRIBE's confirmations are elements of the array
            // (Redis writes them in place).
            replies.extend(confirmations);
            if r != Reply::Multi(Vec::new()) {
                replies.push(r);
            }
            continue;
        }
        let mark = tx.mark();
        // CLIENT TRACKING remembers reads inside EXEC too, as Redis.
        super::track_reads(shared, conn, &name, args);
        match run(shared, conn, &mut tx, &name, rest) {
            Ok(r) => replies.push(r),
            // An engine failure fails the whole EXEC: nothing is written.
            Err(e @ CmdError::Store(_)) => return Reply::Error(e.to_string()),
            Err(e) => {
                tx.rollback_to(mark);
                replies.push(Reply::Error(e.to_string()));
            }
        }
    }
    super::commit(shared, tx, Reply::Array(replies))
}
