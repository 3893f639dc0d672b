//! One command's (or one EXEC's) view of the data: reads see the engine
//! plus the writes buffered so far; the writes go to the engine as one
//! `WriteBatch` at [`Tx::commit`], so every command, and every EXEC, is
//! all-or-nothing and later commands of an EXEC read what earlier ones wrote.

use crate::store::{
    expiry_key, meta_key, now_ms, owner_of, prefix_end, DbKey, KeyLocks, Meta, Result, Store,
    StoreError,
};
use shaledb::{ReadOptions, WriteBatch};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;

mod prefetch;
mod reply_cache;
mod swap;
pub use prefetch::WINDOW as PREFETCH_WINDOW;

pub struct Tx<'a> {
    st: &'a Store,
    ro: ReadOptions,
    /// Buffered writes; `None` is a delete.
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Buffered range deletes `[begin, end)` (FLUSHDB), applied before `writes`.
    ranges: Vec<(Vec<u8>, Vec<u8>)>,
    locks: Vec<KeyLocks<'a>>,
    /// The stripes held (a second [`Tx::lock`] of a key is then a no-op).
    held: BTreeSet<usize>,
    /// Every stripe is held (EXEC): [`Tx::lock`] is then a no-op.
    all_locked: bool,
    /// The time expiry is judged against: fixed for the whole transaction.
    now: u64,
    /// EXEC only: how to undo each buffered change, so that a command that
    /// fails part-way leaves nothing behind ([`Tx::rollback_to`]).
    undo: Option<Vec<Undo>>,
    /// Written by the active expiry cycle (see `Watches::touch`).
    expiry_sweep: bool,
    /// The client whose command this is (0: the server), for tracking's
    /// NOLOOP and for sending its own invalidations after its reply.
    client: u64,
    /// A pipeline batch (`commands::pipeline`): several commands share
    /// this transaction, so a command needing a stripe while others are
    /// held only tries to take it (blocking then could deadlock against
    /// another batch); a failure sets `lock_failed`.
    batch: bool,
    /// Set when a batch's [`Tx::lock`] could not take a stripe: the
    /// command ran without it, and its effects must be rolled back.
    lock_failed: bool,
    /// Batch only: engine reads of records whose key's stripe the batch
    /// holds. No other client can write them until the batch commits, and
    /// its own writes are found in `writes` first, so the cached value is
    /// the record's latest (sixteen pipelined SADDs of one member read the
    /// set's metadata and member record once, not sixteen times).
    read_cache: std::cell::RefCell<HashMap<Vec<u8>, Option<Vec<u8>>>>,
    /// Batch only: the collection the last [`Tx::repeat_count`] asked
    /// about and how many times in a row (`prefetch`).
    repeats: Option<(Vec<u8>, u32)>,
    /// Batch only: replies of reads kept for identical commands
    /// (`reply_cache`), with the write count they were made at.
    reply_cache: std::cell::RefCell<HashMap<Vec<u8>, (u64, crate::resp::Reply)>>,
    /// Buffered changes so far, undone ones included (a cached reply is
    /// stale once it moves).
    write_gen: u64,
    /// The logical -> physical database map, held for the transaction's
    /// whole life (`swap`).
    map: swap::MapLock<'a>,
    /// What this transaction's SWAPDBs change, applied at commit.
    swap: Option<Box<swap::PendingSwap>>,
}

/// One buffered change's inverse.
enum Undo {
    /// `writes[key]` held this before (`None`: no entry).
    Write(Vec<u8>, Option<Option<Vec<u8>>>),
    /// A range delete was pushed onto `ranges`.
    Range,
}

impl<'a> Tx<'a> {
    /// A transaction reading the latest state.
    pub fn new(st: &'a Store) -> Tx<'a> {
        Tx::with_map(st, swap::MapLock::Shared(st.db_map().read()))
    }

    fn with_map(st: &'a Store, map: swap::MapLock<'a>) -> Tx<'a> {
        Tx {
            st,
            ro: ReadOptions::default(),
            writes: BTreeMap::new(),
            ranges: Vec::new(),
            locks: Vec::new(),
            held: BTreeSet::new(),
            all_locked: false,
            now: now_ms(),
            undo: None,
            expiry_sweep: false,
            client: 0,
            batch: false,
            lock_failed: false,
            read_cache: std::cell::RefCell::default(),
            repeats: None,
            reply_cache: std::cell::RefCell::default(),
            write_gen: 0,
            map,
            swap: None,
        }
    }

