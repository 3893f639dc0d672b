//! Aggregate states (COUNT/SUM/AVG/MIN/MAX, with DISTINCT) and groups:
//! what GROUP BY accumulates, and how partial results of a partitioned
//! scan merge (`Groups::merge`).

use crate::error::{Error, Result};
use crate::executor::group_key;
use crate::expr::{AggCall, AggFunc, BExpr, EvalCx};
use crate::types::{sort_order, Datum, Decimal};
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

/// MIN/MAX: whether `v` beats `best` (is smaller; larger with `max`).
fn better(best: Option<&Datum>, v: &Datum, max: bool) -> bool {
    match best {
        None => true,
        Some(b) => {
            let o = sort_order(v, b);
            if max {
                o == Ordering::Greater
            } else {
                o == Ordering::Less
            }
        }
    }
}

/// MIN/MAX: keeps `v` in `best` if it is smaller (larger with `max`).
fn keep_extreme(best: &mut Option<Datum>, v: Datum, max: bool) {
    if better(best.as_ref(), &v, max) {
        *best = Some(v);
    }
}

/// SUM: adds non-NULL `v`, exactly (DECIMAL) while every value is exact,
/// in DOUBLE from the first inexact one on.
fn sum_in(exact: &mut Option<Decimal>, float: &mut Option<f64>, v: &Datum) -> Result<()> {
    let is_exact = matches!(v, Datum::Int(_) | Datum::UInt(_) | Datum::Decimal(_));
    if is_exact && float.is_none() {
        let d = v.to_decimal().unwrap_or(Decimal::from_i128(0));
        *exact = Some(match exact {
            Some(acc) => {
                Decimal::checked_add(*acc, d).ok_or_else(|| Error::OutOfRange("SUM".into(), 0))?
            }
            None => d,
        });
    } else {
        let prior = exact.take().map_or(0.0, Decimal::to_f64);
        *float = Some(float.unwrap_or(prior) + v.to_f64().unwrap_or(0.0));
    }
    Ok(())
}

/// A set of group keys (DISTINCT rows, COUNT/SUM(DISTINCT) arguments).
pub type KeySet = HashSet<Vec<u8>, foldhash::fast::RandomState>;

/// Groups in first-seen order, each with its first row and states.
#[derive(Default)]
pub struct Groups {
    index: HashMap<Vec<u8>, usize, foldhash::fast::RandomState>,
    pub groups: Vec<(Vec<Datum>, Vec<AggState>)>,
}

impl Groups {
    /// Adds one row: `eval` evaluates an expression on it.
    pub fn feed(
        &mut self,
        group_by: &[BExpr],
        aggs: &[AggCall],
        row: &[Datum],
        eval: &dyn Fn(&BExpr) -> Result<Datum>,
    ) -> Result<()> {
        let mut key_vals = Vec::with_capacity(group_by.len());
        for g in group_by {
            key_vals.push(eval(g)?);
        }
        let key = group_key(&key_vals);
        let gi = match self.index.get(&key) {
            Some(i) => *i,
            None => {
                self.groups
                    .push((row.to_vec(), aggs.iter().map(AggState::new).collect()));
                self.index.insert(key, self.groups.len() - 1);
                self.groups.len() - 1
            }
        };
        if let Some((_, states)) = self.groups.get_mut(gi) {
            for (st, call) in states.iter_mut().zip(aggs) {
                let v = match &call.arg {
                    Some(a) => Some(eval(a)?),
                    None => None,
                };
                st.add(v)?;
            }
        }
        Ok(())
    }

