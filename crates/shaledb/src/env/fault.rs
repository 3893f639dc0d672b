//! A [`FileSystem`] wrapper that injects I/O failures, to test that the
//! engine treats a failed write or fsync as sticky and never retries a sync.
//!
//! Every *mutating* operation is counted ([`FaultFs::ops`]): `create`
//! (and `create_mapped` and `create_direct_extent`, counted as a `create`),
//! `open_extent_file`, `rename`, `remove_file`, `create_dir_all`, `sync_dir`,
//! `truncate`, and on handles `append`, `flush`, `sync`, `write_all_at` and
//! the sync handle's `sync_data` (a sync).
//! Reads, opens for reading, `open_append`, `list_dir`, `exists`,
//! `file_size` and `lock` are passed through uncounted.
//!
//! [`FaultFs::fail_after`]`(n)` arms the wrapper: the n-th eligible operation
//! from now (1-based) and every eligible one after it fail with
//! `Error::Io` of kind `Other` and message `"injected fault"`, without
//! reaching the inner file system. With [`FaultFs::fail_syncs_only`] only
//! syncs (`WritableFile::sync`, `ExtentFile::sync`, `sync_dir`) are eligible:
//! other operations neither count towards `n` nor fail; likewise
//! [`FaultFs::fail_paths_ending`] makes only operations on matching paths
//! eligible.
//!
//! Worked example:
//!
//! ```text
//! fs.fail_syncs_only(true); fs.fail_after(2);
//! f.append(..)  ok            (not a sync)
//! f.sync()      ok            (1st sync)
//! f.append(..)  ok
//! f.sync()      Err(injected) (2nd sync) -- and every sync after it
//! fs.heal()     syncs pass again
//! ```
//!
//! All control state sits in one mutex shared by clones and handles.

use super::{
    ExtentFile, FileLock, FileSync, FileSystem, RandomAccessFile, SequentialFile, WritableFile,
};
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The injected error's message.
pub const INJECTED_MESSAGE: &str = "injected fault";

#[derive(Default)]
struct Control {
    /// Mutating operations seen (failed ones included).
    ops: u64,
    /// Sync operations seen (failed ones included).
    syncs: u64,
    /// Failures injected so far.
    injected: u64,
    /// Eligible operations still allowed before failing; `None` = disarmed.
    remaining: Option<u64>,
    syncs_only: bool,
    /// Only operations on paths ending with this are eligible.
    path_suffix: Option<String>,
}

/// Fault-injecting wrapper. Cloning shares the control state, so a test can
/// keep a handle after giving one to the database.
#[derive(Clone)]
pub struct FaultFs {
    inner: Arc<dyn FileSystem>,
    ctl: Arc<Mutex<Control>>,
}

impl std::fmt::Debug for FaultFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = self.ctl.lock();
        f.debug_struct("FaultFs")
            .field("ops", &c.ops)
            .field("injected", &c.injected)
            .field("remaining", &c.remaining)
            .field("syncs_only", &c.syncs_only)
            .finish_non_exhaustive()
    }
}

/// What kind of operation is being checked.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OpKind {
    Sync,
    Other,
}

/// Counts one operation and decides whether it fails.
fn check(ctl: &Mutex<Control>, kind: OpKind, op: &'static str, path: &Path) -> Result<()> {
    let mut c = ctl.lock();
    c.ops += 1;
    if kind == OpKind::Sync {
        c.syncs += 1;
    }
    if c.syncs_only && kind != OpKind::Sync {
        return Ok(());
    }
    if let Some(sfx) = &c.path_suffix {
        if !path.to_string_lossy().ends_with(sfx.as_str()) {
            return Ok(());
        }
    }
    let fail = match c.remaining.as_mut() {
        None => false,
        Some(r) => {
            *r = r.saturating_sub(1);
            *r == 0
        }
    };
    if fail {
        c.injected += 1;
        return Err(Error::io(op, path, std::io::Error::other(INJECTED_MESSAGE)));
    }
    Ok(())
}

impl FaultFs {
    /// Wraps `inner`; nothing is injected until [`FaultFs::fail_after`].
    pub fn new(inner: Arc<dyn FileSystem>) -> Self {
        FaultFs {
            inner,
            ctl: Arc::new(Mutex::new(Control::default())),
        }
    }

    /// This wrapper as a trait object sharing the same control state.
    pub fn arc(&self) -> Arc<dyn FileSystem> {
        Arc::new(self.clone())
    }

    /// The n-th eligible operation from now (1-based) and all later ones
    /// fail. `fail_after(1)` fails the very next one; 0 behaves like 1.
    pub fn fail_after(&self, n: u64) {
        self.ctl.lock().remaining = Some(n.max(1));
    }

    /// Restricts injection (and the countdown) to sync operations.
    pub fn fail_syncs_only(&self, on: bool) {
        self.ctl.lock().syncs_only = on;
    }

