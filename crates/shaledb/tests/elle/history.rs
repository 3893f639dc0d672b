//! What the checker consumes: a history of list-append transactions.
//!
//! A transaction is a list of micro-operations on keys (`u64` ids) whose values
//! are lists of unique `u64` elements. `append(k, e)` is implemented by the
//! workload as read-modify-write, and recorded as two micro-ops: the read of
//! the old list, then the append. A blind append (no read of `k` before it in
//! the transaction) is allowed too; then the version it wrote is unknown.
//!
//! ```text
//! T7 (p2, committed): r(3)=[] r(5)=[1 4] a(5,9)
//! ```
//! T7 read key 3 empty, read key 5 as `[1, 4]` and wrote `[1, 4, 9]`.

use std::collections::BTreeMap;
use std::fmt;

/// `Txn::process` of the synthetic transaction the checker builds from
/// [`History::final_reads`].
pub const FINAL_PROCESS: usize = usize::MAX;

/// A key of the list-append workload.
pub type Key = u64;
/// A list element; unique across the whole history.
pub type Elem = u64;

/// One micro-operation with what it observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mop {
    /// Read `key`; an absent key reads as the empty list.
    Read { key: Key, value: Vec<Elem> },
    /// Appended `elem` to `key`.
    Append { key: Key, elem: Elem },
}

/// How a transaction ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `commit()` returned Ok.
    Committed,
    /// Rolled back; the string names why (an `Error` variant, or "voluntary").
    /// Nothing it wrote may ever be visible.
    Aborted(String),
    /// Commit failed in a way that does not say whether it was applied. The
    /// checker treats it as committed if any of its elements is observed.
    Unknown(String),
}

/// One transaction of the history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Txn {
    /// Index in [`History::txns`]; shown as `T{id}`.
    pub id: usize,
    /// The thread ("process") that ran it.
    pub process: usize,
    /// Micro-ops in program order (for an aborted transaction: the ones that
    /// were attempted, including the one that failed).
    pub ops: Vec<Mop>,
    pub outcome: Outcome,
}

/// A whole run: every transaction, then the final value of every key read
/// after all of them ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    pub txns: Vec<Txn>,
    pub final_reads: BTreeMap<Key, Vec<Elem>>,
}

impl History {
    /// Adds a transaction, numbering it; returns its id.
    pub fn push(&mut self, process: usize, ops: Vec<Mop>, outcome: Outcome) -> usize {
        let id = self.txns.len();
        self.txns.push(Txn {
            id,
            process,
            ops,
            outcome,
        });
        id
    }
}

/// Shows a list as `[1 4 9]` (Elle's notation).
pub struct ListFmt<'a>(pub &'a [Elem]);

impl fmt::Display for ListFmt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, " ")?;
            }
            write!(f, "{e}")?;
        }
        write!(f, "]")
    }
}

/// Shows a long list by its tail, where reads differ: `[(12 more) 40 41 42 43]`.
pub struct TailFmt<'a>(pub &'a [Elem]);

impl fmt::Display for TailFmt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 4;
        let skip = self.0.len().saturating_sub(SHOWN);
        if skip <= 2 {
            return ListFmt(self.0).fmt(f);
        }
        write!(f, "[({skip} more)")?;
        for e in self.0.iter().skip(skip) {
            write!(f, " {e}")?;
        }
        write!(f, "]")
    }
}

impl fmt::Display for Mop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mop::Read { key, value } => write!(f, "r({key})={}", TailFmt(value)),
            Mop::Append { key, elem } => write!(f, "a({key},{elem})"),
        }
    }
}

impl fmt::Display for Txn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outcome = match &self.outcome {
            Outcome::Committed => "committed".to_string(),
            Outcome::Aborted(why) => format!("aborted: {why}"),
            Outcome::Unknown(why) => format!("unknown: {why}"),
        };
        if self.process == FINAL_PROCESS {
            write!(f, "T{} (final read):", self.id)?;
        } else {
            write!(f, "T{} (p{}, {outcome}):", self.id, self.process)?;
        }
        for op in &self.ops {
            write!(f, " {op}")?;
        }
        Ok(())
    }
}
