//! Appends to value files. The group-commit leader calls
//! [`BlobStore::separate`] for its whole group before it writes the WAL: the
//! group's large values become one contiguous append to the value file and
//! their entries one append to its key log (format version 2,
//! docs/format-blob.md section 7; one `write(2)` each, and with `sync` one
//! `fdatasync` each that complete before the WAL's), and each such put
//! becomes a BlobIndex op in its batch.

use super::format::{self, BlobIndex, HEADER_LEN};
use super::keylog::{self, GroupEncoder};
use super::{BlobFile, BlobStore, UnpublishedValues};
use crate::env::WritableFile;
use crate::error::{Error, Result};
use crate::txn::marker::TxnMarker;
use crate::write_batch::{BatchOp, WriteBatch};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The value file being appended to (guarded by `BlobStore::active`).
pub(crate) struct ActiveFile {
    w: Box<dyn WritableFile>,
    /// Version 2: the key log (`None`: a version-1 file, tests only).
    keys: Option<Box<dyn WritableFile>>,
    handle: Arc<BlobFile>,
    records: u64,
    /// Bytes handed to the OS but not fsynced.
    dirty: bool,
}

/// A value file created for appends (the active file or a GC output).
pub(crate) struct NewFile {
    pub w: Box<dyn WritableFile>,
    /// Version 2: the key log (`None`: a version-1 file, tests only).
    pub keys: Option<Box<dyn WritableFile>>,
    pub handle: Arc<BlobFile>,
    pub records: u64,
}

impl BlobStore {
    /// Creates value file `number` (a number taken before: GC counts its
    /// output dead under it before the file exists) with its header, and
    /// for version 2 its key log; the directory is fsynced so that the
    /// names survive power loss before any BlobIndex pointing into the
    /// file can be acknowledged. `v1`: a version-1 file (tests only; GC
    /// outputs are always version 2).
    pub(crate) fn create_numbered(&self, number: u64, v1: bool) -> Result<NewFile> {
        let path = format::blob_path(&self.dir, number);
        let keys = if v1 {
            None
        } else {
            Some(self.create_keylog(number)?)
        };
        let mut w = if self.direct {
            self.fs.create_direct(&path)?
        } else {
            self.fs.create(&path)?
        };
        let version = if v1 {
            format::VERSION
        } else {
            format::VERSION_2
        };
        w.append(&format::encode_header(version))?;
        w.flush()?;
        self.fs.sync_dir(&self.dir)?;
        self.new_file(number, w, keys)
    }

    /// Creates the key log of value file `number` with its header, handed
    /// to the OS (the caller fsyncs the directory before any index into
    /// the pair can be acknowledged; a synced group fsyncs the key log).
    /// Created before the value file: a key log without its value file is
    /// removed at open, a value file without its key log is emptied.
    /// Written through a shared mapping where the file system allows
    /// (`env/mapped.rs`): an append is a copy, not a `write(2)` per group;
    /// after a crash the file may end in zeros (docs/format-blob.md 7.4).
    fn create_keylog(&self, number: u64) -> Result<Box<dyn WritableFile>> {
        let mut k = self
            .fs
            .create_mapped(&keylog::keylog_path(&self.dir, number))?;
        k.append(&keylog::encode_keylog_header(number))?;
        k.flush()?;
        Ok(k)
    }

    /// The [`NewFile`] of value file `number`, whose header `w` holds.
    fn new_file(
        &self,
        number: u64,
        w: Box<dyn WritableFile>,
        keys: Option<Box<dyn WritableFile>>,
    ) -> Result<NewFile> {
        let version = if keys.is_some() {
            format::VERSION_2
        } else {
            format::VERSION
        };
        let key_bytes = keys.as_ref().map_or(0, |k| k.len());
        let handle = Arc::new(BlobFile::new(
            &self.fs,
            &self.dir,
            number,
            (version, HEADER_LEN as u64, key_bytes, false),
            (self.direct_reads, &self.cache),
        )?);
        Ok(NewFile {
            w,
            keys,
            handle,
            records: 0,
        })
    }

