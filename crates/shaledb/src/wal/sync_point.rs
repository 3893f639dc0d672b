//! [`SyncPoint`]: the fsync stage of the pipelined group commit
//! (docs/architecture.md, "Pipelined group commit").
//!
//! The group-commit leader appends a group to the WAL and flushes it to the
//! OS under the WAL writer's mutex, records how far the log is flushed
//! ([`SyncPoint::flushed`]) and lets go of the writer. A synced writer then
//! waits here ([`SyncPoint::wait`]) until the *synced* watermark reaches the
//! end of its group. At most one fsync is in flight: the first waiter that
//! finds none running becomes the syncer, takes the flushed watermark as its
//! target, fsyncs through the log's sync handle outside every lock, and on
//! success raises the synced watermark to that target. Every waiter whose
//! bytes lie below the target is released by that one fsync; one whose bytes
//! were flushed while it ran waits for the next one (started by a waiter of
//! its own). Meanwhile the next group is appended.
//!
//! Worked example: group G1 ends at offset 4 000 of log 7, G2 at 4 400.
//! Writer a (G1) finds no fsync running: target (7, 4 000), fsync. While it
//! runs G2 is appended and flushed; b, c and d (G2) wait. a's fsync ends:
//! synced = (7, 4 000), a returns; b starts the next fsync, target
//! (7, 4 400), which releases b, c and d: two fsyncs for four writers.
//!
//! Errors: a failed fsync is sticky. Every waiter not already covered by an
//! earlier fsync gets its error, and `on_fail` stops the database's writes.
//! No fsync is ever retried after one failed (its pages may have been
//! dropped) or after the database stopped for any reason (`stopped`).
//!
//! Lock order: the WAL writer's mutex, then this state, then the database's
//! state (`stopped` and `on_fail` may take the latter).

use crate::env::FileSync;
use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;

/// A position in the WAL: a log number and a byte offset in that log.
/// Ordered by log, then offset: every offset of a log lies before any
/// position of a later log, because a log is fsynced in full before the
/// next one is created (`db::write::switch_memtable`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct WalPos {
    pub log: u64,
    pub offset: u64,
}

#[derive(Default)]
struct State {
    /// The active log and its sync handle (`None`: the file system has
    /// none; the syncer then syncs through the writer, see `wait`).
    active: Option<(u64, Option<Arc<dyn FileSync>>)>,
    /// Every byte before this was handed to the OS.
    flushed: WalPos,
    /// Every byte before this is durable.
    synced: WalPos,
    /// An fsync is running (one at a time).
    in_flight: bool,
    /// The first failed fsync; sticky.
    failed: Option<Error>,
}

/// The WAL's durability watermark and its single in-flight fsync.
#[derive(Default)]
pub(crate) struct SyncPoint {
    state: Mutex<State>,
    cv: Condvar,
}

impl SyncPoint {
    /// A new log became the active one. The caller (holding the WAL
    /// writer) fsynced every earlier log in full, so everything before
    /// the new log's first byte is durable.
    pub fn set_active(&self, log: u64, handle: Option<Arc<dyn FileSync>>) {
        let mut s = self.state.lock();
        let start = WalPos { log, offset: 0 };
        s.active = Some((log, handle));
        s.flushed = s.flushed.max(start);
        s.synced = s.synced.max(start);
        self.cv.notify_all();
    }

    /// The leader flushed the active log up to `pos`.
    pub fn flushed(&self, pos: WalPos) {
        let mut s = self.state.lock();
        s.flushed = s.flushed.max(pos);
    }

    /// Everything flushed so far: what a new fsync would cover.
    pub fn flushed_pos(&self) -> WalPos {
        self.state.lock().flushed
    }

    /// The caller fsynced the log through its writer up to `pos`.
    pub fn synced(&self, pos: WalPos) {
        let mut s = self.state.lock();
        s.synced = s.synced.max(pos);
        self.cv.notify_all();
    }

