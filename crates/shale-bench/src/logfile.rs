//! The `logfile` backends: the `memory` map made persistent by an append-only log, to test the
//! harness's crash checks (`contest`, `recover`) end to end without a real engine. Like
//! `memory`, their numbers say nothing about storage engines.
//!
//! * `logfile` appends every write to `<db>/data.log` with one `write(2)` before the write
//!   returns, so an acknowledged write is in the OS page cache and survives SIGKILL;
//! * `logfile-lossy` buffers up to 1 MiB of records in the process before writing them, so a
//!   SIGKILL loses acknowledged writes — the crash checks must catch it.
//!
//! Record format (little endian): `key_len: u32, value_len: u32, key, value`, where
//! `value_len == u32::MAX` marks a delete without a value. Open replays the log into the map and
//! stops at the first incomplete record (a torn tail). Example: put("k", "vv") is
//! `01 00 00 00 02 00 00 00 6b 76 76`.
//!
//! Locking: the `log` mutex serializes appends and map updates, so the map applies writes in
//! log order; readers go to the map alone.

use crate::engine::{
    BatchOp, CursorStart, EngineFactory, EngineOptions, KvCursor, KvEngine, WriteOpts,
};
use crate::error::EngineError;
use crate::memory::MemoryEngine;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::sync::{Mutex, PoisonError};

const DELETE: u32 = u32::MAX;
const FILE: &str = "data.log";

/// Factory of the `logfile` and `logfile-lossy` engines.
pub struct LogFileFactory {
    /// Buffer writes in the process (loses acknowledged writes on SIGKILL).
    pub lossy: bool,
}

/// An engine whose writes go to an append-only log before the in-memory map.
pub struct LogFileEngine {
    map: MemoryEngine,
    log: Mutex<BufWriter<File>>,
}

fn len32(n: usize) -> Result<u32, EngineError> {
    u32::try_from(n)
        .ok()
        .filter(|&n| n != DELETE)
        .ok_or_else(|| std::io::Error::other("key or value too long for the log").into())
}

/// Appends one record to `buf`.
fn encode(op: &BatchOp<'_>, buf: &mut Vec<u8>) -> Result<(), EngineError> {
    let (key, value) = match *op {
        BatchOp::Put(k, v) => (k, Some(v)),
        BatchOp::Delete(k) => (k, None),
    };
    buf.extend_from_slice(&len32(key.len())?.to_le_bytes());
    let vlen = value.map_or(Ok(DELETE), |v| len32(v.len()))?;
    buf.extend_from_slice(&vlen.to_le_bytes());
    buf.extend_from_slice(key);
    buf.extend_from_slice(value.unwrap_or_default());
    Ok(())
}

/// Replays complete records of `data` into `map`; returns the bytes used.
fn replay(data: &[u8], map: &MemoryEngine) -> Result<usize, EngineError> {
    let mut pos = 0;
    let wo = WriteOpts::default();
    loop {
        let word = |at: usize| {
            data.get(at..at + 4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_le_bytes)
        };
        let (Some(klen), Some(vlen)) = (word(pos), word(pos + 4)) else {
            return Ok(pos);
        };
        let kstart = pos + 8;
        let kend = kstart + klen as usize;
        let vend = kend + if vlen == DELETE { 0 } else { vlen as usize };
        let (Some(key), Some(value)) = (data.get(kstart..kend), data.get(kend..vend)) else {
            return Ok(pos); // torn tail
        };
        if vlen == DELETE {
            map.delete(wo, key)?;
        } else {
            map.put(wo, key, value)?;
        }
        pos = vend;
    }
}

impl LogFileEngine {
    fn append(&self, batch: &[BatchOp<'_>]) -> Result<(), EngineError> {
        let mut buf = Vec::new();
        for op in batch {
            encode(op, &mut buf)?;
        }
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        log.write_all(&buf)?;
        if log.capacity() == 0 {
            log.flush()?;
        }
        self.map.write(WriteOpts::default(), batch)
    }
}

impl KvEngine for LogFileEngine {
    fn put(&self, _wo: WriteOpts, key: &[u8], value: &[u8]) -> Result<(), EngineError> {
        self.append(&[BatchOp::Put(key, value)])
    }

    fn delete(&self, _wo: WriteOpts, key: &[u8]) -> Result<(), EngineError> {
        self.append(&[BatchOp::Delete(key)])
    }