    /// Creates the next active file: with `O_DIRECT` value files, a staged
    /// one (`staged.rs`: puts do not wait for the device); else as
    /// [`BlobStore::create_numbered`].
    fn create_active(&self) -> Result<NewFile> {
        if !self.direct {
            return self.create_numbered(self.new_number(), self.write_v1);
        }
        let number = self.new_number();
        let (keys, version) = if self.write_v1 {
            (None, format::VERSION)
        } else {
            (Some(self.create_keylog(number)?), format::VERSION_2)
        };
        // Fsyncs the directory after creating the value and stage files.
        // Version-2 files stage through a ring (docs/format-blob.md 6.1);
        // version-1 records are found by the value file's own scan, which a
        // ring's stale bytes could fool, so they keep stage format 1.
        let ring = (!self.write_v1).then(|| (self.stage_ring, Arc::clone(&self.spare_ring)));
        let mut w = super::staged::StagedWriter::create(&self.fs, &self.dir, number, ring)?;
        w.append(&format::encode_header(version))?;
        let view = w.view();
        let f = self.new_file(number, Box::new(w), keys)?;
        *f.handle.stage.lock() = Some(view);
        Ok(f)
    }

    /// Appends the footer and fsyncs: the file is complete. Version 2:
    /// the value file is synced before the key log's footer is written, so
    /// a footer never vouches for values that are not durable.
    pub(crate) fn seal_file(&self, f: &mut NewFile) -> Result<()> {
        let end = f.w.len();
        if f.keys.is_none() {
            f.w.append(&format::encode_footer(f.records, end))?;
        }
        f.w.complete()?;
        f.w.sync()?;
        self.trim(&f.handle, f.w.len())?;
        if let Some(k) = f.keys.as_mut() {
            k.append(&keylog::encode_keylog_footer(f.records, end))?;
            k.sync()?;
            f.handle.keylog_bytes.store(k.len(), Ordering::Release);
        }
        f.handle.bytes.store(f.w.len(), Ordering::Release);
        f.handle.sealed.store(true, Ordering::Release);
        Ok(())
    }

    /// Appends the footer to the active file and hands it to the OS, without
    /// an fsync on the write path: a file whose footer did not survive a
    /// crash is scanned and cut at open like any file without a footer, and
    /// writes with `sync` synced their records already.
    fn seal_active(&self, mut a: ActiveFile) -> Result<()> {
        let end = a.w.len();
        if a.keys.is_none() {
            a.w.append(&format::encode_footer(a.records, end))?;
        }
        a.w.complete()?;
        self.trim(&a.handle, a.w.len())?;
        a.handle.bytes.store(a.w.len(), Ordering::Release);
        let mut unsynced = self.unsynced.lock();
        unsynced.push(a.w);
        if let Some(mut k) = a.keys {
            k.append(&keylog::encode_keylog_footer(a.records, end))?;
            k.flush()?;
            a.handle.keylog_bytes.store(k.len(), Ordering::Release);
            // Synced after the value file (pushed first).
            unsynced.push(k);
        }
        a.handle.sealed.store(true, Ordering::Release);
        Ok(())
    }

    /// A direct-I/O file ends in zero padding past its logical length:
    /// cut it (then a later sync writes nothing more; if the cut is lost
    /// in a crash, the open finds the footer by a scan and cuts again).
    fn trim(&self, handle: &BlobFile, len: u64) -> Result<()> {
        if self.direct {
            self.fs.truncate(&handle.path, len)?;
            handle.bytes.store(len, Ordering::Release);
        }
        Ok(())
    }

