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

/// Encodes a result set's rows as they come.
pub(crate) struct BinarySink<'a> {
    /// The statement's columns as prepared, and their protocol form: a
    /// result with the same columns goes out with these (encoded once per
    /// statement, `mysql/stmt.rs`).
    prepared: &'a [ColumnMeta],
    prepared_columns: &'a Arc<[Column]>,
    /// Set when the SQL layer gives the result's columns.
    columns: Option<Arc<[Column]>>,
    types: Vec<ColumnType>,
    /// The row being encoded, reused for the next.
    scratch: Vec<Value>,
    rows: EncodedRows,
}

impl<'a> BinarySink<'a> {
    pub(crate) fn new(prepared: &'a [ColumnMeta], prepared_columns: &'a Arc<[Column]>) -> Self {
        BinarySink {
            prepared,
            prepared_columns,
            columns: None,
            types: Vec::new(),
            scratch: Vec::new(),
            rows: EncodedRows::default(),
        }
    }

    /// The result set, if the statement made one.
    pub(crate) fn finish(self) -> Option<(Arc<[Column]>, EncodedRows)> {
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
        self.types = cols.iter().map(|c| c.col_type).collect();
        self.columns = Some(cols);
        Ok(())
    }

    fn row(&mut self, row: Vec<Datum>) -> shale_sql::Result<()> {
        self.row_ref(&row)
    }

    fn row_ref(&mut self, row: &[Datum]) -> shale_sql::Result<()> {
        self.scratch.resize(row.len(), Value::Null);
        for (slot, d) in self.scratch.iter_mut().zip(row) {
            set_value(slot, d);
        }
        self.rows
            .push(&self.types, &self.scratch)
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
        let mut sink = BinarySink::new(&metas, &prepared);
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
        let mut sink = BinarySink::new(&metas, &prepared);
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
    fn no_columns_no_result_set() {
        let prepared: Arc<[Column]> = Arc::from(Vec::new());
        assert!(BinarySink::new(&[], &prepared).finish().is_none());
    }
}
