//! The encoding of docs/redis.md over `shaledb::Db`: metadata records,
//! hash-field sub-records, lazy expiry, versions.

use crate::durability::Appendfsync;
use parking_lot::{Mutex, MutexGuard};
use shaledb::{CfId, Db, WriteOptions};
use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use thiserror::Error;

/// Name of the engine column family holding all Redis data.
pub const CF_NAME: &str = "redis";
/// Present once every key with a TTL has its expiry index entry (written
/// by [`Store::open`] after indexing the keys of a data set made before
/// the index existed).
pub const EXPIRY_INDEXED_KEY: &[u8] = b"X";
/// Expiry index entries written per batch by that migration.
const MIGRATE_BATCH: usize = 1000;
pub use crate::watches::DbKey;

/// The record the `everysec` fsync writes (its value: the time, ms BE).
pub const FSYNC_KEY: &[u8] = b"F";
/// Logical databases (SELECT 0..16).
pub const DATABASES: u8 = 16;
const FORMAT: u8 = 1;
const META_LEN: usize = 26;
/// Number of write-lock stripes.
const STRIPES: usize = 256;

/// Held stripe locks; released on drop.
pub struct KeyLocks<'a>(#[allow(dead_code)] Vec<MutexGuard<'a, ()>>);

/// FNV-1a of (db, key), reduced to a stripe.
fn stripe(db: u8, key: &[u8]) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in std::iter::once(&db).chain(key) {
        h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % STRIPES as u64) as usize
}

/// A failure below the command layer.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("engine: {0}")]
    Engine(#[from] shaledb::Error),
    #[error("corrupt metadata record: {0}")]
    Corrupt(&'static str),
    /// SWAPDB in a transaction holding the database map shared (a bug of
    /// the caller: see `Tx::new_swapping`).
    #[error("SWAPDB needs a transaction holding the database map exclusively")]
    MapNotExclusive,
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// A Redis value type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    String,
    Hash,
    List,
    Set,
    ZSet,
}

impl Type {
    pub fn name(self) -> &'static str {
        match self {
            Type::String => "string",
            Type::Hash => "hash",
            Type::List => "list",
            Type::Set => "set",
            Type::ZSet => "zset",
        }
    }

    fn code(self) -> u8 {
        match self {
            Type::String => 0,
            Type::Hash => 1,
            Type::List => 2,
            Type::Set => 3,
            Type::ZSet => 4,
        }
    }
}

/// A decoded metadata record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub ty: Type,
    pub version: u64,
    /// ms since the epoch; 0 = none.
    pub expire_at: u64,
    /// String length, or element count of a collection.
    pub size: u64,
    /// Strings only.
    pub value: Vec<u8>,
    /// Lists only: index of the first element and one past the last
    /// (`tail - head == size`; elements are contiguous).
    pub head: i64,
    pub tail: i64,
}

