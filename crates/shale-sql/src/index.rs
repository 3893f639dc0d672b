//! Index entries (docs/tables.md, "Keys"): how a row becomes keys in
//! `sql_data`.
//!
//! ```text
//! primary key:      index_id u32 BE | pk columns            -> row
//! hidden primary:   index_id u32 BE | row id u64 BE        -> row
//! secondary:        index_id u32 BE | index cols | pk part  -> (empty)
//! unique, no NULL:  index_id u32 BE | index cols            -> pk part
//! ```
//!
//! "pk part" is the primary key's encoding without its index id. A unique
//! index entry whose columns hold a NULL takes the non-unique form (NULLs
//! never collide). Because the unique form is one key per value, two
//! transactions inserting the same value write the same key: the engine's
//! lock and write-conflict check let only one of them commit.

use crate::catalog::{IndexDef, TableDef};
use crate::keycodec;
use crate::types::Datum;

/// `index_id` as the 4-byte key prefix.
pub fn prefix(index_id: u32) -> Vec<u8> {
    index_id.to_be_bytes().to_vec()
}

/// [`prefix`] in a vector with room for `more` bytes after it (a key
/// grown byte by byte from 4 bytes was reallocated three times).
pub(crate) fn prefix_with_room(index_id: u32, more: usize) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + more);
    k.extend_from_slice(&index_id.to_be_bytes());
    k
}

/// Room for the encoded columns of `index`: 9 bytes covers a flag and an
/// integer; longer values grow the key as before.
pub(crate) fn key_room(index: &IndexDef) -> usize {
    9 * index.columns.len()
}

/// The encoded columns of `index` from `row` (current column order).
pub fn encode_columns(def: &TableDef, index: &IndexDef, row: &[Datum], out: &mut Vec<u8>) -> bool {
    let mut any_null = false;
    for (i, id) in index.columns.iter().enumerate() {
        let Some(pos) = def.position_of_id(*id) else {
            continue;
        };
        let (Some(col), Some(v)) = (def.columns.get(pos), row.get(pos)) else {
            continue;
        };
        any_null |= v.is_null();
        keycodec::encode_dir(out, v, &col.ty, index.desc_at(i));
    }
    any_null
}

/// The primary key of `row`, without the index id. `row_id` is the hidden
/// row id for tables without a declared primary key.
pub fn pk_part(def: &TableDef, row: &[Datum], row_id: Option<u64>) -> Vec<u8> {
    let mut out = Vec::with_capacity(def.primary().map_or(8, key_room));
    match (def.hidden_pk, row_id) {
        (true, Some(id)) => out.extend_from_slice(&id.to_be_bytes()),
        _ => {
            if let Some(pk) = def.primary() {
                encode_columns(def, pk, row, &mut out);
            }
        }
    }
    out
}

/// The full primary-key key for a pk part.
pub fn pk_key(def: &TableDef, pk_part: &[u8]) -> Vec<u8> {
    let mut k = prefix_with_room(def.primary().map_or(0, |p| p.id), pk_part.len());
    k.extend_from_slice(pk_part);
    k
}

/// The key and value of `row`'s entry in secondary `index`.
pub fn secondary_entry(
    def: &TableDef,
    index: &IndexDef,
    row: &[Datum],
    pk_part: &[u8],
) -> (Vec<u8>, Vec<u8>) {
    let mut key = prefix_with_room(index.id, key_room(index) + pk_part.len());
    let any_null = encode_columns(def, index, row, &mut key);
    if index.unique && !any_null {
        (key, pk_part.to_vec())
    } else {
        key.extend_from_slice(pk_part);
        (key, Vec::new())
    }
}

/// The pk part named by a secondary entry: its value if non-empty (unique
/// form), else what follows the index columns in the key.
pub fn pk_of_entry(def: &TableDef, index: &IndexDef, key: &[u8], value: &[u8]) -> Option<Vec<u8>> {
    if !value.is_empty() {
        return Some(value.to_vec());
    }
    let mut rest = key.get(4..)?;
    for (i, id) in index.columns.iter().enumerate() {
        let col = def.columns.iter().find(|c| c.id == *id)?;
        rest = keycodec::decode_dir(rest, &col.ty, index.desc_at(i))?.1;
    }
    Some(rest.to_vec())
}

/// The row a covering read builds from a secondary entry: the index's
/// columns from the key, the primary key's from the pk part; the other
/// columns NULL (the query reads none of them). None if malformed.
pub fn covering_row(
    def: &TableDef,
    index: &IndexDef,
    key: &[u8],
    value: &[u8],
) -> Option<Vec<Datum>> {
    let mut row = vec![Datum::Null; def.columns.len()];
    let mut rest = key.get(4..)?;
    for (i, id) in index.columns.iter().enumerate() {
        let pos = def.position_of_id(*id)?;
        let (v, r) = keycodec::decode_dir(rest, &def.columns.get(pos)?.ty, index.desc_at(i))?;
        *row.get_mut(pos)? = v;
        rest = r;
    }
    if def.hidden_pk {
        return Some(row);
    }
    let pk_part = if value.is_empty() {
        rest.to_vec()
    } else {
        value.to_vec()
    };
    let mut rest = pk_part.as_slice();
    let pk = def.primary()?;
    for (i, id) in pk.columns.iter().enumerate() {
        let pos = def.position_of_id(*id)?;
        let (v, r) = keycodec::decode_dir(rest, &def.columns.get(pos)?.ty, pk.desc_at(i))?;
        *row.get_mut(pos)? = v;
        rest = r;
    }
    Some(row)
}
