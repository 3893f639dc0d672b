//! The process list: one entry per open connection, for `SHOW
//! PROCESSLIST`, `KILL [QUERY | CONNECTION] id` and shutdown.
//!
//! Lock: `ProcessList::map` guards the entries. It is held only to copy or
//! update an entry, never across I/O or a statement, so `SHOW
//! PROCESSLIST` never waits for a running query.
//!
//! `KILL QUERY id` raises the connection's interrupt flag, which the
//! session polls between rows and statements (the statement then fails with
//! error 1317); `KILL id` also shuts the socket down (a duplicate of it is
//! kept here), so the connection's I/O task leaves its read or write and
//! the session is dropped (rolling back its transaction).

use std::collections::HashMap;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// One connection as `SHOW PROCESSLIST` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessRow {
    pub id: u32,
    pub user: String,
    pub host: String,
    pub db: Option<String>,
    /// `Sleep`, `Query`, `Execute`, `Connect`, ...
    pub command: &'static str,
    /// Seconds in the current command.
    pub time: u64,
    /// The statement running, if any (first 100 characters, as MySQL).
    pub info: Option<String>,
}

struct Entry {
    row: ProcessRow,
    since: Instant,
    interrupt: Arc<AtomicBool>,
    /// A clone of the socket, to shut it down (`None` for test pipes).
    socket: Option<TcpStream>,
}

/// Open connections by id.
#[derive(Default)]
pub struct ProcessList {
    map: Mutex<HashMap<u32, Entry>>,
}

impl ProcessList {
    fn lock(&self) -> MutexGuard<'_, HashMap<u32, Entry>> {
        // Every update replaces whole fields; a panic elsewhere cannot leave
        // an entry half-written, so a poisoned map is still consistent.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new connection from `host`, in the `Connect` state.
    pub fn register(&self, id: u32, host: &str, socket: Option<TcpStream>) {
        self.lock().insert(
            id,
            Entry {
                row: ProcessRow {
                    id,
                    user: "unauthenticated user".into(),
                    host: host.to_owned(),
                    db: None,
                    command: "Connect",
                    time: 0,
                    info: None,
                },
                since: Instant::now(),
                interrupt: Arc::default(),
                socket,
            },
        );
    }

    /// The connection logged in as `user`, in `db`.
    pub fn logged_in(&self, id: u32, user: &str, db: Option<&str>) {
        if let Some(e) = self.lock().get_mut(&id) {
            e.row.user = user.to_owned();
            e.row.db = db.map(str::to_owned);
            e.row.command = "Sleep";
            e.since = Instant::now();
        }
    }

    /// The connection started `command` (with statement text `info`), or
    /// went back to `Sleep` (`info: None`). A new command clears a pending
    /// `KILL QUERY` meant for the previous one.
    pub fn set_command(&self, id: u32, command: &'static str, info: Option<&str>) {
        if let Some(e) = self.lock().get_mut(&id) {
            e.row.command = command;
            e.row.info = info.map(|s| s.chars().take(100).collect());
            e.since = Instant::now();
            if command != "Sleep" {
                e.interrupt.store(false, Ordering::Release);
            }
        }
    }

    /// The current database changed.
    pub fn set_db(&self, id: u32, db: Option<&str>) {
        if let Some(e) = self.lock().get_mut(&id) {
            e.row.db = db.map(str::to_owned);
        }
    }

    /// The flag `KILL QUERY` raises for connection `id`.
    pub fn interrupt_flag(&self, id: u32) -> Option<Arc<AtomicBool>> {
        self.lock().get(&id).map(|e| e.interrupt.clone())
    }

    /// `KILL QUERY id` (`connection: false`) or `KILL id`. False if no
    /// such connection.
    pub fn kill(&self, id: u32, connection: bool) -> bool {
        let map = self.lock();
        let Some(e) = map.get(&id) else {
            return false;
        };
        e.interrupt.store(true, Ordering::Release);
        if connection {
            if let Some(s) = &e.socket {
                let _ = s.shutdown(Shutdown::Both); // already closed is fine
            }
        }
        true
    }

    /// Shuts every connection down (server shutdown).
    pub fn kill_all(&self) {
        for e in self.lock().values() {
            e.interrupt.store(true, Ordering::Release);
            if let Some(s) = &e.socket {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }

    /// The connection ended.
    pub fn remove(&self, id: u32) {
        self.lock().remove(&id);
    }

    /// Open connections.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True with no connection open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every connection, by id.
    pub fn rows(&self) -> Vec<ProcessRow> {
        let mut rows: Vec<ProcessRow> = self
            .lock()
            .values()
            .map(|e| ProcessRow {
                time: e.since.elapsed().as_secs(),
                ..e.row.clone()
            })
            .collect();
        rows.sort_by_key(|r| r.id);
        rows
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn lifecycle_and_kill_query() {
        let p = ProcessList::default();
        p.register(7, "127.0.0.1", None);
        assert_eq!(p.rows()[0].command, "Connect");
        p.logged_in(7, "root", Some("app"));
        p.set_command(7, "Query", Some("SELECT 1"));
        let r = &p.rows()[0];
        assert_eq!(
            (
                r.user.as_str(),
                r.db.as_deref(),
                r.command,
                r.info.as_deref()
            ),
            ("root", Some("app"), "Query", Some("SELECT 1"))
        );
        let flag = p.interrupt_flag(7).unwrap();
        assert!(p.kill(7, false));
        assert!(flag.load(Ordering::Acquire));
        // The next command starts uninterrupted.
        p.set_command(7, "Query", Some("SELECT 2"));
        assert!(!flag.load(Ordering::Acquire));
        assert!(!p.kill(8, true));
        p.remove(7);
        assert!(p.is_empty());
    }
}
