//! The memory-bounded sort (docs/tables.md, "Memory-bounded sorts, groups
//! and joins"): rows are held in memory until their estimated size passes
//! the bound (`sort_buffer_size`); then the buffer is sorted and written
//! as a run file (`spill.rs`), and at the end the runs are merged.
//!
//! ```text
//! push ... push  (buffer > bound) -> sort, write run 0
//! push ... push  (buffer > bound) -> sort, write run 1
//! finish: more than FAN_IN runs -> merge each FAN_IN consecutive ones into one
//!         read: k-way merge of the runs and the sorted rest of the buffer
//! ```
//!
//! Stability: the in-memory sort is stable and runs hold consecutive
//! stretches of the input in order, so on equal keys the merge takes the
//! row of the earlier run: equal keys keep their input order, as a single
//! in-memory sort does. Under a LIMIT (`keep`) only the first `keep` rows
//! can be in the answer, so a buffer is cut to them before it spills, and
//! while small it is trimmed in memory (a top-N sort).

use crate::error::Result;
use crate::spill::{Record, RunReader, RunWriter, TempFile};
use crate::types::{sort_order, Datum};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::path::PathBuf;
use std::rc::Rc;

/// Runs merged at once (each holds a read buffer while merged).
const FAN_IN: usize = 64;
/// Rows a top-N sort may hold beyond twice N before it trims.
const TOP_N_SLACK: usize = 1024;

/// ORDER BY's comparison of two rows' sort keys (`desc`: per key).
pub fn by_keys(desc: &[bool], a: &[Datum], b: &[Datum]) -> Ordering {
    for ((x, y), desc) in a.iter().zip(b).zip(desc) {
        let o = sort_order(x, y);
        if o != Ordering::Equal {
            return if *desc { o.reverse() } else { o };
        }
    }
    Ordering::Equal
}

/// The memory a row takes, as the bounds count it: the values and their
/// heap bytes (an estimate: allocator overhead is left out).
pub fn row_bytes(vals: &[Datum]) -> usize {
    let heap: usize = vals
        .iter()
        .map(|d| match d {
            Datum::Bytes(b) => b.len(),
            _ => 0,
        })
        .sum();
    std::mem::size_of::<Vec<Datum>>() + std::mem::size_of_val(vals) + heap
}

/// Where and how much a statement may spill.
#[derive(Clone, Debug)]
pub struct Limits {
    /// `sort_buffer_size`: bytes of rows a sort holds in memory.
    pub sort_buffer: usize,
    /// `join_buffer_size`: bytes of rows a hash-join table may hold.
    pub join_buffer: usize,
    /// min(`tmp_table_size`, `max_heap_table_size`): bytes of groups a
    /// GROUP BY holds in memory before it sorts instead.
    pub tmp_table: usize,
    /// `tmpdir`: where run files go; `None`: `tmp/` in the data directory.
    pub tmpdir: Option<PathBuf>,
}

impl Limits {
    pub const DEFAULT_SORT_BUFFER: usize = 8 << 20;
    pub const DEFAULT_JOIN_BUFFER: usize = 128 << 20;
    pub const DEFAULT_TMP_TABLE: usize = 16 << 20;
}

/// The session variables that bound memory, with MySQL's smallest values
/// (a smaller setting is raised to it, as MySQL does).
const BOUNDS: [(&str, usize); 4] = [
    ("sort_buffer_size", 32 << 10),
    ("join_buffer_size", 128),
    ("tmp_table_size", 1 << 10),
    ("max_heap_table_size", 16 << 10),
];

impl Limits {
    /// The default of a bound variable.
    pub fn default_variable(name: &str) -> Option<Datum> {
        let d = Limits::default();
        let v = match name {
            "sort_buffer_size" => d.sort_buffer,
            "join_buffer_size" => d.join_buffer,
            "tmp_table_size" | "max_heap_table_size" => d.tmp_table,
            _ => return None,
        };
        Some(Datum::Int(i64::try_from(v).unwrap_or(i64::MAX)))
    }

