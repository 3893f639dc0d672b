//! `SHOW ENGINE SHALE STATUS`: the storage engine's state in the shape of
//! MySQL's `SHOW ENGINE INNODB STATUS`: one row (`Type`, `Name`, `Status`)
//! whose `Status` is a text report of sections under dashed headings.
//!
//! Every figure comes from the engine's properties (`Db::property`, the
//! `shale.*` names of `shale stats`), the engine's list of prepared
//! transactions, the WAL files in the data directory and the server's own
//! counters; nothing is estimated. Reading it never waits for a statement:
//! the properties read atomics and the current version.
//!
//! `SHOW ENGINE <name> STATUS` for another engine is error 1286, as MySQL
//! answers an unknown engine. Like MySQL, it needs the PROCESS privilege.

use crate::accounts::{privs, Account};
use crate::admin::lex;
use crate::backend::{Column, Reply, SqlError, Value};
use crate::mysql::consts::ColumnType;
use crate::server::Shared;
use crate::utc::Utc;
use shaledb::Db;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

/// Levels shown: ShaleDB's default is 3 (X-Engine's); deeper ones are shown
/// when they hold data.
const MAX_LEVELS: usize = 8;
/// Prepared (XA) transactions listed one by one; the rest are counted.
const LISTED_PREPARED: usize = 20;

/// Answers `stmt` if it is `SHOW ENGINE <name> STATUS`.
pub fn run(
    stmt: &str,
    db: &Db,
    shared: &Shared,
    account: &Account,
) -> Option<Result<Reply, SqlError>> {
    // Every statement passes here: tokenize only a SHOW.
    if !starts_with_word(stmt, "SHOW") {
        return None;
    }
    let toks = lex::tokens(stmt)?;
    let [show, engine, name, status] = toks.as_slice() else {
        return None;
    };
    if !(show.is("SHOW") && engine.is("ENGINE") && status.is("STATUS")) {
        return None;
    }
    let name = name.text()?;
    if !(name.eq_ignore_ascii_case("shale") || name.eq_ignore_ascii_case("shaledb")) {
        return Some(Err(SqlError::new(
            1286,
            *b"42000",
            format!("Unknown storage engine '{name}'"),
        )));
    }
    if account.global & privs::PROCESS == 0 {
        return Some(Err(SqlError::new(
            1227,
            *b"42000",
            "Access denied; you need (at least one of) the PROCESS privilege(s) for this operation",
        )));
    }
    let text = |s: &str| Value::Bytes(s.as_bytes().to_vec());
    Some(Ok(Reply::Rows {
        columns: ["Type", "Name", "Status"]
            .iter()
            .map(|n| Column::new(n, ColumnType::VarString))
            .collect(),
        rows: vec![vec![text("Shale"), text(""), text(&report(db, shared))]],
    }))
}

/// True if `stmt` begins (after spaces) with `word`, in any case.
pub(crate) fn starts_with_word(stmt: &str, word: &str) -> bool {
    let s = stmt.trim_start().as_bytes();
    s.get(..word.len())
        .is_some_and(|w| w.eq_ignore_ascii_case(word.as_bytes()))
        && s.get(word.len())
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
}

/// Appends a section heading as InnoDB's monitor output draws it.
fn heading(out: &mut String, title: &str) {
    let rule = "-".repeat(title.len());
    let _ = write!(out, "{rule}\n{title}\n{rule}\n");
}

