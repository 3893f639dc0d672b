//! Appends to value files. The group-commit leader calls
//! [`BlobStore::separate`] for its whole group before it writes the WAL: the
//! group's large values become one contiguous append (one `write(2)`, and
//! with `sync` one `fdatasync` that completes before the WAL's), and each
//! such put becomes a BlobIndex op in its batch.

use super::format::{self, BlobIndex, HEADER_LEN};
use super::{BlobFile, BlobStore};
use crate::env::WritableFile;
use crate::error::{Error, Result};
use crate::txn::marker::TxnMarker;
use crate::write_batch::{BatchOp, WriteBatch};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The value file being appended to.
pub(crate) struct ActiveFile {
    w: Box<dyn WritableFile>,
    handle: Arc<BlobFile>,
    records: u64,
    /// Bytes handed to the OS but not fsynced.
    dirty: bool,
}

/// A value file created for appends (the active file or a GC output).
pub(crate) struct NewFile {
    pub w: Box<dyn WritableFile>,
    pub handle: Arc<BlobFile>,
    pub records: u64,
}

impl BlobStore {
    /// Creates the next value file with its header; the directory is
    /// fsynced so that the name survives power loss before any BlobIndex
    /// pointing into the file can be acknowledged.
    pub(crate) fn create_file(&self) -> Result<NewFile> {
        self.create_numbered(self.new_number())
    }

    /// [`BlobStore::create_file`] with a number taken before (GC counts
    /// its output dead under that number before the file exists).
    pub(crate) fn create_numbered(&self, number: u64) -> Result<NewFile> {
        let path = format::blob_path(&self.dir, number);
        let mut w = if self.direct {
            self.fs.create_direct(&path)?
        } else {
            self.fs.create(&path)?
        };
        w.append(&format::encode_header())?;
        w.flush()?;
        self.fs.sync_dir(&self.dir)?;
        self.new_file(number, w)
    }

    /// The [`NewFile`] of value file `number`, whose header `w` holds.
    fn new_file(&self, number: u64, w: Box<dyn WritableFile>) -> Result<NewFile> {
        let handle = Arc::new(BlobFile::new(
            &self.fs,
            &self.dir,
            number,
            (HEADER_LEN as u64, false),
            (self.direct_reads, &self.cache),
        )?);
        Ok(NewFile {
            w,
            handle,
            records: 0,
        })
    }

    /// Creates the next active file: with `O_DIRECT` value files, a staged
    /// one (`staged.rs`: puts do not wait for the device); else as
    /// [`BlobStore::create_file`].
    fn create_active(&self) -> Result<NewFile> {
        if !self.direct {
            return self.create_file();
        }
        let number = self.new_number();
        let mut w = super::staged::StagedWriter::create(&self.fs, &self.dir, number)?;
        w.append(&format::encode_header())?;
        let view = w.view();
        let f = self.new_file(number, Box::new(w))?;
        *f.handle.stage.lock() = Some(view);
        Ok(f)
    }

    /// Appends the footer and fsyncs: the file is complete.
    pub(crate) fn seal_file(&self, f: &mut NewFile) -> Result<()> {
        let end = f.w.len();
        f.w.append(&format::encode_footer(f.records, end))?;
        f.w.complete()?;
        f.w.sync()?;
        self.trim(&f.handle, f.w.len())?;
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
        a.w.append(&format::encode_footer(a.records, end))?;
        a.w.complete()?;
        self.trim(&a.handle, a.w.len())?;
        a.handle.bytes.store(a.w.len(), Ordering::Release);
        a.handle.sealed.store(true, Ordering::Release);
        self.unsynced.lock().push(a.w);
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
    /// Caller: the group-commit leader, before the WAL write.
    pub(crate) fn separate<'a>(
        &self,
        batches: impl Iterator<Item = &'a mut WriteBatch>,
        sync: bool,
    ) -> Result<()> {
        let min = self.min_blob_size;
        let mut todo: Vec<&'a mut WriteBatch> = batches
            .filter(|b| b.applies_data() && b.max_key_and_value_len().1 >= min)
            .collect();
        if todo.is_empty() {
            // A synced group makes the WAL records of earlier unsynced
            // groups durable: their values must be durable first.
            return if sync { self.sync_active() } else { Ok(()) };
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
                    handle: f.handle,
                    records: 0,
                    dirty: false,
                })
            }
        };
        let number = active.handle.number;
        let base = active.w.len();
        let room: usize = todo.iter().map(|b| b.approximate_size()).sum();
        let mut buf = Vec::with_capacity(room);
        let mut records = 0;
        for batch in todo.iter_mut() {
            let mut out = WriteBatch::with_capacity(256);
            for op in batch.iter() {
                let op = op.map_err(|e| Error::InvalidArgument(format!("malformed batch: {e}")))?;
                match op {
                    BatchOp::Put { cf, key, value } if value.len() >= min => {
                        let idx = BlobIndex {
                            file: number,
                            offset: base + buf.len() as u64,
                            value_len: value.len() as u64,
                        };
                        format::encode_record(&mut buf, cf, key, value);
                        records += 1;
                        out.put_blob_index_cf(cf, key, &idx.encode());
                    }
                    other => out.push_op(&other),
                }
            }
            **batch = match batch.txn_marker() {
                Some(m @ TxnMarker::Commit { .. }) => WriteBatch::with_txn_marker(&m, &out),
                _ => out,
            };
        }
        active.w.append(&buf)?;
        if sync {
            // Files sealed since the last sync may hold values of earlier
            // unsynced groups, whose WAL records this group's WAL sync makes
            // durable too.
            for mut w in self.unsynced.lock().drain(..) {
                w.sync()?;
            }
            active.w.sync()?;
            active.dirty = false;
        } else {
            active.w.flush()?;
            active.dirty = true;
        }
        active.records += records;
        active.handle.bytes.store(active.w.len(), Ordering::Release);
        Ok(())
    }

    /// Seals the active file (clean close): later opens need not scan it.
    pub(crate) fn close(&self) -> Result<()> {
        for mut w in self.unsynced.lock().drain(..) {
            w.sync()?;
        }
        match self.active.lock().take() {
            Some(a) => {
                let mut f = NewFile {
                    w: a.w,
                    handle: a.handle,
                    records: a.records,
                };
                self.seal_file(&mut f)
            }
            None => Ok(()),
        }
    }
}
