//! A prepared statement's result rows, encoded in the binary protocol as
//! the SQL layer produces them.
//!
//! The SQL layer hands rows to a [`shale_sql::ResultSink`]. Collected, a
//! range of 100 rows would be 100 `Vec<Datum>`s, then 100 `Vec<Value>`s,
//! then packets; here each row is converted into one reused `Vec<Value>`
//! (a string column's bytes copied into the buffer the slot held for the
//! previous row) and encoded straight into [`EncodedRows`]. Under sysbench
//! `oltp_read_write` the per-row allocations were ~7% of the server's
//! samples (docs/benchmarks.md, "Rows projected into reused buffers").
//!
//! Example: `SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?` (`c` is
//! CHAR(120)) reaches [`BinarySink::row_ref`] once per row with the same
//! one-element slice, refilled; each call appends `00 00 78 <120 bytes>`.

use crate::backend::{Column, EncodedRows, Value};
use crate::mysql::consts::ColumnType;
use crate::sql_backend::{convert_column, to_value};
use shale_sql::{ColumnMeta, Datum, ResultSink};
use std::sync::Arc;

/// Buffers a prepared statement keeps for its executions' sinks, so an
/// execution allocates none of them (nor, for a string column, the
/// string's buffer) once the first has sized them.
#[derive(Default)]
pub(crate) struct SinkScratch {
    /// The result columns' protocol types.
    types: Vec<ColumnType>,
    /// The row being encoded, reused for the next.
    row: Vec<Value>,
    /// The last result's encoded rows, handed back by the connection once
    /// sent ([`SinkScratch::recycle`]); emptied before reuse.
    rows: EncodedRows,
}

/// Bytes of string buffers a statement's scratch row may keep between
/// executions: a row of large values is not held by an idle statement.
const KEEP_ROW_BYTES: usize = 16 << 10;

/// Bytes of encoded-row buffers a statement keeps between executions
/// (a 100-row range of sysbench's 120-byte `c` fits).
const KEEP_RESULT_BYTES: usize = 64 << 10;

impl SinkScratch {
    /// Drops the row's buffers if they hold more than [`KEEP_ROW_BYTES`].
    fn trim(&mut self) {
        let held: usize = self
            .row
            .iter()
            .map(|v| match v {
                Value::Bytes(b) => b.capacity(),
                _ => 0,
            })
            .sum();
        if held > KEEP_ROW_BYTES {
            self.row = Vec::new();
        }
    }

    /// Keeps a sent result's row buffers for the next execution, unless
    /// they are larger than [`KEEP_RESULT_BYTES`].
    pub(crate) fn recycle(&mut self, rows: EncodedRows) {
        if rows.capacity_bytes() <= KEEP_RESULT_BYTES {
            self.rows = rows;
        }
    }
}

/// Encodes a result set's rows as they come.
pub(crate) struct BinarySink<'a> {
    /// The statement's columns as prepared, and their protocol form: a
    /// result with the same columns goes out with these (encoded once per
    /// statement, `mysql/stmt.rs`).
    prepared: &'a [ColumnMeta],
    prepared_columns: &'a Arc<[Column]>,
    /// Set when the SQL layer gives the result's columns.
    columns: Option<Arc<[Column]>>,
    scratch: &'a mut SinkScratch,
    rows: EncodedRows,
}

impl<'a> BinarySink<'a> {
    pub(crate) fn new(
        prepared: &'a [ColumnMeta],
        prepared_columns: &'a Arc<[Column]>,
        scratch: &'a mut SinkScratch,
    ) -> Self {
        scratch.trim();
        let mut rows = std::mem::take(&mut scratch.rows);
        rows.clear();
        BinarySink {
            prepared,
            prepared_columns,
            columns: None,
            scratch,
            rows,
        }
    }

    /// The result set, if the statement made one.
    pub(crate) fn finish(self) -> Option<(Arc<[Column]>, EncodedRows)> {
        self.scratch.trim();
        Some((self.columns?, self.rows))
    }
}

impl ResultSink for BinarySink<'_> {
    fn columns(&mut self, columns: &[ColumnMeta]) -> shale_sql::Result<()> {
        let cols: Arc<[Column]> = if columns == self.prepared {
            self.prepared_columns.clone()
        } else {
            columns.iter().map(convert_column).collect()
        };
        self.scratch.types.clear();
        self.scratch.types.extend(cols.iter().map(|c| c.col_type));
        self.columns = Some(cols);
        Ok(())
    }

    fn row(&mut self, row: Vec<Datum>) -> shale_sql::Result<()> {
        self.row_ref(&row)
    }

    fn row_ref(&mut self, row: &[Datum]) -> shale_sql::Result<()> {
        let scratch = &mut *self.scratch;
        scratch.row.resize(row.len(), Value::Null);
        for (slot, d) in scratch.row.iter_mut().zip(row) {
            set_value(slot, d);
        }
        self.rows
            .push(&scratch.types, &scratch.row)
            .map_err(|e| shale_sql::Error::Unsupported(e.to_string()))
    }
}

