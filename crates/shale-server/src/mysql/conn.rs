//! One client connection's command phase, run on an executor thread: a
//! whole command packet in, the whole reply's packets out (queued in a
//! [`PacketWriter`] that the connection's I/O task then sends). The
//! connection phase (greeting, TLS, authentication) is `login.rs`, on the
//! I/O thread; the task that ties both together is `task.rs`.
//!
//! Errors split in two: a [`SqlError`] from the backend is queued as an ERR
//! packet and the connection goes on; a [`ProtocolError`] (malformed
//! packet, ...) ends the connection, after an ERR packet the I/O task sends,
//! as MySQL does.

use super::consts::{com, err, status};
use super::packet::PacketWriter;
use super::results::{column_definition, eof_packet, err_packet, ok_packet, text_row_into};
use super::{auth, ProtocolError};
use crate::backend::{Reply, Session, SqlError};
use crate::server::Shared;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Server-wide settings a connection needs.
#[derive(Clone, Debug)]
pub struct ConnConfig {
    pub server_version: String,
    /// Largest joined packet accepted from a client.
    pub max_allowed_packet: usize,
    /// The plugin announced in the greeting.
    pub default_plugin: &'static str,
    /// TLS offered to clients (capability `SSL`), if configured.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Refuse clients that do not switch to TLS (error 3159).
    pub require_tls: bool,
}

impl Default for ConnConfig {
    fn default() -> Self {
        ConnConfig {
            server_version: format!("8.0.36-ShaleDB-{}", env!("CARGO_PKG_VERSION")),
            max_allowed_packet: 64 << 20,
            default_plugin: auth::NATIVE,
            tls: None,
            require_tls: false,
        }
    }
}

pub(super) fn session_status(s: &impl Session) -> u16 {
    let mut st = 0;
    if s.autocommit() {
        st |= status::AUTOCOMMIT;
    }
    if s.in_transaction() {
        st |= status::IN_TRANS;
    }
    st
}

/// A logged-in connection's state. Owned by its I/O task between commands
/// and moved to an executor thread for each one, so exactly one thread
/// touches it at a time.
pub(super) struct Conn<T: Session> {
    /// The reply to the command being run.
    pub(super) out: PacketWriter,
    pub(super) session: T,
    /// Prepared statements of this connection (`mysql/stmt.rs`).
    pub(super) stmts: super::stmt::Statements,
    pub(super) id: u32,
    pub(super) shared: Arc<Shared>,
    /// Whether the session was in a transaction after its last command
    /// (counted in `ServerStats::open_transactions`).
    pub(super) in_transaction: bool,
    /// Stage histograms on for this command (`perf_hist`).
    pub(super) timing: bool,
    /// When the running command started and its session work ended, for
    /// the `run` and `send` stages (`send` ends when the I/O task has
    /// written the reply).
    pub(super) stages: Option<(Instant, Instant)>,
    /// This connection's process-list entry, updated per command without
    /// the list's lock (`process.rs`).
    pub(super) process: Option<crate::process::ProcessSlot>,
}

impl<T: Session> Conn<T> {
    pub(super) fn new(session: T, id: u32, shared: Arc<Shared>) -> Self {
        let process = shared.processes.slot(id);
        Conn {
            out: PacketWriter::default(),
            session,
            stmts: Default::default(),
            id,
            shared,
            in_transaction: false,
            timing: false,
            stages: None,
            process,
        }
    }

    /// The connection's process-list entry now shows `command` (`info`:
    /// the statement text).
    pub(super) fn set_command(&self, command: &'static str, info: Option<&str>) {
        match &self.process {
            Some(p) => p.set_command(command, info),
            None => self.shared.processes.set_command(self.id, command, info),
        }
    }

    /// Runs one command (`payload`, whose packet had sequence id 0); the
    /// reply is left in `self.out`, its first packet numbered `seq`.
    /// `COM_QUIT` never gets here: the I/O task ends the connection.
    pub(super) fn handle(&mut self, payload: &[u8], seq: u8) -> Result<(), ProtocolError> {
        self.out.start(seq);
        self.stages = None;
        let r = self.dispatch(payload);
        self.track_transaction();
        r
    }

    fn dispatch(&mut self, payload: &[u8]) -> Result<(), ProtocolError> {
        let (&command, body) = payload
            .split_first()
            .ok_or(ProtocolError::Malformed("empty command"))?;
        match command {
            com::PING => self.send_ok(0, 0, 0),
            com::QUERY => self.query(body),
            com::INIT_DB => {
                let db = String::from_utf8_lossy(body);
                match self.session.set_database(&db) {
                    Ok(()) => {
                        match &self.process {
                            Some(p) => p.set_db(Some(&db)),
                            None => self.shared.processes.set_db(self.id, Some(&db)),
                        }
                        self.send_ok(0, 0, 0)
                    }
                    Err(e) => self.send_err(&e),
                }
            }
            com::RESET_CONNECTION => {
                self.close_all_statements();
                match self.session.reset() {
                    Ok(()) => self.send_ok(0, 0, 0),
                    Err(e) => self.send_err(&e),
                }
            }
            com::FIELD_LIST => self.field_list(body),
            com::STMT_PREPARE => self.stmt_prepare(body),
            com::STMT_EXECUTE => self.stmt_execute(body),
            com::STMT_SEND_LONG_DATA => self.stmt_send_long_data(body),
            com::STMT_CLOSE => self.stmt_close(body),
            com::STMT_RESET => self.stmt_reset(body),
            other => self.send_err(&SqlError::new(
                err::UNKNOWN_COM,
                *b"08S01",
                format!("Unknown command 0x{other:02x}"),
            )),
        }
    }