    /// A transaction shared by the consecutive commands of one pipeline
    /// (`commands::pipeline`): undo is on, so one command's failure is
    /// rolled back alone, and new stripes are only tried while others are
    /// held.
    pub fn new_batch(st: &'a Store, client: u64) -> Tx<'a> {
        let mut t = Tx::new(st);
        t.client = client;
        t.batch = true;
        t.enable_undo();
        t
    }

    /// Whether a batch command could not take a lock since the last call
    /// (its effects are then to be rolled back and the command run alone);
    /// resets the flag.
    pub fn take_lock_failed(&mut self) -> bool {
        std::mem::take(&mut self.lock_failed)
    }

    /// Ends one command of a batch: its snapshot, if it took one, must not
    /// serve later commands (they may lock and then read newer data).
    pub fn end_command(&mut self) {
        if self.batch {
            self.ro = ReadOptions::default();
        }
    }

    /// Whether nothing is buffered (a batch of reads commits nothing).
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.ranges.is_empty()
    }

    /// A transaction holding every key lock (EXEC, FLUSHDB).
    pub fn new_exclusive(st: &'a Store) -> Tx<'a> {
        let mut t = Tx::new(st);
        t.locks.push(st.lock_all());
        t.all_locked = true;
        t
    }

    /// A transaction that may run SWAPDB ([`Tx::swap_dbs`]): it holds the
    /// database map exclusively, so it waits for every other transaction
    /// to end and none starts until it ends, and then every key lock.
    /// The map lock comes first: a transaction holding the map shared may
    /// wait for a key lock, never the other way round.
    pub fn new_swapping(st: &'a Store) -> Tx<'a> {
        let mut t = Tx::with_map(st, swap::MapLock::Exclusive(st.db_map().write()));
        t.locks.push(st.lock_all());
        t.all_locked = true;
        t
    }

    pub fn store(&self) -> &'a Store {
        self.st
    }

    pub fn now(&self) -> u64 {
        self.now
    }

    pub fn new_version(&self) -> u64 {
        self.st.new_version()
    }

    /// Takes the write locks of `keys` until the end of the transaction.
    /// Called once per command, before its reads (every writer of a key
    /// holds its lock, so what the command reads does not move). Stripes
    /// already held are skipped, so a command may call a helper that locks
    /// a key it locked already (BLPOP's keys, then LPOP of one); new
    /// stripes must only be taken this way in one call, or in stripe order.
    pub fn lock<'k>(&mut self, db: u8, keys: impl IntoIterator<Item = &'k [u8]>) {
        if !self.all_locked {
            // The stripes not held yet (no allocation when all are, the
            // common case in a batch).
            let mut ids = BTreeSet::new();
            for k in keys {
                let id = self.st.stripe_of(db, k);
                if !self.held.contains(&id) {
                    ids.insert(id);
                }
            }
            if ids.is_empty() || self.lock_failed {
                return;
            }
            // Deadlock freedom: a thread blocks on stripes only while it
            // holds none, or (one command's single call) in stripe order.
            // A batch holding stripes for earlier commands may only try.
            if self.batch && !self.held.is_empty() {
                match self.st.try_lock_stripes(&ids) {
                    Some(l) => self.locks.push(l),
                    None => {
                        self.lock_failed = true;
                        return;
                    }
                }
            } else {
                self.locks.push(self.st.lock_stripes(&ids));
            }
            self.held.extend(ids);
        }
    }

    /// The user keys (logical databases) whose metadata this transaction
    /// writes (not deletes), and those a SWAPDB may have filled: the keys
    /// a blocked client may now pop from.
    pub fn written_keys(&self) -> Vec<DbKey> {
        let mut keys: Vec<DbKey> = self
            .writes
            .iter()
            .filter(|(k, v)| v.is_some() && k.first() == Some(&b'M'))
            .filter_map(|(k, _)| owner_of(k).map(|(db, key)| (self.logical(db), key.to_vec())))
            .collect();
        if let Some(p) = &self.swap {
            keys.extend(p.ready.iter().cloned());
        }
        keys
    }

    /// Takes every key lock (FLUSHDB); a no-op when held already.
    pub fn lock_all(&mut self) {
        if self.batch && !self.held.is_empty() && !self.all_locked {
            // Taking the rest while holding some could deadlock (see `lock`).
            self.lock_failed = true;
            return;
        }
        if !self.all_locked {
            // Stripes held already are skipped (a second lock would deadlock).
            let ids: BTreeSet<usize> = self
                .st
                .all_stripes()
                .difference(&self.held)
                .copied()
                .collect();
            self.locks.push(self.st.lock_stripes(&ids));
            self.all_locked = true;
        }
    }