    pub fn is_bound(name: &str) -> bool {
        BOUNDS.iter().any(|(n, _)| *n == name)
    }

    /// The value `SET name = v` stores: a whole number of bytes, raised
    /// to the variable's minimum.
    pub fn check_bound(name: &str, v: &Datum) -> Result<Datum> {
        let min = BOUNDS
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, m)| *m);
        let bad = || {
            crate::error::Error::BadVariableValue(
                name.to_owned(),
                v.to_text().unwrap_or_else(|| "NULL".into()),
            )
        };
        let n = match v {
            Datum::Int(_) | Datum::UInt(_) | Datum::Decimal(_) => v.to_i128().ok_or_else(bad)?,
            // MySQL: a string (or any non-number) is the wrong type (1232),
            // not a wrong value (1231).
            Datum::Null => return Err(bad()),
            _ => return Err(crate::error::Error::WrongTypeForVariable(name.to_owned())),
        };
        let n = usize::try_from(n.max(0)).unwrap_or(usize::MAX).max(min);
        Ok(Datum::Int(i64::try_from(n).unwrap_or(i64::MAX)))
    }

    /// The bounds a session's variables set (defaults for the others).
    pub fn from_vars(vars: &std::collections::HashMap<String, Datum>) -> Limits {
        let get = |name: &str, default: usize| {
            vars.get(name)
                .and_then(Datum::to_i128)
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(default)
        };
        let d = Limits::default();
        Limits {
            sort_buffer: get("sort_buffer_size", d.sort_buffer),
            join_buffer: get("join_buffer_size", d.join_buffer),
            // MySQL: an in-memory temporary table is bounded by the
            // smaller of the two.
            tmp_table: get("tmp_table_size", d.tmp_table)
                .min(get("max_heap_table_size", d.tmp_table)),
            tmpdir: None,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            sort_buffer: Self::DEFAULT_SORT_BUFFER,
            join_buffer: Self::DEFAULT_JOIN_BUFFER,
            tmp_table: Self::DEFAULT_TMP_TABLE,
            tmpdir: None,
        }
    }
}

/// Sorts rows (sort keys, values) within a memory bound.
pub struct Sorter {
    desc: Rc<[bool]>,
    bound: usize,
    keep: Option<usize>,
    dir: PathBuf,
    buf: Vec<Record>,
    bytes: usize,
    runs: Vec<TempFile>,
}

impl Sorter {
    /// A sort on keys with directions `desc`, holding about `bound` bytes
    /// in memory, writing runs to `dir`; `keep`: only so many first rows
    /// are wanted.
    pub fn new(desc: Vec<bool>, bound: usize, keep: Option<usize>, dir: PathBuf) -> Sorter {
        Sorter {
            desc: desc.into(),
            bound,
            keep,
            dir,
            buf: Vec::new(),
            bytes: 0,
            runs: Vec::new(),
        }
    }

    /// Run files written so far.
    #[cfg(test)]
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    fn record_bytes(keys: &[Datum], vals: &[Datum]) -> usize {
        row_bytes(keys) + row_bytes(vals)
    }

    pub fn push(&mut self, keys: Vec<Datum>, vals: Vec<Datum>) -> Result<()> {
        self.bytes += Self::record_bytes(&keys, &vals);
        self.buf.push((keys, vals));
        if let Some(n) = self.keep {
            if self.buf.len() >= n.saturating_mul(2).max(TOP_N_SLACK) {
                self.sort_buffer();
            }
        }
        if self.bytes > self.bound {
            // Under a LIMIT, cutting to the wanted rows may be enough.
            if self.keep.is_some() {
                self.sort_buffer();
            }
            if self.bytes > self.bound {
                self.spill()?;
            }
        }
        Ok(())
    }

