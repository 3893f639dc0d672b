//! One client connection: the connection phase (greeting, authentication)
//! and then the command phase, one command at a time.
//!
//! Errors split in two: a [`SqlError`] from the backend is sent to the
//! client as an ERR packet and the connection goes on; a [`ProtocolError`]
//! (malformed or oversized packet, broken socket) ends the connection, after
//! an ERR packet when the socket still works, as MySQL does.

use super::consts::{cap, charset, com, err, status};
use super::handshake::{self, ClientHello, Greeting, HandshakeResponse};
use super::packet::PacketIo;
use super::results::{column_definition, eof_packet, err_packet, ok_packet, text_row};
use super::{auth, ProtocolError};
use crate::backend::{Backend, ConnInfo, Reply, Session, SqlError};
use crate::server::Shared;
use std::io::{Read, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// A connection's byte stream: a socket, TLS over a socket, or a test
/// pipe. Boxed, so the switch to TLS in the middle of the handshake keeps
/// one type.
pub trait Transport: Read + Write + Send {}
impl<T: Read + Write + Send> Transport for T {}

/// The stream type connections are served on.
pub type BoxedTransport = Box<dyn Transport>;

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

/// Serves one connection to the end. `peer_host` is the client's address as
/// accounts name it (`127.0.0.1`).
pub fn serve_connection<B: Backend>(
    backend: &B,
    stream: BoxedTransport,
    connection_id: u32,
    peer_host: &str,
    cfg: &ConnConfig,
    shared: &Arc<Shared>,
) -> Result<(), ProtocolError> {
    let stats = &shared.stats;
    stats.connections.fetch_add(1, Ordering::Relaxed);
    let mut io = PacketIo::new(stream, cfg.max_allowed_packet);
    let session = match authenticate(backend, &mut io, connection_id, peer_host, cfg, shared) {
        Ok(s) => s,
        Err(e) => {
            stats.aborted_connects.fetch_add(1, Ordering::Relaxed);
            return fail(&mut io, e);
        }
    };
    stats.threads_connected.fetch_add(1, Ordering::Relaxed);
    let mut conn = Conn {
        io,
        session,
        stmts: Default::default(),
        id: connection_id,
        shared: shared.clone(),
        in_transaction: false,
    };
    let result = match conn.command_loop() {
        Ok(()) => Ok(()),
        Err(e) => fail(&mut conn.io, e),
    };
    conn.count_bytes();
    if conn.in_transaction {
        // The session is dropped next, rolling its transaction back.
        stats.open_transactions.fetch_sub(1, Ordering::Relaxed);
    }
    stats.threads_connected.fetch_sub(1, Ordering::Relaxed);
    result
}

/// Ends a connection on a protocol error: tells the client why if it can.
fn fail<S: Read + Write>(io: &mut PacketIo<S>, e: ProtocolError) -> Result<(), ProtocolError> {
    if let Some(sql) = e.to_sql_error() {
        io.write_payload(&err_packet(&sql));
        let _ = io.flush(); // the socket may be gone already
    }
    Err(e)
}

fn authenticate<B: Backend>(
    backend: &B,
    io: &mut PacketIo<BoxedTransport>,
    connection_id: u32,
    peer_host: &str,
    cfg: &ConnConfig,
    shared: &Arc<Shared>,
) -> Result<B::Session, ProtocolError> {
    let nonce = auth::new_nonce();
    io.write_payload(&handshake::encode_greeting(&Greeting {
        server_version: &cfg.server_version,
        connection_id,
        nonce: &nonce,
        capabilities: if cfg.tls.is_some() {
            cap::SERVER | cap::SSL
        } else {
            cap::SERVER
        },
        charset: u8::try_from(charset::UTF8MB4_BIN).unwrap_or(46),
        status: status::AUTOCOMMIT,
        plugin: cfg.default_plugin,
    }));
    io.flush()?;
    let payload = io.read_payload()?.ok_or(ProtocolError::Closed)?;
    let resp: HandshakeResponse = match handshake::decode_client_hello(&payload)? {
        ClientHello::Response(r) => {
            if cfg.require_tls {
                return Err(ProtocolError::Refused(SqlError::new(
                    3159,
                    *b"HY000",
                    "Connections using insecure transport are prohibited while \
                     --require_secure_transport=ON.",
                )));
            }
            r
        }
        ClientHello::Ssl { .. } => {
            let tls = cfg
                .tls
                .clone()
                .ok_or(ProtocolError::Unsupported("TLS was not offered"))?;
            start_tls(io, tls, cfg.max_allowed_packet)?;
            let payload = io.read_payload()?.ok_or(ProtocolError::Closed)?;
            match handshake::decode_client_hello(&payload)? {
                ClientHello::Response(r) => r,
                ClientHello::Ssl { .. } => {
                    return Err(ProtocolError::Malformed("second SSLRequest"))
                }
            }
        }
    };
    let denied = |using_password: bool| {
        ProtocolError::AccessDenied(SqlError::new(
            err::ACCESS_DENIED,
            *b"28000",
            format!(
                "Access denied for user '{}'@'{peer_host}' (using password: {})",
                resp.user,
                if using_password { "YES" } else { "NO" }
            ),
        ))
    };
    let creds = backend.credentials(&resp.user, peer_host);
    let plugin = resp.plugin.as_deref().unwrap_or(auth::NATIVE);
    // The token is checked under the client's plugin when we know it;
    // otherwise the client is asked to answer a new nonce with ours.
    let has_password = creds.as_ref().is_some_and(|c| !c.is_empty_password());
    let (plugin, nonce, token) =
        if auth::is_supported(plugin) && (!resp.auth_response.is_empty() || !has_password) {
            (plugin.to_owned(), nonce, resp.auth_response.clone())
        } else if auth::is_supported(plugin) {
            // A client whose plugin differs from the greeting's may send an
            // empty token and wait to be asked: ask under its own plugin.
            let fresh = auth::new_nonce();
            io.write_payload(&handshake::encode_auth_switch(plugin, &fresh));
            io.flush()?;
            let token = io.read_payload()?.ok_or(ProtocolError::Closed)?;
            (plugin.to_owned(), fresh, token)
        } else {
            let fresh = auth::new_nonce();
            io.write_payload(&handshake::encode_auth_switch(auth::NATIVE, &fresh));
            io.flush()?;
            let token = io.read_payload()?.ok_or(ProtocolError::Closed)?;
            (auth::NATIVE.to_owned(), fresh, token)
        };
    let using_password = !token.is_empty();
    // An unknown user is checked against a throwaway verifier so the reply
    // takes as long and says the same as a wrong password.
    let ok = match &creds {
        Some(c) => c.verify(&plugin, &nonce, &token) == Some(true),
        None => {
            let _ = auth::Credentials::from_password("x").verify(&plugin, &nonce, &token);
            false
        }
    };
    if !ok {
        return Err(denied(using_password));
    }
    if plugin == auth::CACHING_SHA2 && using_password {
        io.write_payload(&handshake::SHA2_FAST_AUTH_OK);
    }
    let session = backend
        .open_session(&ConnInfo {
            id: connection_id,
            user: resp.user.clone(),
            host: peer_host.to_owned(),
            database: resp.database.clone(),
            shared: shared.clone(),
        })
        .map_err(ProtocolError::Refused)?;
    shared
        .processes
        .logged_in(connection_id, &resp.user, resp.database.as_deref());
    let status = session_status(&session);
    io.write_payload(&ok_packet(0, 0, status, 0, ""));
    io.flush()?;
    Ok(session)
}

/// Switches `io` to TLS after an SSLRequest; the sequence id carries on.
fn start_tls(
    io: &mut PacketIo<BoxedTransport>,
    tls: Arc<rustls::ServerConfig>,
    max_packet: usize,
) -> Result<(), ProtocolError> {
    let placeholder: BoxedTransport = Box::new(std::io::empty());
    let plain = std::mem::replace(io, PacketIo::new(placeholder, max_packet));
    let (stream, seq) = plain.into_inner();
    let conn = rustls::ServerConnection::new(tls)
        .map_err(|e| ProtocolError::Io(std::io::Error::other(e)))?;
    let secure: BoxedTransport = Box::new(rustls::StreamOwned::new(conn, stream));
    *io = PacketIo::resume(secure, seq, max_packet);
    Ok(())
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

pub(super) struct Conn<S: Read + Write, T: Session> {
    pub(super) io: PacketIo<S>,
    pub(super) session: T,
    /// Prepared statements of this connection (`mysql/stmt.rs`).
    pub(super) stmts: super::stmt::Statements,
    pub(super) id: u32,
    pub(super) shared: Arc<Shared>,
    /// Whether the session was in a transaction after its last command
    /// (counted in `ServerStats::open_transactions`).
    pub(super) in_transaction: bool,
}

impl<S: Read + Write, T: Session> Conn<S, T> {
    fn command_loop(&mut self) -> Result<(), ProtocolError> {
        loop {
            self.count_bytes();
            self.track_transaction();
            self.shared.processes.set_command(self.id, "Sleep", None);
            self.io.reset_seq();
            self.io.timing = self.shared.stats.perf_hist.load(Ordering::Relaxed);
            let Some(payload) = self.io.read_payload()? else {
                return Ok(()); // client went away between commands
            };
            if self.io.timing {
                self.shared.stats.recv.record(self.io.last_recv);
            }
            let (&command, body) = payload
                .split_first()
                .ok_or(ProtocolError::Malformed("empty command"))?;
            match command {
                com::QUIT => return Ok(()),
                com::PING => self.send_ok(0, 0, 0)?,
                com::QUERY => self.query(body)?,
                com::INIT_DB => {
                    let db = String::from_utf8_lossy(body);
                    match self.session.set_database(&db) {
                        Ok(()) => {
                            self.shared.processes.set_db(self.id, Some(&db));
                            self.send_ok(0, 0, 0)?
                        }
                        Err(e) => self.send_err(&e)?,
                    }
                }
                com::RESET_CONNECTION => {
                    self.close_all_statements();
                    match self.session.reset() {
                        Ok(()) => self.send_ok(0, 0, 0)?,
                        Err(e) => self.send_err(&e)?,
                    }
                }
                com::FIELD_LIST => self.field_list(body)?,
                com::STMT_PREPARE => self.stmt_prepare(body)?,
                com::STMT_EXECUTE => self.stmt_execute(body)?,
                com::STMT_SEND_LONG_DATA => self.stmt_send_long_data(body)?,
                com::STMT_CLOSE => self.stmt_close(body)?,
                com::STMT_RESET => self.stmt_reset(body)?,
                other => self.send_err(&SqlError::new(
                    err::UNKNOWN_COM,
                    *b"08S01",
                    format!("Unknown command 0x{other:02x}"),
                ))?,
            }
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
        self.shared
            .processes
            .set_command(self.id, "Query", Some(sql));
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
                    self.io.write_payload(&ok_packet(
                        affected_rows,
                        last_insert_id,
                        st,
                        warnings,
                        &info,
                    ));
                }
                Ok(Reply::Rows { columns, rows }) => {
                    let mut count = Vec::new();
                    super::wire::put_lenenc_int(&mut count, columns.len() as u64);
                    self.io.write_payload(&count);
                    for c in &columns {
                        self.io.write_payload(&column_definition(c));
                    }
                    let st = session_status(&self.session) | more;
                    self.io.write_payload(&eof_packet(0, st));
                    for row in &rows {
                        self.io.write_payload(&text_row(row));
                        if self.io.queued() > 1 << 20 {
                            self.io.flush()?; // stream big results
                        }
                    }
                    self.io.write_payload(&eof_packet(0, st));
                }
                Err(e) => {
                    self.io.write_payload(&err_packet(&e));
                    break; // later statements did not run
                }
            }
        }
        self.io.flush()?;
        self.record_stages(started, ran);
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
                    self.io.write_payload(&def);
                }
                let st = session_status(&self.session);
                self.io.write_payload(&eof_packet(0, st));
                self.io.flush()
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
        self.io.timing.then(Instant::now)
    }

    /// Records `run` (from `started` to `ran`) and `send` (from `ran` to now).
    pub(super) fn record_stages(&self, started: Option<Instant>, ran: Option<Instant>) {
        if let (Some(s), Some(r)) = (started, ran) {
            self.shared.stats.run.record(r.duration_since(s));
            self.shared.stats.send.record(r.elapsed());
        }
    }

    /// Adds the bytes moved since the last call to the server's counters.
    fn count_bytes(&mut self) {
        let (i, o) = self.io.take_byte_counts();
        let st = &self.shared.stats;
        st.bytes_received.fetch_add(i, Ordering::Relaxed);
        st.bytes_sent.fetch_add(o, Ordering::Relaxed);
    }

    pub(super) fn send_ok(
        &mut self,
        affected: u64,
        last_id: u64,
        warnings: u16,
    ) -> Result<(), ProtocolError> {
        let st = session_status(&self.session);
        self.io
            .write_payload(&ok_packet(affected, last_id, st, warnings, ""));
        self.io.flush()
    }

    pub(super) fn send_err(&mut self, e: &SqlError) -> Result<(), ProtocolError> {
        self.io.write_payload(&err_packet(e));
        self.io.flush()
    }
}
