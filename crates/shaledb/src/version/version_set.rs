//! The version set: the current [`Version`] and the manifest that makes it durable.
//!
//! Commit protocol for a change of the extent set (crash argument in
//! docs/architecture.md, "Recovery"):
//! 1. the job writes new extents into free slots and fsyncs their data files;
//! 2. [`VersionSet::log_and_apply`] appends the edit to the manifest and fsyncs it
//!    (this is the commit point);
//! 3. the new version is installed; extents it dropped are marked obsolete and
//!    their slots are freed when the last reader lets go.
//!
//! A crash before 2 leaves only unreferenced slots (free at the next open); a
//! torn manifest tail is an edit that never committed. The manifest is
//! rewritten from a snapshot at every open and whenever it outgrows
//! `max_manifest_size`: write `MANIFEST-N` (snapshot), fsync, atomically
//! replace `CURRENT`, fsync the directory, delete the old manifest.

use super::edit::VersionEdit;
use super::extent_meta::ExtentMeta;
use super::space::ExtentSpace;
use super::version::{CfVersion, Extent, L0Run, Version};
use crate::env::{read_to_vec, write_file_atomic, FileSystem};
use crate::error::{Error, Result};
use crate::wal::{LogReader, LogWriter};
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// Name of the file that names the live manifest.
pub const CURRENT: &str = "CURRENT";
/// Id of the column family every database has.
pub const DEFAULT_CF_ID: u32 = 0;
/// Name of the default column family.
pub const DEFAULT_CF_NAME: &str = "default";

/// The file number in a database file name (`000012.log`, `000012.sdt`,
/// `MANIFEST-000012`), if it has one.
fn file_number_of(name: &str) -> Option<u64> {
    let stem = name
        .strip_prefix("MANIFEST-")
        .or_else(|| name.strip_suffix(".log"))
        .or_else(|| name.strip_suffix(".sdt"))?;
    stem.parse().ok()
}

/// Path of manifest `number`.
pub fn manifest_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("MANIFEST-{number:06}"))
}

struct ManifestState {
    writer: LogWriter,
    number: u64,
    log_number: u64,
    last_sequence: u64,
}

/// What recovery learned from the manifest.
#[derive(Debug, Clone)]
pub struct RecoveredManifest {
    /// WAL segments below this are fully flushed.
    pub log_number: u64,
    /// Largest sequence recorded by a flush.
    pub last_sequence: u64,
    /// The lifetime counters of the last edit that had them (empty for a
    /// new database or one written before they existed).
    pub lifetime_counters: Vec<u64>,
}

/// Current version + manifest writer.
pub struct VersionSet {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    space: Arc<ExtentSpace>,
    num_levels: usize,
    max_manifest_size: u64,
    /// Read by every reader; replaced under `manifest`'s lock.
    current: RwLock<Arc<Version>>,
    /// Shared with the extent space and the WAL.
    next_file_number: Arc<AtomicU64>,
    next_extent_id: AtomicU64,
    next_run: AtomicU64,
    next_cf_id: AtomicU32,
    /// Serializes edits: whoever holds it appends to the manifest and installs versions.
    manifest: Mutex<Option<ManifestState>>,
    /// The lifetime counters last logged, repeated in every new manifest's
    /// snapshot. Taken only while `manifest` is held (lock order: manifest,
    /// then this).
    lifetime_counters: Mutex<Vec<u64>>,
}

/// Per-column-family state while replaying the manifest: metas only, so that no
/// slot is touched before the final picture is known.
#[derive(Default)]
struct ReplayCf {
    name: String,
    extents: BTreeMap<u64, (u8, ExtentMeta)>,
}

