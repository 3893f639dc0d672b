//! [`Db::rewrite_range`](super::Db::rewrite_range): rewrites the last
//! level's extents over a key range, so that the column family's compaction
//! filter sees every value there (docs/architecture.md, "Compaction
//! filters"). The SQL layer's OPTIMIZE TABLE uses it to bring every row of
//! a table to its current schema version.
//!
//! Everything is first pushed down to the last level (`compact_all`), then
//! windows of consecutive last-level extents are merged into that same
//! level one at a time with `force_rewrite`, each window taking the
//! compaction turn (`DbState::compaction_running`) as a background
//! compaction does and installing its own edit. A window never ends
//! between two extents that share a boundary key: a tombstone dropped at
//! the bottom of one window must not uncover an older version of its key
//! left in the next.

use super::background::{check_bg, compact_all, run_compaction, spec};
use super::{CfId, DbInner};
use crate::compaction::Source;
use crate::error::{Error, Result};
use crate::version::Extent;
use std::sync::Arc;
use std::time::Duration;

/// What [`Db::rewrite_range`](super::Db::rewrite_range) did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RewriteStats {
    /// Last-level extents read and rewritten.
    pub extents_rewritten: u64,
    /// Values the compaction filter replaced.
    pub values_changed: u64,
    /// Entries the compaction filter dropped (`drop_entry`).
    pub entries_dropped: u64,
}

pub(crate) fn rewrite_range(
    inner: &Arc<DbInner>,
    cf: CfId,
    begin: &[u8],
    end: &[u8],
) -> Result<RewriteStats> {
    compact_all(inner)?;
    let level = inner.opts.num_levels - 1;
    let mut stats = RewriteStats::default();
    let mut cursor = begin.to_vec();
    loop {
        let window = {
            let mut st = inner.state.lock();
            while st.compaction_running {
                inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
            }
            drop(st);
            check_bg(inner)?;
            let mut st = inner.state.lock();
            if st.compaction_running {
                continue;
            }
            let version = inner.versions.current();
            let cfv = version
                .cfs
                .get(&cf)
                .ok_or_else(|| Error::InvalidArgument(format!("no column family {cf}")))?;
            let window = pick_window(
                cfv.level(level),
                &cursor,
                end,
                inner.opts.max_compaction_bytes,
            );
            if window.is_empty() {
                return Ok(stats);
            }
            st.compaction_running = true;
            window
        };
        if let Some(last) = window.last() {
            cursor = last.meta.largest.clone();
            cursor.push(0);
        }
        let n = window.len() as u64;
        let mut s = spec(
            inner,
            cf,
            vec![Source::Run {
                level: u8::try_from(level).unwrap_or(u8::MAX),
                extents: window,
            }],
            Vec::new(),
            level,
            0,
        );
        s.force_rewrite = true;
        let r = run_compaction(inner, cf, s, false)?;
        stats.extents_rewritten += n;
        stats.values_changed += r.values_changed;
        stats.entries_dropped += r.entries_dropped;
    }
}

/// Consecutive extents of a sorted level from the first one ending at or
/// after `cursor`, up to about `max_bytes`, none starting at or after
/// `end`; extended past the limit while the next extent starts with the
/// key the window ends with.
fn pick_window(
    exts: &[Arc<Extent>],
    cursor: &[u8],
    end: &[u8],
    max_bytes: u64,
) -> Vec<Arc<Extent>> {
    let start = exts.partition_point(|e| e.meta.largest.as_slice() < cursor);
    let mut window: Vec<Arc<Extent>> = Vec::new();
    let mut bytes = 0u64;
    for e in exts.get(start..).unwrap_or(&[]) {
        let shares_bound = window
            .last()
            .is_some_and(|l| l.meta.largest == e.meta.smallest);
        if !shares_bound {
            if e.meta.smallest.as_slice() >= end {
                break;
            }
            if !window.is_empty() && bytes + u64::from(e.meta.size) > max_bytes {
                break;
            }
        }
        bytes += u64::from(e.meta.size);
        window.push(e.clone());
    }
    window
}
