//! Table maintenance statements: CHECK TABLE and OPTIMIZE TABLE, and the
//! background sweep of unused schema versions (docs/tables.md, "Retiring
//! schema versions").
//!
//! Both statements answer as MySQL does, one row per table and message:
//!
//! ```text
//! OPTIMIZE TABLE t;
//! Table   Op        Msg_type  Msg_text
//! db.t    optimize  note      rows upgraded: 1000000; schema versions dropped: 1, 2
//! db.t    optimize  status    OK
//! ```

use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::output::Output;
use crate::schema_upgrade::{Sweep, UpgradeState};
use crate::session::Shared;
use crate::types::Datum;
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// A table as a statement names it: (database if qualified, table).
pub(crate) type TableName = (Option<String>, String);

/// The operation ("check" or "optimize") and the tables, as (database if
/// qualified, table), of a CHECK TABLE or OPTIMIZE TABLE statement.
pub(crate) fn table_list(sql: &str) -> Option<(&'static str, Vec<TableName>)> {
    let raw = sql.trim().trim_end_matches(';').trim_end();
    // Every statement passes here: upper-case only a CHECK or OPTIMIZE.
    let first = raw.split_whitespace().next().unwrap_or_default();
    if !(first.eq_ignore_ascii_case("CHECK") || first.eq_ignore_ascii_case("OPTIMIZE")) {
        return None;
    }
    let upper = raw.to_ascii_uppercase();
    let mut words = upper.split_whitespace();
    let op = match (words.next(), words.next()) {
        (Some("CHECK"), Some("TABLE")) => "check",
        (Some("OPTIMIZE"), Some("TABLE")) => "optimize",
        (Some("OPTIMIZE"), Some("LOCAL" | "NO_WRITE_TO_BINLOG"))
            if words.next() == Some("TABLE") =>
        {
            "optimize"
        }
        _ => return None,
    };
    let list = upper
        .find("TABLE")
        .and_then(|p| raw.get(p + 5..))
        .unwrap_or_default();
    let tables = list
        .split(',')
        .map(|n| n.trim().trim_matches('`'))
        .filter(|n| !n.is_empty())
        .map(|name| match name.split_once('.') {
            Some((d, t)) => (
                Some(d.trim_matches('`').to_owned()),
                t.trim_matches('`').to_owned(),
            ),
            None => (None, name.to_owned()),
        })
        .collect();
    Some((op, tables))
}

/// CHECK TABLE or OPTIMIZE TABLE (`None` for any other statement).
pub(crate) fn statement(
    cat: &Catalog,
    current_db: Option<&str>,
    sql: &str,
) -> Result<Option<Output>> {
    let Some((op, tables)) = table_list(sql) else {
        return Ok(None);
    };
    let mut rows = Vec::new();
    for (db, table) in tables {
        let db = match db {
            Some(d) => d,
            None => current_db.ok_or(Error::NoDatabase)?.to_owned(),
        };
        let qualified = format!("{db}.{table}");
        let mut row = |kind: &str, text: &str| {
            rows.push(vec![
                Datum::text(&qualified),
                Datum::text(op),
                Datum::text(kind),
                Datum::text(text),
            ]);
        };
        let def = match cat.table(&db, &table) {
            Ok(d) => d,
            Err(e) => {
                row("Error", &e.to_string());
                continue;
            }
        };
        if op == "check" {
            let problems = {
                let _schema = cat.schema.read();
                crate::check::check_table(cat, &def)?
            };
            for p in &problems {
                row("error", p);
            }
            if problems.is_empty() {
                row("status", "OK");
            }
            continue;
        }
        let (note, ok) = optimize(cat, &db, &table)?;
        row("note", &note);
        row("status", if ok { "OK" } else { "Operation failed" });
    }
    Ok(Some(Output::text_rows(
        &["Table", "Op", "Msg_type", "Msg_text"],
        rows,
    )))
}

/// Rewrites the table's rows under its current schema version, then
/// sweeps the versions no row uses. Returns the note and whether the
/// table ended with a single schema version.
fn optimize(cat: &Catalog, db: &str, table: &str) -> Result<(String, bool)> {
    let def = cat.table(db, table)?;
    let Some(pk) = def.primary() else {
        return Ok(("no primary index".into(), false));
    };
    let lo = pk.id.to_be_bytes();
    let hi = pk
        .id
        .checked_add(1)
        .map_or_else(|| vec![0xFF; 5], |n| n.to_be_bytes().to_vec());
    // Counted by the filter for this table, whichever job (a flush of the
    // memtable, a window of the rewrite, a background compaction) did it.
    let upgraded_before = cat.upgrade.rows_upgraded_of(def.id);
    cat.engine().rewrite_range(cat.data_cf, &lo, &hi)?;
    let upgraded = cat.upgrade.rows_upgraded_of(def.id) - upgraded_before;
    let mut note = format!("rows upgraded: {upgraded}");
    // A sweep defers while an older snapshot or an open writer is about;
    // a few short retries cover statements that were just finishing.
    let mut outcome = Sweep::Deferred("not tried");
    for attempt in 0..5u32 {
        outcome = cat.upgrade.sweep(cat, db, table)?;
        if !matches!(outcome, Sweep::Deferred(_)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20 << attempt));
    }
    match &outcome {
        Sweep::Dropped(v) if !v.is_empty() => {
            let list: Vec<String> = v.iter().map(u32::to_string).collect();
            note.push_str(&format!("; schema versions dropped: {}", list.join(", ")));
        }
        Sweep::Deferred(why) => note.push_str(&format!("; old schema versions kept: {why}")),
        _ => {}
    }
    let single = cat.table(db, table)?.versions.len() == 1;
    Ok((note, single))
}

/// Sweeps every table with old schema versions now and then, in a thread
/// that ends when the database is dropped. A table is swept again no
/// sooner than the sweep interval (`UpgradeState::sweep_interval`), nor
/// than 20 times the time its last sweep spent reading the table's rows
/// (a sweep reads rows until it has seen every old version). The thread holds the database
/// only while it sweeps, so dropping the last `Database` closes the engine.
pub(crate) fn spawn_sweeper(shared: Weak<Shared>, upgrade: Arc<UpgradeState>) {
    let spawned = std::thread::Builder::new()
        .name("shale-schema-sweep".into())
        .spawn(move || {
            let mut due: HashMap<u32, Instant> = HashMap::new();
            while shared.strong_count() > 0 {
                let interval = upgrade.sweep_interval();
                std::thread::sleep(
                    interval.clamp(Duration::from_millis(10), Duration::from_secs(1)),
                );
                let now = Instant::now();
                let tables = upgrade.tables_to_sweep();
                due.retain(|id, _| tables.iter().any(|t| t.id == *id));
                let ready: Vec<_> = tables
                    .into_iter()
                    .filter(|t| now >= *due.entry(t.id).or_insert(now + interval))
                    .collect();
                if ready.is_empty() {
                    continue;
                }
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                for def in ready {
                    let cat = &shared.catalog;
                    if let Err(e) = cat.upgrade.sweep(cat, &def.db, &def.name) {
                        tracing::warn!("schema version sweep of {}: {e}", def.qualified());
                    }
                    let scan = cat.upgrade.last_scan_time(def.id);
                    due.insert(def.id, Instant::now() + interval.max(scan * 20));
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("schema version sweeper not started: {e}");
    }
}
