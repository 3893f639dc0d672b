//! `shale txn`: transactions, snapshots and two-phase commit from a
//! terminal or a script. One command per line on stdin; a prompt only on a
//! terminal; an error is printed and the shell goes on.
//!
//! ```text
//! begin si              -> ok (txn 3, snapshot isolation, snapshot 41)
//! put k v               -> ok
//! get k                 -> v
//! prepare xid-1         -> ok (prepared; survives a crash)
//! quit
//! $ shale --db DIR txn <<< 'prepared'          -> xid-1
//! $ shale --db DIR txn <<< 'commit-prepared xid-1'
//! ```
//!
//! Outside `begin ... commit|rollback` the data commands run on their own
//! (autocommit).

use crate::{codec, CliError};
use shaledb::txn::{Isolation, Txn, TxnOptions};
use shaledb::{Db, ReadOptions, Snapshot};
use std::io::{BufRead, Write};

const HELP: &str = "\
begin [rc|si|serializable]   start a transaction (default si)
get KEY | put KEY VALUE | delete KEY
get-for-update KEY | get-for-share KEY   lock the row, then read it
scan [FROM [TO [LIMIT]]]     key<TAB>value lines (TO exclusive, default limit 100)
savepoint | rollback-to-savepoint
commit | rollback
prepare XID                  two-phase commit, phase one (durable)
commit-prepared XID | rollback-prepared XID | prepared
snapshot                     take a snapshot (replaces the previous one)
snapshot-get KEY | snapshot-scan [FROM [TO [LIMIT]]]   read at that snapshot
help | quit";

/// Runs the shell until `quit` or end of input. An open transaction is
/// rolled back at the end; a prepared one stays prepared.
pub fn run(
    db: &Db,
    input: &mut impl BufRead,
    out: &mut impl Write,
    prompt: bool,
) -> Result<(), CliError> {
    let mut shell = Shell {
        db,
        txn: None,
        snapshot: None,
    };
    let mut line = String::new();
    loop {
        if prompt {
            write!(
                out,
                "{}",
                if shell.txn.is_some() {
                    "shale(txn)> "
                } else {
                    "shale> "
                }
            )?;
        }
        out.flush()?;
        line.clear();
        if input.read_line(&mut line)? == 0 {
            break;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some((&cmd, args)) = words.split_first() else {
            continue;
        };
        if cmd == "quit" || cmd == "exit" {
            break;
        }
        match shell.command(cmd, args) {
            Ok(reply) => writeln!(out, "{reply}")?,
            Err(e) => writeln!(out, "error: {e}")?,
        }
    }
    if let Some(t) = shell.txn.take() {
        if t.prepared_xid().is_none() {
            writeln!(out, "(open transaction rolled back)")?;
        }
        t.rollback();
    }
    out.flush()?;
    Ok(())
}

struct Shell<'a> {
    db: &'a Db,
    txn: Option<Txn>,
    snapshot: Option<Snapshot>,
}

fn arg<'a>(args: &[&'a str], i: usize, what: &str) -> Result<&'a str, CliError> {
    args.get(i)
        .copied()
        .ok_or_else(|| CliError::Input(format!("missing {what} (try `help`)")))
}

fn key(args: &[&str]) -> Result<Vec<u8>, CliError> {
    codec::decode(arg(args, 0, "KEY")?)
}

fn shown(v: Option<Vec<u8>>) -> String {
    v.map_or_else(|| "(not found)".to_owned(), |v| codec::encode(&v))
}

