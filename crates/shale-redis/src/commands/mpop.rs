//! LMPOP / ZMPOP (and the parsing BLMPOP / BZMPOP share): pop from the
//! first non-empty key of a list, with Redis 7.0's checks and replies.

use super::{arg, is_opt, lists, parse_int_strict, zsets, CmdError, CmdResult, Shared};
use crate::resp::Reply;
use crate::tx::Tx;

/// A parsed `numkeys key [key ...] LEFT|RIGHT|MIN|MAX [COUNT n]`.
#[derive(Debug, Clone)]
pub struct MPop {
    pub keys: Vec<Vec<u8>>,
    /// Sorted sets (ZMPOP) rather than lists.
    pub zset: bool,
    /// RIGHT (lists) or MAX (sorted sets).
    pub from_end: bool,
    pub count: i64,
}

fn numkeys_error() -> CmdError {
    CmdError::Other("numkeys should be greater than 0".into())
}

/// Parses the arguments after the command name (after the timeout for the
/// blocking forms).
pub fn parse(zset: bool, a: &[Vec<u8>]) -> Result<MPop, CmdError> {
    let n = parse_int_strict(arg(a, 0))
        .filter(|&n| n > 0)
        .ok_or_else(numkeys_error)?;
    let n = usize::try_from(n).map_err(|_| numkeys_error())?;
    // numkeys keys, then at least the direction.
    if n >= a.len().saturating_sub(1) {
        return Err(CmdError::Syntax);
    }
    let keys = a.get(1..=n).unwrap_or_default().to_vec();
    let dir = arg(a, n + 1);
    let (first, second) = if zset {
        ("MIN", "MAX")
    } else {
        ("LEFT", "RIGHT")
    };
    let from_end = if is_opt(dir, first) {
        false
    } else if is_opt(dir, second) {
        true
    } else {
        return Err(CmdError::Syntax);
    };
    let mut count = None;
    let mut j = n + 2;
    while let Some(opt) = a.get(j) {
        if is_opt(opt, "COUNT") && count.is_none() && j + 1 < a.len() {
            let c = parse_int_strict(arg(a, j + 1))
                .filter(|&c| c > 0)
                .ok_or_else(|| CmdError::Other("count should be greater than 0".into()))?;
            count = Some(c);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(MPop {
        keys,
        zset,
        from_end,
        count: count.unwrap_or(1),
    })
}

/// Pops from `key` if it has elements: `[key, elements]` (ZMPOP: elements
/// are [member, score] pairs in RESP2 and RESP3); None when it is empty.
pub fn pop_key(
    shared: &Shared,
    tx: &mut Tx,
    db: u8,
    p: &MPop,
    key: &[u8],
) -> Result<Option<Reply>, CmdError> {
    let args = [key.to_vec(), p.count.to_string().into_bytes()];
    let got = if p.zset {
        let name = if p.from_end { "zpopmax" } else { "zpopmin" };
        match zsets::run(shared, tx, db, name, &args)? {
            Reply::Pairs(v) if !v.is_empty() => Reply::Array(
                v.into_iter()
                    .map(|(m, s)| Reply::Array(vec![m, s]))
                    .collect(),
            ),
            _ => return Ok(None),
        }
    } else {
        let name = if p.from_end { "rpop" } else { "lpop" };
        match lists::run(tx, db, name, &args)? {
            Reply::Array(v) if !v.is_empty() => Reply::Array(v),
            _ => return Ok(None),
        }
    };
    Ok(Some(Reply::Array(vec![Reply::bulk(key.to_vec()), got])))
}

/// The first non-empty key's pop, in argument order (a key of another
/// type met first is WRONGTYPE); a nil array when all are empty.
pub fn try_all(shared: &Shared, tx: &mut Tx, db: u8, p: &MPop) -> CmdResult {
    tx.lock(db, p.keys.iter().map(Vec::as_slice));
    for k in &p.keys {
        if let Some(r) = pop_key(shared, tx, db, p, k)? {
            return Ok(r);
        }
    }
    Ok(Reply::NilArray)
}

/// LMPOP / ZMPOP.
pub fn run(shared: &Shared, tx: &mut Tx, db: u8, name: &str, a: &[Vec<u8>]) -> CmdResult {
    let p = parse(name == "zmpop", a)?;
    try_all(shared, tx, db, &p)
}