    /// Sorts the buffer (stably) and cuts it to `keep` rows.
    fn sort_buffer(&mut self) {
        let desc = self.desc.clone();
        self.buf.sort_by(|(a, _), (b, _)| by_keys(&desc, a, b));
        if let Some(n) = self.keep {
            if self.buf.len() > n {
                self.buf.truncate(n);
                self.bytes = self.buf.iter().map(|(k, v)| Self::record_bytes(k, v)).sum();
            }
        }
    }

    fn spill(&mut self) -> Result<()> {
        self.sort_buffer();
        let mut w = RunWriter::create(&self.dir)?;
        for (k, v) in self.buf.drain(..) {
            w.write(&k, &v)?;
        }
        self.bytes = 0;
        self.runs.push(w.finish()?);
        Ok(())
    }

    /// The rows in order.
    pub fn finish(mut self) -> Result<Sorted> {
        self.sort_buffer();
        if self.runs.is_empty() {
            return Ok(Sorted::Memory(std::mem::take(&mut self.buf).into_iter()));
        }
        let mut runs = std::mem::take(&mut self.runs);
        while runs.len() > FAN_IN {
            let mut next = Vec::with_capacity(runs.len().div_ceil(FAN_IN));
            let mut rest = runs.into_iter();
            loop {
                let group: Vec<TempFile> = rest.by_ref().take(FAN_IN).collect();
                if group.is_empty() {
                    break;
                }
                let mut merge = Merge::new(self.desc.clone(), group, Vec::new())?;
                let mut w = RunWriter::create(&self.dir)?;
                let mut written = 0usize;
                while let Some((k, v)) = merge.next()? {
                    if self.keep.is_some_and(|n| written >= n) {
                        break;
                    }
                    w.write(&k, &v)?;
                    written += 1;
                }
                next.push(w.finish()?);
            }
            runs = next;
        }
        let rest = std::mem::take(&mut self.buf);
        Ok(Sorted::Merge(Merge::new(self.desc.clone(), runs, rest)?))
    }
}

/// Sorted rows: from memory or merged from run files (removed on drop).
pub enum Sorted {
    Memory(std::vec::IntoIter<Record>),
    Merge(Merge),
}

impl Sorted {
    pub fn next(&mut self) -> Result<Option<Record>> {
        match self {
            Sorted::Memory(it) => Ok(it.next()),
            Sorted::Merge(m) => m.next(),
        }
    }
}

enum Source {
    Run(RunReader),
    Memory(std::vec::IntoIter<Record>),
}

impl Source {
    fn next(&mut self) -> Result<Option<Record>> {
        match self {
            Source::Run(r) => r.next_record(),
            Source::Memory(it) => Ok(it.next()),
        }
    }
}

/// The head row of one source in the merge heap.
struct Head {
    rec: Record,
    source: usize,
    desc: Rc<[bool]>,
}

impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        // BinaryHeap pops the greatest: reverse, so the smallest key (and
        // on a tie the earliest source) comes first.
        by_keys(&self.desc, &self.rec.0, &other.rec.0)
            .then(self.source.cmp(&other.source))
            .reverse()
    }
}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head {}

/// A k-way merge of sorted runs (in input order) and a sorted in-memory
/// rest (the latest input).
pub struct Merge {
    sources: Vec<Source>,
    heap: BinaryHeap<Head>,
    desc: Rc<[bool]>,
    /// Kept until the merge drops, which removes them.
    _files: Vec<TempFile>,
}

impl Merge {
    fn new(desc: Rc<[bool]>, files: Vec<TempFile>, rest: Vec<Record>) -> Result<Merge> {
        let mut sources = Vec::with_capacity(files.len() + 1);
        for f in &files {
            sources.push(Source::Run(f.reader()?));
        }
        sources.push(Source::Memory(rest.into_iter()));
        let mut m = Merge {
            sources,
            heap: BinaryHeap::new(),
            desc,
            _files: files,
        };
        for i in 0..m.sources.len() {
            m.refill(i)?;
        }
        Ok(m)
    }