    /// For read-only commands with several reads and no lock: read at one
    /// engine snapshot so they agree.
    ///
    /// In a batch every call takes a fresh snapshot for this command alone
    /// ([`Tx::end_command`] drops it): the keys earlier commands of the
    /// batch wrote are locked by it and read from its buffer, so the
    /// snapshot only serves keys nobody in the batch holds.
    pub fn consistent_reads(&mut self) {
        if self.batch || (self.locks.is_empty() && self.writes.is_empty() && self.ranges.is_empty())
        {
            self.ro = ReadOptions {
                snapshot: Some(self.st.engine().snapshot()),
                ..ReadOptions::default()
            };
        }
    }

    fn in_ranges(&self, key: &[u8]) -> bool {
        self.ranges
            .iter()
            .any(|(b, e)| key >= b.as_slice() && key < e.as_slice())
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = self.writes.get(key) {
            return Ok(v.clone());
        }
        if self.in_ranges(key) {
            return Ok(None);
        }
        if !self.batch {
            return Ok(self.st.engine().get_opt(&self.ro, self.st.cf(), key)?);
        }
        if let Some(v) = self.read_cache.borrow().get(key) {
            return Ok(v.clone());
        }
        let v = self.st.engine().get_opt(&self.ro, self.st.cf(), key)?;
        if self.holds_owner_of(key) {
            self.read_cache.borrow_mut().insert(key.to_vec(), v.clone());
        }
        Ok(v)
    }

    /// Whether this transaction holds the lock stripe of the user key that
    /// `record` belongs to (so nobody else writes it meanwhile).
    fn holds_owner_of(&self, record: &[u8]) -> bool {
        self.all_locked
            || owner_of(record)
                .is_some_and(|(db, key)| self.held.contains(&self.st.stripe_of(db, key)))
    }

    /// The live metadata of `key` (None when absent or expired).
    pub fn get_meta(&self, db: u8, key: &[u8]) -> Result<Option<Meta>> {
        let Some(raw) = self.get(&meta_key(db, key))? else {
            return Ok(None);
        };
        let m = Meta::decode(&raw)?;
        Ok(if m.expired(self.now) { None } else { Some(m) })
    }

    /// True when `key` has a metadata record that is expired (not live).
    pub fn expired_present(&self, db: u8, key: &[u8]) -> Result<bool> {
        match self.get(&meta_key(db, key))? {
            Some(raw) => Ok(Meta::decode(&raw)?.expired(self.now)),
            None => Ok(false),
        }
    }

    /// The client running this transaction (CLIENT TRACKING's NOLOOP).
    pub fn set_client(&mut self, id: u64) {
        self.client = id;
    }

    /// This transaction only deletes expired keys (the expiry cycle).
    pub fn mark_expiry_sweep(&mut self) {
        self.expiry_sweep = true;
    }

    /// Starts recording undo information (EXEC).
    pub fn enable_undo(&mut self) {
        self.undo = Some(Vec::new());
    }

    /// A point to roll back to.
    pub fn mark(&self) -> usize {
        self.undo.as_ref().map_or(0, Vec::len)
    }

    /// Undoes every change buffered since `mark`.
    pub fn rollback_to(&mut self, mark: usize) {
        self.write_gen += 1;
        let Some(mut undo) = self.undo.take() else {
            return;
        };
        while undo.len() > mark {
            match undo.pop() {
                Some(Undo::Write(k, Some(prev))) => {
                    self.writes.insert(k, prev);
                }
                Some(Undo::Write(k, None)) => {
                    self.writes.remove(&k);
                }
                Some(Undo::Range) => {
                    self.ranges.pop();
                }
                None => break,
            }
        }
        self.undo = Some(undo);
    }