impl VersionSet {
    /// Opens the version set of `dir`: replays the manifest named by CURRENT, or
    /// creates a new database when there is none and `create` is set.
    pub fn open(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        space: Arc<ExtentSpace>,
        num_levels: usize,
        max_manifest_size: u64,
        next_file_number: Arc<AtomicU64>,
    ) -> Result<(VersionSet, RecoveredManifest)> {
        let vs = VersionSet {
            fs,
            dir,
            space,
            num_levels,
            max_manifest_size,
            current: RwLock::new(Arc::new(Version::default())),
            next_file_number,
            next_extent_id: AtomicU64::new(1),
            next_run: AtomicU64::new(1),
            next_cf_id: AtomicU32::new(1),
            manifest: Mutex::new(None),
            lifetime_counters: Mutex::new(Vec::new()),
        };
        let current_path = vs.dir.join(CURRENT);
        let mut log_number = 0;
        let mut last_sequence = 0;
        let mut cfs: BTreeMap<u32, ReplayCf> = BTreeMap::new();
        if vs.fs.exists(&current_path) {
            let raw = read_to_vec(vs.fs.as_ref(), &current_path)?;
            let name = std::str::from_utf8(&raw)
                .ok()
                .map(str::trim)
                .filter(|n| n.starts_with("MANIFEST-"))
                .ok_or_else(|| {
                    Error::corruption(&current_path, 0, "CURRENT does not name a manifest")
                })?;
            let number: u64 = name
                .trim_start_matches("MANIFEST-")
                .parse()
                .map_err(|_| Error::corruption(&current_path, 0, "bad manifest number"))?;
            let path = vs.dir.join(name);
            let file = vs.fs.open_sequential(&path)?;
            let mut reader = LogReader::new(file, path.clone(), number)?;
            while let Some((offset, record)) = reader.read_record()? {
                let edit = VersionEdit::decode(&record)
                    .map_err(|e| Error::corruption(&path, offset, e.to_string()))?;
                Self::replay_edit(&mut cfs, &edit, &path, offset)?;
                if let Some(v) = edit.log_number {
                    log_number = v;
                }
                if let Some(v) = edit.last_sequence {
                    last_sequence = last_sequence.max(v);
                }
                if let Some(c) = &edit.lifetime_counters {
                    *vs.lifetime_counters.lock() = c.clone();
                }
                vs.bump_counters(&edit);
            }
            if cfs.is_empty() {
                return Err(Error::corruption(
                    &path,
                    0,
                    "manifest holds no column family",
                ));
            }
        } else {
            cfs.insert(
                DEFAULT_CF_ID,
                ReplayCf {
                    name: DEFAULT_CF_NAME.to_owned(),
                    extents: BTreeMap::new(),
                },
            );
        }
        // Build the live version from the final picture.
        let mut version = Version::default();
        for (id, rcf) in cfs {
            let mut cfv = CfVersion::empty(id, rcf.name, vs.num_levels);
            for (_, (level, meta)) in rcf.extents {
                vs.space.mark_used(meta.file_number, meta.slot)?;
                let ext = Extent::new(meta, vs.space.clone());
                place(&mut cfv, level, ext);
            }
            version.cfs.insert(id, Arc::new(cfv));
        }
        *vs.current.write() = Arc::new(version);
        // WAL segments and data files created after the last manifest record
        // are not counted in it: never hand their numbers out again (reusing
        // a live WAL segment's number would truncate it).
        for name in vs.fs.list_dir(&vs.dir)? {
            if let Some(n) = file_number_of(&name) {
                vs.next_file_number.fetch_max(n + 1, Ordering::SeqCst);
            }
        }
        {
            let mut m = vs.manifest.lock();
            vs.write_new_manifest(&mut m, log_number, last_sequence)?;
        }
        let lifetime_counters = vs.lifetime_counters.lock().clone();
        Ok((
            vs,
            RecoveredManifest {
                log_number,
                last_sequence,
                lifetime_counters,
            },
        ))
    }

    fn bump_counters(&self, edit: &VersionEdit) {
        if let Some(v) = edit.next_file_number {
            self.next_file_number.fetch_max(v, Ordering::SeqCst);
        }
        if let Some(v) = edit.next_extent_id {
            self.next_extent_id.fetch_max(v, Ordering::SeqCst);
        }
        if let Some(v) = edit.next_run {
            self.next_run.fetch_max(v, Ordering::SeqCst);
        }
        if let Some(v) = edit.next_cf_id {
            self.next_cf_id.fetch_max(v, Ordering::SeqCst);
        }
    }

    fn replay_edit(
        cfs: &mut BTreeMap<u32, ReplayCf>,
        edit: &VersionEdit,
        path: &Path,
        offset: u64,
    ) -> Result<()> {
        for (id, name) in &edit.add_cfs {
            cfs.insert(
                *id,
                ReplayCf {
                    name: name.clone(),
                    extents: BTreeMap::new(),
                },
            );
        }
        let unknown_cf = |cf: &u32| {
            Error::corruption(
                path,
                offset,
                format!("edit names unknown column family {cf}"),
            )
        };
        for (cf, _level, id) in &edit.deleted {
            let rcf = cfs.get_mut(cf).ok_or_else(|| unknown_cf(cf))?;
            if rcf.extents.remove(id).is_none() {
                return Err(Error::corruption(
                    path,
                    offset,
                    format!("edit deletes unknown extent {id}"),
                ));
            }
        }
        for (cf, level, meta) in &edit.added {
            let rcf = cfs.get_mut(cf).ok_or_else(|| unknown_cf(cf))?;
            rcf.extents.insert(meta.id, (*level, meta.clone()));
        }
        for id in &edit.drop_cfs {
            cfs.remove(id);
        }
        Ok(())
    }

