//! An in-memory [`FileSystem`] that models the durability rules of
//! [`crate::env`], so tests can simulate power loss with [`MemFs::crash`].
//!
//! Model:
//! - a file (an *inode*) has its `current` bytes (what readers see) and its
//!   `durable` bytes (what survives power loss). `sync` on any handle of the
//!   file copies current to durable (fdatasync is per file, not per handle);
//! - a directory maps names to inodes twice: its `current` entries and its
//!   `durable` entries. `sync_dir` copies current to durable;
//! - [`MemFs::crash`] (power loss) reverts every directory to its durable
//!   entries and every file to its durable bytes (a never-synced file is
//!   empty), drops inodes no durable name refers to, releases all locks, and
//!   makes every handle opened before the crash fail ("stale handle");
//! - a [`WritableFile`] buffers appends in the handle like the POSIX one:
//!   readers see them only after `flush` (or `sync`), and dropping the handle
//!   without flushing loses them. [`MemFs::crash_process`] models `kill -9`:
//!   flushed bytes and names survive, unflushed buffers and handles do not.
//!
//! Worked example:
//!
//! ```text
//! create /db/a; append "xy"; sync          a: current "xy", durable "xy"
//!                                          /db: current {a}, durable {}
//! crash()                                  /db: {} -> a is gone
//!
//! create /db/a; append "xy"; sync; sync_dir /db; append "z"; flush
//! crash()                                  a survives with "xy" ("z" dropped)
//! ```
//!
//! Directories themselves are durable as soon as `create_dir_all` returns
//! (the engine does not rely on fsyncing a directory's parent). `truncate` is
//! durable at once, as in [`super::posix`] (which fsyncs after truncating).
//!
//! Locking: one mutex guards the namespace (`State`); each inode has its own
//! `RwLock` so reads of different files do not contend. Lock order: state,
//! then inode.

use super::{ExtentFile, FileLock, FileSystem, RandomAccessFile, SequentialFile, WritableFile};
use crate::error::{Error, Result};
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Identity of a file, stable across renames.
type Ino = u64;

/// The bytes of one file. Guarded by its own `RwLock`.
#[derive(Default)]
struct InodeData {
    /// What readers see.
    current: Vec<u8>,
    /// What survives power loss.
    durable: Vec<u8>,
    /// Bumped by every crash; a handle whose generation differs is stale.
    generation: u64,
}

type Inode = Arc<RwLock<InodeData>>;

/// One directory: file names (current and durable) and subdirectory names.
#[derive(Default)]
struct Dir {
    current: BTreeMap<String, Ino>,
    durable: BTreeMap<String, Ino>,
    /// Subdirectories; durable at creation (see the module docs).
    subdirs: BTreeSet<String>,
}

/// The namespace, guarded by `Shared::state`.
struct State {
    inodes: HashMap<Ino, Inode>,
    /// Normalized directory path -> directory.
    dirs: HashMap<PathBuf, Dir>,
    next_ino: Ino,
    /// Locked path -> token of the guard holding it.
    locks: HashMap<PathBuf, u64>,
    next_lock_token: u64,
    /// Generation given to handles opened now.
    generation: u64,
}

struct Shared {
    state: Mutex<State>,
    /// Microseconds a sync handle's `sync_data` takes ([`MemFs::set_sync_latency`]).
    sync_latency_us: Arc<std::sync::atomic::AtomicU64>,
}

/// The in-memory file system. Cloning gives another handle to the same files,
/// so a test can keep one after handing one to the database.
#[derive(Clone)]
pub struct MemFs {
    shared: Arc<Shared>,
}

impl Default for MemFs {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for MemFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemFs").finish_non_exhaustive()
    }
}

fn io_err(op: &'static str, path: &Path, kind: ErrorKind, msg: &str) -> Error {
    Error::io(op, path, std::io::Error::new(kind, msg.to_owned()))
}

fn stale(op: &'static str, path: &Path) -> Error {
    io_err(
        op,
        path,
        ErrorKind::Other,
        "stale handle: opened before a crash",
    )
}

fn not_found(op: &'static str, path: &Path) -> Error {
    io_err(op, path, ErrorKind::NotFound, "no such file or directory")
}

