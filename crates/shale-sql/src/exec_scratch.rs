//! Row buffers a session keeps between the SELECTs it streams, so a point
//! select allocates neither its joined-row buffer nor its projected row
//! (nor, for a string column, the projected string) once the first has
//! sized them. Each statement's executor takes them for its run
//! ([`crate::executor::Executor::scratch`]) and the session keeps them
//! back, trimmed.
//!
//! Nothing kept is observable: the joined row is emptied before it is kept
//! and refilled with NULLs before use; every slot of the projected row is
//! overwritten before the sink sees it (`Executor::project_into`).

use crate::types::Datum;

/// Bytes of string buffers the projected row may keep between statements:
/// a row of large values is not held by an idle session.
const KEEP_VALS_BYTES: usize = 16 << 10;

/// Slots either row may keep (a wider one is allocated per statement).
const KEEP_SLOTS: usize = 256;

/// The buffers; see the module comment.
#[derive(Default)]
pub struct ExecScratch {
    /// The joined row of a nested-loop walk, empty between uses.
    pub(crate) row: Vec<Datum>,
    /// The projected values of the last row, overwritten by the next.
    pub(crate) vals: Vec<Datum>,
    /// The stored row a point select read (`point_select.rs`).
    pub(crate) value: Vec<u8>,
}

impl ExecScratch {
    /// Drops what is too large to keep while idle, and the joined row's
    /// values.
    pub(crate) fn trim(&mut self) {
        self.row.clear();
        if self.row.capacity() > KEEP_SLOTS {
            self.row = Vec::new();
        }
        let held: usize = self
            .vals
            .iter()
            .map(|v| match v {
                Datum::Bytes(b) => b.capacity(),
                _ => 0,
            })
            .sum();
        if held > KEEP_VALS_BYTES || self.vals.capacity() > KEEP_SLOTS {
            self.vals = Vec::new();
        }
        if self.value.capacity() > KEEP_VALS_BYTES {
            self.value = Vec::new();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn trim_keeps_small_buffers_and_drops_large_ones() {
        let mut s = ExecScratch {
            row: vec![Datum::text("joined"), Datum::Int(1)],
            vals: vec![Datum::text("small")],
            value: Vec::with_capacity(64),
        };
        s.trim();
        assert!(s.row.is_empty() && s.row.capacity() >= 2);
        assert_eq!(s.vals, vec![Datum::text("small")]);
        assert!(s.value.capacity() >= 64);
        s.vals = vec![Datum::text(&"x".repeat(KEEP_VALS_BYTES + 1))];
        s.value = Vec::with_capacity(KEEP_VALS_BYTES + 1);
        s.trim();
        assert_eq!(s.vals.capacity(), 0);
        assert_eq!(s.value.capacity(), 0);
    }
}