impl Meta {
    /// An empty collection (or empty string) of type `ty` at `version`.
    pub fn new(ty: Type, version: u64) -> Meta {
        Meta {
            ty,
            version,
            expire_at: 0,
            size: 0,
            value: Vec::new(),
            head: 0,
            tail: 0,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(META_LEN + self.value.len());
        v.push(FORMAT);
        v.push(self.ty.code());
        v.extend_from_slice(&self.version.to_be_bytes());
        v.extend_from_slice(&self.expire_at.to_be_bytes());
        v.extend_from_slice(&self.size.to_be_bytes());
        match self.ty {
            Type::String => v.extend_from_slice(&self.value),
            Type::List => {
                v.extend_from_slice(&self.head.to_be_bytes());
                v.extend_from_slice(&self.tail.to_be_bytes());
            }
            _ => {}
        }
        v
    }

    pub fn decode(b: &[u8]) -> Result<Meta> {
        let u64_at = |o: usize| -> Result<u64> {
            let s = b.get(o..o + 8).ok_or(StoreError::Corrupt("short record"))?;
            let mut a = [0u8; 8];
            a.copy_from_slice(s);
            Ok(u64::from_be_bytes(a))
        };
        if b.first() != Some(&FORMAT) {
            return Err(StoreError::Corrupt("unknown format byte"));
        }
        let ty = match b.get(1) {
            Some(0) => Type::String,
            Some(1) => Type::Hash,
            Some(2) => Type::List,
            Some(3) => Type::Set,
            Some(4) => Type::ZSet,
            _ => return Err(StoreError::Corrupt("unknown type")),
        };
        let value = if ty == Type::String {
            b.get(META_LEN..).unwrap_or_default().to_vec()
        } else {
            Vec::new()
        };
        let (head, tail) = if ty == Type::List {
            (
                i64::from_be_bytes(u64_at(META_LEN)?.to_be_bytes()),
                i64::from_be_bytes(u64_at(META_LEN + 8)?.to_be_bytes()),
            )
        } else {
            (0, 0)
        };
        Ok(Meta {
            ty,
            version: u64_at(2)?,
            expire_at: u64_at(10)?,
            size: u64_at(18)?,
            value,
            head,
            tail,
        })
    }

    /// True when expired at `now` (ms).
    pub fn expired(&self, now: u64) -> bool {
        self.expire_at != 0 && self.expire_at <= now
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub fn meta_key(db: u8, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + key.len());
    k.push(b'M');
    k.push(db);
    k.extend_from_slice(key);
    k
}

/// `E | db | expire_at (u64 BE) | key`: the expiry index entry of a key
/// with a TTL (walked in time order by the active expiry cycle).
pub fn expiry_key(db: u8, expire_at: u64, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(10 + key.len());
    k.push(b'E');
    k.push(db);
    k.extend_from_slice(&expire_at.to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// `S | db | keylen | key | version`: the prefix of one hash's fields.
pub fn sub_prefix(db: u8, key: &[u8], version: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(14 + key.len());
    k.push(b'S');
    k.push(db);
    k.extend_from_slice(&(key.len() as u32).to_be_bytes());
    k.extend_from_slice(key);
    k.extend_from_slice(&version.to_be_bytes());
    k
}

pub fn sub_key(db: u8, key: &[u8], version: u64, field: &[u8]) -> Vec<u8> {
    let mut k = sub_prefix(db, key, version);
    k.extend_from_slice(field);
    k
}

/// The first key after every key starting with `prefix` (None: no bound).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut e = prefix.to_vec();
    while let Some(last) = e.pop() {
        if last < 0xff {
            e.push(last + 1);
            return Some(e);
        }
    }
    None
}

/// The engine column family and the locks of the Redis layer.
pub struct Store {
    db: Db,
    cf: CfId,
    /// Key-striped write locks (see [`Store::lock_stripes`]).
    stripes: Vec<Mutex<()>>,
    last_version: AtomicU64,
    watches: crate::watches::Watches,
    /// Keys deleted by the active expiry cycle (INFO `expired_keys`).
    pub expired_keys: AtomicU64,
    /// The `appendfsync` policy ([`Appendfsync::code`]); CONFIG SET changes it.
    appendfsync: AtomicU8,
    /// A write committed without fsync since the last WAL fsync.
    unsynced: AtomicBool,
    /// Client-side caching: who read what (CLIENT TRACKING).
    tracking: crate::tracking::Tracking,
    /// The handle the stale-sub-record filter reads through (emptied on drop).
    reclaim: crate::reclaim::DbSlot,
    /// Logical -> physical databases (SWAPDB). Every `Tx` holds it read
    /// for its whole life; SWAPDB's `Tx` holds it written.
    db_map: parking_lot::RwLock<crate::dbmap::DbMap>,
}

impl Store {
    /// Opens (creating if needed) the `redis` column family of `db`.
    pub fn open(db: Db) -> Result<Store> {
        let cf = match db.cf_id(CF_NAME) {
            Ok(id) => id,
            Err(shaledb::Error::ColumnFamilyNotFound(_)) => db.create_cf(CF_NAME)?,
            Err(e) => return Err(e.into()),
        };
        migrate_expiry_index(&db, cf)?;
        let db_map = match db.get_opt(&Default::default(), cf, crate::dbmap::DB_MAP_KEY)? {
            Some(v) => crate::dbmap::DbMap::decode(&v)?,
            None => crate::dbmap::DbMap::identity(),
        };
        let reclaim: crate::reclaim::DbSlot = Arc::new(parking_lot::RwLock::new(Some(db.clone())));
        db.set_compaction_filter(
            cf,
            Some(Arc::new(crate::reclaim::StaleFilters {
                slot: reclaim.clone(),
                cf,
            })),
        )?;
        Ok(Store {
            db,
            cf,
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            last_version: AtomicU64::new(0),
            watches: crate::watches::Watches::default(),
            expired_keys: AtomicU64::new(0),
            appendfsync: AtomicU8::new(Appendfsync::default().code()),
            unsynced: AtomicBool::new(false),
            tracking: crate::tracking::Tracking::default(),
            reclaim,
            db_map: parking_lot::RwLock::new(db_map),
        })
    }

    pub fn appendfsync(&self) -> Appendfsync {
        Appendfsync::from_code(self.appendfsync.load(Ordering::SeqCst))
    }

    pub fn set_appendfsync(&self, mode: Appendfsync) {
        self.appendfsync.store(mode.code(), Ordering::SeqCst);
    }

    /// The options of a command's commit: fsynced under `always`.
    pub fn write_options(&self) -> WriteOptions {
        WriteOptions {
            sync: self.appendfsync() == Appendfsync::Always,
            disable_wal: false,
        }
    }

    /// Called after a commit written with `wo`: remembers an unsynced write.
    pub fn committed(&self, wo: &WriteOptions) {
        if !wo.sync {
            self.unsynced.store(true, Ordering::SeqCst);
        }
    }

    /// Fsyncs the WAL if a write landed without fsync since the last time:
    /// one synced write of the `F` record (docs/redis.md), which fsyncs
    /// every WAL record before it. The engine skips an empty batch, so a
    /// record is needed.
    pub fn sync_wal_if_dirty(&self) -> Result<()> {
        if !self.unsynced.swap(false, Ordering::SeqCst) {
            return Ok(());
        }
        let wo = WriteOptions {
            sync: true,
            disable_wal: false,
        };
        let mut b = shaledb::WriteBatch::new();
        b.put_cf(self.cf, FSYNC_KEY, &now_ms().to_be_bytes());
        let r = self.db.write(&wo, b);
        if r.is_err() {
            self.unsynced.store(true, Ordering::SeqCst);
        }
        Ok(r?)
    }

    pub fn engine(&self) -> &Db {
        &self.db
    }

    /// The lock stripe of `key` of `db`.
    pub fn stripe_of(&self, db: u8, key: &[u8]) -> usize {
        stripe(db, key)
    }

    /// The lock stripes of `keys` of `db`, in order.
    pub fn stripes_of<'a>(
        &self,
        db: u8,
        keys: impl IntoIterator<Item = &'a [u8]>,
    ) -> BTreeSet<usize> {
        keys.into_iter().map(|k| stripe(db, k)).collect()
    }

    /// Locks the stripes `ids` (in stripe order, so no deadlock) for a
    /// command's read and write: every writer of a key holds its stripe,
    /// so read-modify-write commands on one key are serial, and commands on
    /// different keys can group-commit together.
    pub fn lock_stripes(&self, ids: &BTreeSet<usize>) -> KeyLocks<'_> {
        KeyLocks(
            ids.iter()
                .filter_map(|&i| self.stripes.get(i))
                .map(|m| m.lock())
                .collect(),
        )
    }

    /// [`Store::lock_stripes`] without waiting: `None` (and nothing held)
    /// when any of them is taken.
    pub fn try_lock_stripes(&self, ids: &BTreeSet<usize>) -> Option<KeyLocks<'_>> {
        let mut held = Vec::with_capacity(ids.len());
        for &i in ids {
            held.push(self.stripes.get(i)?.try_lock()?);
        }
        Some(KeyLocks(held))
    }