/// `*slot = to_value(d.clone())`, reusing the slot's byte buffer when both
/// are strings.
fn set_value(slot: &mut Value, d: &Datum) {
    if let (Value::Bytes(dst), Datum::Bytes(b)) = (&mut *slot, d) {
        dst.clear();
        dst.extend_from_slice(b);
        return;
    }
    *slot = to_value(d.clone());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::binary::binary_row;

    fn meta(name: &str, ty: shale_sql::SqlType) -> ColumnMeta {
        ColumnMeta::computed(name, ty)
    }

    #[test]
    fn rows_encode_as_the_protocol_layer_encodes_values() {
        let metas = vec![
            meta(
                "id",
                shale_sql::SqlType::Int {
                    bytes: 4,
                    unsigned: false,
                },
            ),
            meta("c", shale_sql::SqlType::VarChar(10)),
        ];
        let prepared: Arc<[Column]> = metas.iter().map(convert_column).collect();
        let mut scratch = SinkScratch::default();
        let mut sink = BinarySink::new(&metas, &prepared, &mut scratch);
        sink.columns(&metas).unwrap();
        let rows = [
            vec![Datum::Int(7), Datum::text("a longer string")],
            vec![Datum::Null, Datum::text("b")],
            vec![Datum::Int(-1), Datum::Null],
        ];
        for r in &rows {
            sink.row_ref(r).unwrap();
        }
        let (columns, got) = sink.finish().unwrap();
        assert!(
            Arc::ptr_eq(&columns, &prepared),
            "the prepared columns go out"
        );
        let types: Vec<ColumnType> = columns.iter().map(|c| c.col_type).collect();
        let want: Vec<Vec<u8>> = rows
            .iter()
            .map(|r| {
                let vals: Vec<Value> = r.iter().cloned().map(to_value).collect();
                binary_row(&types, &vals).unwrap()
            })
            .collect();
        let got: Vec<Vec<u8>> = got.iter().map(<[u8]>::to_vec).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn other_columns_are_converted_and_a_misfit_value_is_an_error() {
        let metas = vec![meta(
            "n",
            shale_sql::SqlType::Int {
                bytes: 2,
                unsigned: false,
            },
        )];
        let prepared: Arc<[Column]> = metas.iter().map(convert_column).collect();
        let mut scratch = SinkScratch::default();
        let mut sink = BinarySink::new(&metas, &prepared, &mut scratch);
        let other = vec![meta(
            "x",
            shale_sql::SqlType::Int {
                bytes: 1,
                unsigned: false,
            },
        )];
        sink.columns(&other).unwrap();
        sink.row_ref(&[Datum::Int(5)]).unwrap();
        // 300 does not fit a TINYINT column: refused, nothing half-written.
        assert!(sink.row_ref(&[Datum::Int(300)]).is_err());
        let (columns, rows) = sink.finish().unwrap();
        assert!(!Arc::ptr_eq(&columns, &prepared));
        assert_eq!(columns.first().map(|c| c.col_type), Some(ColumnType::Tiny));
        assert_eq!(rows.iter().collect::<Vec<_>>(), vec![&[0u8, 0, 5][..]]);
    }

    #[test]
    fn scratch_is_reused_but_large_rows_are_not_kept() {
        let metas = vec![meta("c", shale_sql::SqlType::VarChar(100_000))];
        let prepared: Arc<[Column]> = metas.iter().map(convert_column).collect();
        let mut scratch = SinkScratch::default();
        let mut sink = BinarySink::new(&metas, &prepared, &mut scratch);
        sink.columns(&metas).unwrap();
        sink.row_ref(&[Datum::text("small")]).unwrap();
        sink.finish().unwrap();
        assert_eq!(scratch.types.len(), 1);
        assert_eq!(scratch.row.len(), 1, "a small row's buffers stay");
        let mut sink = BinarySink::new(&metas, &prepared, &mut scratch);
        sink.columns(&metas).unwrap();
        let big = "x".repeat(KEEP_ROW_BYTES + 1);
        sink.row_ref(&[Datum::text(&big)]).unwrap();
        let (_, rows) = sink.finish().unwrap();
        assert_eq!(rows.iter().count(), 1);
        assert!(scratch.row.is_empty(), "a large row's buffers are dropped");
    }

    #[test]
    fn recycled_rows_reuse_their_buffers_but_not_their_rows() {
        let metas = vec![meta("c", shale_sql::SqlType::VarChar(100_000))];
        let prepared: Arc<[Column]> = metas.iter().map(convert_column).collect();
        let mut scratch = SinkScratch::default();
        let run = |scratch: &mut SinkScratch, vals: &[&str]| {
            let mut sink = BinarySink::new(&metas, &prepared, scratch);
            sink.columns(&metas).unwrap();
            for v in vals {
                sink.row_ref(&[Datum::text(v)]).unwrap();
            }
            sink.finish().unwrap().1
        };
        let first = run(&mut scratch, &["a", "b", "c"]);
        let kept = first.capacity_bytes();
        scratch.recycle(first);
        let second = run(&mut scratch, &["d"]);
        assert_eq!(
            second.iter().collect::<Vec<_>>(),
            vec![&[0u8, 0, 1, b'd'][..]],
            "only this execution's rows"
        );
        assert_eq!(second.capacity_bytes(), kept, "the buffers were reused");
        scratch.recycle(second);
        // A large result's buffers are not kept.
        let big = "x".repeat(KEEP_RESULT_BYTES);
        let third = run(&mut scratch, &[&big]);
        scratch.recycle(third);
        assert_eq!(scratch.rows.capacity_bytes(), 0);
        assert_eq!(run(&mut scratch, &[]).len(), 0);
    }

    #[test]
    fn no_columns_no_result_set() {
        let prepared: Arc<[Column]> = Arc::from(Vec::new());
        let mut scratch = SinkScratch::default();
        assert!(BinarySink::new(&[], &prepared, &mut scratch)
            .finish()
            .is_none());
    }
}