    fn write_entry(&mut self, key: Vec<u8>, value: Option<Vec<u8>>) {
        self.write_gen += 1;
        match &mut self.undo {
            Some(undo) => {
                let prev = self.writes.insert(key.clone(), value);
                undo.push(Undo::Write(key, prev));
            }
            None => {
                self.writes.insert(key, value);
            }
        }
    }

    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.write_entry(key, Some(value));
    }

    pub fn delete(&mut self, key: Vec<u8>) {
        self.write_entry(key, None);
    }

    /// Writes the metadata of `key`, and its expiry index entry when it has
    /// a TTL (an entry left by an older TTL is dropped by the expiry cycle).
    pub fn put_meta(&mut self, db: u8, key: &[u8], m: &Meta) {
        if m.expire_at != 0 {
            self.put(expiry_key(db, m.expire_at, key), Vec::new());
        }
        self.put(meta_key(db, key), m.encode());
    }

    /// Writes a collection's metadata back, or deletes the key when it is
    /// empty (Redis deletes empty collections).
    pub fn save_collection(&mut self, db: u8, key: &[u8], m: &Meta) {
        if m.size == 0 {
            self.delete_meta(db, key);
        } else {
            self.put_meta(db, key, m);
        }
    }

    pub fn delete_meta(&mut self, db: u8, key: &[u8]) {
        self.delete(meta_key(db, key));
    }

    /// Deletes `key` if it is live; true if it was. A store command's
    /// destination is dropped this way, so replacing a missing key writes
    /// nothing and does not touch its watchers (Redis's `dbDelete` rule).
    pub fn delete_if_live(&mut self, db: u8, key: &[u8]) -> Result<bool> {
        if self.get_meta(db, key)?.is_none() {
            return Ok(false);
        }
        self.delete_meta(db, key);
        Ok(true)
    }

    /// Deletes every key starting with `prefix`.
    pub fn delete_prefix(&mut self, prefix: &[u8]) {
        let end = prefix_end(prefix).unwrap_or_else(|| vec![0xff; prefix.len() + 1]);
        let doomed: Vec<Vec<u8>> = self
            .writes
            .range::<[u8], _>((Bound::Included(prefix), Bound::Excluded(end.as_slice())))
            .map(|(k, _)| k.clone())
            .collect();
        for k in doomed {
            let prev = self.writes.remove(&k);
            if let Some(undo) = &mut self.undo {
                undo.push(Undo::Write(k, prev));
            }
        }
        self.write_gen += 1;
        self.ranges.push((prefix.to_vec(), end));
        if let Some(undo) = &mut self.undo {
            undo.push(Undo::Range);
        }
    }

    /// Calls `f(key, value)` for the keys starting with `prefix`, in key
    /// order (`reverse`: descending), from `start` inclusive (default: the
    /// first, or last, key of the prefix), until `f` returns false.
    pub fn scan(
        &self,
        prefix: &[u8],
        start: Option<&[u8]>,
        reverse: bool,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let end = prefix_end(prefix);
        let opts = ReadOptions {
            snapshot: self.ro.snapshot.clone(),
            lower_bound: Some(prefix.to_vec()),
            upper_bound: end.clone(),
            ..ReadOptions::default()
        };
        // Buffered writes in the walked part of the range, in walk order.
        let hi = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut own: Vec<(&[u8], Option<&[u8]>)> = self
            .writes
            .range::<[u8], _>((Bound::Included(prefix), hi))
            .map(|(k, v)| (k.as_slice(), v.as_deref()))
            .filter(|(k, _)| match start {
                None => true,
                Some(s) if reverse => *k <= s,
                Some(s) => *k >= s,
            })
            .collect();
        if reverse {
            own.reverse();
        }
        let mut it = self.st.engine().iter_cf(&opts, self.st.cf())?;
        match (start, reverse) {
            (Some(s), false) => it.seek(s)?,
            (None, false) => it.seek(prefix)?,
            (Some(s), true) => it.seek_for_prev(s)?,
            (None, true) => it.seek_to_last()?,
        }
        let mut own = own.into_iter().peekable();
        loop {
            let engine_key = it.valid().then(|| it.key());
            let take_own = match (engine_key, own.peek()) {
                (None, None) => break,
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (Some(e), Some((o, _))) => {
                    if reverse {
                        *o >= e
                    } else {
                        *o <= e
                    }
                }
            };
            if take_own {
                let Some((k, v)) = own.next() else { break };
                if engine_key == Some(k) {
                    step(&mut it, reverse)?;
                }
                if let Some(v) = v {
                    if !f(k, v) {
                        return Ok(());
                    }
                }
            } else {
                if !self.in_ranges(it.key()) && !f(it.key(), it.value()) {
                    return Ok(());
                }
                step(&mut it, reverse)?;
            }
        }
        if let Some(e) = it.status() {
            return Err(StoreError::Engine(e.clone()));
        }
        Ok(())
    }

    /// Live keys of `db` from `start` (a user key, inclusive): calls
    /// `f(key, meta)` until it returns false.
    pub fn scan_keys(
        &self,
        db: u8,
        start: Option<&[u8]>,
        mut f: impl FnMut(&[u8], &Meta) -> bool,
    ) -> Result<()> {
        let prefix = [b'M', db];
        let start_key = start.map(|s| meta_key(db, s));
        let mut err = None;
        let now = self.now;
        self.scan(
            &prefix,
            start_key.as_deref(),
            false,
            |k, v| match Meta::decode(v) {
                Ok(m) if m.expired(now) => true,
                Ok(m) => f(k.get(2..).unwrap_or_default(), &m),
                Err(e) => {
                    err = Some(e);
                    false
                }
            },
        )?;
        err.map_or(Ok(()), Err)
    }

    /// Writes everything buffered as one batch (one WAL record), then marks
    /// the watchers of the written keys dirty, still under the locks; under
    /// `appendfsync always` it then releases the locks and waits for the
    /// batch's fsync.
    pub fn commit(mut self) -> Result<()> {
        if self.writes.is_empty() && self.ranges.is_empty() && self.swap.is_none() {
            return Ok(());
        }
        let w = self.st.watches();
        // FLUSHDB judges the watched keys of the db by what existed before
        // it (Redis's touchAllWatchedKeysInDb), read before the batch lands.
        let from = self.swap.as_ref().map_or(0, |p| p.ranges_judged);
        let map = *self.map_now();
        let mut flushed = self.flush_judged(from, &map)?;
        let cf = self.st.cf();
        let mut b = WriteBatch::new();
        for (begin, end) in &self.ranges {
            b.delete_range_cf(cf, begin, end);
        }
        for (k, v) in &self.writes {
            match v {
                Some(v) => b.put_cf(cf, k, v),
                None => b.delete_cf(cf, k),
            }
        }
        if let Some(p) = &self.swap {
            b.put_cf(cf, crate::dbmap::DB_MAP_KEY, &p.map.encode());
        }
        let wo = self.st.write_options();
        // Under `always` the batch goes in unsynced (logged, visible) and
        // the fsync is waited for below, after the key locks are released:
        // the next writer of these keys then writes while this fsync runs
        // and shares the next one (docs/architecture.md, "Pipelined group
        // commit"). The reply still waits for durability.
        let mark = if wo.sync {
            Some(self.st.engine().write_unsynced(b)?)
        } else {
            self.st.engine().write(&wo, b)?;
            None
        };
        self.st.committed(&wo);
        self.install_map();
        self.invalidate_tracked();
        if w.any() {
            if let Some(p) = &mut self.swap {
                flushed.append(&mut p.flushed);
                flushed.append(&mut p.judged);
                for (db, key) in &p.written_before {
                    w.touch(*db, key, false);
                }
            }
            for (db, keys) in &flushed {
                w.touch_all_in_db(*db, keys);
            }
            let mut last: Option<(u8, &[u8])> = None;
            for k in self.writes.keys() {
                let owner = owner_of(k);
                if owner.is_some() && owner != last {
                    if let Some((db, key)) = owner {
                        w.touch(map.logical(db), key, self.expiry_sweep);
                    }
                    last = owner;
                }
            }
        }
        if let Some(mark) = mark {
            let st = self.st;
            drop(self);
            st.engine().sync_to(mark)?;
            COMMIT_WAITED.with(|w| w.set(true));
        }
        Ok(())
    }
}

