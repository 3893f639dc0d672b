//! Accounts and privileges, stored in the engine (docs/mysql-protocol.md,
//! "Accounts").
//!
//! One record per account `'user'@'host'` in the column family
//! [`ACCOUNTS_CF`], changed in engine transactions with a synced commit, so
//! `CREATE USER` / `GRANT` are atomic and survive power loss. A record holds
//! the password verifiers (never the password), the global privileges and
//! the database- and table-level grants.
//!
//! Host matching follows MySQL: an account host is a pattern (`%` any run,
//! `_` one character); the most specific matching account wins (no
//! wildcard before any wildcard, then longer patterns first); a client from
//! 127.0.0.1 or ::1 also matches `localhost`. Worked example: with accounts
//! `'app'@'%'` and `'app'@'localhost'`, a client from 127.0.0.1 is
//! `'app'@'localhost'`.

use crate::mysql::auth::Credentials;
use shaledb::txn::TxnOptions;
use shaledb::{CfId, Db, WriteOptions};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The column family holding accounts.
pub const ACCOUNTS_CF: &str = "__shale_accounts";
const MAGIC: &[u8; 4] = b"SHAC";
const VERSION: u8 = 1;

/// Privileges as bits (MySQL's names).
pub mod privs {
    pub const SELECT: u64 = 1;
    pub const INSERT: u64 = 1 << 1;
    pub const UPDATE: u64 = 1 << 2;
    pub const DELETE: u64 = 1 << 3;
    pub const CREATE: u64 = 1 << 4;
    pub const DROP: u64 = 1 << 5;
    pub const ALTER: u64 = 1 << 6;
    pub const INDEX: u64 = 1 << 7;
    pub const PROCESS: u64 = 1 << 8;
    pub const SUPER: u64 = 1 << 9;
    pub const CREATE_USER: u64 = 1 << 10;
    pub const RELOAD: u64 = 1 << 11;
    pub const SHUTDOWN: u64 = 1 << 12;
    pub const GRANT_OPTION: u64 = 1 << 13;
    /// `ALL [PRIVILEGES]` at the global level (not GRANT OPTION).
    pub const ALL: u64 = (1 << 13) - 1;
    /// What `ALL` means on a database or a table.
    pub const ALL_OBJECT: u64 = SELECT | INSERT | UPDATE | DELETE | CREATE | DROP | ALTER | INDEX;

    /// Names in the order `SHOW GRANTS` lists them.
    pub const NAMES: [(u64, &str); 14] = [
        (SELECT, "SELECT"),
        (INSERT, "INSERT"),
        (UPDATE, "UPDATE"),
        (DELETE, "DELETE"),
        (CREATE, "CREATE"),
        (DROP, "DROP"),
        (RELOAD, "RELOAD"),
        (SHUTDOWN, "SHUTDOWN"),
        (PROCESS, "PROCESS"),
        (INDEX, "INDEX"),
        (ALTER, "ALTER"),
        (SUPER, "SUPER"),
        (CREATE_USER, "CREATE USER"),
        (GRANT_OPTION, "GRANT OPTION"),
    ];

    /// The bit of a privilege name (`ALL` and `ALL PRIVILEGES` included).
    pub fn parse(name: &str) -> Option<u64> {
        let n = name.trim().to_ascii_uppercase();
        if n == "ALL" || n == "ALL PRIVILEGES" {
            return Some(ALL);
        }
        NAMES.iter().find(|(_, s)| *s == n).map(|(b, _)| *b)
    }
}

/// Where a grant applies.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Global,
    Database(String),
    Table(String, String),
}

/// What can go wrong, with the MySQL error each maps to.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    /// ER_CANNOT_USER (1396): create of an existing or drop of a missing one.
    #[error("Operation {op} failed for '{user}'@'{host}'")]
    CannotUser {
        op: &'static str,
        user: String,
        host: String,
    },
    /// ER_NONEXISTING_GRANT (1141).
    #[error("There is no such grant defined for user '{user}' on host '{host}'")]
    NoSuchGrant { user: String, host: String },
    /// A stored record failed its checks.
    #[error("account record of '{user}'@'{host}' is damaged: {reason}")]
    Corrupt {
        user: String,
        host: String,
        reason: &'static str,
    },
    #[error(transparent)]
    Engine(#[from] shaledb::Error),
}

/// One account.
#[derive(Clone, Debug, PartialEq)]
pub struct Account {
    pub user: String,
    pub host: String,
    pub credentials: Credentials,
    pub global: u64,
    pub grants: BTreeMap<Level, u64>,
}

