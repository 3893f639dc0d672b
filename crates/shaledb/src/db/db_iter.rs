//! The user-facing iterator: merges every source, shows each user key once at
//! the iterator's snapshot, hides deleted keys and keys under range
//! tombstones, honours bounds, and moves both ways.
//!
//! Worked example (snapshot 7): internal entries `a@9:Put(x) a@5:Put(y)
//! b@6:Del b@3:Put(z) c@4:Put(w)` and a range tombstone `[c, d)@5` yield just
//! `a -> y`: `a@9` is too new, `b` is deleted at 6, `c@4` lies under the
//! tombstone at 5.
//!
//! Positioning invariant: moving forward, the inner iterator rests on the
//! newest visible entry of the current key; moving backward, it rests just
//! before the current key's entries (on an older user key, or invalid).
//!
//! So moving forward the current value is the inner iterator's own value
//! (a slice of a pinned block or memtable node) and [`DbIterator::value`]
//! returns it without a copy (`value_in_inner`); only a value resolved from
//! a value file, or one found moving backward, is copied into `value`. The
//! user key is still copied: it is short, and the next step needs it to skip
//! the key's older entries after the inner iterator has moved.

use super::{DbInner, ReadOptions};
use crate::error::{Error, Result};
use crate::extent::block::cmp_bytes;
use crate::iter::level_iter::{LevelIterator, Run};
use crate::iter::merge::MergingIterator;
use crate::iter::range_del::RangeTombstones;
use crate::iter::{corruption_at, BoxedIterator, InternalIterator};
use crate::types::{
    append_internal_key, make_internal_key, parse_internal_key, SequenceNumber, ValueKind,
    KIND_FOR_SEEK, MAX_SEQUENCE,
};
use crate::Snapshot;
use std::cell::Cell;
use std::sync::Arc;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Iterator over one column family at one snapshot.
pub struct DbIterator {
    inner: MergingIterator<'static>,
    tombstones: RangeTombstones,
    /// The tombstone fragment the last covered-check ended on
    /// ([`RangeTombstones::max_covering_seq_from`]): a forward scan steps
    /// through the fragments with its keys instead of a binary search per
    /// key.
    tomb_hint: Cell<usize>,
    snapshot: SequenceNumber,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    dir: Direction,
    valid: bool,
    key: Vec<u8>,
    value: Vec<u8>,
    /// The current value is `inner.value()` (forward, not a resolved
    /// BlobIndex), not `value`: a scan copies no value.
    value_in_inner: bool,
    /// The user key whose older entries a forward step skips (the key just
    /// left, or a deleted one); a buffer reused across steps so moving on
    /// copies no key into a fresh allocation.
    skip_key: Vec<u8>,
    /// The user key of the last entry stepped over for being newer than
    /// the snapshot, and the internal key a long skip seeks to (buffers
    /// reused across steps).
    newer_key: Vec<u8>,
    seek_buf: Vec<u8>,
    status: Option<Error>,
    // Keeps what the iterator reads alive (memtables, extents, the snapshot).
    _sv: Arc<super::SuperVersion>,
    /// Keeps the database (and its directory lock) alive while the iterator
    /// may still read its files, even after every `Db` handle is gone.
    _db: Arc<DbInner>,
    _snap: Option<Snapshot>,
    /// The value files around the snapshot sequence (blob/mod.rs): a
    /// BlobIndex entry this iterator can see points into one of them.
    blobs: crate::blob::FileView,
    /// Resolve BlobIndex entries to their values (`false`: raw indexes, for
    /// the engine's own accounting).
    resolve_blobs: bool,
    /// The current entry is a BlobIndex (raw mode only: resolved otherwise).
    value_is_blob: bool,
    /// Scan readahead of value records (`blob/readahead.rs`): the window
    /// (`Options::blob_readahead`; 0 = none), values resolved moving
    /// forward since the last seek (readahead starts at the second), and
    /// the shadow iterator once started. `ahead_failed`: the shadow met an
    /// error, no readahead until the next seek.
    readahead: usize,
    forward_blobs: u8,
    ahead: Option<Box<crate::blob::readahead::ScanAhead>>,
    ahead_failed: bool,
    cf: u32,
    cache_priority: crate::cache::CachePriority,
}