    /// As [`Groups::feed`] without GROUP BY (one group), reading argument
    /// values in place ([`AggState::add_ref`]).
    pub fn feed_ungrouped(
        &mut self,
        aggs: &[AggCall],
        row: &[Datum],
        cx: &EvalCx<'_>,
    ) -> Result<()> {
        if self.groups.is_empty() {
            self.groups
                .push((row.to_vec(), aggs.iter().map(AggState::new).collect()));
            // The key `feed` and `merge` give a group of no columns.
            self.index.insert(group_key(&[]), 0);
        }
        if let Some((_, states)) = self.groups.first_mut() {
            for (st, call) in states.iter_mut().zip(aggs) {
                match &call.arg {
                    Some(a) => st.add_ref(a.eval_ref(row, cx)?.as_ref())?,
                    None => st.add(None)?,
                }
            }
        }
        Ok(())
    }

    /// Adds `n` rows to COUNT(*) aggregates of the one group of an
    /// ungrouped aggregate whose aggregates are all COUNT(*)
    /// (`row`: the group's row, for its projection).
    pub fn count_rows(&mut self, aggs: &[AggCall], row: &[Datum], rows: i64) {
        if rows == 0 {
            return;
        }
        if self.groups.is_empty() {
            self.groups
                .push((row.to_vec(), aggs.iter().map(AggState::new).collect()));
            self.index.insert(group_key(&[]), 0);
        }
        if let Some((_, states)) = self.groups.first_mut() {
            for st in states.iter_mut() {
                if let AggState::Count { n, star: true, .. } = st {
                    *n += rows;
                }
            }
        }
    }

    /// Folds another partition's groups into these (no DISTINCT states).
    pub fn merge(
        &mut self,
        other: Groups,
        group_by: &[BExpr],
        eval_on: &dyn Fn(&BExpr, &[Datum]) -> Result<Datum>,
    ) -> Result<()> {
        for (row, states) in other.groups {
            let mut key_vals = Vec::with_capacity(group_by.len());
            for g in group_by {
                key_vals.push(eval_on(g, &row)?);
            }
            let key = group_key(&key_vals);
            match self.index.get(&key) {
                Some(i) => {
                    if let Some((_, mine)) = self.groups.get_mut(*i) {
                        for (m, o) in mine.iter_mut().zip(states) {
                            m.merge(o)?;
                        }
                    }
                }
                None => {
                    self.groups.push((row, states));
                    self.index.insert(key, self.groups.len() - 1);
                }
            }
        }
        Ok(())
    }
}

/// One aggregate's running state.
pub enum AggState {
    Count {
        n: i64,
        distinct: Option<KeySet>,
        star: bool,
    },
    Sum {
        exact: Option<Decimal>,
        float: Option<f64>,
        n: i64,
        avg: bool,
        distinct: Option<KeySet>,
    },
    Extreme {
        best: Option<Datum>,
        max: bool,
    },
}

impl AggState {
    pub fn new(call: &AggCall) -> AggState {
        let distinct = call.distinct.then(KeySet::default);
        match call.func {
            AggFunc::CountStar => AggState::Count {
                n: 0,
                distinct: None,
                star: true,
            },
            AggFunc::Count => AggState::Count {
                n: 0,
                distinct,
                star: false,
            },
            AggFunc::Sum | AggFunc::Avg => AggState::Sum {
                exact: None,
                float: None,
                n: 0,
                avg: call.func == AggFunc::Avg,
                distinct,
            },
            AggFunc::Min => AggState::Extreme {
                best: None,
                max: false,
            },
            AggFunc::Max => AggState::Extreme {
                best: None,
                max: true,
            },
        }
    }

    pub fn add(&mut self, v: Option<Datum>) -> Result<()> {
        match self {
            AggState::Count { n, distinct, star } => {
                if *star {
                    *n += 1;
                } else if let Some(v) = v.filter(|v| !v.is_null()) {
                    if distinct
                        .as_mut()
                        .is_none_or(|s| s.insert(group_key(std::slice::from_ref(&v))))
                    {
                        *n += 1;
                    }
                }
            }
            AggState::Sum {
                exact,
                float,
                n,
                distinct,
                ..
            } => {
                let Some(v) = v.filter(|v| !v.is_null()) else {
                    return Ok(());
                };
                if let Some(s) = distinct.as_mut() {
                    if !s.insert(group_key(std::slice::from_ref(&v))) {
                        return Ok(());
                    }
                }
                *n += 1;
                sum_in(exact, float, &v)?;
            }
            AggState::Extreme { best, max } => {
                let Some(v) = v.filter(|v| !v.is_null()) else {
                    return Ok(());
                };
                keep_extreme(best, v, *max);
            }
        }
        Ok(())
    }

