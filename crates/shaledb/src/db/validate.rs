//! Read validation for Serializable transactions: "did anything in this key
//! range change after sequence S?" (docs/isolation.md, "Serializable").
//!
//! Only existence matters, not the merged view, so every source (memtable,
//! level, L0 run) is searched on its own, and any source that cannot hold
//! a newer entry is skipped: an extent whose `largest_seq <= S` is never
//! opened. In the common case (the range was last written long ago) only
//! the memtables are searched.
//!
//! Example: T read the range `[b, d)` at snapshot 10. T2 inserted `c` at
//! sequence 12. The active memtable holds `c@12`; seeking it to `b` finds
//! `c@12` with `c < d` and `12 > 10`: the range changed, T fails.

use super::DbInner;
use crate::error::{Error, Result};
use crate::iter::level_iter::LevelIterator;
use crate::iter::BoxedIterator;
use crate::types::{
    make_internal_key, parse_internal_key, SequenceNumber, KIND_FOR_SEEK, MAX_SEQUENCE,
};
use crate::version::Extent;
use std::sync::Arc;

/// The first key in `[lo, hi)` of `cf` (hi `None` = unbounded) with a
/// version newer than `since` (a put, a delete, or a range delete
/// overlapping the range), or `None` if nothing there changed after `since`.
/// Versions not yet visible count too (conservative).
pub(crate) fn range_changed_since(
    inner: &Arc<DbInner>,
    cf: u32,
    lo: &[u8],
    hi: Option<&[u8]>,
    since: SequenceNumber,
) -> Result<Option<Vec<u8>>> {
    let sv = inner.sv.get();
    let cfs = sv
        .cfs
        .get(&cf)
        .ok_or_else(|| Error::ColumnFamilyNotFound(cf.to_string()))?;
    let below_hi = |k: &[u8]| hi.is_none_or(|h| k < h);
    let mut tombs = Vec::new();
    let mut sources: Vec<BoxedIterator<'static>> = Vec::new();
    for mem in std::iter::once(&cfs.mem).chain(cfs.imm.iter()) {
        tombs.extend(mem.range_tombstones());
        sources.push(Box::new(mem.iter()));
    }
    // Extents that may hold something newer than `since` and overlap the range.
    let newer = |run: &[Arc<Extent>]| -> Vec<Arc<Extent>> {
        run.iter()
            .filter(|e| {
                e.meta.largest_seq > since
                    && e.meta.largest.as_slice() >= lo
                    && below_hi(&e.meta.smallest)
            })
            .cloned()
            .collect()
    };
    let v = &cfs.version;
    let runs =
        v.l0.iter()
            .map(|r| (newer(&r.extents), true))
            .chain(v.levels.iter().enumerate().map(|(i, l)| (newer(l), i == 0)));
    for (extents, pin) in runs {
        for e in &extents {
            if e.meta.num_range_deletions > 0 {
                tombs.extend(e.reader(pin)?.range_tombstones()?);
            }
        }
        if !extents.is_empty() {
            sources.push(Box::new(LevelIterator::new(extents, pin)));
        }
    }
    for (b, e, seq) in tombs {
        if seq > since && e.as_slice() > lo && below_hi(&b) {
            return Ok(Some(b.max(lo.to_vec())));
        }
    }
    let target = make_internal_key(lo, MAX_SEQUENCE, KIND_FOR_SEEK);
    for mut it in sources {
        it.seek(&target)?;
        while it.valid() {
            let Some(parsed) = parse_internal_key(it.key()) else {
                return Err(Error::corruption(
                    inner.dir.clone(),
                    0,
                    "malformed internal key while validating a read range",
                ));
            };
            if !below_hi(parsed.user_key) {
                break;
            }
            if parsed.seq > since {
                return Ok(Some(parsed.user_key.to_vec()));
            }
            it.next()?;
        }
    }
    Ok(None)
}
