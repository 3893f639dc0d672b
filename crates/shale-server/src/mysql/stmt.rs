//! Prepared statements on one connection: COM_STMT_PREPARE, _EXECUTE,
//! _SEND_LONG_DATA, _CLOSE and _RESET (docs/mysql-protocol.md, "Prepared
//! statements").
//!
//! The connection keeps, per statement id, what the protocol needs across
//! commands: the parameter count, the parameter types the client bound
//! (sent with the first execute, reused after), long data gathered for
//! parameters, and the result columns (their types choose the binary
//! layout of each value). The SQL side of a statement lives in the session.

use super::binary::{binary_row_into, decode_execute_reusing, ParamType};
use super::conn::{session_status, Conn};
use super::consts::{err, ColumnType};
use super::results::{column_definition, eof_packet, err_packet, ok_packet};
use super::wire::{put_lenenc_int, Reader};
use super::ProtocolError;
use crate::backend::{Column, Executed, Reply, Session, SqlError, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// Statements prepared on one connection.
#[derive(Default)]
pub(super) struct Statements {
    next_id: u32,
    by_id: HashMap<u32, Stmt>,
    /// The parameter list of the last execute, emptied: the next decodes
    /// into it instead of allocating one.
    params: Vec<Value>,
}

/// Parameter slots the connection keeps between executes (a statement
/// with more gets a fresh list each time).
const KEEP_PARAMS: usize = 256;

struct Stmt {
    params: usize,
    types: Option<Vec<ParamType>>,
    long_data: Vec<Option<Vec<u8>>>,
    /// The result columns of the last execution with their encoded
    /// definitions and types: the session hands out the same shared
    /// columns each time (`sql_backend.rs`), so while the pointer is the
    /// same they are not encoded again.
    defs: Option<Defs>,
}

struct Defs {
    columns: Arc<[Column]>,
    encoded: Vec<Vec<u8>>,
    types: Vec<ColumnType>,
}

impl Defs {
    fn new(columns: Arc<[Column]>) -> Defs {
        Defs {
            encoded: columns.iter().map(column_definition).collect(),
            types: columns.iter().map(|c| c.col_type).collect(),
            columns,
        }
    }
}

/// Statements per connection; more is refused (ER_MAX_PREPARED_STMT_COUNT
/// is server-wide in MySQL; a per-connection bound keeps one client from
/// holding unbounded memory).
const MAX_STATEMENTS: usize = 16_382;

fn unknown(id: u32) -> SqlError {
    SqlError::new(
        err::UNKNOWN_STMT_HANDLER,
        *b"HY000",
        format!("Unknown prepared statement handler ({id}) given to mysqld_stmt_execute"),
    )
}

impl<T: Session> Conn<T> {
    pub(super) fn stmt_prepare(&mut self, body: &[u8]) -> Result<(), ProtocolError> {
        if self.stmts.by_id.len() >= MAX_STATEMENTS {
            return self.send_err(&SqlError::new(
                1461,
                *b"42000",
                "Can't create more than max_prepared_stmt_count statements",
            ));
        }
        self.shared
            .stats
            .com_stmt_prepare
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let Ok(sql) = std::str::from_utf8(body) else {
            return self.send_err(&SqlError::new(
                1300,
                *b"HY000",
                "Invalid utf8mb4 character string in statement",
            ));
        };
        self.stmts.next_id = self.stmts.next_id.wrapping_add(1).max(1);
        let id = self.stmts.next_id;
        let prepared = match self.session.prepare(id, sql) {
            Ok(p) => p,
            Err(e) => return self.send_err(&e),
        };
        let mut head = vec![0x00];
        head.extend_from_slice(&id.to_le_bytes());
        let ncols = u16::try_from(prepared.columns.len()).unwrap_or(u16::MAX);
        head.extend_from_slice(&ncols.to_le_bytes());
        head.extend_from_slice(&prepared.params.to_le_bytes());
        head.push(0);
        head.extend_from_slice(&0u16.to_le_bytes()); // warnings
        self.out.write_payload(&head);
        let st = session_status(&self.session);
        if prepared.params > 0 {
            let p = Column::new("?", ColumnType::VarString);
            for _ in 0..prepared.params {
                self.out.write_payload(&column_definition(&p));
            }
            self.out.write_payload(&eof_packet(0, st));
        }
        if !prepared.columns.is_empty() {
            for c in &prepared.columns {
                self.out.write_payload(&column_definition(c));
            }
            self.out.write_payload(&eof_packet(0, st));
        }
        let params = usize::from(prepared.params);
        self.stmts.by_id.insert(
            id,
            Stmt {
                params,
                types: None,
                long_data: vec![None; params],
                defs: None,
            },
        );
        Ok(())
    }

    pub(super) fn stmt_execute(&mut self, body: &[u8]) -> Result<(), ProtocolError> {
        let id = Reader::new(body).u32("statement id")?;
        let buf = std::mem::take(&mut self.stmts.params);
        let Some(stmt) = self.stmts.by_id.get_mut(&id) else {
            return self.send_err(&unknown(id));
        };
        let exec = decode_execute_reusing(
            body,
            stmt.params,
            stmt.types.as_deref(),
            &stmt.long_data,
            buf,
        )?;
        if let Some(t) = exec.new_types {
            stmt.types = Some(t);
        }
        stmt.long_data.iter_mut().for_each(|d| *d = None);
        let stats = &self.shared.stats;
        stats
            .questions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        stats
            .com_stmt_execute
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.set_command("Execute", None);
        let started = self.clock();
        let reply = self.session.execute(id, &exec.params);
        let ran = self.clock();
        // Emptied now: a kept list holds no value (a long string) until
        // the next execute.
        let mut params = exec.params;
        params.clear();
        if params.capacity() <= KEEP_PARAMS {
            self.stmts.params = params;
        }
        let st = session_status(&self.session);
        match reply {
            Err(e) => self.out.write_payload(&err_packet(&e)),
            Ok(Executed::Reply(Reply::Ok {
                affected_rows,
                last_insert_id,
                warnings,
                info,
            })) => self.out.write_payload(&ok_packet(
                affected_rows,
                last_insert_id,
                st,
                warnings,
                &info,
            )),
            Ok(Executed::Reply(Reply::Rows { columns, rows })) => {
                let defs = self.result_header(id, columns, st);
                for row in &rows {
                    self.out
                        .write_payload_with(|buf| binary_row_into(buf, &defs.types, row))?;
                }
                self.result_end(id, defs, st);
            }
            Ok(Executed::BinaryRows { columns, rows }) => {
                let defs = self.result_header(id, columns, st);
                for row in rows.iter() {
                    self.out.write_payload(row);
                }
                self.result_end(id, defs, st);
                self.session.recycle_rows(id, rows);
            }
        }
        self.record_run(started, ran);
        Ok(())
    }

    /// Writes a result set's column count, definitions and EOF; returns the
    /// definitions (kept with statement `id` while its columns stay the
    /// same, so they are encoded once).
    fn result_header(&mut self, id: u32, columns: Arc<[Column]>, st: u16) -> Defs {
        // Built in the writer's scratch buffer: no allocation per result.
        let Ok(()) = self.out.write_payload_with(|b| {
            put_lenenc_int(b, columns.len() as u64); // usize -> u64: lossless
            Ok::<(), std::convert::Infallible>(())
        });
        let kept = self.stmts.by_id.get_mut(&id).and_then(|s| s.defs.take());
        let defs = match kept {
            Some(d) if Arc::ptr_eq(&d.columns, &columns) => d,
            _ => Defs::new(columns),
        };
        for d in &defs.encoded {
            self.out.write_payload(d);
        }
        self.out.write_payload(&eof_packet(0, st));
        defs
    }

    /// Ends a result set after its rows and keeps `defs` for statement `id`.
    fn result_end(&mut self, id: u32, defs: Defs, st: u16) {
        self.out.write_payload(&eof_packet(0, st));
        if let Some(s) = self.stmts.by_id.get_mut(&id) {
            s.defs = Some(defs);
        }
    }

    /// No reply, even on error (the protocol has none): a bad id or
    /// parameter number is remembered by nothing and the execute fails.
    pub(super) fn stmt_send_long_data(&mut self, body: &[u8]) -> Result<(), ProtocolError> {
        let mut r = Reader::new(body);
        let id = r.u32("statement id")?;
        let param = usize::from(r.u16("parameter id")?);
        let data = r.rest();
        if let Some(slot) = self
            .stmts
            .by_id
            .get_mut(&id)
            .and_then(|s| s.long_data.get_mut(param))
        {
            slot.get_or_insert_with(Vec::new).extend_from_slice(data);
        }
        Ok(())
    }

    /// No reply (the protocol has none).
    pub(super) fn stmt_close(&mut self, body: &[u8]) -> Result<(), ProtocolError> {
        let id = Reader::new(body).u32("statement id")?;
        if self.stmts.by_id.remove(&id).is_some() {
            self.session.close_statement(id);
        }
        Ok(())
    }

    pub(super) fn stmt_reset(&mut self, body: &[u8]) -> Result<(), ProtocolError> {
        let id = Reader::new(body).u32("statement id")?;
        match self.stmts.by_id.get_mut(&id) {
            Some(s) => {
                s.long_data.iter_mut().for_each(|d| *d = None);
                self.send_ok(0, 0, 0)
            }
            None => self.send_err(&unknown(id)),
        }
    }

    pub(super) fn close_all_statements(&mut self) {
        for (id, _) in self.stmts.by_id.drain() {
            self.session.close_statement(id);
        }
    }
}