/// Normalizes a path: drops `.` components; the empty path becomes `.`.
fn norm(p: &Path) -> PathBuf {
    let out: PathBuf = p
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    if out.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        out
    }
}

/// Splits a file path into its normalized directory and its name.
fn split(op: &'static str, p: &Path) -> Result<(PathBuf, String)> {
    let n = norm(p);
    let name = n
        .file_name()
        .and_then(|s| s.to_str())
        .ok_or_else(|| io_err(op, p, ErrorKind::InvalidInput, "not a file name"))?
        .to_owned();
    let parent = norm(n.parent().unwrap_or(Path::new(".")));
    Ok((parent, name))
}

/// Converts a file offset to a buffer index.
fn to_index(op: &'static str, path: &Path, v: u64) -> Result<usize> {
    usize::try_from(v).map_err(|_| io_err(op, path, ErrorKind::InvalidInput, "offset too large"))
}

/// A small deterministic PRNG (splitmix64) for [`MemFs::crash_keep_unsynced_prefix`].
struct SplitMix(u64);
impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl State {
    fn dir(&self, op: &'static str, dir: &Path) -> Result<&Dir> {
        self.dirs.get(dir).ok_or_else(|| not_found(op, dir))
    }

    fn dir_mut(&mut self, op: &'static str, dir: &Path) -> Result<&mut Dir> {
        self.dirs.get_mut(dir).ok_or_else(|| not_found(op, dir))
    }

    /// The inode currently named `path`.
    fn lookup(&self, op: &'static str, path: &Path) -> Result<Inode> {
        let (dir, name) = split(op, path)?;
        let ino = self
            .dir(op, &dir)?
            .current
            .get(&name)
            .copied()
            .ok_or_else(|| not_found(op, path))?;
        self.inodes
            .get(&ino)
            .cloned()
            .ok_or_else(|| not_found(op, path))
    }

    /// Returns the inode named `path`, creating an empty one if missing.
    /// With `truncate`, an existing file's current bytes are cleared
    /// (its durable bytes stay until the next sync, like `O_TRUNC`).
    fn open_or_create(&mut self, op: &'static str, path: &Path, truncate: bool) -> Result<Inode> {
        let (dir, name) = split(op, path)?;
        let next = self.next_ino;
        let d = self.dir_mut(op, &dir)?;
        if d.subdirs.contains(&name) {
            return Err(io_err(op, path, ErrorKind::IsADirectory, "is a directory"));
        }
        let (ino, created) = match d.current.get(&name) {
            Some(&ino) => (ino, false),
            None => {
                d.current.insert(name, next);
                (next, true)
            }
        };
        if created {
            self.next_ino += 1;
            let inode = Inode::default();
            inode.write().generation = self.generation;
            self.inodes.insert(ino, inode);
        }
        let inode = self
            .inodes
            .get(&ino)
            .cloned()
            .ok_or_else(|| not_found(op, path))?;
        if truncate {
            inode.write().current.clear();
        }
        Ok(inode)
    }

    /// Drops inodes that no current or durable name refers to. Open handles
    /// keep their `Arc`, so an unlinked open file stays readable (POSIX).
    fn collect_garbage(&mut self) {
        let live: HashSet<Ino> = self
            .dirs
            .values()
            .flat_map(|d| d.current.values().chain(d.durable.values()))
            .copied()
            .collect();
        self.inodes.retain(|ino, _| live.contains(ino));
    }

    /// Power loss or process death: invalidates handles and locks; with
    /// `power_loss`, reverts names and bytes to their durable state, keeping
    /// for an append-only file a prefix of its unsynced tail chosen by `rng`.
    fn crash(&mut self, power_loss: bool, mut rng: Option<SplitMix>) {
        self.generation += 1;
        self.locks.clear();
        // Every inode, including ones about to be dropped, so that no stale
        // handle can keep writing. Sorted so the seeded choice of surviving
        // tails does not depend on hash order.
        let mut inodes: Vec<(Ino, Inode)> = self
            .inodes
            .iter()
            .map(|(i, n)| (*i, Arc::clone(n)))
            .collect();
        inodes.sort_unstable_by_key(|(ino, _)| *ino);
        for (_, inode) in inodes {
            let mut data = inode.write();
            data.generation = self.generation;
            if !power_loss {
                continue;
            }
            let mut survivor = data.durable.clone();
            if let Some(r) = rng.as_mut() {
                if let Some(tail) = data.current.strip_prefix(data.durable.as_slice()) {
                    let keep = r.next() % (tail.len() as u64 + 1);
                    // keep <= tail.len(), so the conversion and slice are in range.
                    let keep = usize::try_from(keep).unwrap_or(0);
                    survivor.extend_from_slice(tail.get(..keep).unwrap_or_default());
                }
            }
            data.durable = survivor.clone();
            data.current = survivor;
        }
        if power_loss {
            for d in self.dirs.values_mut() {
                d.current = d.durable.clone();
            }
            self.collect_garbage();
        }
    }
}

