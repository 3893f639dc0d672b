//! GROUP BY execution (docs/tables.md, "Memory-bounded sorts, groups and
//! joins"): groups are gathered in a hash table while their estimated
//! size stays under min(`tmp_table_size`, `max_heap_table_size`); past it
//! the hash table is dropped and the input read again through a sort on
//! the group key (spilling as any sort), so each group's rows arrive
//! together and one group at a time is held.
//!
//! ```text
//! hash:   row -> Groups[group_key] (first-seen order out)
//! sorted: row -> Sorter(key = group_key bytes, value = the joined row)
//!         merge: consecutive rows of equal key fold into one group
//! ```
//!
//! The sort is stable, so a group's first row (what non-aggregated
//! columns show) is the same row the hash pass would keep. Groups come
//! out in key order instead of first-seen order; without ORDER BY neither
//! is promised (MySQL 8 gives no order either). The second pass reads the
//! same snapshot, so it sees the same rows.

use crate::aggregate::{AggState, Groups};
use crate::error::Result;
use crate::executor::{group_key, Executor, Rows};
use crate::result::Pipeline;
use crate::select::SelectPlan;
use crate::sort::{row_bytes, Sorter};
use crate::types::Datum;

/// What a group costs beyond its first row, per aggregate (the state)
/// and in all (key, map slot), as the bound counts it.
const STATE_BYTES: usize = 64;
const GROUP_BYTES: usize = 96;

impl Executor<'_> {
    pub(crate) fn aggregate(
        &self,
        plan: &SelectPlan,
        first: Option<&Rows>,
        out: &mut Pipeline<'_, '_>,
    ) -> Result<()> {
        let mut acc = match crate::parallel::partitions(self, plan, first)? {
            Some(parts) => crate::parallel::aggregate(self, plan, &parts)?,
            None => {
                let mut acc = Groups::default();
                if plan.tables.is_empty() {
                    let row: Vec<Datum> = Vec::new();
                    if self.passes(&plan.filter, &row)? {
                        self.with_cx(&[], |cx| {
                            acc.feed(&plan.group_by, &plan.aggs, &row, &|e| e.eval(&row, cx))
                        })?;
                    }
                } else {
                    let mut bytes = 0usize;
                    let bound = self.limits.tmp_table;
                    let per_group = GROUP_BYTES + STATE_BYTES * plan.aggs.len();
                    let mut overflow = false;
                    self.for_each_row_values(plan, first, &mut |row| {
                        let before = acc.groups.len();
                        self.with_cx(&[], |cx| {
                            if plan.group_by.is_empty() {
                                // One group: no key to build or look up.
                                acc.feed_ungrouped(&plan.aggs, row, cx)
                            } else {
                                acc.feed(&plan.group_by, &plan.aggs, row, &|e| e.eval(row, cx))
                            }
                        })?;
                        if acc.groups.len() > before {
                            bytes += row_bytes(row) + per_group;
                            overflow = bytes > bound;
                        }
                        Ok(!overflow)
                    })?;
                    if overflow {
                        drop(acc);
                        return self.aggregate_sorted(plan, first, out);
                    }
                }
                acc
            }
        };
        let mut groups = std::mem::take(&mut acc.groups);
        let fresh = || plan.aggs.iter().map(AggState::new).collect::<Vec<_>>();
        if groups.is_empty() && plan.group_by.is_empty() {
            groups.push((vec![Datum::Null; plan.width], fresh()));
        }
        for (row, states) in groups {
            if !self.emit_group(plan, &row, states, out)? {
                break;
            }
        }
        Ok(())
    }

    /// Finishes one group's aggregates and passes it on unless HAVING
    /// drops it; false: no more rows wanted.
    fn emit_group(
        &self,
        plan: &SelectPlan,
        row: &[Datum],
        states: Vec<AggState>,
        out: &mut Pipeline<'_, '_>,
    ) -> Result<bool> {
        let aggs: Vec<Datum> = states
            .into_iter()
            .map(AggState::finish)
            .collect::<Result<_>>()?;
        if let Some(h) = &plan.having {
            if self.with_cx(&aggs, |cx| h.eval(row, cx))?.truth() != Some(true) {
                return Ok(true);
            }
        }
        let (keys, vals) = self.project(plan, row, &aggs)?;
        out.push(keys, vals)
    }

    /// GROUP BY through a sort on the group key (too many groups to hash).
    fn aggregate_sorted(
        &self,
        plan: &SelectPlan,
        first: Option<&Rows>,
        out: &mut Pipeline<'_, '_>,
    ) -> Result<()> {
        let mut sorter = Sorter::new(vec![false], self.limits.sort_buffer, None, self.tmpdir());
        self.for_each_row_values(plan, first, &mut |row| {
            let key = self.with_cx(&[], |cx| {
                plan.group_by
                    .iter()
                    .map(|g| g.eval(row, cx))
                    .collect::<Result<Vec<_>>>()
            })?;
            sorter.push(vec![Datum::Bytes(group_key(&key))], row.to_vec())?;
            Ok(true)
        })?;
        let mut sorted = sorter.finish()?;
        let mut current: Option<(Vec<Datum>, Vec<Datum>, Vec<AggState>)> = None;
        while let Some((key, row)) = sorted.next()? {
            self.check_interrupt()?;
            if current.as_ref().is_none_or(|(k, _, _)| *k != key) {
                if let Some((_, first_row, states)) = current.take() {
                    if !self.emit_group(plan, &first_row, states, out)? {
                        return Ok(());
                    }
                }
                let states = plan.aggs.iter().map(AggState::new).collect();
                current = Some((key, row.clone(), states));
            }
            if let Some((_, _, states)) = current.as_mut() {
                for (st, call) in states.iter_mut().zip(&plan.aggs) {
                    let v = match &call.arg {
                        Some(a) => Some(self.with_cx(&[], |cx| a.eval(&row, cx))?),
                        None => None,
                    };
                    st.add(v)?;
                }
            }
        }
        if let Some((_, first_row, states)) = current {
            self.emit_group(plan, &first_row, states, out)?;
        }
        Ok(())
    }
}