    /// Writes a snapshot of the current version into a new manifest and makes it
    /// the live one. Caller holds the manifest lock.
    fn write_new_manifest(
        &self,
        slot: &mut Option<ManifestState>,
        log_number: u64,
        last_sequence: u64,
    ) -> Result<()> {
        let number = self.next_file_number.fetch_add(1, Ordering::SeqCst);
        let path = manifest_path(&self.dir, number);
        let mut writer = LogWriter::new(self.fs.create(&path)?, number)?;
        let snap = self.snapshot_edit(log_number, last_sequence);
        writer.add_record(&snap.encode())?;
        writer.sync()?;
        write_file_atomic(
            self.fs.as_ref(),
            &self.dir,
            CURRENT,
            format!("MANIFEST-{number:06}\n").as_bytes(),
        )?;
        if let Some(old) = slot.take() {
            // The old manifest is no longer named by CURRENT; losing the unlink
            // only leaves an orphan that the next open removes.
            let _ = self.fs.remove_file(&manifest_path(&self.dir, old.number));
        }
        *slot = Some(ManifestState {
            writer,
            number,
            log_number,
            last_sequence,
        });
        Ok(())
    }

    /// An edit that recreates the current version from nothing.
    fn snapshot_edit(&self, log_number: u64, last_sequence: u64) -> VersionEdit {
        let version = self.current();
        let mut e = VersionEdit {
            log_number: Some(log_number),
            last_sequence: Some(last_sequence),
            ..Default::default()
        };
        self.fill_counters(&mut e);
        let lifetime = self.lifetime_counters.lock().clone();
        e.lifetime_counters = (!lifetime.is_empty()).then_some(lifetime);
        for (id, cf) in &version.cfs {
            e.add_cfs.push((*id, cf.name.clone()));
            for (level, ext) in cf.all_extents() {
                let level = u8::try_from(level).unwrap_or(u8::MAX);
                e.added.push((*id, level, ext.meta.clone()));
            }
        }
        e
    }

    fn fill_counters(&self, e: &mut VersionEdit) {
        e.next_file_number = Some(self.next_file_number.load(Ordering::SeqCst));
        e.next_extent_id = Some(self.next_extent_id.load(Ordering::SeqCst));
        e.next_run = Some(self.next_run.load(Ordering::SeqCst));
        e.next_cf_id = Some(self.next_cf_id.load(Ordering::SeqCst));
    }

    /// The current version (cheap: one `Arc` clone).
    pub fn current(&self) -> Arc<Version> {
        self.current.read().clone()
    }

    /// A fresh extent id.
    pub fn new_extent_id(&self) -> u64 {
        self.next_extent_id.fetch_add(1, Ordering::SeqCst)
    }

    /// A fresh L0 run number.
    pub fn new_run(&self) -> u64 {
        self.next_run.fetch_add(1, Ordering::SeqCst)
    }

    /// A fresh column-family id.
    pub fn new_cf_id(&self) -> u32 {
        self.next_cf_id.fetch_add(1, Ordering::SeqCst)
    }

    /// A fresh file number (WAL segments, manifests, data files).
    pub fn new_file_number(&self) -> u64 {
        self.next_file_number.fetch_add(1, Ordering::SeqCst)
    }

    /// The extent space.
    pub fn space(&self) -> &Arc<ExtentSpace> {
        &self.space
    }

    /// Appends `edit` to the manifest (fsynced: the commit point), then installs
    /// the new version. Edits are serialized.
    pub fn log_and_apply(&self, mut edit: VersionEdit) -> Result<Arc<Version>> {
        let mut guard = self.manifest.lock();
        let state = guard.as_mut().ok_or(Error::Closed)?;
        let log_number = edit
            .log_number
            .unwrap_or(state.log_number)
            .max(state.log_number);
        let last_sequence = edit.last_sequence.unwrap_or(0).max(state.last_sequence);
        edit.log_number = Some(log_number);
        edit.last_sequence = Some(last_sequence);
        self.fill_counters(&mut edit);
        if let Some(c) = &edit.lifetime_counters {
            *self.lifetime_counters.lock() = c.clone();
        }
        let (new_version, removed) =
            apply_live(&self.current(), &edit, &self.space, self.num_levels)?;
        if state.writer.file_size() > self.max_manifest_size {
            // Install first so the snapshot includes this edit; the snapshot
            // manifest is the commit point then.
            let old = std::mem::replace(&mut *self.current.write(), Arc::new(new_version));
            if let Err(e) = self.write_new_manifest(&mut guard, log_number, last_sequence) {
                *self.current.write() = old;
                return Err(e);
            }
        } else {
            state.writer.add_record(&edit.encode())?;
            state.writer.sync()?;
            state.log_number = log_number;
            state.last_sequence = last_sequence;
            *self.current.write() = Arc::new(new_version);
        }
        for ext in removed {
            ext.mark_obsolete();
        }
        Ok(self.current())
    }
}

