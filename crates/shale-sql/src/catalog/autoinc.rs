//! Auto-increment counters, and claims: how an INSERT whose primary key
//! takes a generated value skips the lookup that checks the key is new.
//!
//! # Counters
//!
//! Each table has a counter `next` in memory and a persisted high-water
//! mark in the dictionary (`A` + table id, written through the WAL before
//! any row that uses a value below it), reserved [`AUTOINC_BATCH`] values
//! at a time, so a value is never handed out twice, even after kill -9.
//! An explicit value `v >= next` in a written row moves `next` past it
//! ([`Catalog::note_autoinc`]).
//!
//! # Claims (why a generated key needs no existence check)
//!
//! An INSERT normally locks its primary key and reads it, to report a
//! duplicate (`Txn::get_for_update_cf`); under sysbench's `oltp_insert`
//! that read was ~7 % of the server's CPU, for keys that are new by
//! construction. A generated value is new if no row holds it, and:
//!
//! - **Invariant N (noted before locked).** Every path that writes a row
//!   whose auto-increment column holds an explicit value `v` calls
//!   `note_autoinc(v)` before it locks the row's primary key: INSERT and
//!   REPLACE (`Dml::insert`, before `insert_row`), UPDATE (`dml/target.rs`,
//!   before `update_row`), ON DUPLICATE KEY UPDATE (`insert_row`, before
//!   `update_row`). A column cannot become AUTO_INCREMENT after rows were
//!   written without notes (`ddl.rs` refuses MODIFY/CHANGE that adds it;
//!   ADD COLUMN cannot carry it), TRUNCATE empties the table when it
//!   resets the counter, and a hidden primary key's row ids are never
//!   written explicitly.
//!
//! [`Catalog::claim_autoinc`] hands out `v` and records it as *pending*
//! under the counters' mutex; a note of a pending value marks it
//! *contested*. The INSERT then tries its primary key's lock without
//! waiting (`Txn::try_lock_fresh_cf`) and, holding it, confirms the claim
//! ([`Claim::confirm`]: removes it, true if uncontested). Only a confirmed
//! claim skips the read. Suppose another transaction B writes a row
//! holding `v`:
//!
//! - B noted `v` before the claim: then `next > v` and the claim cannot
//!   hand out `v`.
//! - B noted `v` between the claim and the confirmation: `v` was pending,
//!   so it is contested and the INSERT reads the key as before.
//! - B noted `v` after the confirmation: the INSERT holds the key's lock
//!   from before the confirmation to its commit or rollback; B locks the
//!   key after its note (N), so it waits, and then finds the row (or a
//!   write conflict) as any second writer of a key does.
//!
//! Rows written before the claim hold values below `next` by N, and rows
//! of another transaction that locked the key first make the try-lock
//! fail (the INSERT then waits and reads as before). A claim dropped
//! unconfirmed (an error, a failed try) is removed by its `Drop`.

use super::{autoinc_key, frame, unframe, Catalog, Counter};
use crate::error::{Error, Result};
use shaledb::WriteBatch;
use std::collections::HashMap;

/// How many auto-increment values one dictionary write reserves.
const AUTOINC_BATCH: u64 = 1024;

#[derive(Default, Clone, Copy)]
struct AutoIncCounter {
    next: u64,
    /// Values below this are covered by the persisted high-water mark.
    reserved: u64,
}

/// The counters and the pending claims, under one mutex
/// (`Catalog::autoinc`) so that a claim and a note are ordered.
#[derive(Default)]
pub(super) struct AutoIncState {
    counters: HashMap<u32, AutoIncCounter, foldhash::fast::RandomState>,
    /// `(table id, value)` handed out and not yet confirmed: `true` once
    /// an explicit value equal to it was noted.
    pending: HashMap<(u32, u64), bool, foldhash::fast::RandomState>,
}

/// A generated value whose row has not locked its key yet; see the module
/// documentation.
pub struct Claim<'a> {
    cat: &'a Catalog,
    table_id: u32,
    /// The value handed out.
    pub value: u64,
    open: bool,
}

impl Claim<'_> {
    /// Call while holding the lock of the row's primary key: true if no
    /// explicit write of this value was noted since it was handed out, so
    /// no row holds the key.
    pub fn confirm(mut self) -> bool {
        self.open = false;
        let contested = self
            .cat
            .autoinc
            .lock()
            .pending
            .remove(&(self.table_id, self.value));
        contested == Some(false)
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if self.open {
            self.cat
                .autoinc
                .lock()
                .pending
                .remove(&(self.table_id, self.value));
        }
    }
}

impl Catalog {
    /// Resets a table's auto-increment counter (TRUNCATE), in `batch`.
    pub fn reset_autoinc(&self, table_id: u32, batch: &mut WriteBatch) {
        batch.delete_cf(self.dict_cf, &autoinc_key(table_id));
        self.autoinc.lock().counters.remove(&table_id);
    }