    fn query(&mut self, body: &[u8]) -> Result<(), ProtocolError> {
        // Raw bytes in a string literal (a client quoting binary data)
        // become a hex literal; anything else must be UTF-8.
        let rewritten;
        let sql = match std::str::from_utf8(body) {
            Ok(s) => s,
            Err(_) => match super::literals::hex_literals(body) {
                Some(s) => {
                    rewritten = s;
                    &rewritten
                }
                None => {
                    return self.send_err(&SqlError::new(
                        1300,
                        *b"HY000",
                        "Invalid utf8mb4 character string in statement",
                    ))
                }
            },
        };
        self.shared.stats.questions.fetch_add(1, Ordering::Relaxed);
        self.set_command("Query", Some(sql));
        let started = self.clock();
        let replies = self.session.query(sql);
        let ran = self.clock();
        let n = replies.len();
        for (i, r) in replies.into_iter().enumerate() {
            let more = if i + 1 < n {
                status::MORE_RESULTS_EXISTS
            } else {
                0
            };
            match r {
                Ok(Reply::Ok {
                    affected_rows,
                    last_insert_id,
                    warnings,
                    info,
                }) => {
                    let st = session_status(&self.session) | more;
                    self.out.write_payload(&ok_packet(
                        affected_rows,
                        last_insert_id,
                        st,
                        warnings,
                        &info,
                    ));
                }
                Ok(Reply::Rows { columns, rows }) => {
                    // Built in the writer's scratch buffer: no allocation per result.
                    let Ok(()) = self.out.write_payload_with(|b| {
                        super::wire::put_lenenc_int(b, columns.len() as u64); // usize -> u64: lossless
                        Ok::<(), std::convert::Infallible>(())
                    });
                    for c in columns.iter() {
                        self.out.write_payload(&column_definition(c));
                    }
                    let st = session_status(&self.session) | more;
                    self.out.write_payload(&eof_packet(0, st));
                    for row in &rows {
                        let _ = self.out.write_payload_with(|buf| {
                            text_row_into(buf, row);
                            Ok::<(), std::convert::Infallible>(())
                        });
                    }
                    self.out.write_payload(&eof_packet(0, st));
                }
                Err(e) => {
                    self.out.write_payload(&err_packet(&e));
                    break; // later statements did not run
                }
            }
        }
        self.record_run(started, ran);
        Ok(())
    }

    /// `COM_FIELD_LIST`: `table NUL [wildcard]`; a column definition per
    /// column (each followed by its default, sent as NULL), then EOF.
    fn field_list(&mut self, body: &[u8]) -> Result<(), ProtocolError> {
        let table = body.split(|&b| b == 0).next().unwrap_or_default();
        let table = String::from_utf8_lossy(table);
        match self.session.field_list(&table) {
            Ok(columns) => {
                for c in &columns {
                    let mut def = column_definition(c);
                    def.push(0xfb); // default value: NULL
                    self.out.write_payload(&def);
                }
                let st = session_status(&self.session);
                self.out.write_payload(&eof_packet(0, st));
                Ok(())
            }
            Err(e) => self.send_err(&e),
        }
    }

    /// Keeps `open_transactions` in step with the session's state.
    fn track_transaction(&mut self) {
        let now = self.session.in_transaction();
        if now != self.in_transaction {
            let open = &self.shared.stats.open_transactions;
            if now {
                open.fetch_add(1, Ordering::Relaxed);
            } else {
                open.fetch_sub(1, Ordering::Relaxed);
            }
            self.in_transaction = now;
        }
    }

    /// Now, if stage histograms are on.
    pub(super) fn clock(&self) -> Option<Instant> {
        self.timing.then(Instant::now)
    }

    /// Records `run` (from `started` to `ran`); `send` is recorded from
    /// `ran` on once the reply is written ([`Conn::record_send`]).
    pub(super) fn record_run(&mut self, started: Option<Instant>, ran: Option<Instant>) {
        if let (Some(s), Some(r)) = (started, ran) {
            self.shared.stats.run.record(r.duration_since(s));
            self.stages = Some((s, r));
        }
    }

    /// The reply is on its way: the `send` stage ends.
    pub(super) fn record_send(&mut self) {
        if let Some((_, ran)) = self.stages.take() {
            self.shared.stats.send.record(ran.elapsed());
        }
    }

    pub(super) fn send_ok(
        &mut self,
        affected: u64,
        last_id: u64,
        warnings: u16,
    ) -> Result<(), ProtocolError> {
        let st = session_status(&self.session);
        self.out
            .write_payload(&ok_packet(affected, last_id, st, warnings, ""));
        Ok(())
    }

    pub(super) fn send_err(&mut self, e: &SqlError) -> Result<(), ProtocolError> {
        self.out.write_payload(&err_packet(e));
        Ok(())
    }
}
