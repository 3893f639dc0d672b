//! Random picks from a collection: SRANDMEMBER / SPOP's sample,
//! HRANDFIELD, ZRANDMEMBER. A positive count asks for distinct elements (at
//! most all of them), a negative one for exactly |count| with repeats, as
//! in Redis. Distinct picks are reservoir-sampled over one walk of the
//! sub-records (O(size) time, O(count) memory); Redis's are O(count).

use super::{arg, is_opt, parse_i64, typed_meta, CmdError, CmdResult};
use crate::resp::Reply;
use crate::store::{sub_prefix, Type};
use crate::tx::Tx;
use rand::Rng;

/// Longest reply with repeats (Redis streams any length; this one is built
/// in memory).
pub const MAX_RANDOM_REPEATS: usize = 10_000_000;

/// A (member or field, value) pair.
pub type Pair = (Vec<u8>, Vec<u8>);

/// The count argument: Redis's range `-LONG_MAX..=LONG_MAX`; with
/// WITHVALUES / WITHSCORES a negative count below `-LONG_MAX/2` is refused
/// (the reply would have twice as many elements).
pub fn parse_count(b: &[u8], with: bool) -> Result<i64, CmdError> {
    let n = parse_i64(b)?;
    if n == i64::MIN {
        return Err(CmdError::Other(
            "value is out of range, value must between -9223372036854775807 and \
             9223372036854775807"
                .into(),
        ));
    }
    if with && n < -(i64::MAX / 2) {
        return Err(CmdError::Other("value is out of range".into()));
    }
    Ok(n)
}

/// `count` records under `prefix` as (suffix, value): distinct for
/// `count >= 0`, |count| with repeats for `count < 0`.
pub fn pick(tx: &Tx, prefix: &[u8], count: i64) -> Result<Vec<Pair>, CmdError> {
    let mut rng = rand::thread_rng();
    let want = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    let mut out: Vec<Pair> = Vec::new();
    if count < 0 {
        if want > MAX_RANDOM_REPEATS {
            return Err(CmdError::Other(format!(
                "count is too large for this server (at most {MAX_RANDOM_REPEATS} with repeats)"
            )));
        }
        let all = walk(tx, prefix, |_| true)?;
        if all.is_empty() {
            return Ok(out);
        }
        for _ in 0..want {
            if let Some(p) = all.get(rng.gen_range(0..all.len())) {
                out.push(p.clone());
            }
        }
        return Ok(out);
    }
    let mut seen = 0usize;
    walk(tx, prefix, |pair| {
        if out.len() < want {
            out.push(pair);
        } else {
            let j = rng.gen_range(0..=seen);
            if let Some(slot) = out.get_mut(j) {
                *slot = pair;
            }
        }
        seen += 1;
        false
    })?;
    Ok(out)
}

/// Calls `keep` on every (suffix, value) under `prefix`; collects those it keeps.
fn walk(tx: &Tx, prefix: &[u8], mut keep: impl FnMut(Pair) -> bool) -> Result<Vec<Pair>, CmdError> {
    let mut out = Vec::new();
    tx.scan(prefix, None, false, |k, v| {
        let pair = (
            k.get(prefix.len()..).unwrap_or_default().to_vec(),
            v.to_vec(),
        );
        if keep(pair.clone()) {
            out.push(pair);
        }
        true
    })?;
    Ok(out)
}

/// HRANDFIELD key [count [WITHVALUES]] and ZRANDMEMBER key [count
/// [WITHSCORES]] (Redis's checks in its order: syntax, count, key).
pub fn run(tx: &mut Tx, db: u8, name: &str, a: &[Vec<u8>]) -> CmdResult {
    let (ty, with_word) = if name == "hrandfield" {
        (Type::Hash, "WITHVALUES")
    } else {
        (Type::ZSet, "WITHSCORES")
    };
    let key = arg(a, 0);
    if a.len() > 3 || a.get(2).is_some_and(|w| !is_opt(w, with_word)) {
        return Err(CmdError::Syntax);
    }
    let with = a.len() == 3;
    let count = match a.get(1) {
        Some(c) => Some(parse_count(c, with)?),
        None => None,
    };
    tx.consistent_reads();
    let Some(m) = typed_meta(tx, db, key, ty)? else {
        return Ok(match count {
            Some(_) => Reply::Array(vec![]),
            None => Reply::Nil,
        });
    };
    let picked = pick(tx, &sub_prefix(db, key, m.version), count.unwrap_or(1))?;
    let value = |v: Vec<u8>| -> Reply {
        if ty == Type::Hash {
            return Reply::Bulk(v);
        }
        let mut b = [0u8; 8];
        for (slot, x) in b.iter_mut().zip(&v) {
            *slot = *x;
        }
        Reply::Double(f64::from_bits(u64::from_be_bytes(b)))
    };
    Ok(match count {
        None => Reply::opt_bulk(picked.into_iter().next().map(|(f, _)| f)),
        Some(_) if with => Reply::Pairs(
            picked
                .into_iter()
                .map(|(f, v)| (Reply::Bulk(f), value(v)))
                .collect(),
        ),
        Some(_) => Reply::Array(picked.into_iter().map(|(f, _)| Reply::Bulk(f)).collect()),
    })
}