    /// Restricts injection (and the countdown) to operations on paths
    /// ending with `suffix` (`None`: every path), e.g. `".blob"` for the
    /// value files alone.
    pub fn fail_paths_ending(&self, suffix: Option<&str>) {
        self.ctl.lock().path_suffix = suffix.map(str::to_string);
    }

    /// Stops injecting; counters are kept.
    pub fn heal(&self) {
        self.ctl.lock().remaining = None;
    }

    /// Mutating operations attempted so far (including failed ones).
    pub fn ops(&self) -> u64 {
        self.ctl.lock().ops
    }

    /// Sync operations attempted so far (including failed ones); lets a test
    /// check that a failed fsync is not retried.
    pub fn syncs(&self) -> u64 {
        self.ctl.lock().syncs
    }

    /// Failures injected so far.
    pub fn injected(&self) -> u64 {
        self.ctl.lock().injected
    }

    fn check(&self, kind: OpKind, op: &'static str, path: &Path) -> Result<()> {
        check(&self.ctl, kind, op, path)
    }
}

struct FaultWritable {
    inner: Box<dyn WritableFile>,
    ctl: Arc<Mutex<Control>>,
    path: PathBuf,
}

impl WritableFile for FaultWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        check(&self.ctl, OpKind::Other, "write", &self.path)?;
        self.inner.append(data)
    }
    fn flush(&mut self) -> Result<()> {
        check(&self.ctl, OpKind::Other, "write", &self.path)?;
        self.inner.flush()
    }
    fn sync(&mut self) -> Result<()> {
        check(&self.ctl, OpKind::Sync, "fdatasync", &self.path)?;
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn sync_handle(&self) -> Result<Option<Arc<dyn FileSync>>> {
        Ok(self.inner.sync_handle()?.map(|inner| {
            Arc::new(FaultSync {
                inner,
                ctl: Arc::clone(&self.ctl),
                path: self.path.clone(),
            }) as Arc<dyn FileSync>
        }))
    }
}

/// A [`FaultWritable`]'s sync handle: its syncs count and fail like the
/// writer's own.
struct FaultSync {
    inner: Arc<dyn FileSync>,
    ctl: Arc<Mutex<Control>>,
    path: PathBuf,
}

impl FileSync for FaultSync {
    fn sync_data(&self) -> Result<()> {
        check(&self.ctl, OpKind::Sync, "fdatasync", &self.path)?;
        self.inner.sync_data()
    }
}

struct FaultExtent {
    inner: Arc<dyn ExtentFile>,
    ctl: Arc<Mutex<Control>>,
    path: PathBuf,
}

impl RandomAccessFile for FaultExtent {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read_exact_at(offset, buf)
    }
    fn len(&self) -> Result<u64> {
        self.inner.len()
    }
}

impl ExtentFile for FaultExtent {
    fn write_all_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        check(&self.ctl, OpKind::Other, "pwrite", &self.path)?;
        self.inner.write_all_at(offset, data)
    }
    fn sync(&self) -> Result<()> {
        check(&self.ctl, OpKind::Sync, "fdatasync", &self.path)?;
        self.inner.sync()
    }
    fn punch_hole(&self, offset: u64, len: u64) -> Result<()> {
        check(&self.ctl, OpKind::Other, "fallocate", &self.path)?;
        self.inner.punch_hole(offset, len)
    }
}