pub(crate) fn new_iterator(inner: &Arc<DbInner>, ro: &ReadOptions, cf: u32) -> Result<DbIterator> {
    inner.check_open()?;
    let (blobs, sv, snapshot) = super::read::read_view(inner, ro);
    let readahead = match &inner.blobs {
        Some(b) if b.reads_ahead() => inner.opts.blob_readahead,
        _ => 0,
    };
    let view = View {
        sv,
        snapshot,
        blobs,
        lower: ro.lower_bound.clone(),
        upper: ro.upper_bound.clone(),
        cache_priority: ro.cache_priority,
        cf,
    };
    let mut it = build(inner, view, ro.snapshot.clone())?;
    it.readahead = readahead;
    Ok(it)
}

/// What an iterator reads: a super version at a snapshot sequence, the
/// value files around it, and the bounds.
struct View {
    sv: Arc<super::SuperVersion>,
    snapshot: SequenceNumber,
    blobs: crate::blob::FileView,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    cache_priority: crate::cache::CachePriority,
    cf: u32,
}

/// An iterator over `view` (no readahead; unpositioned).
fn build(inner: &Arc<DbInner>, view: View, snap: Option<Snapshot>) -> Result<DbIterator> {
    let View {
        sv,
        snapshot,
        blobs,
        lower,
        upper,
        cache_priority,
        cf,
    } = view;
    let cfs = sv
        .cfs
        .get(&cf)
        .ok_or_else(|| Error::ColumnFamilyNotFound(cf.to_string()))?;
    let v = &cfs.version;
    let sources = 1 + cfs.imm.len() + v.l0.len() + v.levels.len();
    let mut children: Vec<BoxedIterator<'static>> = Vec::with_capacity(sources);
    let mut tombs = Vec::new();
    for mem in std::iter::once(&cfs.mem).chain(cfs.imm.iter()) {
        children.push(Box::new(mem.iter()));
        tombs.extend(mem.range_tombstones());
    }
    for i in 0..v.l0.len() {
        children.push(Box::new(
            LevelIterator::over(Run::L0(v.clone(), i), true).with_cache_priority(cache_priority),
        ));
    }
    for (i, level) in v.levels.iter().enumerate() {
        if !level.is_empty() {
            let run = Run::Level(v.clone(), i);
            children.push(Box::new(
                LevelIterator::over(run, i == 0).with_cache_priority(cache_priority),
            ));
        }
    }
    for (ext, pin) in &cfs.tombstone_extents {
        tombs.extend(ext.reader(*pin)?.range_tombstones()?);
    }
    Ok(DbIterator {
        inner: MergingIterator::new(children),
        tombstones: RangeTombstones::new(tombs, snapshot),
        tomb_hint: Cell::new(0),
        snapshot,
        lower,
        upper,
        dir: Direction::Forward,
        valid: false,
        key: Vec::new(),
        value: Vec::new(),
        value_in_inner: false,
        skip_key: Vec::new(),
        newer_key: Vec::new(),
        seek_buf: Vec::new(),
        status: None,
        _sv: sv,
        _db: inner.clone(),
        _snap: snap,
        blobs,
        resolve_blobs: true,
        value_is_blob: false,
        readahead: 0,
        forward_blobs: 0,
        ahead: None,
        ahead_failed: false,
        cf,
        cache_priority,
    })
}

/// Entries of one user key a forward scan steps over before it seeks past
/// them instead ([`DbIterator::find_next_visible`]). RocksDB steps over 8
/// (`max_sequential_skip_in_iterations`), because its seek descends the
/// skiplist from the top. Here the seek is [`InternalIterator::seek_forward`]:
/// only the children still on the key move, the memtable jumps over a row's
/// versions in one load (`memtable/node.rs`, "Version jumps") and an extent
/// child steps; so a scan seeks at the first older entry. Measured under
/// sysbench `oltp_read_write` (docs/benchmarks.md, "Version jumps"): with 8
/// steps first the scans slowed as the memtable filled with versions of hot
/// rows; with none they stayed level.
const MAX_SEQUENTIAL_SKIP: usize = 0;

/// `key < bound`, compared in line: checked on every step of a bounded
/// scan, where a call to `memcmp` for the few bytes that decide (bounds are
/// short: an index prefix and a column or two) cost more than the compare.
#[inline]
fn key_before(key: &[u8], bound: &[u8]) -> bool {
    for (k, b) in key.iter().zip(bound) {
        if k != b {
            return k < b;
        }
    }
    key.len() < bound.len()
}