impl MemFs {
    /// An empty file system holding only the directories `/` and `.`.
    pub fn new() -> Self {
        let mut dirs = HashMap::new();
        dirs.insert(PathBuf::from("/"), Dir::default());
        dirs.insert(PathBuf::from("."), Dir::default());
        MemFs {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    inodes: HashMap::new(),
                    dirs,
                    next_ino: 1,
                    locks: HashMap::new(),
                    next_lock_token: 1,
                    generation: 0,
                }),
                sync_latency_us: Arc::default(),
            }),
        }
    }

    /// This file system as a trait object sharing the same files.
    pub fn arc(&self) -> Arc<dyn FileSystem> {
        Arc::new(self.clone())
    }

    /// Power loss: every directory reverts to its durable entries, every file
    /// to its durable bytes; all handles opened before become stale (their
    /// operations fail) and all locks are released.
    pub fn crash(&self) {
        self.shared.state.lock().crash(true, None);
    }

    /// Makes every sync through a [`WritableFile::sync_handle`] take
    /// `latency`: the handle takes its snapshot of the file's bytes when
    /// the call begins and makes exactly those durable when it ends, so
    /// bytes flushed meanwhile are not covered (the strictest fdatasync a
    /// POSIX system may give). Tests use it to hold an fsync in flight.
    pub fn set_sync_latency(&self, latency: std::time::Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.shared
            .sync_latency_us
            .store(us, std::sync::atomic::Ordering::Relaxed);
    }

    /// Power loss in which the disk wrote part of what was not yet synced:
    /// like [`MemFs::crash`], but a file whose current bytes extend its
    /// durable bytes (an append-only file such as a WAL) keeps a prefix of
    /// that unsynced tail, chosen pseudo-randomly from `rng_seed`. This
    /// produces torn tails.
    pub fn crash_keep_unsynced_prefix(&self, rng_seed: u64) {
        self.shared
            .state
            .lock()
            .crash(true, Some(SplitMix(rng_seed)));
    }

    /// Process death (`kill -9`) without power loss: flushed bytes and all
    /// names survive; unflushed append buffers, open handles and locks do not.
    pub fn crash_process(&self) {
        self.shared.state.lock().crash(false, None);
    }
}

/// Checks a handle's generation against its inode's.
fn check_gen(data: &InodeData, generation: u64, op: &'static str, path: &Path) -> Result<()> {
    if data.generation == generation {
        Ok(())
    } else {
        Err(stale(op, path))
    }
}

struct MemWritable {
    inode: Inode,
    generation: u64,
    path: PathBuf,
    /// Appended but not yet flushed (invisible to readers).
    buf: Vec<u8>,
    len: u64,
    /// Shared with the file system: the latency of a sync handle's syncs.
    sync_latency_us: Arc<std::sync::atomic::AtomicU64>,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        check_gen(&self.inode.read(), self.generation, "write", &self.path)?;
        self.buf.extend_from_slice(data);
        self.len += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let mut d = self.inode.write();
        check_gen(&d, self.generation, "write", &self.path)?;
        d.current.extend_from_slice(&self.buf);
        self.buf.clear();
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        let mut d = self.inode.write();
        check_gen(&d, self.generation, "fdatasync", &self.path)?;
        d.durable = d.current.clone();
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn sync_handle(&self) -> Result<Option<Arc<dyn super::FileSync>>> {
        Ok(Some(Arc::new(sync_handle::MemSync::new(
            Arc::clone(&self.inode),
            self.generation,
            self.path.clone(),
            Arc::clone(&self.sync_latency_us),
        ))))
    }
}