impl FileSystem for FaultFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.check(OpKind::Other, "create", path)?;
        Ok(Box::new(FaultWritable {
            inner: self.inner.create(path)?,
            ctl: Arc::clone(&self.ctl),
            path: path.to_owned(),
        }))
    }

    fn create_mapped(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.check(OpKind::Other, "create", path)?;
        Ok(Box::new(FaultWritable {
            inner: self.inner.create_mapped(path)?,
            ctl: Arc::clone(&self.ctl),
            path: path.to_owned(),
        }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(Box::new(FaultWritable {
            inner: self.inner.open_append(path)?,
            ctl: Arc::clone(&self.ctl),
            path: path.to_owned(),
        }))
    }

    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
        self.inner.open_sequential(path)
    }

    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.inner.open_random(path)
    }

    fn open_extent_file(&self, path: &Path) -> Result<Arc<dyn ExtentFile>> {
        self.check(OpKind::Other, "open", path)?;
        Ok(Arc::new(FaultExtent {
            inner: self.inner.open_extent_file(path)?,
            ctl: Arc::clone(&self.ctl),
            path: path.to_owned(),
        }))
    }

    fn create_direct_extent(&self, path: &Path) -> Result<Arc<dyn ExtentFile>> {
        self.check(OpKind::Other, "create", path)?;
        Ok(Arc::new(FaultExtent {
            inner: self.inner.create_direct_extent(path)?,
            ctl: Arc::clone(&self.ctl),
            path: path.to_owned(),
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.check(OpKind::Other, "rename", from)?;
        self.inner.rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        self.check(OpKind::Other, "unlink", path)?;
        self.inner.remove_file(path)
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        self.check(OpKind::Other, "mkdir", path)?;
        self.inner.create_dir_all(path)
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<String>> {
        self.inner.list_dir(path)
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        self.inner.file_size(path)
    }

    fn sync_dir(&self, path: &Path) -> Result<()> {
        self.check(OpKind::Sync, "fsync dir", path)?;
        self.inner.sync_dir(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        self.check(OpKind::Other, "ftruncate", path)?;
        self.inner.truncate(path, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::mem::MemFs;
    use crate::env::read_to_vec;

    fn setup() -> (MemFs, FaultFs) {
        let mem = MemFs::new();
        mem.create_dir_all(Path::new("/db")).expect("mkdir");
        let fs = FaultFs::new(mem.arc());
        (mem, fs)
    }

    fn is_injected(r: Result<()>) -> bool {
        match r {
            Err(Error::Io { source, .. }) => {
                source.kind() == std::io::ErrorKind::Other && source.to_string() == INJECTED_MESSAGE
            }
            _ => false,
        }
    }

    #[test]
    fn counts_mutating_operations_only() {
        let (_mem, fs) = setup();
        let p = Path::new("/db/f");
        let mut f = fs.create(p).expect("create"); // 1
        f.append(b"ab").expect("append"); // 2
        f.flush().expect("flush"); // 3
        f.sync().expect("sync"); // 4
        let _ = fs.exists(p);
        let _ = fs.file_size(p).expect("size");
        let _ = fs.list_dir(Path::new("/db")).expect("ls");
        let _ = read_to_vec(&fs, p).expect("read");
        let e = fs.open_extent_file(Path::new("/db/e")).expect("open"); // 5
        e.write_all_at(0, b"x").expect("pwrite"); // 6
        e.sync().expect("sync"); // 7
        fs.sync_dir(Path::new("/db")).expect("sync dir"); // 8
        fs.rename(p, Path::new("/db/g")).expect("rename"); // 9
        fs.truncate(Path::new("/db/g"), 1).expect("truncate"); // 10
        fs.remove_file(Path::new("/db/g")).expect("rm"); // 11
        assert_eq!(fs.ops(), 11);
        assert_eq!(fs.syncs(), 3);
        assert_eq!(fs.injected(), 0);
    }

    #[test]
    fn fail_after_n_fails_nth_and_all_later_until_healed() {
        let (mem, fs) = setup();
        let mut f = fs.create(Path::new("/db/f")).expect("create");
        fs.fail_after(3);
        f.append(b"1").expect("1st");
        f.append(b"2").expect("2nd");
        assert!(is_injected(f.append(b"3")));
        assert!(is_injected(f.flush()));
        assert!(is_injected(fs.sync_dir(Path::new("/db"))));
        assert!(fs.create(Path::new("/db/h")).is_err());
        assert_eq!(fs.injected(), 4);
        // Failed operations never reached the inner file system.
        assert!(!mem.exists(Path::new("/db/h")));
        fs.heal();
        f.flush().expect("healed");
        assert_eq!(read_to_vec(&mem, Path::new("/db/f")).expect("read"), b"12");
        assert_eq!(fs.ops(), 8);
    }

    #[test]
    fn fail_after_one_fails_the_next_operation() {
        let (_mem, fs) = setup();
        fs.fail_after(1);
        assert!(fs.create(Path::new("/db/f")).is_err());
        fs.heal();
        fs.fail_after(0);
        assert!(is_injected(fs.sync_dir(Path::new("/db"))));
    }

    #[test]
    fn syncs_only_mode_skips_other_operations() {
        let (mem, fs) = setup();
        fs.fail_syncs_only(true);
        fs.fail_after(2);
        let mut f = fs.create(Path::new("/db/f")).expect("create");
        f.append(b"a").expect("append");
        f.sync().expect("1st sync passes");
        f.append(b"b").expect("append");
        f.flush().expect("flush");
        assert!(is_injected(f.sync()));
        let e = fs.open_extent_file(Path::new("/db/e")).expect("open");
        e.write_all_at(0, b"z").expect("pwrite still works");
        assert!(is_injected(e.sync()));
        assert!(is_injected(fs.sync_dir(Path::new("/db"))));
        assert_eq!(fs.syncs(), 4);
        assert_eq!(fs.injected(), 3);
        // The failed sync did not make "b" durable.
        drop(f);
        fs.heal();
        fs.sync_dir(Path::new("/db")).expect("healed");
        mem.crash();
        assert_eq!(read_to_vec(&mem, Path::new("/db/f")).expect("read"), b"a");
    }

    #[test]
    fn clones_share_control_and_pass_through_locks() {
        let (_mem, fs) = setup();
        let other = fs.clone();
        other.fail_after(1);
        assert!(fs.sync_dir(Path::new("/db")).is_err());
        assert_eq!(other.injected(), 1);
        let l = fs.lock(Path::new("/db/LOCK")).expect("lock not counted");
        assert!(matches!(
            fs.lock(Path::new("/db/LOCK")),
            Err(Error::Locked(_))
        ));
        drop(l);
    }
}