/// Inserts an extent into its level, keeping the sort orders.
fn place(cfv: &mut CfVersion, level: u8, ext: Arc<Extent>) {
    if level == 0 {
        let run = ext.meta.run;
        let pos = cfv.l0.iter().position(|r| r.run <= run);
        match pos {
            Some(i) if cfv.l0.get(i).is_some_and(|r| r.run == run) => {
                if let Some(r) = cfv.l0.get_mut(i) {
                    let at = r
                        .extents
                        .partition_point(|e| e.meta.smallest < ext.meta.smallest);
                    r.extents.insert(at, ext);
                }
            }
            Some(i) => cfv.l0.insert(
                i,
                L0Run {
                    run,
                    extents: vec![ext],
                },
            ),
            None => cfv.l0.push(L0Run {
                run,
                extents: vec![ext],
            }),
        }
        return;
    }
    let idx = usize::from(level) - 1;
    while cfv.levels.len() <= idx {
        cfv.levels.push(Vec::new());
    }
    if let Some(l) = cfv.levels.get_mut(idx) {
        let at = l.partition_point(|e| e.meta.smallest < ext.meta.smallest);
        l.insert(at, ext);
    }
}

/// Builds the version that results from `edit`; returns it with the extents
/// that leave the extent set for good (to be marked obsolete once committed).
fn apply_live(
    base: &Version,
    edit: &VersionEdit,
    space: &Arc<ExtentSpace>,
    num_levels: usize,
) -> Result<(Version, Vec<Arc<Extent>>)> {
    let mut v = base.clone();
    for (id, name) in &edit.add_cfs {
        v.cfs.insert(
            *id,
            Arc::new(CfVersion::empty(*id, name.clone(), num_levels)),
        );
    }
    let mut removed: BTreeMap<u64, Arc<Extent>> = BTreeMap::new();
    for (cf, level, id) in &edit.deleted {
        let cfv = v
            .cfs
            .get_mut(cf)
            .ok_or_else(|| Error::ColumnFamilyNotFound(cf.to_string()))?;
        let cfv = Arc::make_mut(cfv);
        let found = if *level == 0 {
            let mut hit = None;
            for run in cfv.l0.iter_mut() {
                if let Some(p) = run.extents.iter().position(|e| e.meta.id == *id) {
                    hit = Some(run.extents.remove(p));
                    break;
                }
            }
            cfv.l0.retain(|r| !r.extents.is_empty());
            hit
        } else {
            cfv.levels
                .get_mut(usize::from(*level) - 1)
                .and_then(|l| l.iter().position(|e| e.meta.id == *id).map(|p| l.remove(p)))
        };
        let ext = found.ok_or_else(|| {
            Error::InvalidArgument(format!("edit deletes extent {id} not in level {level}"))
        })?;
        removed.insert(*id, ext);
    }
    for (cf, level, meta) in &edit.added {
        let cfv = v
            .cfs
            .get_mut(cf)
            .ok_or_else(|| Error::ColumnFamilyNotFound(cf.to_string()))?;
        let ext = match removed.remove(&meta.id) {
            Some(old) if old.meta == *meta => old,
            // Moved with changed metadata (e.g. its L0 run number): same slot,
            // new object; the old one is not obsolete, so it frees nothing.
            Some(_) | None => Extent::new(meta.clone(), space.clone()),
        };
        place(Arc::make_mut(cfv), *level, ext);
    }
    #[cfg(debug_assertions)]
    for cfv in v.cfs.values() {
        for level in &cfv.levels {
            for pair in level.windows(2) {
                if let [a, b] = pair {
                    debug_assert!(
                        a.meta.largest <= b.meta.smallest,
                        "level overlap: extent {} ends after extent {} starts",
                        a.meta.id,
                        b.meta.id
                    );
                }
            }
        }
    }
    for id in &edit.drop_cfs {
        if let Some(cfv) = v.cfs.remove(id) {
            for (_, e) in cfv.all_extents() {
                removed.insert(e.meta.id, e.clone());
            }
        }
    }
    Ok((v, removed.into_values().collect()))
}
