//! Statements the SQL parser does not know, recognized by their first
//! words before parsing: SHOW INDEX/KEYS, SHOW WARNINGS/ERRORS, SHOW
//! ENGINES, CHECK/OPTIMIZE TABLE, and XA START/END/PREPARE/COMMIT/ROLLBACK/
//! RECOVER (on the engine's 2PC).

use super::*;

impl Session {
    /// SHOW statements the parser does not know: INDEX/KEYS, WARNINGS,
    /// ERRORS, ENGINES.
    pub(super) fn show_extra(&mut self, sql: &str) -> Result<Option<Output>> {
        // Every statement passes here: allocate nothing unless the first
        // word can start a pattern below (it was ~2 % of an INSERT's
        // server CPU), and look at no more words than they need (a bulk
        // INSERT can be megabytes).
        let first = sql.split_whitespace().next().unwrap_or_default();
        if !["SHOW", "CHECK", "OPTIMIZE"]
            .iter()
            .any(|w| first.eq_ignore_ascii_case(w))
        {
            return Ok(None);
        }
        let words: Vec<String> = sql
            .trim()
            .trim_end_matches(';')
            .split_whitespace()
            .take(4)
            .map(|w| w.to_ascii_uppercase())
            .collect();
        let w: Vec<&str> = words.iter().map(String::as_str).collect();
        match w.as_slice() {
            ["SHOW", "INDEX" | "INDEXES" | "KEYS", "FROM" | "IN", ..] => {
                let raw: Vec<&str> = sql
                    .trim()
                    .trim_end_matches(';')
                    .split_whitespace()
                    .collect();
                let table = raw.get(3).copied().unwrap_or_default().trim_matches('`');
                let def = match table.split_once('.') {
                    Some((d, t)) => self.cat().table(d.trim_matches('`'), t.trim_matches('`'))?,
                    None => self
                        .cat()
                        .table(self.current_database().ok_or(Error::NoDatabase)?, table)?,
                };
                Ok(Some(show::indexes(&def)))
            }
            ["CHECK" | "OPTIMIZE", ..] => {
                crate::maintenance::statement(self.cat(), self.current_database(), sql)
            }
            ["SHOW", "WARNINGS" | "ERRORS", ..] => Ok(Some(Output::text_rows(
                &["Level", "Code", "Message"],
                Vec::new(),
            ))),
            ["SHOW", "ENGINES"] => Ok(Some(Output::text_rows(
                &[
                    "Engine",
                    "Support",
                    "Comment",
                    "Transactions",
                    "XA",
                    "Savepoints",
                ],
                vec![[
                    "ShaleDB",
                    "DEFAULT",
                    "LSM-tree engine with multi-version schemas",
                    "YES",
                    "YES",
                    "NO",
                ]
                .iter()
                .map(|v| Datum::text(v))
                .collect()],
            ))),
            _ => Ok(None),
        }
    }

    /// XA START/END/PREPARE/COMMIT/ROLLBACK/RECOVER over the engine's 2PC.
    pub(super) fn xa(&mut self, sql: &str) -> Result<Option<Output>> {
        let first = sql.split_whitespace().next();
        if !first.is_some_and(|w| w.eq_ignore_ascii_case("XA")) {
            return Ok(None);
        }
        let words: Vec<&str> = sql
            .trim()
            .trim_end_matches(';')
            .split_whitespace()
            .collect();
        if !words.first().is_some_and(|w| w.eq_ignore_ascii_case("XA")) {
            return Ok(None);
        }
        let verb = words
            .get(1)
            .map(|w| w.to_ascii_uppercase())
            .unwrap_or_default();
        let xid = || -> Result<Vec<u8>> {
            let raw = words
                .get(2)
                .ok_or_else(|| Error::Syntax("XA needs an xid".into()))?;
            Ok(raw.trim_matches('\'').trim_matches('"').as_bytes().to_vec())
        };
        match verb.as_str() {
            "START" | "BEGIN" => {
                self.begin(false)?;
                Ok(Some(Output::affected(0)))
            }
            "END" => Ok(Some(Output::affected(0))),
            "PREPARE" => {
                let x = xid()?;
                let mut txn = self
                    .txn
                    .take()
                    .ok_or_else(|| Error::XaState("no active XA transaction".into()))?;
                self.explicit = false;
                // The pins go only once the engine lists the transaction as
                // prepared (a sweep defers while one is, schema_upgrade.rs).
                let written = std::mem::take(&mut self.written);
                txn.prepare(&x)?;
                drop(written);
                // A prepared transaction lives in the engine until XA COMMIT.
                drop(txn);
                Ok(Some(Output::affected(0)))
            }
            "COMMIT" => {
                let x = xid()?;
                if words.iter().any(|w| w.eq_ignore_ascii_case("PHASE")) {
                    // XA COMMIT xid ONE PHASE
                    self.commit()?;
                    return Ok(Some(Output::affected(0)));
                }
                self.cat().engine().commit_prepared(&x).map_err(xa_error)?;
                Ok(Some(Output::affected(0)))
            }
            "ROLLBACK" => {
                let x = xid()?;
                self.cat()
                    .engine()
                    .rollback_prepared(&x)
                    .map_err(xa_error)?;
                Ok(Some(Output::affected(0)))
            }
            "RECOVER" => {
                let rows = self
                    .cat()
                    .engine()
                    .prepared()
                    .into_iter()
                    .map(|p| {
                        let x = p.xid.to_vec();
                        vec![
                            Datum::Int(1),
                            Datum::Int(x.len() as i64),
                            Datum::Int(0),
                            Datum::Bytes(x),
                        ]
                    })
                    .collect();
                let mut out =
                    Output::text_rows(&["formatID", "gtrid_length", "bqual_length", "data"], rows);
                if let Output::Rows { columns, .. } = &mut out {
                    for c in columns.iter_mut().take(3) {
                        c.ty = SqlType::Int {
                            bytes: 8,
                            unsigned: false,
                        };
                    }
                }
                Ok(Some(out))
            }
            _ => Err(Error::Syntax(format!("XA {verb}"))),
        }
    }
}

/// XA COMMIT and XA ROLLBACK of an xid the engine does not list as
/// prepared: MySQL's ER_XAER_NOTA, not an engine error.
fn xa_error(e: shaledb::Error) -> Error {
    match e {
        shaledb::Error::UnknownXid(_) => Error::UnknownXid,
        other => Error::Engine(other),
    }
}
