//! The server's users, kept in memory and persisted in the engine: one
//! record `U | name` per user whose value is the user's ACL LIST rules
//! (docs/redis.md, "ACL"), replayed through [`User::apply`] at start.

use super::log::AclLog;
use super::table::COMMANDS;
use super::{command_index, User, KEY_READ, KEY_WRITE};
use crate::store::{prefix_end, Result, Store};
use parking_lot::RwLock;
use shaledb::{ReadOptions, WriteBatch};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bit of `@write` in `table::CATEGORIES`.
const WRITE_BIT: u32 = 1 << 2;

pub struct Acl {
    users: RwLock<BTreeMap<String, Arc<User>>>,
    /// Bumped by every change of `users` (under its write lock): a
    /// connection's cached "this user may run anything" holds while it is
    /// unchanged (`commands::acl::check`).
    version: AtomicU64,
    pub log: AclLog,
    /// `requirepass` as last given (flag or CONFIG SET), for CONFIG GET.
    requirepass: RwLock<String>,
}

fn user_key(name: &str) -> Vec<u8> {
    let mut k = vec![b'U'];
    k.extend_from_slice(name.as_bytes());
    k
}

impl Acl {
    /// Loads the stored users; the default user, if none is stored, is
    /// `on ~* &* +@all` with `password` (None: nopass), as requirepass.
    pub fn load(st: &Store, password: Option<&str>) -> Result<Acl> {
        let mut users = BTreeMap::new();
        let ro = ReadOptions {
            lower_bound: Some(b"U".to_vec()),
            upper_bound: prefix_end(b"U"),
            ..ReadOptions::default()
        };
        let mut it = st.engine().iter_cf(&ro, st.cf())?;
        it.seek(b"U")?;
        while it.valid() {
            let name = String::from_utf8_lossy(it.key().get(1..).unwrap_or_default()).into_owned();
            let mut u = User::new(&name);
            for rule in it.value().split(|&c| c == b' ').filter(|r| !r.is_empty()) {
                if u.apply(rule).is_err() {
                    return Err(crate::store::StoreError::Corrupt("bad stored ACL rule"));
                }
            }
            users.insert(name, Arc::new(u));
            it.next()?;
        }
        users
            .entry("default".to_string())
            .or_insert_with(|| Arc::new(User::default_user(password)));
        Ok(Acl {
            users: RwLock::new(users),
            version: AtomicU64::new(0),
            log: AclLog::default(),
            requirepass: RwLock::new(password.unwrap_or_default().to_string()),
        })
    }

    pub fn requirepass(&self) -> String {
        self.requirepass.read().clone()
    }

    /// CONFIG SET requirepass: the default user's only password becomes
    /// `pw` (nopass when empty), as Redis's `ACLUpdateDefaultUserPassword`.
    pub fn set_requirepass(&self, st: &Store, pw: &[u8]) -> Result<()> {
        let mut u = self
            .get("default")
            .map_or_else(|| User::default_user(None), |u| (*u).clone());
        let _ = u.apply(b"resetpass");
        if pw.is_empty() {
            let _ = u.apply(b"nopass");
        } else {
            let mut rule = vec![b'>'];
            rule.extend_from_slice(pw);
            let _ = u.apply(&rule);
        }
        self.put(st, u)?;
        *self.requirepass.write() = String::from_utf8_lossy(pw).into_owned();
        Ok(())
    }

    /// Changes when any user changes (see the field).
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The user (shared: a request's check clones no rule set).
    pub fn get(&self, name: &str) -> Option<Arc<User>> {
        self.users.read().get(name).cloned()
    }

    pub fn names(&self) -> Vec<String> {
        self.users.read().keys().cloned().collect()
    }

    pub fn all(&self) -> Vec<Arc<User>> {
        self.users.read().values().cloned().collect()
    }

    /// Stores `u` (fsynced: an ACL change is rare and must survive).
    pub fn put(&self, st: &Store, u: User) -> Result<()> {
        let mut users = self.users.write();
        let mut b = WriteBatch::new();
        b.put_cf(st.cf(), &user_key(&u.name), u.describe().as_bytes());
        st.engine().write(&synced(), b)?;
        users.insert(u.name.clone(), Arc::new(u));
        self.version.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Deletes the named users; the number that existed.
    pub fn delete(&self, st: &Store, names: &[String]) -> Result<i64> {
        let mut users = self.users.write();
        let mut b = WriteBatch::new();
        let mut n = 0;
        for name in names {
            if users.remove(name).is_some() {
                b.delete_cf(st.cf(), &user_key(name));
                n += 1;
            }
        }
        self.version.fetch_add(1, Ordering::AcqRel);
        st.engine().write(&synced(), b)?;
        Ok(n)
    }

    /// Authenticates `user` with `pw`: the user if it exists, is on and
    /// the password matches.
    pub fn authenticate(&self, user: &str, pw: &[u8]) -> bool {
        self.users
            .read()
            .get(user)
            .is_some_and(|u| u.enabled && u.password_ok(pw))
    }
}

fn synced() -> shaledb::WriteOptions {
    shaledb::WriteOptions {
        sync: true,
        disable_wal: false,
    }
}

/// What a command needs: its table index and full name (`config|get`).
pub fn command_of(name: &str, args: &[Vec<u8>]) -> Option<(usize, String)> {
    let top = command_index(name)?;
    let has_subs = COMMANDS.get(top + 1).is_some_and(|c| {
        c.0.strip_prefix(name)
            .is_some_and(|rest| rest.starts_with('|'))
    });
    if !has_subs {
        return Some((top, name.to_string()));
    }
    let Some(sub) = args.get(1) else {
        return Some((top, name.to_string()));
    };
    let sub = String::from_utf8_lossy(sub).to_ascii_lowercase();
    let full = format!("{name}|{sub}");
    command_index(&full).map(|i| (i, full))
}

/// The key arguments of a request (`args[0]` is the command), and the
/// access they need: write for `@write` commands, else read.
pub fn keys_of(i: usize, name: &str, args: &[Vec<u8>]) -> (Vec<Vec<u8>>, u8) {
    let Some(&(_, cats, first, last, step)) = COMMANDS.get(i) else {
        return (Vec::new(), 0);
    };
    let need = if cats & WRITE_BIT != 0 {
        KEY_WRITE
    } else {
        KEY_READ
    };
    let n = args.len() as i64;
    let numkeys_at = |at: usize| -> Vec<Vec<u8>> {
        let k = args
            .get(at)
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|s| s.parse::<usize>().ok())
            .unwrap_or(0);
        args.iter().skip(at + 1).take(k).cloned().collect()
    };
    let keys = match name {
        "zunionstore" | "zinterstore" | "zdiffstore" => {
            let mut v: Vec<Vec<u8>> = args.get(1).cloned().into_iter().collect();
            v.extend(numkeys_at(2));
            v
        }
        "sintercard" | "zintercard" | "lmpop" | "zmpop" | "zunion" | "zinter" | "zdiff" => {
            numkeys_at(1)
        }
        "blmpop" | "bzmpop" => numkeys_at(2),
        _ if first <= 0 => Vec::new(),
        _ => {
            let last = if last < 0 {
                n + i64::from(last)
            } else {
                i64::from(last)
            };
            let step = i64::from(step.max(1));
            let mut v = Vec::new();
            let mut j = i64::from(first);
            while j <= last && j < n {
                if let Some(a) = usize::try_from(j).ok().and_then(|j| args.get(j)) {
                    v.push(a.clone());
                }
                j += step;
            }
            v
        }
    };
    (keys, need)
}
