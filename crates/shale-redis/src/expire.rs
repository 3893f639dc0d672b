//! Active expiry: a background cycle that deletes keys whose TTL has
//! passed, in addition to lazy expiry (every read treats them as absent).
//!
//! Redis's `activeExpireCycle` samples random keys with a TTL, 10 times a
//! second, for at most 25 % of a tick. Here every key with a TTL has an
//! expiry index entry `E | db | expire_at | key` (docs/redis.md), so the
//! cycle walks exactly the entries that are due, oldest first, instead of
//! sampling: every [`PERIOD`] it deletes at most [`BATCH`] keys per engine
//! write and stops after [`BUDGET`] (the rest waits for the next tick). An
//! entry whose key has another expiry time (PERSIST, a new EXPIRE, a new
//! SET) is stale and only the entry is removed.

use crate::store::{meta_key, Meta, Result, Store, DATABASES};
use crate::tx::Tx;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Time between two cycles (Redis's default `hz 10`).
pub const PERIOD: Duration = Duration::from_millis(100);
/// Work of one cycle at most (Redis: 25 % of a tick).
pub const BUDGET: Duration = Duration::from_millis(25);
/// Index entries handled per engine write.
pub const BATCH: usize = 200;
/// A cycle starts its walk this long before the time the previous one
/// reached, not at the start of the index: the entries it deleted stay as
/// engine tombstones until compaction, and walking over them every 100 ms
/// would cost more and more. The margin covers a command that read a TTL
/// before the previous cycle and commits its entry after it.
pub const MARGIN_MS: u64 = 60_000;
/// Every this many cycles the walk starts at the beginning (an entry
/// committed later than [`MARGIN_MS`] after its time is still found).
pub const FULL_WALK_EVERY: u64 = 600;

/// One index entry: its record key, its time, the user key.
type Due = (Vec<u8>, u64, Vec<u8>);

/// Deletes up to `max` due keys of `db` (entries from time `from` to
/// `now`) in one batch; returns the number of keys deleted and whether more
/// entries are due.
pub fn sweep_db(st: &Store, db: u8, from: u64, now: u64, max: usize) -> Result<(usize, bool)> {
    let mut due: Vec<Due> = Vec::new();
    let mut more = false;
    let start = crate::store::expiry_key(db, from, b"");
    Tx::new(st).scan(&[b'E', db], Some(&start), false, |k, _| {
        let mut at = [0u8; 8];
        match k.get(2..10) {
            Some(b) => at.copy_from_slice(b),
            None => return true,
        }
        let at = u64::from_be_bytes(at);
        if at > now {
            return false;
        }
        if due.len() >= max {
            more = true;
            return false;
        }
        due.push((k.to_vec(), at, k.get(10..).unwrap_or_default().to_vec()));
        true
    })?;
    if due.is_empty() {
        return Ok((0, false));
    }
    let mut tx = Tx::new(st);
    tx.mark_expiry_sweep();
    tx.lock(db, due.iter().map(|(_, _, k)| k.as_slice()));
    let mut deleted = 0;
    for (entry, at, key) in due {
        if let Some(raw) = tx.get(&meta_key(db, &key))? {
            // A record that does not decode is left to the reads that report it.
            let live_entry = Meta::decode(&raw).is_ok_and(|m| m.expire_at == at);
            if live_entry && at <= tx.now() {
                tx.delete_meta(db, &key);
                deleted += 1;
            }
        }
        tx.delete(entry);
    }
    tx.commit()?;
    st.expired_keys.fetch_add(deleted as u64, Ordering::Relaxed);
    Ok((deleted, more))
}

/// One cycle over every database, walking the entries from `from` to
/// `now`, within [`BUDGET`]; returns keys deleted and whether it got
/// through every due entry.
pub fn cycle(st: &Store, from: u64, now: u64) -> Result<(usize, bool)> {
    let start = Instant::now();
    let mut total = 0;
    for db in 0..DATABASES {
        loop {
            let (n, more) = sweep_db(st, db, from, now, BATCH)?;
            total += n;
            if !more {
                break;
            }
            if start.elapsed() >= BUDGET {
                return Ok((total, false));
            }
        }
    }
    Ok((total, true))
}

/// Runs cycles every [`PERIOD`] until `stop` is set.
pub fn run(st: &Store, stop: &AtomicBool) {
    // The time the last complete cycle walked up to (0: from the start).
    let mut reached = 0u64;
    let mut cycles = 0u64;
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(PERIOD);
        cycles += 1;
        let from = if cycles.is_multiple_of(FULL_WALK_EVERY) {
            0
        } else {
            reached.saturating_sub(MARGIN_MS)
        };
        let now = crate::store::now_ms();
        // An engine error (disk full ...) is retried at the next tick; the
        // keys stay invisible to reads meanwhile. A cycle cut short by its
        // budget leaves `reached` where it was.
        if let Ok((_, true)) = cycle(st, from, now) {
            reached = now;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::store::{expiry_key, Type};

    fn raw(st: &Store, key: &[u8]) -> Option<Vec<u8>> {
        st.engine()
            .get_opt(&Default::default(), st.cf(), key)
            .unwrap()
    }

    fn string(st: &Store, expire_at: u64) -> Meta {
        let mut m = Meta::new(Type::String, st.new_version());
        m.expire_at = expire_at;
        m
    }

    /// Due keys are deleted from the engine (not only hidden), keys with a
    /// later TTL and stale entries are handled, and a cycle is bounded.
    #[test]
    fn cycle_deletes_due_keys_and_stale_entries_only() {
        let dir = tempfile::tempdir().unwrap();
        let st = Store::open(shaledb::Db::open(dir.path(), Default::default()).unwrap()).unwrap();
        let now = crate::store::now_ms();
        let mut tx = Tx::new(&st);
        for i in 0..(BATCH + 50) {
            tx.put_meta(3, format!("old{i}").as_bytes(), &string(&st, now - 1000));
        }
        tx.put_meta(3, b"later", &string(&st, now + 3_600_000));
        // A key whose TTL was removed after its entry was written.
        tx.put_meta(3, b"persisted", &string(&st, now - 500));
        tx.put_meta(3, b"persisted", &string(&st, 0));
        tx.commit().unwrap();

        // One bounded batch first: BATCH deleted, more due.
        let (n, more) = sweep_db(&st, 3, 0, now, BATCH).unwrap();
        assert_eq!((n, more), (BATCH, true));
        // A walk that starts after the entries' time finds nothing.
        assert_eq!(cycle(&st, now - 100, now).unwrap(), (0, true));
        let total = n + cycle(&st, now - 1000 - MARGIN_MS, now).unwrap().0;
        assert_eq!(total, BATCH + 50);
        assert_eq!(raw(&st, &meta_key(3, b"old0")), None);
        assert_eq!(raw(&st, &expiry_key(3, now - 1000, b"old0")), None);
        assert!(raw(&st, &meta_key(3, b"later")).is_some());
        assert!(raw(&st, &expiry_key(3, now + 3_600_000, b"later")).is_some());
        assert!(raw(&st, &meta_key(3, b"persisted")).is_some());
        assert_eq!(raw(&st, &expiry_key(3, now - 500, b"persisted")), None);
        assert_eq!(st.expired_keys.load(Ordering::Relaxed), (BATCH + 50) as u64);
        assert_eq!(cycle(&st, 0, now).unwrap(), (0, true));
    }
}
