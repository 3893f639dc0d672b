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

/// One connection's entry. The connection updates it through its own
/// [`ProcessSlot`] twice per command (`Execute`, then `Sleep`), so it has
/// a lock of its own: the list's lock is taken only to add, find, list or
/// remove entries, and 64 connections busy on 2 cores never queue on one
/// lock for their state changes (a futex wait there is a context switch).
struct Entry {
    state: Mutex<State>,
    interrupt: Arc<AtomicBool>,
    /// A clone of the socket, to shut it down (`None` for test pipes).
    socket: Option<TcpStream>,
}

struct State {
    /// `info` unused: `row.info` is kept `None` and the statement text is
    /// held in `text` (its buffer reused from command to command).
    row: ProcessRow,
    text: String,
    has_text: bool,
    since: Instant,
}

impl Entry {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update replaces whole fields; a panic elsewhere cannot leave
        // an entry half-written, so a poisoned entry is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_command(&self, command: &'static str, info: Option<&str>) {
        let mut st = self.lock();
        st.row.command = command;
        st.has_text = info.is_some();
        if let Some(s) = info {
            st.text.clear();
            st.text.push_str(first_chars(s, 100));
        }
        st.since = Instant::now();
        drop(st);
        if command != "Sleep" {
            self.interrupt.store(false, Ordering::Release);
        }
    }

    fn set_db(&self, db: Option<&str>) {
        let mut st = self.lock();
        if st.row.db.as_deref() != db {
            st.row.db = db.map(str::to_owned);
        }
    }

    fn row(&self) -> ProcessRow {
        let st = self.lock();
        ProcessRow {
            time: st.since.elapsed().as_secs(),
            info: st.has_text.then(|| st.text.clone()),
            ..st.row.clone()
        }
    }
}

/// The first `n` characters of `s` (all of it if shorter).
fn first_chars(s: &str, n: usize) -> &str {
    if s.len() <= n {
        return s; // at most n bytes: at most n characters
    }
    // Statements are mostly ASCII: then n characters are n bytes.
    if s.as_bytes().get(..n).is_some_and(<[u8]>::is_ascii) {
        return s.get(..n).unwrap_or(s);
    }
    let end = s.char_indices().nth(n).map_or(s.len(), |(i, _)| i);
    s.get(..end).unwrap_or(s)
}

/// A connection's handle on its own process-list entry: updates through it
/// take only the entry's lock (see `Entry`).
#[derive(Clone)]
pub struct ProcessSlot(Arc<Entry>);

impl ProcessSlot {
    /// As [`ProcessList::set_command`].
    pub fn set_command(&self, command: &'static str, info: Option<&str>) {
        self.0.set_command(command, info);
    }

    /// As [`ProcessList::set_db`].
    pub fn set_db(&self, db: Option<&str>) {
        self.0.set_db(db);
    }
}

/// Open connections by id.
#[derive(Default)]
pub struct ProcessList {
    map: Mutex<HashMap<u32, Arc<Entry>>>,
}

impl ProcessList {
    fn lock(&self) -> MutexGuard<'_, HashMap<u32, Arc<Entry>>> {
        // Entries are added and removed whole; a poisoned map is consistent.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn entry(&self, id: u32) -> Option<Arc<Entry>> {
        self.lock().get(&id).cloned()
    }

    /// A new connection from `host`, in the `Connect` state.
    pub fn register(&self, id: u32, host: &str, socket: Option<TcpStream>) {
        let entry = Entry {
            state: Mutex::new(State {
                row: ProcessRow {
                    id,
                    user: "unauthenticated user".into(),
                    host: host.to_owned(),
                    db: None,
                    command: "Connect",
                    time: 0,
                    info: None,
                },
                text: String::new(),
                has_text: false,
                since: Instant::now(),
            }),
            interrupt: Arc::default(),
            socket,
        };
        self.lock().insert(id, Arc::new(entry));
    }

    /// Connection `id`'s own handle on its entry (None once removed).
    pub fn slot(&self, id: u32) -> Option<ProcessSlot> {
        self.entry(id).map(ProcessSlot)
    }

    /// The connection logged in as `user`, in `db`.
    pub fn logged_in(&self, id: u32, user: &str, db: Option<&str>) {
        if let Some(e) = self.entry(id) {
            let mut st = e.lock();
            st.row.user = user.to_owned();
            st.row.db = db.map(str::to_owned);
            st.row.command = "Sleep";
            st.since = Instant::now();
        }
    }

    /// The connection started `command` (with statement text `info`), or
    /// went back to `Sleep` (`info: None`). A new command clears a pending
    /// `KILL QUERY` meant for the previous one.
    pub fn set_command(&self, id: u32, command: &'static str, info: Option<&str>) {
        if let Some(e) = self.entry(id) {
            e.set_command(command, info);
        }
    }

    /// The current database changed.
    pub fn set_db(&self, id: u32, db: Option<&str>) {
        if let Some(e) = self.entry(id) {
            e.set_db(db);
        }
    }

    /// The flag `KILL QUERY` raises for connection `id`.
    pub fn interrupt_flag(&self, id: u32) -> Option<Arc<AtomicBool>> {
        self.entry(id).map(|e| e.interrupt.clone())
    }

    /// `KILL QUERY id` (`connection: false`) or `KILL id`. False if no
    /// such connection.
    pub fn kill(&self, id: u32, connection: bool) -> bool {
        let Some(e) = self.entry(id) else {
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
        // Entries are copied out first: no entry lock is taken under the
        // list's lock.
        let entries: Vec<Arc<Entry>> = self.lock().values().cloned().collect();
        let mut rows: Vec<ProcessRow> = entries.iter().map(|e| e.row()).collect();
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

    /// A slot updates the listed row; statement text is cut at 100
    /// characters (not bytes) and cleared by a command without text.
    #[test]
    fn slot_updates_and_info_cut() {
        let p = ProcessList::default();
        p.register(3, "127.0.0.1", None);
        let slot = p.slot(3).unwrap();
        let long = "é".repeat(150);
        slot.set_command("Query", Some(&long));
        let info = p.rows()[0].info.clone().unwrap();
        assert_eq!(info.chars().count(), 100);
        assert!(long.starts_with(&info));
        slot.set_command("Query", Some("SELECT 1"));
        assert_eq!(p.rows()[0].info.as_deref(), Some("SELECT 1"));
        slot.set_db(Some("shop"));
        slot.set_command("Sleep", None);
        let r = &p.rows()[0];
        assert_eq!(
            (r.command, r.info.as_deref(), r.db.as_deref()),
            ("Sleep", None, Some("shop"))
        );
        // KILL QUERY, then the next command through the slot clears it.
        let flag = p.interrupt_flag(3).unwrap();
        assert!(p.kill(3, false));
        slot.set_command("Execute", None);
        assert!(!flag.load(Ordering::Acquire));
        p.remove(3);
        assert!(p.slot(3).is_none());
        assert_eq!(first_chars("abc", 100), "abc");
    }
}