impl Shell<'_> {
    fn command(&mut self, cmd: &str, args: &[&str]) -> Result<String, CliError> {
        Ok(match cmd {
            "help" => HELP.to_owned(),
            "begin" => {
                if self.txn.is_some() {
                    return Err(CliError::Input(
                        "a transaction is open; commit or rollback first".into(),
                    ));
                }
                let isolation = match args.first().copied().unwrap_or("si") {
                    "rc" | "read-committed" => Isolation::ReadCommitted,
                    "si" | "snapshot" | "repeatable-read" => Isolation::SnapshotIsolation,
                    "serializable" | "ser" => Isolation::Serializable,
                    other => {
                        return Err(CliError::Input(format!(
                            "unknown isolation level {other:?}"
                        )))
                    }
                };
                let t = self.db.begin(TxnOptions {
                    isolation,
                    ..Default::default()
                });
                let snap = t.snapshot_sequence().map_or_else(
                    || "a fresh snapshot per read".to_owned(),
                    |s| format!("snapshot {s}"),
                );
                let reply = format!("ok (txn {}, {isolation:?}, {snap})", t.id());
                self.txn = Some(t);
                reply
            }
            "get" => {
                let k = key(args)?;
                shown(match &self.txn {
                    Some(t) => t.get(&k)?,
                    None => self.db.get(&k)?,
                })
            }
            "get-for-update" | "get-for-share" => {
                let k = key(args)?;
                let t = self.open_txn()?;
                shown(if cmd == "get-for-update" {
                    t.get_for_update(&k)?
                } else {
                    t.get_for_share(&k)?
                })
            }
            "put" => {
                let (k, v) = (key(args)?, codec::decode(arg(args, 1, "VALUE")?)?);
                match &mut self.txn {
                    Some(t) => t.put(&k, &v)?,
                    None => self.db.put(&k, &v)?,
                }
                "ok".into()
            }
            "delete" => {
                let k = key(args)?;
                match &mut self.txn {
                    Some(t) => t.delete(&k)?,
                    None => self.db.delete(&k)?,
                }
                "ok".into()
            }
            "scan" => {
                let (from, to, limit) = scan_args(args)?;
                let rows = match &self.txn {
                    Some(t) => t.scan(from.as_deref(), to.as_deref(), limit)?,
                    None => scan_db(self.db, &ReadOptions::default(), from, to, limit)?,
                };
                rows_text(rows)
            }
            "savepoint" => {
                self.open_txn()?.set_savepoint();
                "ok".into()
            }
            "rollback-to-savepoint" => {
                self.open_txn()?.rollback_to_savepoint()?;
                "ok".into()
            }
            "commit" => {
                let t = self.take_txn()?;
                t.commit()?;
                "ok (committed)".into()
            }
            "rollback" => {
                self.take_txn()?.rollback();
                "ok (rolled back)".into()
            }
            "prepare" => {
                let xid = arg(args, 0, "XID")?;
                self.open_txn()?.prepare(xid.as_bytes())?;
                // Only commit-prepared / rollback-prepared end it now.
                self.txn = None;
                "ok (prepared; survives a crash)".into()
            }
            "commit-prepared" => {
                self.db.commit_prepared(arg(args, 0, "XID")?.as_bytes())?;
                "ok (committed)".into()
            }
            "rollback-prepared" => {
                self.db.rollback_prepared(arg(args, 0, "XID")?.as_bytes())?;
                "ok (rolled back)".into()
            }
            "prepared" => {
                let list = self.db.prepared();
                if list.is_empty() {
                    "(no prepared transactions)".into()
                } else {
                    list.iter()
                        .map(|p| codec::encode(&p.xid))
                        .collect::<Vec<_>>()
                        .join("\n")
                }
            }
            "snapshot" => {
                let s = self.db.snapshot();
                let reply = format!("ok (snapshot {})", s.sequence());
                self.snapshot = Some(s);
                reply
            }
            "snapshot-get" | "snapshot-scan" => {
                let snap = self.snapshot.clone().ok_or_else(|| {
                    CliError::Input("no snapshot; take one with `snapshot`".into())
                })?;
                let ro = ReadOptions {
                    snapshot: Some(snap),
                    ..Default::default()
                };
                if cmd == "snapshot-get" {
                    shown(self.db.get_opt(&ro, shaledb::DEFAULT_CF_ID, &key(args)?)?)
                } else {
                    let (from, to, limit) = scan_args(args)?;
                    rows_text(scan_db(self.db, &ro, from, to, limit)?)
                }
            }
            other => {
                return Err(CliError::Input(format!(
                    "unknown command {other:?} (try `help`)"
                )))
            }
        })
    }

    fn open_txn(&mut self) -> Result<&mut Txn, CliError> {
        self.txn
            .as_mut()
            .ok_or_else(|| CliError::Input("no open transaction; `begin` first".into()))
    }

    fn take_txn(&mut self) -> Result<Txn, CliError> {
        self.txn
            .take()
            .ok_or_else(|| CliError::Input("no open transaction".into()))
    }
}

type Range = (Option<Vec<u8>>, Option<Vec<u8>>, usize);
type Rows = Vec<(Vec<u8>, Vec<u8>)>;

fn scan_args(args: &[&str]) -> Result<Range, CliError> {
    let from = args.first().map(|s| codec::decode(s)).transpose()?;
    let to = args.get(1).map(|s| codec::decode(s)).transpose()?;
    let limit = match args.get(2) {
        Some(n) => n
            .parse()
            .map_err(|_| CliError::Input(format!("bad LIMIT {n:?}")))?,
        None => 100,
    };
    Ok((from, to, limit))
}

fn scan_db(
    db: &Db,
    ro: &ReadOptions,
    from: Option<Vec<u8>>,
    to: Option<Vec<u8>>,
    limit: usize,
) -> Result<Rows, CliError> {
    let ro = ReadOptions {
        lower_bound: from,
        upper_bound: to,
        ..ro.clone()
    };
    let mut it = db.iter(&ro)?;
    it.seek_to_first()?;
    let mut rows = Vec::new();
    while it.valid() && rows.len() < limit {
        rows.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(rows)
}

fn rows_text(rows: Rows) -> String {
    if rows.is_empty() {
        return "(no rows)".into();
    }
    rows.iter()
        .map(|(k, v)| format!("{}\t{}", codec::encode(k), codec::encode(v)))
        .collect::<Vec<_>>()
        .join("\n")
}