impl Account {
    /// True if the account may do `privilege` on `db`.`table` (either
    /// level may be absent).
    pub fn allows(&self, privilege: u64, db: Option<&str>, table: Option<&str>) -> bool {
        if self.global & privilege == privilege {
            return true;
        }
        let Some(db) = db else { return false };
        let on_db = self
            .grants
            .get(&Level::Database(db.to_owned()))
            .copied()
            .unwrap_or(0);
        let on_table = table
            .and_then(|t| self.grants.get(&Level::Table(db.to_owned(), t.to_owned())))
            .copied()
            .unwrap_or(0);
        (self.global | on_db | on_table) & privilege == privilege
    }

    /// `SHOW GRANTS FOR` lines, as MySQL prints them.
    pub fn grant_statements(&self) -> Vec<String> {
        let who = format!("`{}`@`{}`", self.user, self.host);
        let mut out = vec![format!(
            "GRANT {} ON *.* TO {who}{}",
            names(self.global, privs::ALL),
            if self.global & privs::GRANT_OPTION != 0 {
                " WITH GRANT OPTION"
            } else {
                ""
            }
        )];
        for (level, bits) in &self.grants {
            let on = match level {
                Level::Global => continue,
                Level::Database(d) => format!("`{d}`.*"),
                Level::Table(d, t) => format!("`{d}`.`{t}`"),
            };
            out.push(format!(
                "GRANT {} ON {on} TO {who}",
                names(*bits, privs::ALL_OBJECT)
            ));
        }
        out
    }
}

