//! CHECK TABLE: every row decodes and every secondary index holds exactly
//! the entries the rows call for (invariant 2 of docs/tables.md), read
//! from one snapshot.

use crate::catalog::{Catalog, TableDef};
use crate::error::{Error, Result};
use crate::index;
use crate::keycodec::prefix_successor;
use shaledb::ReadOptions;
use std::collections::BTreeMap;

/// The problems found in `def` (empty: the table is consistent).
pub fn check_table(cat: &Catalog, def: &TableDef) -> Result<Vec<String>> {
    let db = cat.engine();
    let snapshot = db.snapshot();
    let scan = |id: u32, f: &mut dyn FnMut(&[u8], &[u8])| -> Result<()> {
        let lo = index::prefix(id);
        let ro = ReadOptions {
            snapshot: Some(snapshot.clone()),
            lower_bound: Some(lo.clone()),
            upper_bound: prefix_successor(&lo),
            // A bulk scan: it must not flush the block cache.
            cache_priority: shaledb::CachePriority::Low,
        };
        let mut it = db.iter_cf(&ro, cat.data_cf)?;
        it.seek_to_first()?;
        while it.valid() {
            f(it.key(), it.value());
            it.next()?;
        }
        match it.status() {
            Some(e) => Err(Error::Engine(e.clone())),
            None => Ok(()),
        }
    };
    let mut problems = Vec::new();
    let secondaries: Vec<_> = def.indexes.iter().skip(1).collect();
    let mut expected: Vec<BTreeMap<Vec<u8>, Vec<u8>>> = vec![BTreeMap::new(); secondaries.len()];
    let mut rows = 0u64;
    let pk_id = def.primary().map_or(0, |p| p.id);
    scan(pk_id, &mut |k, v| {
        rows += 1;
        match def.decode_row(v) {
            Ok(row) => {
                let pk = k.get(4..).unwrap_or_default();
                for (ix, exp) in secondaries.iter().zip(expected.iter_mut()) {
                    let (ek, ev) = index::secondary_entry(def, ix, &row, pk);
                    if exp.insert(ek, ev).is_some() {
                        problems.push(format!("index {}: two rows share a unique entry", ix.name));
                    }
                }
            }
            Err(e) => problems.push(e.to_string()),
        }
    })?;
    for (ix, exp) in secondaries.iter().zip(expected) {
        let mut found = BTreeMap::new();
        scan(ix.id, &mut |k, v| {
            found.insert(k.to_vec(), v.to_vec());
        })?;
        let missing = exp
            .iter()
            .filter(|(k, v)| found.get(*k) != Some(*v))
            .count();
        let extra = found.keys().filter(|k| !exp.contains_key(*k)).count();
        if missing > 0 || extra > 0 {
            problems.push(format!(
                "index {}: {missing} of {rows} rows lack their entry, {extra} entries name no row",
                ix.name
            ));
        }
    }
    Ok(problems)
}