    fn write(&self, _wo: WriteOpts, batch: &[BatchOp<'_>]) -> Result<(), EngineError> {
        self.append(batch)
    }

    fn get(&self, key: &[u8], found: &mut dyn FnMut(&[u8])) -> Result<bool, EngineError> {
        self.map.get(key, found)
    }

    fn cursor(&self, start: CursorStart<'_>) -> Result<Box<dyn KvCursor + '_>, EngineError> {
        self.map.cursor(start)
    }

    fn flush(&self) -> Result<(), EngineError> {
        Ok(self
            .log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .flush()?)
    }

    fn stats(&self) -> Option<String> {
        self.map.stats()
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        self.flush()
    }
}

impl EngineFactory for LogFileFactory {
    fn name(&self) -> &'static str {
        if self.lossy {
            "logfile-lossy"
        } else {
            "logfile"
        }
    }

    fn open(&self, opts: &EngineOptions) -> Result<Box<dyn KvEngine>, EngineError> {
        std::fs::create_dir_all(&opts.path)?;
        let path = opts.path.join(FILE);
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)?;
        let mut data = Vec::new();
        file.read_to_end(&mut data)?;
        let map = MemoryEngine::new();
        let used = replay(&data, &map)?;
        file.set_len(used as u64)?; // drop a torn tail; appends go to the end
        let capacity = if self.lossy { 1 << 20 } else { 0 };
        Ok(Box::new(LogFileEngine {
            map,
            log: Mutex::new(BufWriter::with_capacity(capacity, file)),
        }))
    }

    fn describe(&self, _opts: &EngineOptions) -> Vec<String> {
        vec![format!(
            "Engine:     {} (memory map + append-only log; harness self-test only)",
            self.name()
        )]
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::engine::Compression;

    fn opts(dir: &std::path::Path) -> EngineOptions {
        EngineOptions {
            path: dir.join("db"),
            write_buffer_size: 0,
            cache_size: 0,
            bloom_bits: None,
            block_size: 4096,
            compression: Compression::None,
            statistics: false,
            recovery_threads: None,
            concurrent_memtable_insert: true,
            wal_mapped_writes: true,
            lone_writes: true,
            min_blob_size: 0,
            blob_direct_io: false,
            direct_reads: false,
            blob_cache_size: 0,
            blob_readahead: (0, 0),
            cache_index_and_filter_blocks: None,
        }
    }

    #[test]
    fn reopens_with_its_data_and_drops_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let f = LogFileFactory { lossy: false };
        let e = f.open(&opts(dir.path())).unwrap();
        let wo = WriteOpts::default();
        e.put(wo, b"a", b"1").unwrap();
        e.write(wo, &[BatchOp::Put(b"b", b"2"), BatchOp::Delete(b"a")])
            .unwrap();
        drop(e); // no close: the writes are in the file already
        let log = dir.path().join("db").join(FILE);
        let mut bytes = std::fs::read(&log).unwrap();
        bytes.extend_from_slice(&[9, 0, 0, 0, 1]); // torn record
        std::fs::write(&log, &bytes).unwrap();
        let e = f.open(&opts(dir.path())).unwrap();
        assert_eq!(e.get_vec(b"a").unwrap(), None);
        assert_eq!(e.get_vec(b"b").unwrap(), Some(b"2".to_vec()));
        e.put(wo, b"c", b"3").unwrap();
        e.close().unwrap();
        let e = f.open(&opts(dir.path())).unwrap();
        assert_eq!(e.get_vec(b"c").unwrap(), Some(b"3".to_vec()));
    }

    #[test]
    fn the_lossy_variant_keeps_writes_in_the_process() {
        let dir = tempfile::tempdir().unwrap();
        let f = LogFileFactory { lossy: true };
        let e = f.open(&opts(dir.path())).unwrap();
        e.put(WriteOpts::default(), b"a", b"1").unwrap();
        // Nothing reached the file yet: a SIGKILL now would lose the acknowledged write.
        assert_eq!(
            std::fs::read(dir.path().join("db").join(FILE)).unwrap(),
            b""
        );
        e.close().unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("db").join(FILE)).unwrap(),
            b"\x01\0\0\0\x01\0\0\0a1"
        );
    }
}
