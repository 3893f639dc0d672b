//! The database map a transaction runs under, and SWAPDB.
//!
//! Every [`Tx`] holds the store's [`DbMap`] locked for its whole life:
//! shared by ordinary commands, exclusive for a transaction that may run
//! SWAPDB ([`Tx::new_swapping`]). Commands turn the client's logical
//! database into the physical one of record keys with [`Tx::phys`];
//! what is kept per logical database (WATCHes, blocked clients) gets the
//! logical number back from [`Tx::logical`]. Because a swap waits for
//! every other transaction to end, a command never sees the map change
//! between its reads and its writes.
//!
//! [`Tx::swap_dbs`] changes only this transaction's copy of the map and
//! judges the watched keys of both databases (Redis 7.0's
//! `touchAllWatchedKeysInDb`) against what they hold before the swap.
//! [`Tx::commit`] writes the map record in the same batch as everything
//! else and, once the batch is in, installs the new map; a failed commit
//! leaves the old one.

use super::Tx;
use crate::dbmap::DbMap;
use crate::store::{meta_key, owner_of, DbKey, Meta, Result, StoreError};
use crate::watches::{Presence, Replaced};
use parking_lot::{RwLockReadGuard, RwLockWriteGuard};
use shaledb::ReadOptions;

/// How a transaction holds the database map.
pub(super) enum MapLock<'a> {
    Shared(RwLockReadGuard<'a, DbMap>),
    Exclusive(RwLockWriteGuard<'a, DbMap>),
}

/// The effects of the SWAPDBs a transaction ran, applied at commit.
#[derive(Default)]
pub(super) struct PendingSwap {
    /// The map after every swap so far.
    pub map: DbMap,
    /// Watched keys judged by each swap: (logical db, keys).
    pub judged: Vec<(u8, Vec<Replaced>)>,
    /// FLUSHDBs buffered before a swap, judged under the map they ran with.
    pub flushed: Vec<(u8, Vec<Replaced>)>,
    /// How many of the transaction's range deletes `flushed` covers.
    pub ranges_judged: usize,
    /// The logical keys of the writes buffered before a swap (touched at
    /// commit as well as under the final map: a watcher may be dirtied
    /// once more than needed, never missed).
    pub written_before: Vec<DbKey>,
    /// Keys clients are blocked on in the swapped databases: they may
    /// have data now (Redis's `scanDatabaseForReadyKeys`).
    pub ready: Vec<DbKey>,
}

impl<'a> Tx<'a> {
    /// The map this transaction runs under (its own after a SWAPDB).
    pub(super) fn map_now(&self) -> &DbMap {
        match (&self.swap, &self.map) {
            (Some(p), _) => &p.map,
            (None, MapLock::Shared(g)) => g,
            (None, MapLock::Exclusive(g)) => g,
        }
    }

    /// The physical database (the `db` byte of record keys) of logical
    /// database `db`.
    pub fn phys(&self, db: u8) -> u8 {
        self.map_now().physical(db)
    }

    /// The logical database of physical database `db`.
    pub fn logical(&self, db: u8) -> u8 {
        self.map_now().logical(db)
    }

    /// What physical database `db` holds under `key`, as this transaction
    /// sees it.
    fn presence(&self, db: u8, key: &[u8]) -> Result<Presence> {
        presence_of(self.get(&meta_key(db, key))?, self.now)
    }

    /// SWAPDB `a` `b` (logical): from here on this transaction runs under
    /// the swapped map; commit makes it everyone's. `ready`: the keys
    /// clients are blocked on in `a` and `b`.
    pub fn swap_dbs(&mut self, a: u8, b: u8, ready: Vec<DbKey>) -> Result<()> {
        if !matches!(self.map, MapLock::Exclusive(_)) {
            return Err(StoreError::MapNotExclusive);
        }
        let old = *self.map_now();
        let w = self.st.watches();
        let mut judged = Vec::new();
        for (db, other) in [(a, b), (b, a)] {
            let mut keys = Vec::new();
            for key in w.keys_of_db(db) {
                let emptied = self.presence(old.physical(db), &key)?;
                let replaced = self.presence(old.physical(other), &key)?;
                keys.push((key, emptied, Some(replaced)));
            }
            judged.push((db, keys));
        }
        let from = self.swap.as_ref().map_or(0, |p| p.ranges_judged);
        let flushed = self.flush_judged(from, &old)?;
        let written: Vec<DbKey> = self
            .writes
            .keys()
            .filter_map(|k| owner_of(k))
            .map(|(db, key)| (old.logical(db), key.to_vec()))
            .collect();
        let ranges = self.ranges.len();
        let p = self.swap.get_or_insert_with(Box::default);
        p.map = old.swapped(a, b);
        p.judged.extend(judged);
        p.flushed.extend(flushed);
        p.ranges_judged = ranges;
        p.written_before.extend(written);
        p.ready.extend(ready);
        self.write_gen += 1;
        Ok(())
    }

    /// The watched keys of the databases emptied by range deletes
    /// `ranges[from..]` (FLUSHDB's `M|db` ranges), judged against the
    /// engine before the batch lands; `map` names their logical databases.
    pub(super) fn flush_judged(
        &self,
        from: usize,
        map: &DbMap,
    ) -> Result<Vec<(u8, Vec<Replaced>)>> {
        let w = self.st.watches();
        let mut out = Vec::new();
        if !w.any() {
            return Ok(out);
        }
        for (begin, _) in self.ranges.iter().skip(from) {
            let (Some(&b'M'), Some(&db)) = (begin.first(), begin.get(1)) else {
                continue;
            };
            let logical = map.logical(db);
            let mut keys = Vec::new();
            for key in w.keys_of_db(logical) {
                let raw = self.st.engine().get_opt(
                    &ReadOptions::default(),
                    self.st.cf(),
                    &meta_key(db, &key),
                )?;
                keys.push((key, presence_of(raw, self.now)?, None));
            }
            out.push((logical, keys));
        }
        Ok(out)
    }

    /// Installs the swapped map once the batch carrying its record is in.
    pub(super) fn install_map(&mut self) {
        if let (Some(p), MapLock::Exclusive(g)) = (&self.swap, &mut self.map) {
            **g = p.map;
        }
    }
}

/// What a metadata record (or its absence) means at time `now`.
fn presence_of(raw: Option<Vec<u8>>, now: u64) -> Result<Presence> {
    Ok(match raw {
        None => Presence::Absent,
        Some(raw) if Meta::decode(&raw)?.expired(now) => Presence::Expired,
        Some(_) => Presence::Live,
    })
}
