//! The last stage of a SELECT (docs/tables.md, "Memory-bounded sorts,
//! groups and joins"): ORDER BY, DISTINCT, OFFSET/LIMIT, and handing rows
//! to a [`ResultSink`].
//!
//! Two ways through:
//! - direct: no sort is needed (no ORDER BY, or the rows come in its
//!   order) and no DISTINCT: each row goes to the sink as it is made, and
//!   the scan stops after OFFSET + LIMIT rows. A streaming sink gets rows
//!   this way only when every column is a plain table column, whose values
//!   always fit the declared type (see `output::conform`).
//! - sorted: rows go through a [`Sorter`] bounded by `sort_buffer_size`
//!   (spilling to run files); with nothing to sort its keys are empty and
//!   it keeps input order, which spools a computed result for a streaming
//!   sink. The column types are settled from statistics gathered as rows
//!   come in, so the rows can then stream out of the merge.
//!
//! A collecting sink ([`Collect`]) instead settles column types over the
//! final rows, as before streaming existed.

use crate::error::{Error, Result};
use crate::executor::group_key;
use crate::output::{conform, row_fits, ColumnMeta, ConformStats, Conversions};
use crate::sort::Sorter;
use crate::types::Datum;
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};

/// Receives a result set: its columns once, then its rows in order.
pub trait ResultSink {
    fn columns(&mut self, columns: &[ColumnMeta]) -> Result<()>;
    /// [`ResultSink::columns`] for a caller that no longer needs them: a
    /// sink that keeps the columns takes them without a copy (five strings
    /// per column, per statement).
    fn take_columns(&mut self, columns: Vec<ColumnMeta>) -> Result<()> {
        self.columns(&columns)
    }
    fn row(&mut self, row: Vec<Datum>) -> Result<()>;
    /// A row the caller keeps (it reuses the buffers for the next row): a
    /// sink that encodes each row as it comes (the server's binary result
    /// rows) takes it without the copy; by default it is copied to
    /// [`ResultSink::row`].
    fn row_ref(&mut self, row: &[Datum]) -> Result<()> {
        self.row(row.to_vec())
    }
    /// Whether rows must fit the column types given before them (a sink
    /// that holds every row instead gets them as made, and conforms).
    fn streaming(&self) -> bool {
        true
    }
}

/// A sink that holds the whole result (subqueries, INSERT ... SELECT, the
/// `Output::Rows` of [`crate::Session::execute`]).
#[derive(Default)]
pub struct Collect {
    pub columns: Vec<ColumnMeta>,
    pub rows: Vec<Vec<Datum>>,
}

impl Collect {
    /// The columns and rows, with every value fitting its column's type.
    pub fn finish(mut self) -> (Vec<ColumnMeta>, Vec<Vec<Datum>>) {
        conform(&mut self.columns, &mut self.rows);
        (self.columns, self.rows)
    }
}

impl ResultSink for Collect {
    fn take_columns(&mut self, columns: Vec<ColumnMeta>) -> Result<()> {
        self.columns = columns;
        Ok(())
    }
    fn columns(&mut self, columns: &[ColumnMeta]) -> Result<()> {
        self.columns = columns.to_vec();
        Ok(())
    }
    fn row(&mut self, row: Vec<Datum>) -> Result<()> {
        self.rows.push(row);
        Ok(())
    }
    fn streaming(&self) -> bool {
        false
    }
}

/// How a pipeline was asked to run.
pub(crate) struct Shape<'a, 's> {
    /// Borrowed from a plan when it has them ([`crate::select::SelectPlan::columns`]);
    /// copied only by a sink that keeps them or a sort that retypes them.
    pub columns: Cow<'s, [ColumnMeta]>,
    /// ORDER BY directions; empty when no sort is needed.
    pub desc: Vec<bool>,
    pub distinct: bool,
    pub offset: u64,
    pub limit: Option<u64>,
    /// Every column is a plain table column.
    pub plain: bool,
    /// `sort_buffer_size`.
    pub sort_buffer: usize,
    pub tmpdir: std::path::PathBuf,
    pub interrupt: Option<&'a AtomicBool>,
}

/// ORDER BY / DISTINCT / OFFSET / LIMIT between the row source and a sink.
pub(crate) struct Pipeline<'a, 's> {
    sink: &'s mut dyn ResultSink,
    columns: Cow<'s, [ColumnMeta]>,
    interrupt: Option<&'a AtomicBool>,
    /// `None`: direct.
    sorter: Option<Sorter>,
    sorting: bool,
    stats: Option<ConformStats>,
    distinct: Option<crate::aggregate::KeySet>,
    to_skip: u64,
    left: Option<u64>,
    /// Rows pushed (to stop an unsorted read at OFFSET + LIMIT).
    pushed: u64,
    wanted: Option<u64>,
}

