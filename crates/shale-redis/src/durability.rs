//! Redis's `appendfsync` on the engine's WAL (docs/redis.md, "Durability").
//!
//! Every command commits one `WriteBatch`; the engine appends it to the WAL
//! and hands it to the OS (`write(2)`) before the call returns, so an
//! acknowledged write survives `kill -9` in every mode. What differs is
//! when the WAL reaches the disk:
//! - `always`: the batch is written with `WriteOptions::sync`, so the
//!   reply goes out only after the group commit that carried it fsynced
//!   the WAL (concurrent clients share one fsync per group);
//! - `everysec`: [`run`] fsyncs the WAL once a second when something was
//!   written since the last fsync;
//! - `no`: the OS writes the WAL back when it likes.

use crate::store::Store;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often `everysec` fsyncs the WAL.
pub const EVERYSEC: Duration = Duration::from_secs(1);
/// How often the background thread looks at the stop flag.
const TICK: Duration = Duration::from_millis(100);

/// Redis's `appendfsync` policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Appendfsync {
    Always,
    #[default]
    EverySec,
    No,
}

impl Appendfsync {
    /// Parses `always` / `everysec` / `no`, in any case (as CONFIG SET).
    pub fn parse(s: &[u8]) -> Option<Appendfsync> {
        match s.to_ascii_lowercase().as_slice() {
            b"always" => Some(Appendfsync::Always),
            b"everysec" => Some(Appendfsync::EverySec),
            b"no" => Some(Appendfsync::No),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Appendfsync::Always => "always",
            Appendfsync::EverySec => "everysec",
            Appendfsync::No => "no",
        }
    }

    pub(crate) fn code(self) -> u8 {
        match self {
            Appendfsync::Always => 0,
            Appendfsync::EverySec => 1,
            Appendfsync::No => 2,
        }
    }

    pub(crate) fn from_code(c: u8) -> Appendfsync {
        match c {
            0 => Appendfsync::Always,
            2 => Appendfsync::No,
            _ => Appendfsync::EverySec,
        }
    }
}

/// The `everysec` thread: once a second, if the policy is `everysec` and
/// a write landed since the last fsync, fsync the WAL. Ends when `stop` is
/// set. A failed fsync is reported and retried a second later (the writes
/// stay marked unsynced).
pub fn run(st: &Store, stop: &AtomicBool) {
    let mut last = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(TICK);
        if last.elapsed() < EVERYSEC {
            continue;
        }
        last = Instant::now();
        if st.appendfsync() == Appendfsync::EverySec {
            if let Err(e) = st.sync_wal_if_dirty() {
                eprintln!("appendfsync everysec: WAL fsync failed: {e}");
            }
        }
    }
}