    /// Fsyncs the active file and the files sealed since the last call
    /// (before a WAL segment is synced whole, and at close).
    pub(crate) fn sync_active(&self) -> Result<()> {
        let mut active = self.active.lock();
        for mut w in self.unsynced.lock().drain(..) {
            w.sync()?;
        }
        match active.as_mut() {
            Some(a) if a.dirty => {
                a.w.sync()?;
                if let Some(k) = a.keys.as_mut() {
                    k.sync()?;
                }
                a.dirty = false;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Moves the values of at least `min_blob_size` bytes of `batches` to
    /// the active value file and replaces their puts with BlobIndex ops.
    /// Prepare and rollback records keep their values (they are not applied;
    /// the commit record carries the writes again and is separated then).
    /// Caller: the group-commit leader, before the WAL write, or a lone
    /// writer before it takes the WAL writer; with `claim` (the lone
    /// writer) the file appended to is claimed until the write is
    /// published ([`UnpublishedValues`]).
    pub(crate) fn separate<'a>(
        &self,
        batches: impl Iterator<Item = &'a mut WriteBatch>,
        sync: bool,
        claim: bool,
    ) -> Result<Option<UnpublishedValues>> {
        let min = self.min_blob_size;
        let mut todo: Vec<&'a mut WriteBatch> = batches
            .filter(|b| b.applies_data() && b.max_key_and_value_len().1 >= min)
            .collect();
        if todo.is_empty() {
            // A synced group makes the WAL records of earlier unsynced
            // groups durable: their values must be durable first.
            return if sync {
                self.sync_active().map(|()| None)
            } else {
                Ok(None)
            };
        }
        let mut guard = self.active.lock();
        if guard.as_ref().is_some_and(|a| a.w.len() >= self.file_size) {
            if let Some(a) = guard.take() {
                self.seal_active(a)?;
            }
        }
        let active = match guard.as_mut() {
            Some(a) => a,
            None => {
                let f = self.create_active()?;
                self.add_file(f.handle.clone());
                guard.insert(ActiveFile {
                    w: f.w,
                    keys: f.keys,
                    handle: f.handle,
                    records: 0,
                    dirty: false,
                })
            }
        };
        let number = active.handle.number;
        let room: usize = todo.iter().map(|b| b.approximate_size()).sum();
        let mut enc = GroupEncoder::new(number, active.w.len(), room);
        let v1 = active.keys.is_none();
        for batch in todo.iter_mut() {
            let mut out = WriteBatch::with_capacity(256);
            for op in batch.iter() {
                let op = op.map_err(|e| Error::InvalidArgument(format!("malformed batch: {e}")))?;
                match op {
                    BatchOp::Put { cf, key, value } if value.len() >= min => {
                        let idx = if v1 {
                            encode_v1(&mut enc, cf, key, value)
                        } else {
                            enc.push(cf, key, value)
                        }
                        .ok_or_else(|| {
                            Error::InvalidArgument("value or key longer than 4 GiB".into())
                        })?;
                        out.put_blob_index_cf(cf, key, idx.encode().as_slice());
                    }
                    other => out.push_op(&other),
                }
            }
            **batch = match batch.txn_marker() {
                Some(m @ TxnMarker::Commit { .. }) => WriteBatch::with_txn_marker(&m, &out),
                _ => out,
            };
        }
        // Values first, then their entries (docs/format-blob.md 7.4).
        active.w.append(&enc.values)?;
        if !sync {
            // Hands the values to the OS (staged: checks the writer
            // thread's sticky error) before the entries that name them.
            active.w.flush()?;
        }
        if let Some(k) = active.keys.as_mut() {
            k.append(&enc.keys)?;
        }
        if sync {
            // Files sealed since the last sync may hold values of earlier
            // unsynced groups, whose WAL records this group's WAL sync makes
            // durable too.
            for mut w in self.unsynced.lock().drain(..) {
                w.sync()?;
            }
            active.w.sync()?;
            if let Some(k) = active.keys.as_mut() {
                k.sync()?;
            }
            active.dirty = false;
        } else {
            if let Some(k) = active.keys.as_mut() {
                k.flush()?;
            }
            active.dirty = true;
        }
        active.records += enc.entries;
        active.handle.bytes.store(active.w.len(), Ordering::Release);
        if let Some(k) = active.keys.as_ref() {
            active.handle.keylog_bytes.store(k.len(), Ordering::Release);
        }
        Ok(claim.then(|| UnpublishedValues::new(&active.handle)))
    }

    /// Seals the active file (clean close): later opens need not scan it.
    pub(crate) fn close(&self) -> Result<()> {
        for mut w in self.unsynced.lock().drain(..) {
            w.sync()?;
        }
        if let Some(a) = self.active.lock().take() {
            let mut f = NewFile {
                w: a.w,
                keys: a.keys,
                handle: a.handle,
                records: a.records,
            };
            self.seal_file(&mut f)?;
        }
        // The kept ring is not needed once nothing is written (an open
        // would remove it too: its value file is complete).
        if let Some(path) = self.spare_ring.lock().take() {
            self.fs.remove_file(&path)?;
        }
        Ok(())
    }
}

/// Tests only (`Options::blob_write_format_v1`): appends a version-1 record
/// to the encoder's value bytes and returns its 24-byte index.
fn encode_v1(enc: &mut GroupEncoder, cf: u32, key: &[u8], value: &[u8]) -> Option<BlobIndex> {
    let offset = enc.end();
    format::encode_record(&mut enc.values, cf, key, value)?;
    enc.entries += 1;
    Some(BlobIndex {
        file: enc.file(),
        offset,
        value_len: value.len() as u64,
        crc: None,
    })
}
