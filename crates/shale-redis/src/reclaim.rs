//! Reclaiming stale sub-records (docs/redis.md, "Reclaiming stale
//! sub-records"): a compaction filter on the `redis` column family that
//! drops the `S` and `Z` records of key versions no reader can reach.
//!
//! A record `S|db|keylen|key|version|...` (or `Z|...`) written at sequence
//! `e` is dropped when, at the filter's snapshot `O` (the oldest live
//! snapshot, or the latest state when there is none), `e <= O` and the
//! key's metadata is missing or has another version. The argument is in
//! the docs; in short, a version's records are live from its metadata's
//! creation to its deletion or replacement, a version never comes back
//! (versions only grow), and every reader reads at or above `O`.

use crate::store::{meta_key, Meta};
use parking_lot::RwLock;
use shaledb::{CfId, CompactionFilter, CompactionFilterFactory, Db, ReadOptions, Snapshot};
use std::sync::Arc;

/// The engine handle the filters read through. `Store` empties it when it
/// goes away, which breaks the cycle engine -> filter -> engine.
pub(crate) type DbSlot = Arc<RwLock<Option<Db>>>;

/// Registered on the `redis` column family by `Store::open`.
pub(crate) struct StaleFilters {
    pub(crate) slot: DbSlot,
    pub(crate) cf: CfId,
}

impl CompactionFilterFactory for StaleFilters {
    fn create(&self) -> Box<dyn CompactionFilter> {
        let snapshot = self.slot.read().as_ref().map(Db::oldest_snapshot);
        Box::new(StaleJob {
            slot: self.slot.clone(),
            cf: self.cf,
            snapshot,
            last: None,
        })
    }
}

/// One merge job's filter.
struct StaleJob {
    slot: DbSlot,
    cf: CfId,
    /// `O`; `None` when the store is closing (then nothing is dropped).
    snapshot: Option<Snapshot>,
    /// The last key looked up. Records arrive in key order, so one key's
    /// records (of every version) come together.
    last: Option<Looked>,
}

/// A metadata lookup: the key and its live version at `O` (`None`: no
/// metadata).
struct Looked {
    db: u8,
    key: Vec<u8>,
    version: Option<u64>,
}

/// `(db, key, version)` of an `S` or `Z` record key.
pub(crate) fn parse_sub(record: &[u8]) -> Option<(u8, &[u8], u64)> {
    let (&tag, rest) = record.split_first()?;
    if tag != b'S' && tag != b'Z' {
        return None;
    }
    let (&db, rest) = rest.split_first()?;
    let mut n = [0u8; 4];
    n.copy_from_slice(rest.get(..4)?);
    let len = usize::try_from(u32::from_be_bytes(n)).ok()?;
    let key = rest.get(4..4 + len)?;
    let mut v = [0u8; 8];
    v.copy_from_slice(rest.get(4 + len..4 + len + 8)?);
    Some((db, key, u64::from_be_bytes(v)))
}

impl StaleJob {
    /// The key's live version at `O`: `Ok(None)` when it has no metadata,
    /// `Err(())` when that cannot be told (then the record is kept).
    fn live_version(&mut self, db: u8, key: &[u8]) -> Result<Option<u64>, ()> {
        if let Some(l) = &self.last {
            if l.db == db && l.key == key {
                return Ok(l.version);
            }
        }
        let snapshot = self.snapshot.clone().ok_or(())?;
        let guard = self.slot.read();
        let engine = guard.as_ref().ok_or(())?;
        let ro = ReadOptions {
            snapshot: Some(snapshot),
            ..Default::default()
        };
        let found = engine
            .get_opt(&ro, self.cf, &meta_key(db, key))
            .map_err(|_| ())?;
        // A record that does not decode is kept: the filter must never
        // guess (a missing record is the only "no metadata").
        let version = match found {
            None => None,
            Some(raw) => Some(Meta::decode(&raw).map_err(|_| ())?.version),
        };
        self.last = Some(Looked {
            db,
            key: key.to_vec(),
            version,
        });
        Ok(version)
    }
}

impl CompactionFilter for StaleJob {
    fn change_value(&mut self, _user_key: &[u8], _value: &[u8]) -> Option<Vec<u8>> {
        None
    }

    fn drop_entry(&mut self, user_key: &[u8], seq: u64) -> bool {
        let Some(horizon) = self.snapshot.as_ref().map(Snapshot::sequence) else {
            return false;
        };
        // Written after `O`: its metadata may be newer than what `O` shows
        // (a key created after it), so nothing can be told from there.
        if seq > horizon {
            return false;
        }
        let Some((db, key, version)) = parse_sub(user_key) else {
            return false;
        };
        match self.live_version(db, key) {
            Ok(live) => live != Some(version),
            Err(()) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::store::{score_prefix, sub_key};

    #[test]
    fn parses_sub_and_score_records_only() {
        let s = sub_key(3, b"k\x00y", 77, b"field");
        assert_eq!(parse_sub(&s), Some((3, b"k\x00y".as_slice(), 77)));
        let mut z = score_prefix(1, b"z", 9);
        z.extend_from_slice(&[0u8; 8]);
        assert_eq!(parse_sub(&z), Some((1, b"z".as_slice(), 9)));
        assert_eq!(parse_sub(&meta_key(0, b"k")), None);
        assert_eq!(parse_sub(&s[..s.len() - 6]), None); // cut inside the version
        assert_eq!(parse_sub(b"S"), None);
    }
}