    /// Every stripe id.
    pub fn all_stripes(&self) -> BTreeSet<usize> {
        (0..self.stripes.len()).collect()
    }

    /// Locks every stripe (FLUSHDB).
    pub fn lock_all(&self) -> KeyLocks<'_> {
        KeyLocks(self.stripes.iter().map(|m| m.lock()).collect())
    }

    /// A version greater than every one handed out before (by this process,
    /// and by earlier ones while the clock does not go back).
    pub fn new_version(&self) -> u64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let mut cur = self.last_version.load(Ordering::Relaxed);
        loop {
            let next = now.max(cur + 1);
            match self.last_version.compare_exchange_weak(
                cur,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return next,
                Err(actual) => cur = actual,
            }
        }
    }

    /// The engine column family holding every record.
    pub fn cf(&self) -> CfId {
        self.cf
    }

    /// The CLIENT TRACKING state.
    pub fn tracking(&self) -> &crate::tracking::Tracking {
        &self.tracking
    }

    /// The WATCH registry (see `commands/multi.rs`).
    pub fn watches(&self) -> &crate::watches::Watches {
        &self.watches
    }

    /// The logical -> physical database map (see `crate::dbmap`).
    pub(crate) fn db_map(&self) -> &parking_lot::RwLock<crate::dbmap::DbMap> {
        &self.db_map
    }
}