thread_local! {
    /// Set by a commit that waited for its fsync (`appendfsync always`):
    /// everything its command read lies before its own record, so the
    /// reply needs no further wait (see `commands::dispatch`).
    static COMMIT_WAITED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether a commit on this thread waited for its fsync since the last
/// call; resets the flag.
pub fn take_commit_waited() -> bool {
    COMMIT_WAITED.with(|w| w.replace(false))
}

impl Tx<'_> {
    /// Tells client tracking what this commit modified: the keys of every
    /// written record, each once, and a flush for a range delete.
    fn invalidate_tracked(&self) {
        let t = self.st.tracking();
        if !t.any() {
            return;
        }
        // SWAPDB changes what every key of two databases reads as.
        if !self.ranges.is_empty() || self.swap.is_some() {
            t.flush(self.client);
        }
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut seen = BTreeSet::new();
        for k in self.writes.keys() {
            if let Some((_, key)) = owner_of(k) {
                if seen.insert(key) {
                    keys.push(key.to_vec());
                }
            }
        }
        t.invalidate(self.client, &keys);
    }
}

fn step(it: &mut shaledb::DbIterator, reverse: bool) -> Result<()> {
    if reverse {
        it.prev()?;
    } else {
        it.next()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn store(dir: &std::path::Path) -> Store {
        Store::open(shaledb::Db::open(dir, shaledb::Options::default()).unwrap()).unwrap()
    }

    fn walk(tx: &Tx, prefix: &[u8], start: Option<&[u8]>, reverse: bool) -> Vec<(String, String)> {
        let mut out = Vec::new();
        tx.scan(prefix, start, reverse, |k, v| {
            out.push((
                String::from_utf8_lossy(k).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ));
            true
        })
        .unwrap();
        out
    }

    fn keys(v: &[(String, String)]) -> Vec<&str> {
        v.iter().map(|(k, _)| k.as_str()).collect()
    }

    /// Buffered puts, deletes and range deletes merged with the engine, in
    /// both directions and from a start key; then committed as one batch.
    #[test]
    fn scan_merges_buffer_with_engine_both_ways() {
        let dir = tempfile::tempdir().unwrap();
        let st = store(dir.path());
        let mut t = Tx::new(&st);
        for k in ["pa", "pc", "pe", "pg", "q1"] {
            t.put(k.as_bytes().to_vec(), b"old".to_vec());
        }
        t.commit().unwrap();

        let mut t = Tx::new(&st);
        t.put(b"pb".to_vec(), b"new".to_vec()); // insert between engine keys
        t.put(b"pc".to_vec(), b"new".to_vec()); // shadow an engine key
        t.delete(b"pe".to_vec()); // hide an engine key
        t.put(b"ph".to_vec(), b"new".to_vec()); // after the last engine key
        let fwd = walk(&t, b"p", None, false);
        assert_eq!(keys(&fwd), ["pa", "pb", "pc", "pg", "ph"]);
        assert_eq!(fwd[2].1, "new");
        let rev = walk(&t, b"p", None, true);
        assert_eq!(keys(&rev), ["ph", "pg", "pc", "pb", "pa"]);
        assert_eq!(
            keys(&walk(&t, b"p", Some(b"pc"), false)),
            ["pc", "pg", "ph"]
        );
        assert_eq!(keys(&walk(&t, b"p", Some(b"pd"), true)), ["pc", "pb", "pa"]);
        assert_eq!(t.get(b"pe").unwrap(), None);
        assert_eq!(t.get(b"pc").unwrap().unwrap(), b"new");

        // A range delete hides engine keys; later puts in the range show.
        t.delete_prefix(b"p");
        assert!(walk(&t, b"p", None, false).is_empty());
        t.put(b"pz".to_vec(), b"after".to_vec());
        assert_eq!(keys(&walk(&t, b"p", None, true)), ["pz"]);
        assert_eq!(t.get(b"pa").unwrap(), None);
        assert_eq!(keys(&walk(&t, b"q", None, false)), ["q1"]);
        t.commit().unwrap();

        let t = Tx::new(&st);
        assert_eq!(keys(&walk(&t, b"p", None, false)), ["pz"]);
        assert_eq!(keys(&walk(&t, b"q", None, false)), ["q1"]);
    }

    /// rollback_to undoes puts, deletes and range deletes since the mark.
    #[test]
    fn rollback_to_mark_undoes_only_later_changes() {
        let dir = tempfile::tempdir().unwrap();
        let st = store(dir.path());
        let mut t = Tx::new(&st);
        t.put(b"a1".to_vec(), b"x".to_vec());
        t.commit().unwrap();

        let mut t = Tx::new(&st);
        t.enable_undo();
        t.put(b"a2".to_vec(), b"kept".to_vec());
        let mark = t.mark();
        t.put(b"a2".to_vec(), b"changed".to_vec());
        t.put(b"a3".to_vec(), b"gone".to_vec());
        t.delete(b"a1".to_vec());
        t.delete_prefix(b"a");
        assert!(walk(&t, b"a", None, false).is_empty());
        t.rollback_to(mark);
        let got = walk(&t, b"a", None, false);
        assert_eq!(keys(&got), ["a1", "a2"]);
        assert_eq!(got[1].1, "kept");
        t.commit().unwrap();
        let t = Tx::new(&st);
        assert_eq!(keys(&walk(&t, b"a", None, false)), ["a1", "a2"]);
    }
}