/// A read/write handle at offsets (random reads and extent files).
struct MemRandom {
    inode: Inode,
    generation: u64,
    path: PathBuf,
}

impl RandomAccessFile for MemRandom {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let d = self.inode.read();
        check_gen(&d, self.generation, "pread", &self.path)?;
        let start = to_index("pread", &self.path, offset)?;
        let src = start
            .checked_add(buf.len())
            .and_then(|end| d.current.get(start..end))
            .ok_or_else(|| {
                io_err(
                    "pread",
                    &self.path,
                    ErrorKind::UnexpectedEof,
                    "read past end of file",
                )
            })?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        let d = self.inode.read();
        check_gen(&d, self.generation, "fstat", &self.path)?;
        Ok(d.current.len() as u64)
    }
}

impl ExtentFile for MemRandom {
    /// Zeroes the range (within the file), as a punched hole reads: a
    /// read of a freed slot then fails its checksum in tests.
    fn punch_hole(&self, offset: u64, len: u64) -> Result<()> {
        let mut d = self.inode.write();
        check_gen(&d, self.generation, "fallocate", &self.path)?;
        let start = to_index("fallocate", &self.path, offset)?;
        let end = to_index("fallocate", &self.path, offset.saturating_add(len))?;
        let end = end.min(d.current.len());
        if let Some(range) = d.current.get_mut(start.min(end)..end) {
            range.fill(0);
        }
        Ok(())
    }
    fn write_all_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        let mut d = self.inode.write();
        check_gen(&d, self.generation, "pwrite", &self.path)?;
        let start = to_index("pwrite", &self.path, offset)?;
        let end = start
            .checked_add(data.len())
            .ok_or_else(|| io_err("pwrite", &self.path, ErrorKind::InvalidInput, "overflow"))?;
        if d.current.len() < end {
            d.current.resize(end, 0);
        }
        let dst = d
            .current
            .get_mut(start..end)
            .ok_or_else(|| io_err("pwrite", &self.path, ErrorKind::Other, "resize failed"))?;
        dst.copy_from_slice(data);
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        let mut d = self.inode.write();
        check_gen(&d, self.generation, "fdatasync", &self.path)?;
        d.durable = d.current.clone();
        Ok(())
    }
}

struct MemSequential {
    inode: Inode,
    generation: u64,
    path: PathBuf,
    pos: usize,
}

impl SequentialFile for MemSequential {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        let d = self.inode.read();
        check_gen(&d, self.generation, "read", &self.path)?;
        let rest = d.current.get(self.pos..).unwrap_or_default();
        let n = rest.len().min(buf.len());
        if let (Some(dst), Some(src)) = (buf.get_mut(..n), rest.get(..n)) {
            dst.copy_from_slice(src);
        }
        self.pos += n;
        Ok(n)
    }
}

struct MemLock {
    shared: Arc<Shared>,
    path: PathBuf,
    token: u64,
}

impl FileLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        let mut st = self.shared.state.lock();
        // After a crash the lock table was cleared and may hold a newer lock.
        if st.locks.get(&self.path) == Some(&self.token) {
            st.locks.remove(&self.path);
        }
    }
}

