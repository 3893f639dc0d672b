//! The encoding of docs/redis.md over `shaledb::Db`: metadata records,
//! hash-field sub-records, lazy expiry, versions.

use parking_lot::{Mutex, MutexGuard};
use shaledb::{CfId, Db, ReadOptions, WriteBatch, WriteOptions};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};
use thiserror::Error;

/// Name of the engine column family holding all Redis data.
pub const CF_NAME: &str = "redis";
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
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// A Redis value type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    String,
    Hash,
}

impl Type {
    pub fn name(self) -> &'static str {
        match self {
            Type::String => "string",
            Type::Hash => "hash",
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
    /// String length or hash field count.
    pub size: u64,
    /// Strings only.
    pub value: Vec<u8>,
}

impl Meta {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(META_LEN + self.value.len());
        v.push(FORMAT);
        v.push(match self.ty {
            Type::String => 0,
            Type::Hash => 1,
        });
        v.extend_from_slice(&self.version.to_be_bytes());
        v.extend_from_slice(&self.expire_at.to_be_bytes());
        v.extend_from_slice(&self.size.to_be_bytes());
        if self.ty == Type::String {
            v.extend_from_slice(&self.value);
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
            _ => return Err(StoreError::Corrupt("unknown type")),
        };
        let value = if ty == Type::String {
            b.get(META_LEN..).unwrap_or_default().to_vec()
        } else {
            Vec::new()
        };
        Ok(Meta {
            ty,
            version: u64_at(2)?,
            expire_at: u64_at(10)?,
            size: u64_at(18)?,
            value,
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
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
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
    /// Key-striped write locks (see [`Store::lock_keys`]).
    stripes: Vec<Mutex<()>>,
    last_version: AtomicU64,
}

impl Store {
    /// Opens (creating if needed) the `redis` column family of `db`.
    pub fn open(db: Db) -> Result<Store> {
        let cf = match db.cf_id(CF_NAME) {
            Ok(id) => id,
            Err(shaledb::Error::ColumnFamilyNotFound(_)) => db.create_cf(CF_NAME)?,
            Err(e) => return Err(e.into()),
        };
        Ok(Store {
            db,
            cf,
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            last_version: AtomicU64::new(0),
        })
    }

    pub fn engine(&self) -> &Db {
        &self.db
    }

    /// Locks the stripes of `keys` of `db` (in stripe order, so no deadlock)
    /// for a command's read and write: every writer of a key holds its
    /// stripe, so read-modify-write commands on one key are serial, and
    /// commands on different keys can group-commit together.
    pub fn lock_keys<'a>(&self, db: u8, keys: impl IntoIterator<Item = &'a [u8]>) -> KeyLocks<'_> {
        let ids: BTreeSet<usize> = keys.into_iter().map(|k| stripe(db, k)).collect();
        KeyLocks(
            ids.into_iter()
                .filter_map(|i| self.stripes.get(i))
                .map(|m| m.lock())
                .collect(),
        )
    }

    /// Locks every stripe (FLUSHDB).
    pub fn lock_all(&self) -> KeyLocks<'_> {
        KeyLocks(self.stripes.iter().map(|m| m.lock()).collect())
    }

    /// Read options at a fresh snapshot (several reads of one command agree).
    pub fn snapshot(&self) -> ReadOptions {
        ReadOptions {
            snapshot: Some(self.db.snapshot()),
            ..ReadOptions::default()
        }
    }

    /// Read options for the latest state: for a single read, or for reads
    /// under [`Store::lock`] (every writer holds it, so nothing moves).
    pub fn latest(&self) -> ReadOptions {
        ReadOptions::default()
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

    /// The live metadata of `key` (None when absent or expired).
    pub fn get_meta(&self, ro: &ReadOptions, db: u8, key: &[u8]) -> Result<Option<Meta>> {
        let Some(raw) = self.db.get_opt(ro, self.cf, &meta_key(db, key))? else {
            return Ok(None);
        };
        let m = Meta::decode(&raw)?;
        Ok(if m.expired(now_ms()) { None } else { Some(m) })
    }

    pub fn batch_put_meta(&self, b: &mut WriteBatch, db: u8, key: &[u8], m: &Meta) {
        b.put_cf(self.cf, &meta_key(db, key), &m.encode());
    }

    pub fn batch_delete_meta(&self, b: &mut WriteBatch, db: u8, key: &[u8]) {
        b.delete_cf(self.cf, &meta_key(db, key));
    }

    pub fn batch_put_field(&self, b: &mut WriteBatch, sub: &[u8], value: &[u8]) {
        b.put_cf(self.cf, sub, value);
    }

    pub fn batch_delete_field(&self, b: &mut WriteBatch, sub: &[u8]) {
        b.delete_cf(self.cf, sub);
    }

    pub fn write(&self, b: WriteBatch) -> Result<()> {
        if b.is_empty() {
            return Ok(());
        }
        self.db.write(&WriteOptions::default(), b)?;
        Ok(())
    }

    /// One hash field's value.
    pub fn get_field(&self, ro: &ReadOptions, sub: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get_opt(ro, self.cf, sub)?)
    }

    /// All (field, value) pairs of the hash `key` at `version`, in field order.
    pub fn fields(
        &self,
        ro: &ReadOptions,
        db: u8,
        key: &[u8],
        version: u64,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let prefix = sub_prefix(db, key, version);
        let mut out = Vec::new();
        self.scan_prefix(ro, &prefix, None, |k, v| {
            out.push((
                k.get(prefix.len()..).unwrap_or_default().to_vec(),
                v.to_vec(),
            ));
            true
        })?;
        Ok(out)
    }

    /// Calls `f(key, value)` for the keys starting with `prefix`, from
    /// `start` (inclusive) or the prefix's start, until `f` returns false.
    pub fn scan_prefix(
        &self,
        ro: &ReadOptions,
        prefix: &[u8],
        start: Option<&[u8]>,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let opts = ReadOptions {
            snapshot: ro.snapshot.clone(),
            lower_bound: Some(prefix.to_vec()),
            upper_bound: prefix_end(prefix),
        };
        let mut it = self.db.iter_cf(&opts, self.cf)?;
        match start {
            Some(s) => it.seek(s)?,
            None => it.seek(prefix)?,
        }
        while it.valid() {
            if !f(it.key(), it.value()) {
                break;
            }
            it.next()?;
        }
        if let Some(e) = it.status() {
            return Err(e.clone().into());
        }
        Ok(())
    }

    /// Live keys of `db` from `start` (a user key, inclusive): calls
    /// `f(key, meta)` until it returns false.
    pub fn scan_keys(
        &self,
        ro: &ReadOptions,
        db: u8,
        start: Option<&[u8]>,
        mut f: impl FnMut(&[u8], &Meta) -> bool,
    ) -> Result<()> {
        let prefix = [b'M', db];
        let start_key = start.map(|s| meta_key(db, s));
        let now = now_ms();
        let mut err = None;
        self.scan_prefix(
            ro,
            &prefix,
            start_key.as_deref(),
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

    /// Drops every key of `db`: two range deletes in one batch.
    pub fn flush_db(&self, db: u8) -> Result<()> {
        let mut b = WriteBatch::new();
        for tag in [b'M', b'S'] {
            let begin = [tag, db];
            let end = prefix_end(&begin).unwrap_or_else(|| vec![tag + 1]);
            b.delete_range_cf(self.cf, &begin, &end);
        }
        self.write(b)
    }
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
