//! Who WATCHes which key: `(db, key)` -> the dirty flags of the watching
//! connections. `db` is the logical database (SELECT's number, not the
//! physical one in record keys, see `crate::dbmap`): a WATCH stays on the
//! database the client selected, across SWAPDB, as in Redis.
//!
//! A committed write to a key sets its watchers' flags (under the key's
//! lock, before the lock is released), so EXEC, which checks its flag
//! under every lock, sees every write that happened since WATCH.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// A watching connection: its id, its dirty flag, and whether the key was
/// expired (present, but not live) when it was watched; FLUSHDB and
/// SWAPDB may clear or set that last flag ([`Watches::touch_all_in_db`]).
type Watcher = (u64, Arc<AtomicBool>, bool);
/// A key of one logical database.
pub type DbKey = (u8, Vec<u8>);

/// What a database holds under a key: Redis's `dictFind` finds expired
/// keys not yet deleted, which FLUSHDB and SWAPDB treat apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    Absent,
    Expired,
    Live,
}

impl Presence {
    fn exists(self) -> bool {
        self != Presence::Absent
    }
}

/// One watched key of a database that FLUSHDB empties or SWAPDB replaces:
/// the key, what the database held under it, and (SWAPDB only) what the
/// database replacing it holds.
pub type Replaced = (Vec<u8>, Presence, Option<Presence>);

#[derive(Default)]
pub struct Watches {
    /// Number of watched (db, key, client) entries: writes skip the map when 0.
    count: AtomicU64,
    map: Mutex<HashMap<DbKey, Vec<Watcher>>>,
}

impl Watches {
    /// `client` watches `(db, key)`; `expired`: the key is present but
    /// expired now.
    pub fn watch(&self, db: u8, key: &[u8], client: u64, flag: &Arc<AtomicBool>, expired: bool) {
        let mut m = self.map.lock();
        let list = m.entry((db, key.to_vec())).or_default();
        if !list.iter().any(|(c, _, _)| *c == client) {
            list.push((client, flag.clone(), expired));
            self.count.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Removes `client` from the watchers of `keys`.
    pub fn unwatch(&self, client: u64, keys: &[DbKey]) {
        let mut m = self.map.lock();
        for k in keys {
            if let Some(list) = m.get_mut(k) {
                let before = list.len();
                list.retain(|(c, _, _)| *c != client);
                let gone = (before - list.len()) as u64;
                self.count.fetch_sub(gone, Ordering::SeqCst);
                if list.is_empty() {
                    m.remove(k);
                }
            }
        }
    }

    pub fn any(&self) -> bool {
        self.count.load(Ordering::SeqCst) > 0
    }

    /// Whether `client`'s watch of `(db, key)` is flagged expired (EXEC:
    /// a key expired since WATCH counts as changed, one that was expired
    /// already does not).
    pub fn was_expired(&self, db: u8, key: &[u8], client: u64) -> bool {
        self.map
            .lock()
            .get(&(db, key.to_vec()))
            .and_then(|list| list.iter().find(|(c, _, _)| *c == client))
            .is_some_and(|(_, _, expired)| *expired)
    }

    /// Marks the watchers of `(db, key)` dirty. `expiry`: the active expiry
    /// cycle deleted the key, which does not change it for a client that
    /// watched it already expired (Redis 7.0's `touchWatchedKey`).
    pub fn touch(&self, db: u8, key: &[u8], expiry: bool) {
        if let Some(list) = self.map.lock().get(&(db, key.to_vec())) {
            for (_, f, expired) in list {
                if !(expiry && *expired) {
                    f.store(true, Ordering::SeqCst);
                }
            }
        }
    }

    /// The watched keys of `db` (FLUSHDB and SWAPDB judge those).
    pub fn keys_of_db(&self, db: u8) -> Vec<Vec<u8>> {
        self.map
            .lock()
            .keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, k)| k.clone())
            .collect()
    }

    /// Redis 7.0's `touchAllWatchedKeysInDb`: database `db` was emptied
    /// (FLUSHDB: every `Replaced` has `None`) or replaced by another
    /// (SWAPDB: what that one holds). A key present in neither changes
    /// nothing; otherwise a watcher is dirtied, except that an expired key
    /// now gone, or still expired, is no change for a watcher who saw it
    /// expired (its flag is cleared when the key is gone), and a missing
    /// key replaced by an expired one only flags the watcher expired.
    pub fn touch_all_in_db(&self, db: u8, keys: &[Replaced]) {
        let mut m = self.map.lock();
        for (key, emptied, replaced) in keys {
            let replaced_exists = replaced.is_some_and(Presence::exists);
            if !emptied.exists() && !replaced_exists {
                continue;
            }
            let Some(list) = m.get_mut(&(db, key.clone())) else {
                continue;
            };
            for (_, flag, expired) in list.iter_mut() {
                if *expired {
                    if !replaced_exists {
                        *expired = false;
                        continue;
                    }
                    if *replaced == Some(Presence::Expired) {
                        continue;
                    }
                } else if !emptied.exists() && *replaced == Some(Presence::Expired) {
                    *expired = true;
                    continue;
                }
                flag.store(true, Ordering::SeqCst);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watched(w: &Watches, db: u8, key: &[u8], expired: bool) -> Arc<AtomicBool> {
        let flag = Arc::new(AtomicBool::new(false));
        w.watch(db, key, 7, &flag, expired);
        flag
    }

    /// The cases of Redis 7.0's `touchAllWatchedKeysInDb`, one key each.
    #[test]
    fn touch_all_follows_redis_rules() {
        use Presence::*;
        let w = Watches::default();
        // key, watched expired, emptied, replaced -> dirty, flag after
        type Case = (&'static [u8], bool, Presence, Option<Presence>, bool, bool);
        let cases: [Case; 8] = [
            (b"flushed", false, Live, None, true, false),
            (b"flushed-expired", true, Expired, None, false, false),
            (b"absent", false, Absent, None, false, false),
            (b"swapped-in", false, Absent, Some(Live), true, false),
            (b"neither", false, Absent, Some(Absent), false, false),
            (
                b"expired-to-expired",
                true,
                Expired,
                Some(Expired),
                false,
                true,
            ),
            (b"expired-to-live", true, Expired, Some(Live), true, true),
            (
                b"absent-to-expired",
                false,
                Absent,
                Some(Expired),
                false,
                true,
            ),
        ];
        let flags: Vec<_> = cases
            .iter()
            .map(|(k, exp, ..)| watched(&w, 1, k, *exp))
            .collect();
        let keys: Vec<Replaced> = cases
            .iter()
            .map(|(k, _, e, r, ..)| (k.to_vec(), *e, *r))
            .collect();
        w.touch_all_in_db(1, &keys);
        for ((k, _, _, _, dirty, flag_after), f) in cases.iter().zip(&flags) {
            let name = String::from_utf8_lossy(k);
            assert_eq!(f.load(Ordering::SeqCst), *dirty, "{name} dirty");
            assert_eq!(w.was_expired(1, k, 7), *flag_after, "{name} flag");
        }
        // Another database's watchers are not judged.
        let other = watched(&w, 2, b"flushed", false);
        w.touch_all_in_db(1, &keys);
        assert!(!other.load(Ordering::SeqCst));
    }
}