fn names(bits: u64, all: u64) -> String {
    let plain = bits & !privs::GRANT_OPTION;
    if plain == 0 {
        return "USAGE".into();
    }
    if plain & all == all {
        return "ALL PRIVILEGES".into();
    }
    privs::NAMES
        .iter()
        .filter(|(b, _)| *b != privs::GRANT_OPTION && plain & b != 0)
        .map(|(_, n)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The accounts of one database.
#[derive(Clone)]
pub struct AccountStore {
    db: Db,
    cf: CfId,
    /// Bumped after every committed change, so a session can keep its
    /// account and re-read it only when this moved (shared by clones; all
    /// changes of one server go through one store).
    generation: Arc<AtomicU64>,
}

fn key(user: &str, host: &str) -> Vec<u8> {
    [user.as_bytes(), &[0], host.as_bytes()].concat()
}

impl AccountStore {
    /// Opens the store, creating its column family on first use.
    pub fn open(db: &Db) -> Result<Self, AccountError> {
        let cf = match db.cf_id(ACCOUNTS_CF) {
            Ok(id) => id,
            Err(shaledb::Error::ColumnFamilyNotFound(_)) => db.create_cf(ACCOUNTS_CF)?,
            Err(e) => return Err(e.into()),
        };
        Ok(AccountStore {
            db: db.clone(),
            cf,
            generation: Arc::default(),
        })
    }

    /// A new data directory's first account: `'root'@'localhost'` with
    /// every privilege and GRANT OPTION, its password `password` or, if
    /// `None`, 20 random characters returned so the caller can print them
    /// once. Does nothing (`Ok(None)`) once any account exists, so an
    /// operator's later changes are never undone.
    pub fn bootstrap_root(&self, password: Option<&str>) -> Result<Option<String>, AccountError> {
        if !self.list()?.is_empty() {
            return Ok(None);
        }
        let pw = match password {
            Some(p) => p.to_owned(),
            None => random_password(),
        };
        self.create("root", "localhost", &pw, true)?;
        self.grant(
            "root",
            "localhost",
            privs::ALL | privs::GRANT_OPTION,
            Level::Global,
        )?;
        Ok(Some(pw))
    }

    /// Changes committed through this store (or its clones) so far.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Every account, by user then host.
    pub fn list(&self) -> Result<Vec<Account>, AccountError> {
        let mut it = self.db.iter_cf(&Default::default(), self.cf)?;
        it.seek_to_first()?;
        let mut out = Vec::new();
        while it.valid() {
            out.push(decode(it.key(), it.value())?);
            it.next()?;
        }
        Ok(out)
    }

    /// The account a client `user` from `peer` logs in as (see the module
    /// docs for the matching rules).
    pub fn find(&self, user: &str, peer: &str) -> Result<Option<Account>, AccountError> {
        let mut best: Option<Account> = None;
        for a in self.list()?.into_iter().filter(|a| a.user == user) {
            if !host_matches(&a.host, peer) {
                continue;
            }
            if best
                .as_ref()
                .is_none_or(|b| specificity(&a.host) > specificity(&b.host))
            {
                best = Some(a);
            }
        }
        Ok(best)
    }

    /// `CREATE USER`. With `if_not_exists`, an existing account is left as
    /// it is and `Ok(false)` returned.
    pub fn create(
        &self,
        user: &str,
        host: &str,
        password: &str,
        if_not_exists: bool,
    ) -> Result<bool, AccountError> {
        self.update(user, host, |existing| match existing {
            Some(_) if if_not_exists => Ok(None),
            Some(_) => Err(AccountError::CannotUser {
                op: "CREATE USER",
                user: user.into(),
                host: host.into(),
            }),
            None => Ok(Some(Some(Account {
                user: user.into(),
                host: host.into(),
                credentials: Credentials::from_password(password),
                global: 0,
                grants: BTreeMap::new(),
            }))),
        })
    }

    /// `DROP USER`. With `if_exists`, a missing account is `Ok(false)`.
    pub fn drop(&self, user: &str, host: &str, if_exists: bool) -> Result<bool, AccountError> {
        self.update(user, host, |existing| match existing {
            Some(_) => Ok(Some(None)),
            None if if_exists => Ok(None),
            None => Err(AccountError::CannotUser {
                op: "DROP USER",
                user: user.into(),
                host: host.into(),
            }),
        })
    }

    /// `ALTER USER ... IDENTIFIED BY` / `SET PASSWORD`.
    pub fn set_password(&self, user: &str, host: &str, password: &str) -> Result<(), AccountError> {
        self.modify(user, host, "ALTER USER", |a| {
            a.credentials = Credentials::from_password(password);
        })
    }

    /// `GRANT privileges ON level TO account`.
    pub fn grant(
        &self,
        user: &str,
        host: &str,
        bits: u64,
        level: Level,
    ) -> Result<(), AccountError> {
        self.modify(user, host, "GRANT", |a| match level {
            Level::Global => a.global |= bits,
            other => *a.grants.entry(other).or_insert(0) |= bits,
        })
    }

    /// `REVOKE privileges ON level FROM account`.
    pub fn revoke(
        &self,
        user: &str,
        host: &str,
        bits: u64,
        level: Level,
    ) -> Result<(), AccountError> {
        let mut missing = false;
        self.modify(user, host, "REVOKE", |a| match &level {
            Level::Global => a.global &= !bits,
            other => match a.grants.get_mut(other) {
                Some(b) => {
                    *b &= !bits;
                    if *b == 0 {
                        a.grants.remove(other);
                    }
                }
                None => missing = true,
            },
        })?;
        if missing {
            return Err(AccountError::NoSuchGrant {
                user: user.into(),
                host: host.into(),
            });
        }
        Ok(())
    }

    fn modify(
        &self,
        user: &str,
        host: &str,
        op: &'static str,
        f: impl FnOnce(&mut Account),
    ) -> Result<(), AccountError> {
        self.update(user, host, |existing| match existing {
            Some(mut a) => {
                f(&mut a);
                Ok(Some(Some(a)))
            }
            None => Err(AccountError::CannotUser {
                op,
                user: user.into(),
                host: host.into(),
            }),
        })?;
        Ok(())
    }

    /// Reads the account under an exclusive row lock and writes what `f`
    /// returns: `None` = no change, `Some(None)` = delete,
    /// `Some(Some(a))` = store `a`. Committed with `sync`: an
    /// acknowledged account change survives power loss.
    fn update(
        &self,
        user: &str,
        host: &str,
        f: impl FnOnce(Option<Account>) -> Result<Option<Option<Account>>, AccountError>,
    ) -> Result<bool, AccountError> {
        let k = key(user, host);
        let mut t = self.db.begin(TxnOptions {
            write_options: WriteOptions {
                sync: true,
                ..Default::default()
            },
            ..Default::default()
        });
        let existing = t
            .get_for_update_cf(self.cf, &k)?
            .map(|v| decode(&k, &v))
            .transpose()?;
        match f(existing)? {
            None => Ok(false),
            Some(None) => {
                t.delete_cf(self.cf, &k)?;
                t.commit()?;
                self.generation.fetch_add(1, Ordering::AcqRel);
                Ok(true)
            }
            Some(Some(a)) => {
                t.put_cf(self.cf, &k, &encode(&a))?;
                t.commit()?;
                self.generation.fetch_add(1, Ordering::AcqRel);
                Ok(true)
            }
        }
    }
}

/// 20 characters from a 62-letter alphabet: about 119 bits.
fn random_password() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::thread_rng();
    (0..20)
        .map(|_| {
            let i = rng.gen_range(0..ALPHABET.len());
            char::from(ALPHABET.get(i).copied().unwrap_or(b'x'))
        })
        .collect()
}

/// MySQL's host pattern match: `%` any run, `_` one character; loopback
/// peers also match `localhost`.
pub fn host_matches(pattern: &str, peer: &str) -> bool {
    let loopback = peer == "127.0.0.1" || peer == "::1";
    like(pattern.as_bytes(), peer.as_bytes()) || (loopback && pattern == "localhost")
}

/// SQL `LIKE` without escapes, ASCII case-insensitive (`SHOW STATUS LIKE`).
pub fn like_ci(pattern: &str, s: &str) -> bool {
    like(pattern.as_bytes(), s.as_bytes())
}

fn like(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'%', rest)) => (0..=s.len()).any(|i| s.get(i..).is_some_and(|t| like(rest, t))),
        Some((&c, rest)) => match s.split_first() {
            Some((&d, srest)) if c == b'_' || c.eq_ignore_ascii_case(&d) => like(rest, srest),
            _ => false,
        },
    }
}