    /// Forgets a dropped table's counter.
    pub(super) fn forget_autoinc(&self, table_id: u32) {
        self.autoinc.lock().counters.remove(&table_id);
    }

    fn counter(&self, state: &AutoIncState, table_id: u32) -> Result<AutoIncCounter> {
        if let Some(a) = state.counters.get(&table_id) {
            return Ok(*a);
        }
        let persisted = match self.db.get_cf(self.dict_cf, &autoinc_key(table_id))? {
            Some(v) => unframe::<Counter>(&v, "auto-increment counter")?.value,
            None => 1,
        };
        Ok(AutoIncCounter {
            next: persisted,
            reserved: persisted,
        })
    }

    /// Hands out the next auto-increment value of a table. The persisted
    /// high-water mark is written whenever the handed-out values pass it.
    /// The mutex is held throughout, so concurrent sessions get distinct
    /// values.
    pub fn next_autoinc(&self, table_id: u32) -> Result<u64> {
        let mut state = self.autoinc.lock();
        self.take_next(&mut state, table_id)
    }

    /// [`Catalog::next_autoinc`], recording the value as pending until the
    /// returned claim is confirmed or dropped.
    pub fn claim_autoinc(&self, table_id: u32) -> Result<Claim<'_>> {
        let mut state = self.autoinc.lock();
        let value = self.take_next(&mut state, table_id)?;
        state.pending.insert((table_id, value), false);
        Ok(Claim {
            cat: self,
            table_id,
            value,
            open: true,
        })
    }

    /// [`Catalog::claim_autoinc`] into `slot` (an INSERT's one claim per
    /// row; a claim already there is dropped); returns the value.
    pub fn claim_autoinc_into<'c>(
        &'c self,
        table_id: u32,
        slot: &mut Option<Claim<'c>>,
    ) -> Result<u64> {
        let claim = self.claim_autoinc(table_id)?;
        let value = claim.value;
        *slot = Some(claim);
        Ok(value)
    }

    fn take_next(&self, state: &mut AutoIncState, table_id: u32) -> Result<u64> {
        let mut a = self.counter(state, table_id)?;
        let v = a.next;
        a.next = v
            .checked_add(1)
            .ok_or_else(|| Error::OutOfRange("auto_increment".into(), 0))?;
        self.reserve(&mut a, table_id)?;
        state.counters.insert(table_id, a);
        Ok(v)
    }

    /// An explicit value `v` is about to be written: later values start
    /// above it, and a pending claim of `v` is contested.
    pub fn note_autoinc(&self, table_id: u32, v: u64) -> Result<()> {
        let mut state = self.autoinc.lock();
        let mut a = self.counter(&state, table_id)?;
        if v >= a.next {
            a.next = v.saturating_add(1);
            self.reserve(&mut a, table_id)?;
        }
        // Kept even when unchanged: an explicit id below the counter (every
        // INSERT of sysbench's write_only) otherwise read the persisted
        // counter from the dictionary again each time.
        state.counters.insert(table_id, a);
        if let Some(contested) = state.pending.get_mut(&(table_id, v)) {
            *contested = true;
        }
        Ok(())
    }

    fn reserve(&self, a: &mut AutoIncCounter, table_id: u32) -> Result<()> {
        if a.next > a.reserved {
            let reserved = a.next.saturating_add(AUTOINC_BATCH);
            self.db.put_cf(
                self.dict_cf,
                &autoinc_key(table_id),
                &frame(&Counter { value: reserved }),
            )?;
            a.reserved = reserved;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use crate::catalog::Catalog;

    fn catalog() -> (tempfile::TempDir, Catalog) {
        let dir = tempfile::tempdir().unwrap();
        let db = shaledb::Db::open(dir.path(), shaledb::Options::default()).unwrap();
        (dir, Catalog::open(db).unwrap())
    }

    #[test]
    fn a_claim_holds_unless_its_value_is_noted_before_it_is_confirmed() {
        let (_dir, cat) = catalog();
        let a = cat.claim_autoinc(7).unwrap();
        assert_eq!(a.value, 1);
        assert!(a.confirm(), "nothing noted: the key is new");
        let b = cat.claim_autoinc(7).unwrap();
        assert_eq!(b.value, 2);
        cat.note_autoinc(7, 2).unwrap(); // an explicit write of 2
        assert!(!b.confirm(), "contested: the insert must look the key up");
        // A note of another table's value or another value leaves a claim alone.
        let c = cat.claim_autoinc(7).unwrap();
        cat.note_autoinc(8, c.value).unwrap();
        cat.note_autoinc(7, c.value + 5).unwrap();
        assert!(c.confirm());
        // A value noted first is never handed out.
        let d = cat.claim_autoinc(7).unwrap();
        assert_eq!(d.value, 3 + 5 + 1);
        drop(d);
        assert!(
            cat.autoinc.lock().pending.is_empty(),
            "a dropped claim is removed"
        );
    }
}