    /// As [`AggState::add`] with a borrowed, present argument value: a
    /// MIN/MAX copies it only when it becomes the best one (scans feed
    /// values straight from their row buffer).
    pub fn add_ref(&mut self, v: &Datum) -> Result<()> {
        match self {
            AggState::Count {
                n,
                distinct: None,
                star,
            } => {
                if *star || !v.is_null() {
                    *n += 1;
                }
            }
            AggState::Sum {
                exact,
                float,
                n,
                distinct: None,
                ..
            } => {
                if !v.is_null() {
                    *n += 1;
                    sum_in(exact, float, v)?;
                }
            }
            AggState::Extreme { best, max } => {
                if !v.is_null() && better(best.as_ref(), v, *max) {
                    *best = Some(v.clone());
                }
            }
            AggState::Count { .. } | AggState::Sum { .. } => self.add(Some(v.clone()))?,
        }
        Ok(())
    }

    /// Folds in the state of the same aggregate from another partition.
    pub fn merge(&mut self, other: AggState) -> Result<()> {
        match (self, other) {
            (
                AggState::Count {
                    n, distinct: None, ..
                },
                AggState::Count {
                    n: m,
                    distinct: None,
                    ..
                },
            ) => *n += m,
            (
                AggState::Sum {
                    exact,
                    float,
                    n,
                    distinct: None,
                    ..
                },
                AggState::Sum {
                    exact: e2,
                    float: f2,
                    n: n2,
                    distinct: None,
                    ..
                },
            ) => {
                *n += n2;
                match (float.is_some() || f2.is_some(), *exact, e2) {
                    (false, Some(a), Some(b)) => {
                        *exact = Some(
                            Decimal::checked_add(a, b)
                                .ok_or_else(|| Error::OutOfRange("SUM".into(), 0))?,
                        )
                    }
                    (false, a, b) => *exact = a.or(b),
                    (true, a, b) => {
                        let total = float.unwrap_or(0.0)
                            + f2.unwrap_or(0.0)
                            + a.map_or(0.0, Decimal::to_f64)
                            + b.map_or(0.0, Decimal::to_f64);
                        *float = Some(total);
                        *exact = None;
                    }
                }
            }
            (AggState::Extreme { best, max }, AggState::Extreme { best: Some(v), .. }) => {
                keep_extreme(best, v, *max);
            }
            (AggState::Extreme { .. }, AggState::Extreme { best: None, .. }) => {}
            _ => return Err(Error::Unsupported("merging DISTINCT aggregates".into())),
        }
        Ok(())
    }

    pub fn finish(self) -> Result<Datum> {
        Ok(match self {
            AggState::Count { n, .. } => Datum::Int(n),
            AggState::Sum {
                exact,
                float,
                n,
                avg,
                ..
            } => {
                if n == 0 {
                    return Ok(Datum::Null);
                }
                match (float, exact, avg) {
                    (Some(f), _, false) => Datum::Double(f),
                    (Some(f), _, true) => Datum::Double(f / n as f64),
                    (None, Some(d), false) => Datum::Decimal(d),
                    (None, Some(d), true) => Datum::Decimal(
                        Decimal::checked_div(d, Decimal::from_i128(i128::from(n)))
                            .ok_or_else(|| Error::OutOfRange("AVG".into(), 0))?,
                    ),
                    (None, None, _) => Datum::Null,
                }
            }
            AggState::Extreme { best, .. } => best.unwrap_or(Datum::Null),
        })
    }
}