/// An iterator that yields BlobIndex entries unresolved (see
/// [`DbIterator::value_is_blob`]): the live-byte accounting of value files.
pub(crate) fn new_raw_iterator(inner: &Arc<DbInner>, cf: u32) -> Result<DbIterator> {
    let mut it = new_iterator(inner, &ReadOptions::default(), cf)?;
    it.resolve_blobs = false;
    it.readahead = 0;
    Ok(it)
}

impl DbIterator {
    /// True when positioned on a key.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current user key; empty when not valid.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The current value; empty when not valid.
    pub fn value(&self) -> &[u8] {
        if !self.valid {
            &[]
        } else if self.value_in_inner {
            self.inner.value()
        } else {
            &self.value
        }
    }

    /// The first error met, if any (movement also returns it).
    pub fn status(&self) -> Option<&Error> {
        self.status.as_ref()
    }

    fn fail<T>(&mut self, e: Error) -> Result<T> {
        self.valid = false;
        self.status = Some(e.clone());
        Err(e)
    }

    fn guard(&mut self, r: Result<()>) -> Result<()> {
        match r {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e),
        }
    }

    /// Positions on the first key (>= the lower bound).
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.drop_ahead();
        let r = match self.lower.clone() {
            Some(lo) => return self.seek(&lo),
            None => self.inner.seek_to_first(),
        };
        self.guard(r)?;
        self.dir = Direction::Forward;
        let r = self.find_next_visible(false);
        self.guard(r)
    }

    /// Positions on the last key (< the upper bound).
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.drop_ahead();
        let r = match self.upper.clone() {
            Some(hi) => self.position_before(&hi),
            None => self.inner.seek_to_last(),
        };
        self.guard(r)?;
        self.dir = Direction::Reverse;
        let r = self.find_prev_visible();
        self.guard(r)
    }

    /// Positions on the first key `>= target`.
    pub fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.drop_ahead();
        let target = match &self.lower {
            Some(lo) if lo.as_slice() > target => lo.clone(),
            _ => target.to_vec(),
        };
        let ik = make_internal_key(&target, self.snapshot, KIND_FOR_SEEK);
        let r = self.inner.seek(&ik);
        self.guard(r)?;
        self.dir = Direction::Forward;
        let r = self.find_next_visible(false);
        self.guard(r)
    }

    /// Positions on the last key `<= target`.
    pub fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.drop_ahead();
        let r = match &self.upper {
            Some(hi) if hi.as_slice() <= target => {
                let hi = hi.clone();
                self.position_before(&hi)
            }
            _ => {
                let ik = make_internal_key(target, 0, ValueKind::Delete);
                self.inner.seek_for_prev(&ik)
            }
        };
        self.guard(r)?;
        self.dir = Direction::Reverse;
        let r = self.find_prev_visible();
        self.guard(r)
    }

    /// Moves to the next key.
    #[allow(clippy::should_implement_trait)] // a fallible cursor, not an `Iterator`
    pub fn next(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        // The key being left becomes the one to skip; its buffer is reused.
        std::mem::swap(&mut self.key, &mut self.skip_key);
        self.key.clear();
        if self.dir == Direction::Reverse {
            // The inner iterator is before the current key: go to its first entry.
            let ik = make_internal_key(&self.skip_key, MAX_SEQUENCE, KIND_FOR_SEEK);
            let r = self.inner.seek(&ik);
            self.guard(r)?;
            self.dir = Direction::Forward;
        } else {
            // Forward, the inner iterator rests on the entry just returned:
            // step past it here rather than parse and skip it in the loop.
            let r = self.inner.next();
            self.guard(r)?;
        }
        let r = self.find_next_visible(true);
        self.guard(r)
    }

    /// Moves to the previous key.
    pub fn prev(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        self.drop_ahead();
        if self.dir == Direction::Forward {
            let current = self.key.clone();
            let r = self.position_before(&current);
            self.guard(r)?;
            self.dir = Direction::Reverse;
        }
        let r = self.find_prev_visible();
        self.guard(r)
    }

    /// Puts the inner iterator on the last entry whose user key is `< key`.
    fn position_before(&mut self, key: &[u8]) -> Result<()> {
        let ik = make_internal_key(key, MAX_SEQUENCE, KIND_FOR_SEEK);
        self.inner.seek(&ik)?;
        if self.inner.valid() {
            self.inner.prev()
        } else {
            self.inner.seek_to_last()
        }
    }

    fn covered(&self, user_key: &[u8], seq: SequenceNumber) -> bool {
        if self.tombstones.is_empty() {
            return false;
        }
        let mut hint = self.tomb_hint.get();
        let covering = self.tombstones.max_covering_seq_from(user_key, &mut hint);
        self.tomb_hint.set(hint);
        covering > seq
    }

    /// Forward scan from the inner position to the next visible key, skipping
    /// entries of `skip_key` if `skip` (the key just left).
    ///
    /// A user key with many entries (a hot row updated since the last flush
    /// has one per update in the memtable, each a cache miss to step over)
    /// is left with one forward seek after [`MAX_SEQUENTIAL_SKIP`] entries:
    /// past all of its entries once the visible one is behind us, or to the
    /// newest entry the snapshot sees while they are too new. Example,
    /// snapshot 50, key `a` at sequences 90..=40 in the memtable and `b`
    /// after it: the scan meets `a@90`, seeks `(a, 50)`, returns `a@50`; the
    /// next step meets `a@49`, seeks `(a, 0, Delete)` (the memtable jumps to
    /// `a@40`) and lands on `b`.
    fn find_next_visible(&mut self, skip: bool) -> Result<()> {
        let mut skip = skip;
        // Entries of the key being skipped, and too-new entries of
        // `newer_key`, stepped over one by one so far.
        let (mut skipped, mut newer) = (0usize, 0usize);
        // Set by a seek past `skip_key`: the only entry of the key it can
        // land on is `(key, 0, Delete)` itself, which is stepped over, not
        // sought again (that seek would not move).
        let mut sought = false;
        while self.inner.valid() {
            let ikey = self.inner.key();
            let p = parse_internal_key(ikey)
                .ok_or_else(|| corruption_at(&self.inner, "bad internal key"))?;
            if let Some(hi) = &self.upper {
                if !key_before(p.user_key, hi) {
                    break;
                }
            }
            let skipping = skip
                && self.skip_key.len() == p.user_key.len()
                && cmp_bytes(&self.skip_key, p.user_key) == std::cmp::Ordering::Equal;
            if p.seq <= self.snapshot && !skipping {
                // Newest visible entry of this user key decides.
                if p.kind.is_value() && !self.covered(p.user_key, p.seq) {
                    self.value_is_blob = p.kind == ValueKind::BlobIndex;
                    self.key.clear();
                    self.key.extend_from_slice(p.user_key);
                    // The inner iterator stays on this entry until the next
                    // move, so its value is served from there; a BlobIndex
                    // to resolve is replaced by the value it points at.
                    self.value_in_inner = !(self.value_is_blob && self.resolve_blobs);
                    if self.readahead > 0 {
                        // Before resolving: the reader threads work while
                        // this scan reads its own value.
                        self.read_ahead();
                    }
                    if !self.value_in_inner {
                        self.value.clear();
                        self.value.extend_from_slice(self.inner.value());
                        self.resolve_value()?;
                    }
                    self.valid = true;
                    return Ok(());
                }
                skip = true;
                self.skip_key.clear();
                self.skip_key.extend_from_slice(p.user_key);
                skipped = 0;
                sought = false;
            } else if skipping {
                skipped += 1;
                if skipped > MAX_SEQUENTIAL_SKIP && !sought {
                    // Past every entry of the key: (key, 0, Delete) sorts last.
                    self.seek_buf.clear();
                    append_internal_key(&mut self.seek_buf, &self.skip_key, 0, ValueKind::Delete);
                    self.inner.seek_forward(&self.seek_buf)?;
                    skipped = 0;
                    sought = true;
                    continue;
                }
            } else {
                // Newer than the snapshot.
                if newer > 0 && self.newer_key.as_slice() == p.user_key {
                    newer += 1;
                } else {
                    self.newer_key.clear();
                    self.newer_key.extend_from_slice(p.user_key);
                    newer = 1;
                }
                if newer > MAX_SEQUENTIAL_SKIP {
                    // To the newest entry the snapshot sees.
                    self.seek_buf.clear();
                    append_internal_key(
                        &mut self.seek_buf,
                        &self.newer_key,
                        self.snapshot,
                        KIND_FOR_SEEK,
                    );
                    self.inner.seek_forward(&self.seek_buf)?;
                    newer = 0;
                    continue;
                }
            }
            self.inner.next()?;
        }
        self.valid = false;
        Ok(())
    }

    /// Backward scan: collects the newest visible entry of the user key just
    /// before the inner position (LevelDB's FindPrevUserEntry).
    fn find_prev_visible(&mut self) -> Result<()> {
        let mut found = false; // a live value is saved in key/value
        self.value_in_inner = false;
        self.key.clear();
        self.value.clear();
        while self.inner.valid() {
            let ikey = self.inner.key();
            let p = parse_internal_key(ikey)
                .ok_or_else(|| corruption_at(&self.inner, "bad internal key"))?;
            if let Some(lo) = &self.lower {
                if p.user_key < lo.as_slice() && !found {
                    break;
                }
            }
            if p.seq <= self.snapshot {
                if found && p.user_key < self.key.as_slice() {
                    // Passed into the previous user key with a result in hand.
                    break;
                }
                if p.kind.is_value() && !self.covered(p.user_key, p.seq) {
                    self.value_is_blob = p.kind == ValueKind::BlobIndex;
                    self.key.clear();
                    self.key.extend_from_slice(p.user_key);
                    self.value.clear();
                    self.value.extend_from_slice(self.inner.value());
                    found = true;
                } else {
                    found = false;
                    self.key.clear();
                    self.key.extend_from_slice(p.user_key);
                }
            }
            self.inner.prev()?;
        }
        if found {
            if let Some(lo) = &self.lower {
                if self.key.as_slice() < lo.as_slice() {
                    found = false;
                }
            }
        }
        if found {
            self.resolve_value()?;
        }
        self.valid = found;
        if !found {
            self.key.clear();
            self.value.clear();
        }
        Ok(())
    }

    /// Replaces a BlobIndex in `value` by the value it points at.
    fn resolve_value(&mut self) -> Result<()> {
        if self.value_is_blob && self.resolve_blobs {
            crate::blob::reader::read_value_into(
                &self.blobs,
                &self._db.dir,
                self.cf,
                &self.key,
                &mut self.value,
                crate::blob::reader::Sharing::Flight,
            )?;
            self.value_is_blob = false;
        }
        Ok(())
    }

    /// The column family this iterator reads.
    pub(crate) fn cf(&self) -> u32 {
        self.cf
    }

    /// Raw iterators only: the current value is an encoded BlobIndex.
    pub(crate) fn value_is_blob(&self) -> bool {
        self.value_is_blob
    }

    /// The value file `number` as this iterator's view has it.
    pub(crate) fn blob_file(&self, number: u64) -> Option<&Arc<crate::blob::BlobFile>> {
        self.blobs.get(number)
    }

    /// Forgets readahead (a seek or a turn: the shadow is elsewhere).
    fn drop_ahead(&mut self) {
        self.ahead = None;
        self.forward_blobs = 0;
        self.ahead_failed = false;
    }

    /// Scan readahead, on each forward landing (docs/format-blob.md section
    /// 5): moves the shadow along, or starts it at the second value resolved
    /// since the last seek (a lookup by iterator resolves one and stops).
    fn read_ahead(&mut self) {
        if let Some(a) = &mut self.ahead {
            if a.step(true).is_err() {
                self.ahead = None;
                self.ahead_failed = true;
            }
            return;
        }
        if !(self.value_is_blob && self.resolve_blobs) || self.ahead_failed {
            return;
        }
        self.forward_blobs = self.forward_blobs.saturating_add(1);
        if self.forward_blobs < 2 {
            return;
        }
        match self.start_ahead() {
            Ok(a) => self.ahead = Some(Box::new(a)),
            Err(_) => self.ahead_failed = true,
        }
    }

    /// A shadow over this iterator's view, on its current key, already
    /// `readahead` entries ahead.
    fn start_ahead(&self) -> Result<crate::blob::readahead::ScanAhead> {
        let view = View {
            sv: self._sv.clone(),
            snapshot: self.snapshot,
            blobs: self.blobs.clone(),
            lower: self.lower.clone(),
            upper: self.upper.clone(),
            cache_priority: self.cache_priority,
            cf: self.cf,
        };
        let mut shadow = build(&self._db, view, None)?;
        shadow.resolve_blobs = false;
        shadow.seek(&self.key)?;
        let mut a = crate::blob::readahead::ScanAhead::new(shadow, self.readahead);
        a.step(false)?;
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::key_before;
    use crate::{Db, Options, ReadOptions};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn k(i: u32) -> Vec<u8> {
        format!("k{i:03}").into_bytes()
    }

    /// Random walks of next/prev (both direction changes), over versions
    /// in extents and memtable, deletes and range tombstones, with bounds,
    /// equal a model: the forward step past the returned entry, the hinted
    /// tombstone lookup and the in-line bound compare keep the answers.
    #[test]
    fn walks_match_a_model() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let mut model = BTreeMap::new();
        for round in 0..3u32 {
            for i in (round..120).step_by(2 + round as usize) {
                let v = format!("v{round}-{i}").into_bytes();
                db.put(&k(i), &v).unwrap();
                model.insert(k(i), v);
            }
            for i in (round * 7..120).step_by(11) {
                db.delete(&k(i)).unwrap();
                model.remove(&k(i));
            }
            let (b, e) = (10 + round * 30, 18 + round * 30);
            db.delete_range(&k(b), &k(e)).unwrap();
            model.retain(|key, _| key < &k(b) || key >= &k(e));
            if round < 2 {
                db.flush().unwrap();
            }
        }
        let mut seed = 7u64;
        let mut rand = move |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for walk in 0..200 {
            let lo = k(rand(60) as u32);
            let hi = k(60 + rand(70) as u32);
            let ro = ReadOptions {
                snapshot: None,
                lower_bound: (walk % 3 != 0).then(|| lo.clone()),
                upper_bound: (walk % 4 != 0).then(|| hi.clone()),
                // Both ways into the block cache give the same answers.
                cache_priority: if walk % 2 == 0 {
                    crate::CachePriority::Low
                } else {
                    crate::CachePriority::High
                },
            };
            let inside = |key: &Vec<u8>| {
                ro.lower_bound.as_ref().is_none_or(|l| key >= l)
                    && ro.upper_bound.as_ref().is_none_or(|h| key < h)
            };
            let keys: Vec<&Vec<u8>> = model.keys().filter(|key| inside(key)).collect();
            let mut it = db.iter(&ro).unwrap();
            let target = k(rand(130) as u32);
            it.seek(&target).unwrap();
            let mut pos = keys.iter().position(|key| **key >= target);
            for _ in 0..30 {
                assert_eq!(
                    it.valid().then(|| it.key().to_vec()),
                    pos.and_then(|p| keys.get(p)).map(|key| (*key).clone()),
                    "walk {walk}"
                );
                let Some(p) = pos else { break };
                assert_eq!(Some(it.value()), model.get(keys[p]).map(Vec::as_slice));
                if rand(3) == 0 {
                    it.prev().unwrap();
                    pos = p.checked_sub(1);
                } else {
                    it.next().unwrap();
                    pos = (p + 1 < keys.len()).then_some(p + 1);
                }
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Put(u32, u8),
        Delete(u32),
        DeleteRange(u32, u32),
        Flush,
        Snapshot,
    }

    /// Operations on keys `0..keys`: with a handful of keys each gets many
    /// versions, more than `MAX_SEQUENTIAL_SKIP`, so scans seek past them.
    fn arb_op(keys: u32) -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u32..keys, any::<u8>()).prop_map(|(k, v)| Op::Put(k, v)),
            2 => (0u32..keys).prop_map(Op::Delete),
            1 => (0u32..keys, 1u32..8).prop_map(|(b, n)| Op::DeleteRange(b, b + n)),
            1 => Just(Op::Flush),
            1 => Just(Op::Snapshot),
        ]
    }

    /// Applies `ops` to a fresh database and checks full scans both ways,
    /// at the latest state and at the snapshot taken first, against a model.
    fn check_scans(ops: &[Op]) -> Result<(), TestCaseError> {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let mut model = BTreeMap::new();
        let mut snap = None;
        for op in ops {
            match op {
                Op::Put(key, v) => {
                    let v = vec![*v; 1 + *key as usize * 7 % 300];
                    db.put(&k(*key), &v).unwrap();
                    model.insert(k(*key), v);
                }
                Op::Delete(key) => {
                    db.delete(&k(*key)).unwrap();
                    model.remove(&k(*key));
                }
                Op::DeleteRange(b, e) => {
                    db.delete_range(&k(*b), &k(*e)).unwrap();
                    model.retain(|key, _| key < &k(*b) || key >= &k(*e));
                }
                Op::Flush => db.flush().unwrap(),
                Op::Snapshot => {
                    if snap.is_none() {
                        snap = Some((db.snapshot(), model.clone()));
                    }
                }
            }
        }
        let mut views = vec![(None, model)];
        if let Some((s, m)) = snap {
            views.push((Some(s), m));
        }
        for (snapshot, model) in views {
            let ro = ReadOptions {
                snapshot,
                lower_bound: None,
                upper_bound: None,
                ..ReadOptions::default()
            };
            let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
            let mut it = db.iter(&ro).unwrap();
            let mut got = Vec::new();
            it.seek_to_first().unwrap();
            while it.valid() {
                got.push((it.key().to_vec(), it.value().to_vec()));
                it.next().unwrap();
            }
            prop_assert!(it.value().is_empty());
            prop_assert_eq!(&got, &want);
            got.clear();
            it.seek_to_last().unwrap();
            while it.valid() {
                got.push((it.key().to_vec(), it.value().to_vec()));
                it.prev().unwrap();
            }
            got.reverse();
            prop_assert_eq!(&got, &want);
        }
        Ok(())
    }

    /// A hot key: 30 versions in the memtable, some newer than a snapshot,
    /// between two cold keys. Scans at both views see the right version,
    /// and stepping back and forth across the hot key keeps it.
    #[test]
    fn hot_key_versions_are_skipped_by_seeking() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        db.put(&k(1), b"cold-a").unwrap();
        db.put(&k(3), b"cold-c").unwrap();
        db.flush().unwrap();
        for v in 0..20u32 {
            db.put(&k(2), format!("hot{v}").as_bytes()).unwrap();
        }
        let snap = db.snapshot();
        for v in 20..30u32 {
            db.put(&k(2), format!("hot{v}").as_bytes()).unwrap();
        }
        for (snapshot, hot) in [(None, "hot29"), (Some(snap), "hot19")] {
            let ro = ReadOptions {
                snapshot,
                lower_bound: None,
                upper_bound: None,
                ..ReadOptions::default()
            };
            let mut it = db.iter(&ro).unwrap();
            it.seek_to_first().unwrap();
            let mut got = Vec::new();
            while it.valid() {
                got.push(String::from_utf8(it.value().to_vec()).unwrap());
                it.next().unwrap();
            }
            assert_eq!(got, ["cold-a", hot, "cold-c"]);
            it.seek(&k(2)).unwrap();
            it.next().unwrap();
            assert_eq!(it.value(), b"cold-c");
            it.prev().unwrap();
            assert_eq!(it.value(), hot.as_bytes());
            it.next().unwrap();
            assert_eq!(it.key(), k(3));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Full scans, forward (values served from the inner iterator, no
        /// copy) and backward (copied), at the latest state and at a
        /// snapshot taken mid-way, equal a sorted model: the value seen at
        /// each key is that key's entry, not a neighbour's or a stale one.
        #[test]
        fn scans_match_a_model_at_a_snapshot(ops in proptest::collection::vec(arb_op(40), 1..80)) {
            check_scans(&ops)?;
        }

        /// Three keys, up to 200 operations: dozens of versions per key,
        /// in the memtable and across flushes, so forward scans seek past
        /// long runs of one key (and of entries newer than the snapshot).
        #[test]
        fn scans_of_hot_keys_match_a_model(ops in proptest::collection::vec(arb_op(3), 1..200)) {
            check_scans(&ops)?;
        }

        #[test]
        fn key_before_is_slice_order(a in proptest::collection::vec(0u8..4, 0..6), b in proptest::collection::vec(0u8..4, 0..6)) {
            prop_assert_eq!(key_before(&a, &b), a < b);
        }
    }
}