/// The `Status` text.
pub fn report(db: &Db, shared: &Shared) -> String {
    let p = |name: &str| db.property(name).unwrap_or_else(|| "n/a".into());
    let mut out = String::new();
    let rule = "=".repeat(37);
    let _ = write!(
        out,
        "\n{rule}\n{} SHALEDB ENGINE STATUS\n{rule}\n",
        Utc::now().datetime()
    );

    heading(&mut out, "MEMTABLES");
    let _ = writeln!(
        out,
        "Memtable bytes (active + frozen) {}",
        p("shale.memtable-bytes")
    );
    let _ = writeln!(
        out,
        "Frozen memtables waiting for flush {}",
        p("shale.frozen-memtables")
    );

    heading(&mut out, "LEVELS AND EXTENTS");
    let _ = writeln!(out, "L0 sorted runs {}", p("shale.l0-runs"));
    for level in 0..MAX_LEVELS {
        let extents = p(&format!("shale.num-extents-at-level{level}"));
        let bytes = p(&format!("shale.bytes-at-level{level}"));
        if level >= 3 && extents == "0" {
            continue;
        }
        let _ = writeln!(out, "L{level}: {extents} extents, {bytes} bytes");
    }

    heading(&mut out, "COMPACTION");
    let _ = writeln!(
        out,
        "Write amplification {}",
        p("shale.write-amplification")
    );
    let _ = writeln!(
        out,
        "Bytes reused without rewrite {}",
        p("shale.compaction-bytes-reused")
    );
    let _ = writeln!(out, "Write stall time {} us", p("shale.stall-micros"));

    heading(&mut out, "BLOCK CACHE");
    let _ = writeln!(
        out,
        "Hits {}, misses {}, bytes used {}",
        p("shale.cache-hits"),
        p("shale.cache-misses"),
        p("shale.cache-usage")
    );

    heading(&mut out, "WAL");
    wal_section(&mut out, db);

    heading(&mut out, "TRANSACTIONS");
    let stats = &shared.stats;
    let _ = writeln!(
        out,
        "Sessions in a transaction {}",
        stats.open_transactions.load(Ordering::Relaxed)
    );
    let _ = writeln!(out, "Snapshots held {}", p("shale.num-snapshots"));
    let prepared = db.prepared();
    let _ = writeln!(out, "Prepared (XA) transactions {}", prepared.len());
    for t in prepared.iter().take(LISTED_PREPARED) {
        let _ = writeln!(
            out,
            "---XA xid '{}', prepared at sequence {}, {} writes",
            String::from_utf8_lossy(&t.xid).escape_debug(),
            t.prepare_seq,
            t.num_writes
        );
    }
    if prepared.len() > LISTED_PREPARED {
        let _ = writeln!(out, "... and {} more", prepared.len() - LISTED_PREPARED);
    }

    heading(&mut out, "BLOB FILES");
    let _ = writeln!(
        out,
        "Value files {}, bytes {}",
        p("shale.blob-file-count"),
        p("shale.blob-bytes")
    );
    let _ = writeln!(
        out,
        "GC runs {}, files rewritten {}, bytes rewritten {}, files deleted {}",
        p("shale.blob-gc-runs"),
        p("shale.blob-gc-files-rewritten"),
        p("shale.blob-gc-bytes-rewritten"),
        p("shale.blob-gc-files-deleted")
    );

    heading(&mut out, "SERVER");
    let g = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let _ = writeln!(
        out,
        "Threads connected {}, connections {}, questions {}",
        g(&stats.threads_connected),
        g(&stats.connections),
        g(&stats.questions)
    );

    heading(&mut out, "ENGINE COUNTERS (shale stats)");
    out.push_str(&p("shale.stats"));
    let end = "=".repeat(30);
    let _ = write!(out, "{end}\nEND OF SHALEDB ENGINE STATUS\n{end}\n");
    out
}

/// The WAL segments in the data directory (`NNNNNN.log`): how many, their
/// bytes, the newest.
fn wal_section(out: &mut String, db: &Db) {
    let entries = match std::fs::read_dir(db.path()) {
        Ok(e) => e,
        Err(e) => {
            let _ = writeln!(out, "WAL files unreadable: {e}");
            return;
        }
    };
    let (mut files, mut bytes, mut newest) = (0u64, 0u64, None::<u64>);
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(number) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".log"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        files += 1;
        bytes += entry.metadata().map_or(0, |m| m.len());
        newest = newest.max(Some(number));
    }
    let _ = writeln!(out, "WAL files {files}, bytes {bytes}");
    if let Some(n) = newest {
        let _ = writeln!(out, "Current WAL file {n:06}.log");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use shaledb::txn::TxnOptions;
    use shaledb::Options;

    #[test]
    fn only_show_engine_statements_are_taken() {
        assert!(starts_with_word("  show engine", "SHOW"));
        assert!(starts_with_word("SHOW", "SHOW"));
        assert!(!starts_with_word("SHOWS", "SHOW"));
        assert!(!starts_with_word("SELECT 1", "SHOW"));
        assert!(!starts_with_word("SH", "SHOW"));
    }

    #[test]
    fn report_sections_carry_engine_figures() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        db.put(b"k", b"v").unwrap();
        let mut t = db.begin(TxnOptions::default());
        t.put(b"x", b"1").unwrap();
        t.prepare(b"xid-7").unwrap();
        let shared = Shared::default();
        shared.stats.open_transactions.store(2, Ordering::Relaxed);
        let r = report(&db, &shared);
        for want in [
            "SHALEDB ENGINE STATUS",
            "---------\nMEMTABLES\n---------\n",
            "L0: 0 extents, 0 bytes",
            "L2: 0 extents",
            "WAL files 1,",
            "Sessions in a transaction 2",
            "Prepared (XA) transactions 1",
            "---XA xid 'xid-7'",
            "1 writes",
            "Value files 0",
            "** ShaleDB stats **",
            "END OF SHALEDB ENGINE STATUS",
        ] {
            assert!(r.contains(want), "{want:?} missing from\n{r}");
        }
        // After a flush the extent shows at the level the engine put it.
        db.flush().unwrap();
        let r = report(&db, &shared);
        let mut extents = 0;
        for level in 0..3 {
            let n = db
                .property(&format!("shale.num-extents-at-level{level}"))
                .unwrap();
            let b = db
                .property(&format!("shale.bytes-at-level{level}"))
                .unwrap();
            assert!(
                r.contains(&format!("L{level}: {n} extents, {b} bytes")),
                "{r}"
            );
            extents += n.parse::<u64>().unwrap();
        }
        assert_eq!(extents, 1, "{r}");
        drop(t);
        db.close().unwrap();
    }
}