    fn refill(&mut self, source: usize) -> Result<()> {
        if let Some(s) = self.sources.get_mut(source) {
            if let Some(rec) = s.next()? {
                self.heap.push(Head {
                    rec,
                    source,
                    desc: self.desc.clone(),
                });
            }
        }
        Ok(())
    }

    pub fn next(&mut self) -> Result<Option<Record>> {
        let Some(head) = self.heap.pop() else {
            return Ok(None);
        };
        self.refill(head.source)?;
        Ok(Some(head.rec))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure
    use super::*;
    use proptest::prelude::*;

    fn sorted_all(mut s: Sorted) -> Vec<Record> {
        let mut out = Vec::new();
        while let Some(r) = s.next().unwrap() {
            out.push(r);
        }
        out
    }

    fn key(v: Option<i64>) -> Datum {
        v.map_or(Datum::Null, Datum::Int)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Any bound (so 0 to hundreds of runs, merged in one or more
        /// passes) gives the stable in-memory sort's answer.
        #[test]
        fn spilled_sort_equals_stable_sort(
            rows in proptest::collection::vec((proptest::option::of(-5i64..5), 0i64..3), 0..1500),
            desc in proptest::collection::vec(any::<bool>(), 2),
            bound in prop_oneof![Just(1usize), 100usize..5000, Just(1usize << 30)],
            keep in proptest::option::of(0usize..200),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut s = Sorter::new(desc.clone(), bound, keep, dir.path().to_owned());
            let mut model = Vec::new();
            for (i, (a, b)) in rows.iter().enumerate() {
                let rec = (vec![key(*a), Datum::Int(*b)], vec![Datum::Int(i as i64)]);
                model.push(rec.clone());
                s.push(rec.0, rec.1).unwrap();
            }
            model.sort_by(|(a, _), (b, _)| by_keys(&desc, a, b));
            if let Some(n) = keep {
                model.truncate(n);
            }
            let mut got = sorted_all(s.finish().unwrap());
            if let Some(n) = keep {
                got.truncate(n);
            }
            prop_assert_eq!(got, model);
            prop_assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        }
    }

    #[test]
    fn many_runs_merge_in_passes_and_leave_no_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sorter::new(vec![true], 1, None, dir.path().to_owned());
        let n = FAN_IN * 3 + 5;
        for i in 0..n {
            s.push(vec![Datum::Int((i % 7) as i64)], vec![Datum::Int(i as i64)])
                .unwrap();
        }
        assert_eq!(s.runs(), n);
        let got = sorted_all(s.finish().unwrap());
        assert_eq!(got.len(), n);
        for w in got.windows(2) {
            let (ka, kb) = (&w[0].0[0], &w[1].0[0]);
            assert!(sort_order(ka, kb) != Ordering::Less, "descending");
            if ka == kb {
                assert!(
                    sort_order(&w[0].1[0], &w[1].1[0]) == Ordering::Less,
                    "stable"
                );
            }
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_damaged_run_is_an_error_not_fewer_rows() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sorter::new(vec![false], 200, None, dir.path().to_owned());
        for i in 0..100 {
            s.push(vec![Datum::Int(i)], vec![Datum::text("row")])
                .unwrap();
        }
        assert!(s.runs() > 1);
        let victim = std::fs::read_dir(dir.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let mut bytes = std::fs::read(&victim).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 1;
        std::fs::write(&victim, bytes).unwrap();
        // The damage shows when the merge starts or when it reaches the
        // record: either way an error, and never a short answer.
        let result = s.finish().and_then(|mut sorted| {
            let mut n = 0;
            while sorted.next()?.is_some() {
                n += 1;
            }
            Ok(n)
        });
        assert!(
            matches!(result, Err(crate::Error::TempFile { .. })),
            "{result:?}"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