impl<'a, 's> Pipeline<'a, 's> {
    pub(crate) fn new(shape: Shape<'a, 's>, sink: &'s mut dyn ResultSink) -> Result<Self> {
        let streaming = sink.streaming();
        let sorting = !shape.desc.is_empty();
        let direct = !sorting && !shape.distinct && (!streaming || shape.plain);
        let wanted = shape
            .limit
            .filter(|_| !shape.distinct)
            .map(|l| l.saturating_add(shape.offset));
        let mut columns = shape.columns;
        if direct && streaming {
            sink.columns(&columns)?;
        } else if direct {
            // A direct pipeline has no sorter (`finish`) and checks rows
            // against the columns only for a streaming sink (`push`): the
            // sink can have them.
            sink.take_columns(std::mem::take(&mut columns).into_owned())?;
        }
        let sorter = (!direct).then(|| {
            Sorter::new(
                shape.desc,
                shape.sort_buffer,
                wanted.map(|w| usize::try_from(w).unwrap_or(usize::MAX)),
                shape.tmpdir,
            )
        });
        Ok(Pipeline {
            stats: (streaming && !direct).then(|| ConformStats::new(&columns)),
            sink,
            columns,
            interrupt: shape.interrupt,
            sorter,
            sorting,
            distinct: shape.distinct.then(crate::aggregate::KeySet::default),
            to_skip: shape.offset,
            left: shape.limit,
            pushed: 0,
            wanted,
        })
    }

    /// Adds a row (its ORDER BY keys and values); false: no more wanted.
    pub(crate) fn push(&mut self, keys: Vec<Datum>, vals: Vec<Datum>) -> Result<bool> {
        self.pushed += 1;
        match self.sorter.as_mut() {
            None => {
                self.check_fits(&vals)?;
                self.emit(vals, None)
            }
            Some(sorter) => {
                if let Some(st) = self.stats.as_mut() {
                    st.observe(&vals);
                }
                let keys = if self.sorting { keys } else { Vec::new() };
                sorter.push(keys, vals)?;
                // Unsorted, the first OFFSET + LIMIT rows are the answer.
                Ok(self.sorting || self.wanted.is_none_or(|w| self.pushed < w))
            }
        }
    }

    /// [`Pipeline::push`] of a row the caller keeps: on the direct path it
    /// goes to [`ResultSink::row_ref`] without a copy (a point select or a
    /// range scan projects each row into the same buffers); otherwise it is
    /// copied in.
    pub(crate) fn push_ref(&mut self, keys: &[Datum], vals: &[Datum]) -> Result<bool> {
        if self.sorter.is_some() {
            return self.push(keys.to_vec(), vals.to_vec());
        }
        self.pushed += 1;
        self.check_fits(vals)?;
        if !self.admit(vals) {
            return Ok(self.left != Some(0));
        }
        self.sink.row_ref(vals)?;
        Ok(self.count_sent())
    }

    /// Sends `vals` on unless DISTINCT, OFFSET or LIMIT drops it; false
    /// once LIMIT is reached.
    fn emit(&mut self, mut vals: Vec<Datum>, conv: Option<&Conversions>) -> Result<bool> {
        if !self.admit(&vals) {
            return Ok(self.left != Some(0));
        }
        if let Some(c) = conv {
            c.apply(&mut vals);
        }
        self.sink.row(vals)?;
        Ok(self.count_sent())
    }

    /// On the direct path: plain columns always fit their types; a row that
    /// does not would go out to a streaming sink under a wrong type, so it
    /// is refused.
    fn check_fits(&self, vals: &[Datum]) -> Result<()> {
        if self.sink.streaming() && !row_fits(&self.columns, vals) {
            return Err(Error::Unsupported(
                "streaming a value that does not fit its column's type".into(),
            ));
        }
        Ok(())
    }

    /// Whether the next row goes to the sink: not once LIMIT is reached,
    /// not a DISTINCT duplicate, not one OFFSET skips.
    fn admit(&mut self, vals: &[Datum]) -> bool {
        if self.left == Some(0) {
            return false;
        }
        if let Some(seen) = self.distinct.as_mut() {
            if !seen.insert(group_key(vals)) {
                return false;
            }
        }
        if self.to_skip > 0 {
            self.to_skip -= 1;
            return false;
        }
        true
    }

    /// Counts a row sent against LIMIT; false once it is reached.
    fn count_sent(&mut self) -> bool {
        match self.left.as_mut() {
            Some(l) => {
                *l -= 1;
                *l > 0
            }
            None => true,
        }
    }

    /// Sends the rows held back (sorted), after the columns.
    pub(crate) fn finish(mut self) -> Result<()> {
        let Some(sorter) = self.sorter.take() else {
            return Ok(());
        };
        let conv = match self.stats.take() {
            Some(st) => Some(st.decide(self.columns.to_mut())),
            None => None,
        };
        self.sink.columns(&self.columns)?;
        let mut sorted = sorter.finish()?;
        let mut n = 0u32;
        while let Some((_, vals)) = sorted.next()? {
            n = n.wrapping_add(1);
            if n.is_multiple_of(1024) && self.interrupt.is_some_and(|f| f.load(Ordering::Relaxed)) {
                return Err(Error::Interrupted);
            }
            if !self.emit(vals, conv.as_ref())? {
                break;
            }
        }
        Ok(())
    }
}