/// Orders matching hosts: no wildcard beats wildcards, then longer first.
fn specificity(host: &str) -> (bool, usize) {
    (!host.contains(['%', '_']), host.len())
}

/// Record layout (docs/mysql-protocol.md, "Accounts"): `SHAC`, version,
/// verifiers (length-prefixed), global privileges `u64`, grant count `u32`,
/// then per grant a level tag (1 database, 2 table), names
/// (length-prefixed), privileges `u64`; last a CRC32C of all before it.
fn encode(a: &Account) -> Vec<u8> {
    let mut out = Vec::with_capacity(96);
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    put_bytes(&mut out, &a.credentials.to_bytes());
    out.extend_from_slice(&a.global.to_le_bytes());
    let grants: Vec<_> = a
        .grants
        .iter()
        .filter(|(l, _)| **l != Level::Global)
        .collect();
    out.extend_from_slice(
        &u32::try_from(grants.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    for (level, bits) in grants {
        match level {
            Level::Global => {}
            Level::Database(d) => {
                out.push(1);
                put_bytes(&mut out, d.as_bytes());
            }
            Level::Table(d, t) => {
                out.push(2);
                put_bytes(&mut out, d.as_bytes());
                put_bytes(&mut out, t.as_bytes());
            }
        }
        out.extend_from_slice(&bits.to_le_bytes());
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    // Names are identifiers (at most 64 characters) and verifiers 53 bytes,
    // far below u16::MAX; a longer one could only come from a bug.
    let n = u16::try_from(b.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(b.get(..usize::from(n)).unwrap_or(b));
}

fn decode(key: &[u8], v: &[u8]) -> Result<Account, AccountError> {
    let (user, host) = {
        let mut parts = key.splitn(2, |&b| b == 0);
        let u = parts.next().unwrap_or_default();
        let h = parts.next().unwrap_or_default();
        (
            String::from_utf8_lossy(u).into_owned(),
            String::from_utf8_lossy(h).into_owned(),
        )
    };
    let corrupt = |reason| AccountError::Corrupt {
        user: user.clone(),
        host: host.clone(),
        reason,
    };
    let (body, crc) = v
        .split_at_checked(v.len().saturating_sub(4))
        .ok_or_else(|| corrupt("short"))?;
    let crc = u32::from_le_bytes(crc.try_into().map_err(|_| corrupt("short"))?);
    if crc32c::crc32c(body) != crc {
        return Err(corrupt("checksum mismatch"));
    }
    let mut r = crate::mysql::wire::Reader::new(body);
    if r.bytes(4, "magic").ok() != Some(&MAGIC[..]) {
        return Err(corrupt("bad magic"));
    }
    if r.u8("version").ok() != Some(VERSION) {
        return Err(corrupt("unknown version"));
    }
    let get_bytes = |r: &mut crate::mysql::wire::Reader<'_>| -> Result<Vec<u8>, AccountError> {
        let n = r.u16("length").map_err(|_| corrupt("truncated"))?;
        Ok(r.bytes(usize::from(n), "bytes")
            .map_err(|_| corrupt("truncated"))?
            .to_vec())
    };
    let creds = get_bytes(&mut r)?;
    let credentials = Credentials::from_bytes(&creds).ok_or_else(|| corrupt("bad verifiers"))?;
    let global = r.u64("global").map_err(|_| corrupt("truncated"))?;
    let n = r.u32("grants").map_err(|_| corrupt("truncated"))?;
    let mut grants = BTreeMap::new();
    for _ in 0..n {
        let tag = r.u8("level").map_err(|_| corrupt("truncated"))?;
        let text = |b: Vec<u8>| String::from_utf8(b).map_err(|_| corrupt("bad name"));
        let level = match tag {
            1 => Level::Database(text(get_bytes(&mut r)?)?),
            2 => {
                let d = text(get_bytes(&mut r)?)?;
                Level::Table(d, text(get_bytes(&mut r)?)?)
            }
            _ => return Err(corrupt("bad grant level")),
        };
        let bits = r.u64("privileges").map_err(|_| corrupt("truncated"))?;
        grants.insert(level, bits);
    }
    if !r.is_empty() {
        return Err(corrupt("trailing bytes"));
    }
    Ok(Account {
        user,
        host,
        credentials,
        global,
        grants,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)] // tests: a panic is the failure report
mod tests;