impl FileSystem for MemFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let mut st = self.shared.state.lock();
        let inode = st.open_or_create("create", path, true)?;
        Ok(Box::new(MemWritable {
            inode,
            generation: st.generation,
            path: path.to_owned(),
            buf: Vec::new(),
            len: 0,
            sync_latency_us: Arc::clone(&self.shared.sync_latency_us),
        }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let st = self.shared.state.lock();
        let inode = st.lookup("open", path)?;
        let len = inode.read().current.len() as u64;
        Ok(Box::new(MemWritable {
            inode,
            generation: st.generation,
            path: path.to_owned(),
            buf: Vec::new(),
            len,
            sync_latency_us: Arc::clone(&self.shared.sync_latency_us),
        }))
    }

    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
        let st = self.shared.state.lock();
        Ok(Box::new(MemSequential {
            inode: st.lookup("open", path)?,
            generation: st.generation,
            path: path.to_owned(),
            pos: 0,
        }))
    }

    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let st = self.shared.state.lock();
        Ok(Arc::new(MemRandom {
            inode: st.lookup("open", path)?,
            generation: st.generation,
            path: path.to_owned(),
        }))
    }

    fn open_extent_file(&self, path: &Path) -> Result<Arc<dyn ExtentFile>> {
        let mut st = self.shared.state.lock();
        Ok(Arc::new(MemRandom {
            inode: st.open_or_create("open", path, false)?,
            generation: st.generation,
            path: path.to_owned(),
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut st = self.shared.state.lock();
        let (fdir, fname) = split("rename", from)?;
        let (tdir, tname) = split("rename", to)?;
        // Check the target directory before detaching the source: atomic.
        if st.dir("rename", &tdir)?.subdirs.contains(&tname) {
            return Err(io_err(
                "rename",
                to,
                ErrorKind::IsADirectory,
                "is a directory",
            ));
        }
        let ino = st
            .dir_mut("rename", &fdir)?
            .current
            .remove(&fname)
            .ok_or_else(|| not_found("rename", from))?;
        st.dir_mut("rename", &tdir)?.current.insert(tname, ino);
        st.collect_garbage();
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        let mut st = self.shared.state.lock();
        let (dir, name) = split("unlink", path)?;
        st.dir_mut("unlink", &dir)?
            .current
            .remove(&name)
            .ok_or_else(|| not_found("unlink", path))?;
        st.collect_garbage();
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        let mut st = self.shared.state.lock();
        let n = norm(path);
        // Outermost first, so each parent exists when its child is added.
        let mut chain: Vec<&Path> = n
            .ancestors()
            .filter(|a| !a.as_os_str().is_empty())
            .collect();
        chain.reverse();
        for dir in chain {
            if st.dirs.contains_key(dir) {
                continue;
            }
            let (parent, name) = split("mkdir", dir)?;
            let p = st.dirs.entry(parent).or_default();
            if p.current.contains_key(&name) {
                return Err(io_err(
                    "mkdir",
                    dir,
                    ErrorKind::AlreadyExists,
                    "a file has that name",
                ));
            }
            p.subdirs.insert(name);
            st.dirs.insert(dir.to_owned(), Dir::default());
        }
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<String>> {
        let st = self.shared.state.lock();
        let d = st.dir("readdir", &norm(path))?;
        let mut names: Vec<String> = d.current.keys().chain(d.subdirs.iter()).cloned().collect();
        names.sort();
        Ok(names)
    }

    fn exists(&self, path: &Path) -> bool {
        let st = self.shared.state.lock();
        let n = norm(path);
        st.dirs.contains_key(&n) || st.lookup("stat", &n).is_ok()
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        let inode = self.shared.state.lock().lookup("stat", path)?;
        let len = inode.read().current.len();
        Ok(len as u64)
    }

    fn sync_dir(&self, path: &Path) -> Result<()> {
        let mut st = self.shared.state.lock();
        let d = st.dir_mut("fsync dir", &norm(path))?;
        d.durable = d.current.clone();
        st.collect_garbage();
        Ok(())
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut st = self.shared.state.lock();
        st.open_or_create("open", path, false)?;
        let key = norm(path);
        if st.locks.contains_key(&key) {
            return Err(Error::Locked(path.to_owned()));
        }
        let token = st.next_lock_token;
        st.next_lock_token += 1;
        st.locks.insert(key.clone(), token);
        Ok(Box::new(MemLock {
            shared: Arc::clone(&self.shared),
            path: key,
            token,
        }))
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let inode = self.shared.state.lock().lookup("open", path)?;
        let len = to_index("ftruncate", path, len)?;
        let mut d = inode.write();
        d.current.resize(len, 0);
        // Durable at once: the POSIX implementation fsyncs after truncating.
        d.durable = d.current.clone();
        Ok(())
    }
}

mod sync_handle;
#[cfg(test)]
mod tests;