/// Gives every key with a TTL its expiry index entry, once per data set:
/// data written before the index existed has none, and the active expiry
/// cycle would never delete those keys (reads still hide them). Runs at
/// open, before any command; the entries are idempotent, and the marker
/// record is written (fsynced) only after all of them, so a crash midway
/// redoes the walk at the next open.
fn migrate_expiry_index(db: &Db, cf: CfId) -> Result<()> {
    let ro = shaledb::ReadOptions::default();
    if db.get_opt(&ro, cf, EXPIRY_INDEXED_KEY)?.is_some() {
        return Ok(());
    }
    let ro = shaledb::ReadOptions {
        lower_bound: Some(b"M".to_vec()),
        upper_bound: Some(b"N".to_vec()),
        ..shaledb::ReadOptions::default()
    };
    let mut it = db.iter_cf(&ro, cf)?;
    it.seek(b"M")?;
    let mut batch = shaledb::WriteBatch::new();
    let mut n = 0;
    while it.valid() {
        let m = Meta::decode(it.value())?;
        if m.expire_at != 0 {
            if let (Some(&d), Some(user)) = (it.key().get(1), it.key().get(2..)) {
                batch.put_cf(cf, &expiry_key(d, m.expire_at, user), b"");
                n += 1;
            }
        }
        if n == MIGRATE_BATCH {
            db.write(&WriteOptions::default(), std::mem::take(&mut batch))?;
            n = 0;
        }
        it.next()?;
    }
    if let Some(e) = it.status() {
        return Err(StoreError::Engine(e.clone()));
    }
    batch.put_cf(cf, EXPIRY_INDEXED_KEY, &[1]);
    let wo = WriteOptions {
        sync: true,
        disable_wal: false,
    };
    db.write(&wo, batch)?;
    Ok(())
}

impl Drop for Store {
    /// Unregisters the stale-sub-record filter and lets go of its engine
    /// handle: the engine holds the filter, so otherwise the engine would
    /// hold a handle to itself and never shut down.
    fn drop(&mut self) {
        let _ = self.db.set_compaction_filter(self.cf, None);
        self.reclaim.write().take();
    }
}

/// The user key a record key belongs to: `M|db|key`, or
/// `S|db|keylen|key|...` / `Z|db|keylen|key|...`.
pub fn owner_of(record: &[u8]) -> Option<(u8, &[u8])> {
    let (&tag, rest) = record.split_first()?;
    let (&db, rest) = rest.split_first()?;
    match tag {
        b'M' => Some((db, rest)),
        b'S' | b'Z' => {
            let mut n = [0u8; 4];
            n.copy_from_slice(rest.get(..4)?);
            let len = usize::try_from(u32::from_be_bytes(n)).ok()?;
            Some((db, rest.get(4..4 + len)?))
        }
        _ => None,
    }
}

/// A list position as a sub-record suffix: the i64 with its sign bit
/// flipped, big-endian, so byte order is numeric order.
pub fn list_index(i: i64) -> [u8; 8] {
    let mut b = i.to_be_bytes();
    if let Some(first) = b.first_mut() {
        *first ^= 0x80;
    }
    b
}

/// A score as a memcomparable 8-byte string: byte order is numeric order,
/// -inf first, +inf last; -0.0 is encoded as 0.0 (Redis treats them as
/// equal). NaN never reaches here (ZADD refuses it).
pub fn score_bytes(f: f64) -> [u8; 8] {
    let f = if f == 0.0 { 0.0 } else { f };
    let bits = f.to_bits();
    let m = if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    m.to_be_bytes()
}

/// Inverse of [`score_bytes`].
pub fn score_from_bytes(b: &[u8]) -> Option<f64> {
    let mut a = [0u8; 8];
    a.copy_from_slice(b.get(..8)?);
    let m = u64::from_be_bytes(a);
    let bits = if m >> 63 == 1 { m & !(1 << 63) } else { !m };
    Some(f64::from_bits(bits))
}