    /// Returns once every byte before `pos` is durable, fsyncing if no
    /// fsync is in flight. `stopped` reports a database-wide failure (no
    /// new fsync starts then); `sync_by_writer` fsyncs the active log
    /// through its writer when it has no sync handle (it takes the WAL
    /// writer's mutex: the caller holds no lock); `on_fail` is told of a
    /// failed fsync once.
    pub fn wait(
        &self,
        pos: WalPos,
        stopped: impl Fn() -> Option<Error>,
        sync_by_writer: impl Fn(WalPos) -> Result<()>,
        on_fail: impl Fn(&Error),
    ) -> Result<()> {
        let mut s = self.state.lock();
        loop {
            if s.synced >= pos {
                return Ok(());
            }
            if let Some(e) = &s.failed {
                return Err(e.clone());
            }
            if s.in_flight {
                self.cv.wait(&mut s);
                continue;
            }
            if let Some(e) = stopped() {
                return Err(e);
            }
            let target = s.flushed;
            let handle = match &s.active {
                Some((log, handle)) if *log == target.log => handle.clone(),
                _ => None,
            };
            s.in_flight = true;
            drop(s);
            let r = match handle {
                Some(h) => h.sync_data(),
                None => sync_by_writer(target),
            };
            s = self.state.lock();
            s.in_flight = false;
            match r {
                Ok(()) => s.synced = s.synced.max(target),
                Err(e) => {
                    if s.failed.is_none() {
                        s.failed = Some(e.clone());
                        on_fail(&e);
                    }
                }
            }
            self.cv.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Counts its syncs; fails them once `fail` is set.
    #[derive(Default)]
    struct Counting {
        syncs: AtomicU64,
        fail: std::sync::atomic::AtomicBool,
    }

    impl FileSync for Counting {
        fn sync_data(&self) -> Result<()> {
            self.syncs.fetch_add(1, Ordering::SeqCst);
            if self.fail.load(Ordering::SeqCst) {
                return Err(Error::io("fdatasync", "wal", std::io::Error::other("eio")));
            }
            Ok(())
        }
    }

    fn pos(log: u64, offset: u64) -> WalPos {
        WalPos { log, offset }
    }

    fn never_stopped() -> Option<Error> {
        None
    }

    fn no_writer(_: WalPos) -> Result<()> {
        panic!("the sync handle is used when there is one")
    }

    #[test]
    fn one_fsync_covers_everything_flushed_before_it() {
        let sp = SyncPoint::default();
        let h = Arc::new(Counting::default());
        sp.set_active(7, Some(h.clone()));
        sp.flushed(pos(7, 100));
        sp.flushed(pos(7, 250));
        sp.wait(pos(7, 100), never_stopped, no_writer, |_| {})
            .expect("synced");
        // Covered by the same fsync (its target was 250): no second one.
        sp.wait(pos(7, 250), never_stopped, no_writer, |_| {})
            .expect("synced");
        assert_eq!(h.syncs.load(Ordering::SeqCst), 1);
        // Flushed later: needs another.
        sp.flushed(pos(7, 300));
        sp.wait(pos(7, 300), never_stopped, no_writer, |_| {})
            .expect("synced");
        assert_eq!(h.syncs.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_switched_out_log_counts_as_synced() {
        let sp = SyncPoint::default();
        let h = Arc::new(Counting::default());
        sp.set_active(7, Some(h.clone()));
        sp.flushed(pos(7, 100));
        // The switch fsynced log 7 through its writer, then started log 8.
        sp.synced(pos(7, 100));
        sp.set_active(8, Some(h.clone()));
        sp.wait(pos(7, 100), never_stopped, no_writer, |_| {})
            .expect("synced");
        assert_eq!(sp.flushed_pos(), pos(8, 0));
        sp.wait(pos(8, 0), never_stopped, no_writer, |_| {})
            .expect("nothing of log 8 to sync");
        assert_eq!(h.syncs.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_failed_fsync_is_sticky_and_never_retried() {
        let sp = SyncPoint::default();
        let h = Arc::new(Counting::default());
        sp.set_active(1, Some(h.clone()));
        sp.flushed(pos(1, 10));
        sp.wait(pos(1, 10), never_stopped, no_writer, |_| {})
            .expect("synced");
        h.fail.store(true, Ordering::SeqCst);
        sp.flushed(pos(1, 20));
        let told = AtomicU64::new(0);
        let on_fail = |_: &Error| {
            told.fetch_add(1, Ordering::SeqCst);
        };
        assert!(sp
            .wait(pos(1, 20), never_stopped, no_writer, on_fail)
            .is_err());
        assert!(sp
            .wait(pos(1, 20), never_stopped, no_writer, on_fail)
            .is_err());
        sp.flushed(pos(1, 30));
        assert!(sp
            .wait(pos(1, 30), never_stopped, no_writer, on_fail)
            .is_err());
        // Bytes an earlier fsync covered stay acknowledged.
        sp.wait(pos(1, 10), never_stopped, no_writer, on_fail)
            .expect("durable before the failure");
        assert_eq!(h.syncs.load(Ordering::SeqCst), 2);
        assert_eq!(told.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_stopped_database_starts_no_fsync() {
        let sp = SyncPoint::default();
        let h = Arc::new(Counting::default());
        sp.set_active(1, Some(h.clone()));
        sp.flushed(pos(1, 10));
        let r = sp.wait(pos(1, 10), || Some(Error::Closed), no_writer, |_| {});
        assert!(matches!(r, Err(Error::Closed)));
        assert_eq!(h.syncs.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn without_a_handle_the_writer_syncs() {
        let sp = SyncPoint::default();
        sp.set_active(3, None);
        sp.flushed(pos(3, 40));
        let asked = parking_lot::Mutex::new(Vec::new());
        sp.wait(
            pos(3, 40),
            never_stopped,
            |target| {
                asked.lock().push(target);
                Ok(())
            },
            |_| {},
        )
        .expect("synced");
        assert_eq!(*asked.lock(), vec![pos(3, 40)]);
    }
}
