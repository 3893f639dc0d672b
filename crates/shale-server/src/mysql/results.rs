//! Reply packets (docs/mysql-protocol.md, "Replies"): OK, ERR, EOF, column
//! definitions and text-protocol result sets.
//!
//! A text result set is
//! `column count | column definition x N | EOF | row x M | EOF`, where a
//! row is one length-encoded string per column, or `0xfb` for NULL. For
//! example the one-row result of `SELECT 1 AS a` is the packets
//! `01`, `03 'def' 00 00 00 01 'a' 00 0c 3f00 01000000 08 8100 00 0000`,
//! `fe 0000 0200`, `01 '1'`, `fe 0000 0200`.

use super::consts::{colflag, ColumnType};
use super::wire::{put_lenenc_bytes, put_lenenc_int};
use crate::backend::{Column, SqlError, Value};

/// Encodes an OK packet.
pub fn ok_packet(
    affected_rows: u64,
    last_insert_id: u64,
    status: u16,
    warnings: u16,
    info: &str,
) -> Vec<u8> {
    // Sized for the largest integers, so the pushes below never regrow it.
    let mut out = Vec::with_capacity(1 + 9 + 9 + 4 + info.len());
    out.push(0x00);
    put_lenenc_int(&mut out, affected_rows);
    put_lenenc_int(&mut out, last_insert_id);
    out.extend_from_slice(&status.to_le_bytes());
    out.extend_from_slice(&warnings.to_le_bytes());
    out.extend_from_slice(info.as_bytes());
    out
}

/// Encodes an ERR packet (protocol 4.1: with the SQLSTATE marker).
pub fn err_packet(e: &SqlError) -> Vec<u8> {
    let mut out = vec![0xff];
    out.extend_from_slice(&e.code.to_le_bytes());
    out.push(b'#');
    out.extend_from_slice(&e.state);
    // Clients show the message as-is; keep it bounded so a huge statement
    // echoed in an error cannot make a huge packet.
    let msg = e.message.as_bytes();
    out.extend_from_slice(msg.get(..msg.len().min(8 << 10)).unwrap_or(msg));
    out
}

/// Encodes an EOF packet (an array: two go out with every result set, and
/// a vector grown from `vec![0xfe]` cost two allocations each).
pub fn eof_packet(warnings: u16, status: u16) -> [u8; 5] {
    let [w0, w1] = warnings.to_le_bytes();
    let [s0, s1] = status.to_le_bytes();
    [0xfe, w0, w1, s0, s1]
}

/// Encodes a column definition (Protocol::ColumnDefinition41).
pub fn column_definition(c: &Column) -> Vec<u8> {
    let mut out = Vec::with_capacity(48 + c.name.len() * 2);
    put_lenenc_bytes(&mut out, b"def");
    put_lenenc_bytes(&mut out, c.schema.as_bytes());
    put_lenenc_bytes(&mut out, c.table.as_bytes());
    put_lenenc_bytes(&mut out, c.org_table.as_bytes());
    put_lenenc_bytes(&mut out, c.name.as_bytes());
    put_lenenc_bytes(&mut out, c.org_name.as_bytes());
    put_lenenc_int(&mut out, 0x0c); // length of the fixed fields
    out.extend_from_slice(&c.charset.to_le_bytes());
    out.extend_from_slice(&c.length.to_le_bytes());
    out.push(c.col_type as u8); // repr(u8): the discriminant is the wire byte
    let mut flags = c.flags;
    if is_numeric(c.col_type) {
        flags |= colflag::NUM;
    }
    out.extend_from_slice(&flags.to_le_bytes());
    out.push(c.decimals);
    out.extend_from_slice(&[0, 0]);
    out
}

fn is_numeric(t: ColumnType) -> bool {
    matches!(
        t,
        ColumnType::Decimal
            | ColumnType::NewDecimal
            | ColumnType::Tiny
            | ColumnType::Short
            | ColumnType::Long
            | ColumnType::LongLong
            | ColumnType::Int24
            | ColumnType::Float
            | ColumnType::Double
            | ColumnType::Year
    )
}

/// Encodes one text-protocol row.
pub fn text_row(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * 8);
    text_row_into(&mut out, values);
    out
}

/// As [`text_row`], appended to `out`.
pub fn text_row_into(out: &mut Vec<u8>, values: &[Value]) {
    let mut buf = Vec::new();
    for v in values {
        if matches!(v, Value::Null) {
            out.push(0xfb);
        } else {
            buf.clear();
            v.write_text(&mut buf);
            put_lenenc_bytes(out, &buf);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use crate::mysql::wire::Reader;

    #[test]
    fn ok_and_err_layouts() {
        let ok = ok_packet(300, 7, 2, 1, "");
        assert_eq!(ok, [0x00, 0xfc, 0x2c, 0x01, 7, 2, 0, 1, 0]);
        let e = err_packet(&SqlError::new(1146, *b"42S02", "Table 't' doesn't exist"));
        assert_eq!(
            &e[..9],
            &[0xff, 0x7a, 0x04, b'#', b'4', b'2', b'S', b'0', b'2']
        );
        assert_eq!(&e[9..], b"Table 't' doesn't exist");
    }

    #[test]
    fn column_definition_round_trips_its_strings() {
        let c = Column::new("a", ColumnType::LongLong);
        let d = column_definition(&c);
        let mut r = Reader::new(&d);
        assert_eq!(r.lenenc_bytes("catalog").unwrap(), b"def");
        for _ in 0..3 {
            r.lenenc_bytes("s").unwrap();
        }
        assert_eq!(r.lenenc_bytes("name").unwrap(), b"a");
        r.lenenc_bytes("org").unwrap();
        assert_eq!(r.lenenc_int("fixed").unwrap(), 0x0c);
        r.u16("charset").unwrap();
        r.u32("len").unwrap();
        assert_eq!(r.u8("type").unwrap(), 0x08);
        assert_ne!(r.u16("flags").unwrap() & colflag::NUM, 0);
    }

    #[test]
    fn text_rows_mark_null() {
        let row = text_row(&[Value::Int(-5), Value::Null, Value::Bytes(b"xy".to_vec())]);
        assert_eq!(row, [2, b'-', b'5', 0xfb, 2, b'x', b'y']);
    }
}