/// `Z | db | keylen | key | version`: the prefix of a sorted set's score index.
pub fn score_prefix(db: u8, key: &[u8], version: u64) -> Vec<u8> {
    let mut k = sub_prefix(db, key, version);
    if let Some(first) = k.first_mut() {
        *first = b'Z';
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_layout_is_the_documented_one() {
        let m = Meta {
            ty: Type::String,
            version: 0x0102_0304_0506_0708,
            expire_at: 0x1112_1314_1516_1718,
            size: 3,
            value: b"abc".to_vec(),
            head: 0,
            tail: 0,
        };
        let e = m.encode();
        let mut want = vec![1u8, 0];
        want.extend([1, 2, 3, 4, 5, 6, 7, 8]);
        want.extend([0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18]);
        want.extend([0, 0, 0, 0, 0, 0, 0, 3]);
        want.extend(b"abc");
        assert_eq!(e, want);
        assert_eq!(Meta::decode(&e).ok(), Some(m));
        let h = Meta {
            ty: Type::Hash,
            version: 9,
            expire_at: 0,
            size: 2,
            value: Vec::new(),
            head: 0,
            tail: 0,
        };
        assert_eq!(h.encode().len(), META_LEN);
        assert_eq!(Meta::decode(&h.encode()).ok(), Some(h));
    }

    #[test]
    fn bad_metadata_is_an_error_not_a_panic() {
        assert!(Meta::decode(&[]).is_err());
        assert!(Meta::decode(&[2, 0]).is_err());
        assert!(Meta::decode(&[1, 7]).is_err());
        assert!(Meta::decode(&[1, 0, 1, 2, 3]).is_err());
    }

    #[test]
    fn key_layouts() {
        assert_eq!(meta_key(3, b"k"), b"M\x03k".to_vec());
        assert_eq!(
            sub_key(1, b"ab", 5, b"f"),
            b"S\x01\x00\x00\x00\x02ab\x00\x00\x00\x00\x00\x00\x00\x05f".to_vec()
        );
        assert_eq!(prefix_end(b"M\x03"), Some(b"M\x04".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
    }
}

#[cfg(test)]
mod encoding_tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn list_metadata_layout() {
        let mut m = Meta::new(Type::List, 7);
        m.size = 3;
        m.head = -2;
        m.tail = 1;
        let e = m.encode();
        assert_eq!(e.len(), META_LEN + 16);
        assert_eq!(e[1], 2);
        assert_eq!(&e[26..34], &(-2i64).to_be_bytes());
        assert_eq!(&e[34..42], &1i64.to_be_bytes());
        assert_eq!(Meta::decode(&e).unwrap(), m);
        // A list record cut short is corruption, not a panic.
        assert!(Meta::decode(&e[..30]).is_err());
        for (ty, code) in [(Type::Set, 3u8), (Type::ZSet, 4)] {
            let e = Meta::new(ty, 1).encode();
            assert_eq!((e.len(), e[1]), (META_LEN, code));
        }
    }

    #[test]
    fn score_encoding_fixed_points() {
        assert_eq!(score_bytes(0.0), score_bytes(-0.0));
        assert_eq!(score_bytes(0.0), [0x80, 0, 0, 0, 0, 0, 0, 0]);
        assert!(score_bytes(f64::NEG_INFINITY) < score_bytes(f64::MIN));
        assert!(score_bytes(f64::MAX) < score_bytes(f64::INFINITY));
        assert!(score_bytes(-f64::MIN_POSITIVE) < score_bytes(0.0));
        for x in [f64::NEG_INFINITY, -1.5, 0.0, 1e-300, 3.25, f64::INFINITY] {
            assert_eq!(score_from_bytes(&score_bytes(x)), Some(x));
        }
        assert_eq!(score_from_bytes(&[1, 2]), None);
    }

    #[test]
    fn owner_of_record_keys() {
        assert_eq!(owner_of(&meta_key(2, b"k")), Some((2, &b"k"[..])));
        assert_eq!(owner_of(&sub_key(1, b"ab", 9, b"f")), Some((1, &b"ab"[..])));
        assert_eq!(owner_of(&score_prefix(3, b"z", 9)), Some((3, &b"z"[..])));
        assert_eq!(owner_of(b"S\x01\x00\x00\x00\x09ab"), None);
        assert_eq!(owner_of(b"X\x01k"), None);
    }

    proptest! {
        #[test]
        fn score_bytes_order_is_numeric_order(a in any::<f64>(), b in any::<f64>()) {
            prop_assume!(!a.is_nan() && !b.is_nan());
            let (ea, eb) = (score_bytes(a), score_bytes(b));
            prop_assert_eq!(a.partial_cmp(&b), Some(ea.cmp(&eb)));
        }

        #[test]
        fn list_index_order_is_numeric_order(a in any::<i64>(), b in any::<i64>()) {
            prop_assert_eq!(a.cmp(&b), list_index(a).cmp(&list_index(b)));
        }
    }
}
