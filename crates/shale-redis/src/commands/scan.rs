//! SCAN, and SSCAN / HSCAN / ZSCAN over one collection: the options, the
//! paging and the cursors. A cursor is an id in the server's cursor table
//! holding the next record key to visit (unknown, evicted or stale:
//! the walk restarts from the first).

use super::{arg, is_opt, parse_i64, CmdError, CmdResult, Shared};
use crate::glob;
use crate::resp::Reply;
use crate::tx::Tx;

pub fn parse_cursor(b: &[u8]) -> Result<u64, CmdError> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| CmdError::Other("invalid cursor".into()))
}

pub fn empty_scan() -> Reply {
    Reply::Array(vec![Reply::bulk("0"), Reply::Array(vec![])])
}

/// `[MATCH p] [COUNT n]`, and `[TYPE t]` for SCAN.
struct Opts<'a> {
    pattern: Option<&'a [u8]>,
    count: i64,
    ty: Option<String>,
}

fn parse_opts(opts: &[Vec<u8>], allow_type: bool) -> Result<Opts<'_>, CmdError> {
    let mut o = Opts {
        pattern: None,
        count: 10,
        ty: None,
    };
    for pair in opts.chunks(2) {
        let [name, v] = pair else {
            return Err(CmdError::Syntax);
        };
        if is_opt(name, "MATCH") {
            o.pattern = Some(v.as_slice());
        } else if is_opt(name, "COUNT") {
            o.count = parse_i64(v)?;
            if o.count < 1 {
                return Err(CmdError::Syntax);
            }
        } else if allow_type && is_opt(name, "TYPE") {
            o.ty = Some(String::from_utf8_lossy(v).to_ascii_lowercase());
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(o)
}

/// One page of a walk: visits up to `count` records, then remembers where
/// the next page starts.
struct Page {
    count: i64,
    visited: i64,
    next: Option<Vec<u8>>,
    out: Vec<Reply>,
}

impl Page {
    fn new(count: i64) -> Page {
        Page {
            count,
            visited: 0,
            next: None,
            out: Vec::new(),
        }
    }

    /// Counts record `k`; false (and `k` is where the next page starts)
    /// once the page is full.
    fn visit(&mut self, k: &[u8]) -> bool {
        if self.visited >= self.count {
            self.next = Some(k.to_vec());
            return false;
        }
        self.visited += 1;
        true
    }

    /// `[next cursor, items]`, saving the cursor.
    fn reply(self, shared: &Shared, db: u8) -> Reply {
        let next_cursor = self.next.map_or(0, |k| shared.cursors.save(db, k));
        Reply::Array(vec![
            Reply::bulk(next_cursor.to_string()),
            Reply::Array(self.out),
        ])
    }
}

/// SCAN cursor [MATCH pattern] [COUNT n] [TYPE t]
pub fn scan(shared: &Shared, tx: &mut Tx, db: u8, a: &[Vec<u8>]) -> CmdResult {
    let cursor = parse_cursor(arg(a, 0))?;
    let o = parse_opts(a.get(1..).unwrap_or_default(), true)?;
    let start = match cursor {
        0 => None,
        c => shared.cursors.take(db, c),
    };
    let mut page = Page::new(o.count);
    tx.consistent_reads();
    tx.scan_keys(db, start.as_deref(), |k, m| {
        if !page.visit(k) {
            return false;
        }
        if o.pattern.is_none_or(|p| glob::matches(p, k))
            && o.ty.as_deref().is_none_or(|t| t == m.ty.name())
        {
            page.out.push(Reply::bulk(k));
        }
        true
    })?;
    Ok(page.reply(shared, db))
}

/// SSCAN / ZSCAN / HSCAN over the records under `prefix`: `[MATCH p]
/// [COUNT n]` (MATCH applies to the record key's suffix after `skip`
/// bytes); `emit` turns a (suffix, value) into reply items.
#[allow(clippy::too_many_arguments)]
pub fn scan_collection(
    shared: &Shared,
    tx: &Tx,
    db: u8,
    prefix: &[u8],
    cursor: u64,
    opts: &[Vec<u8>],
    skip: usize,
    emit: impl Fn(&[u8], &[u8]) -> Vec<Reply>,
) -> CmdResult {
    let o = parse_opts(opts, false)?;
    let start = match cursor {
        0 => None,
        c => shared.cursors.take(db, c).filter(|k| k.starts_with(prefix)),
    };
    let mut page = Page::new(o.count);
    tx.scan(prefix, start.as_deref(), false, |k, v| {
        if !page.visit(k) {
            return false;
        }
        let f = k.get(prefix.len()..).unwrap_or_default();
        if o.pattern
            .is_none_or(|p| glob::matches(p, f.get(skip..).unwrap_or_default()))
        {
            page.out.extend(emit(f, v));
        }
        true
    })?;
    Ok(page.reply(shared, db))
}
