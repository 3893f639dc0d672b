//! RENAME, RENAMENX, COPY, MOVE: the value is copied record by record under a new
//! version (O(size), where Redis moves a pointer), then the source's
//! metadata is deleted (RENAME) so its old sub-records become unreachable.

use super::{arg, is_opt, CmdError, CmdResult};
use crate::resp::Reply;
use crate::store::{score_prefix, sub_prefix, Meta, Type, DATABASES};
use crate::tx::Tx;

/// Writes a copy of `m` (the value of `src` in `db`) as `dst` in `dst_db`.
fn copy_value(
    tx: &mut Tx,
    db: u8,
    src: &[u8],
    m: &Meta,
    dst_db: u8,
    dst: &[u8],
) -> Result<(), CmdError> {
    let mut nm = m.clone();
    nm.version = tx.new_version();
    let mut prefixes = vec![(
        sub_prefix(db, src, m.version),
        sub_prefix(dst_db, dst, nm.version),
    )];
    if m.ty == Type::ZSet {
        prefixes.push((
            score_prefix(db, src, m.version),
            score_prefix(dst_db, dst, nm.version),
        ));
    }
    if m.ty != Type::String {
        for (from, to) in prefixes {
            let mut records = Vec::new();
            tx.scan(&from, None, false, |k, v| {
                let mut nk = to.clone();
                nk.extend_from_slice(k.get(from.len()..).unwrap_or_default());
                records.push((nk, v.to_vec()));
                true
            })?;
            for (k, v) in records {
                tx.put(k, v);
            }
        }
    }
    tx.put_meta(dst_db, dst, &nm);
    Ok(())
}

pub fn run(tx: &mut Tx, db: u8, name: &str, a: &[Vec<u8>]) -> CmdResult {
    let (src, dst) = (arg(a, 0), arg(a, 1));
    match name {
        "rename" | "renamenx" => {
            let nx = name == "renamenx";
            tx.lock(db, [src, dst]);
            let Some(m) = tx.get_meta(db, src)? else {
                return Err(CmdError::Other("no such key".into()));
            };
            if src == dst {
                return Ok(if nx { Reply::Int(0) } else { Reply::ok() });
            }
            if nx && tx.get_meta(db, dst)?.is_some() {
                return Ok(Reply::Int(0));
            }
            copy_value(tx, db, src, &m, db, dst)?;
            tx.delete_meta(db, src);
            Ok(if nx { Reply::Int(1) } else { Reply::ok() })
        }
        "copy" => {
            let (mut dst_db, mut replace) = (db, false);
            let mut i = 2;
            while let Some(o) = a.get(i) {
                if is_opt(o, "REPLACE") {
                    replace = true;
                } else if is_opt(o, "DB") && a.get(i + 1).is_some() {
                    let n = super::parse_i64(arg(a, i + 1))?;
                    let logical = u8::try_from(n)
                        .ok()
                        .filter(|d| *d < DATABASES)
                        .ok_or_else(|| CmdError::Other("DB index is out of range".into()))?;
                    dst_db = tx.phys(logical);
                    i += 1;
                } else {
                    return Err(CmdError::Syntax);
                }
                i += 1;
            }
            if src == dst && db == dst_db {
                return Err(CmdError::Other(
                    "source and destination objects are the same".into(),
                ));
            }
            // Both stripes: the destination may be in another db.
            tx.lock_all();
            let Some(m) = tx.get_meta(db, src)? else {
                return Ok(Reply::Int(0));
            };
            if tx.get_meta(dst_db, dst)?.is_some() && !replace {
                return Ok(Reply::Int(0));
            }
            copy_value(tx, db, src, &m, dst_db, dst)?;
            Ok(Reply::Int(1))
        }
        "move" => {
            // Redis's order: the index, its range, same db, then the keys.
            let n = super::parse_i64(dst)?;
            let logical = u8::try_from(n)
                .ok()
                .filter(|d| *d < DATABASES)
                .ok_or_else(|| CmdError::Other("DB index is out of range".into()))?;
            // `db` is physical (see `Tx::phys`), so is the destination.
            let dst_db = tx.phys(logical);
            if dst_db == db {
                return Err(CmdError::Other(
                    "source and destination objects are the same".into(),
                ));
            }
            tx.lock_all();
            let Some(m) = tx.get_meta(db, src)? else {
                return Ok(Reply::Int(0));
            };
            if tx.get_meta(dst_db, src)?.is_some() {
                return Ok(Reply::Int(0));
            }
            copy_value(tx, db, src, &m, dst_db, src)?;
            tx.delete_meta(db, src);
            Ok(Reply::Int(1))
        }
        _ => Err(CmdError::Other(format!("unknown command '{name}'"))),
    }
}
