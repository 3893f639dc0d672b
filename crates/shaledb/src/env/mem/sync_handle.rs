//! The sync handle of a [`super::MemFs`] file ([`crate::env::WritableFile::sync_handle`]).
//!
//! It models an fdatasync that runs while the writer goes on appending:
//! the call snapshots the file's flushed bytes when it begins, waits the
//! file system's sync latency, and then makes exactly that snapshot
//! durable. Bytes flushed during the wait stay unsynced, so a power-loss
//! test catches a caller that counts them as covered.

use super::{check_gen, Inode};
use crate::env::FileSync;
use crate::error::Result;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub(super) struct MemSync {
    inode: Inode,
    generation: u64,
    path: PathBuf,
    latency_us: Arc<AtomicU64>,
}

impl MemSync {
    pub(super) fn new(
        inode: Inode,
        generation: u64,
        path: PathBuf,
        latency_us: Arc<AtomicU64>,
    ) -> Self {
        MemSync {
            inode,
            generation,
            path,
            latency_us,
        }
    }
}

impl FileSync for MemSync {
    fn sync_data(&self) -> Result<()> {
        let snapshot = {
            let d = self.inode.read();
            check_gen(&d, self.generation, "fdatasync", &self.path)?;
            d.current.clone()
        };
        let us = self.latency_us.load(Ordering::Relaxed);
        if us > 0 {
            std::thread::sleep(Duration::from_micros(us));
        }
        let mut d = self.inode.write();
        // A crash during the wait: the handle is stale and nothing is synced.
        check_gen(&d, self.generation, "fdatasync", &self.path)?;
        // An append-only file only grows; a sync through the writer may have
        // made more durable meanwhile, which must not be undone.
        if snapshot.len() > d.durable.len() && d.current.starts_with(&snapshot) {
            d.durable = snapshot;
        }
        Ok(())
    }
}
