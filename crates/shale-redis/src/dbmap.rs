//! Which physical database each logical database (SELECT's number) is:
//! the `db` byte of every record key is the physical one, and SWAPDB
//! swaps two entries of this map instead of moving any record
//! (docs/redis.md, "Database map record").
//!
//! Example: after `SWAPDB 0 1` the map is `[1, 0, 2, 3, ...]`: a client
//! that selected db 0 reads and writes records `M|0x01|...`, and one in
//! db 1 records `M|0x00|...`. A second `SWAPDB 0 1` restores the identity.
//!
//! Who may read which map: every [`crate::tx::Tx`] holds the store's map
//! under a read lock for its whole life and SWAPDB holds it under the
//! write lock, so no command runs with one map while another command
//! changes it.

use crate::store::{StoreError, DATABASES};

/// The record holding the map: key `D` (one byte, 0x44).
pub const DB_MAP_KEY: &[u8] = b"D";
/// The map record's format byte (its first byte).
const FORMAT: u8 = 1;
const LEN: usize = 1 + DATABASES as usize;

/// A permutation of `0..DATABASES`: logical -> physical, and its inverse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DbMap {
    physical: [u8; DATABASES as usize],
    logical: [u8; DATABASES as usize],
}

impl Default for DbMap {
    fn default() -> DbMap {
        DbMap::identity()
    }
}

impl DbMap {
    /// Every logical database is the physical one of the same number (a
    /// data set that never saw SWAPDB, which has no map record).
    pub fn identity() -> DbMap {
        let mut ids = [0u8; DATABASES as usize];
        for (i, slot) in (0u8..).zip(ids.iter_mut()) {
            *slot = i;
        }
        DbMap {
            physical: ids,
            logical: ids,
        }
    }

    /// The physical database of logical database `db` (`db` itself when
    /// out of range; callers check the range first).
    pub fn physical(&self, db: u8) -> u8 {
        self.physical.get(usize::from(db)).copied().unwrap_or(db)
    }

    /// The logical database whose records carry physical number `db`.
    pub fn logical(&self, db: u8) -> u8 {
        self.logical.get(usize::from(db)).copied().unwrap_or(db)
    }

    /// This map with logical databases `a` and `b` exchanged.
    pub fn swapped(&self, a: u8, b: u8) -> DbMap {
        let mut physical = self.physical;
        if usize::from(a) < physical.len() && usize::from(b) < physical.len() {
            physical.swap(usize::from(a), usize::from(b));
        }
        DbMap::from_physical(physical).unwrap_or(*self)
    }

    fn from_physical(physical: [u8; DATABASES as usize]) -> Option<DbMap> {
        let mut logical = [u8::MAX; DATABASES as usize];
        for (l, &p) in (0u8..).zip(physical.iter()) {
            let slot = logical.get_mut(usize::from(p))?;
            if *slot != u8::MAX {
                return None; // not a permutation
            }
            *slot = l;
        }
        Some(DbMap { physical, logical })
    }

    /// The record value: format byte, then the physical number of logical
    /// databases 0..16, one byte each.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(LEN);
        v.push(FORMAT);
        v.extend_from_slice(&self.physical);
        v
    }

    /// Decodes a map record; a wrong format byte or length, or bytes that
    /// are not a permutation of `0..16`, are corruption.
    pub fn decode(v: &[u8]) -> Result<DbMap, StoreError> {
        let (&format, rest) = v
            .split_first()
            .ok_or(StoreError::Corrupt("empty database map record"))?;
        if format != FORMAT {
            return Err(StoreError::Corrupt("unknown database map format"));
        }
        let physical: [u8; DATABASES as usize] = rest
            .try_into()
            .map_err(|_| StoreError::Corrupt("database map record of the wrong length"))?;
        DbMap::from_physical(physical)
            .ok_or(StoreError::Corrupt("database map is not a permutation"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn swaps_compose_and_invert() {
        let id = DbMap::identity();
        let m = id.swapped(0, 1).swapped(1, 5);
        // logical 0 -> physical 1, logical 1 -> 5, logical 5 -> 0
        assert_eq!((m.physical(0), m.physical(1), m.physical(5)), (1, 5, 0));
        for l in 0..DATABASES {
            assert_eq!(m.logical(m.physical(l)), l);
        }
        assert_eq!(m.swapped(1, 5).swapped(0, 1), id);
        assert_eq!(id.swapped(3, 3), id);
    }

    #[test]
    fn encoding_round_trips_and_refuses_damage() {
        let m = DbMap::identity().swapped(2, 15);
        let v = m.encode();
        assert_eq!(v.len(), 17);
        assert_eq!(DbMap::decode(&v).unwrap(), m);
        let mut bad_format = v.clone();
        bad_format[0] = 2;
        assert!(DbMap::decode(&bad_format).is_err());
        assert!(DbMap::decode(&v[..16]).is_err());
        assert!(DbMap::decode(&[]).is_err());
        let mut not_perm = v.clone();
        not_perm[1] = not_perm[2]; // two logical dbs on one physical
        assert!(DbMap::decode(&not_perm).is_err());
        let mut out_of_range = v;
        out_of_range[1] = 16;
        assert!(DbMap::decode(&out_of_range).is_err());
    }
}
