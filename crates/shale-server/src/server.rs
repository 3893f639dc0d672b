//! Sockets and threads: accept connections, serve each on its own thread,
//! shut down cleanly.
//!
//! Thread per connection: the engine's calls block (row-lock waits,
//! fsync), so an event loop would need a blocking pool behind it anyway; on
//! this project's 2-core machines a thread per session is the simplest
//! thing that keeps every core busy. `max_connections` bounds the threads.
//!
//! Shutdown ([`ShutdownHandle::shutdown`]): stop accepting, then shut the
//! sockets of open connections down so their threads leave their read, roll
//! their sessions back (dropping a session rolls back its transaction) and
//! end; [`Server::run`] returns when all of them have.

use crate::backend::{Backend, SqlError};
use crate::mysql::conn::{serve_connection, ConnConfig};
use crate::mysql::consts::err;
use crate::mysql::packet::PacketIo;
use crate::mysql::results::err_packet;
use crate::process::ProcessList;
use crate::stats::ServerStats;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Server settings.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub conn: ConnConfig,
    /// Connections served at once; more are refused with error 1040.
    pub max_connections: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            conn: ConnConfig::default(),
            max_connections: 151, // MySQL's default
        }
    }
}

/// What every connection of one server shares.
#[derive(Default)]
pub struct Shared {
    pub stats: ServerStats,
    pub processes: ProcessList,
    pub slow_log: crate::slow_log::SlowLog,
}

/// A bound, not yet running server.
pub struct Server<B: Backend> {
    listener: TcpListener,
    backend: Arc<B>,
    cfg: ServerConfig,
    stop: Arc<AtomicBool>,
    shared: Arc<Shared>,
}

/// Stops a running server from another thread (or a signal handler thread).
#[derive(Clone)]
pub struct ShutdownHandle {
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl ShutdownHandle {
    /// Stops accepting and disconnects every client.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept call; the connection is dropped at once.
        let _ = TcpStream::connect(self.addr);
        self.shared.processes.kill_all();
    }
}

impl<B: Backend> Server<B> {
    /// Binds `addr` (use `127.0.0.1:0` for a free loopback port).
    pub fn bind(addr: SocketAddr, backend: Arc<B>, cfg: ServerConfig) -> std::io::Result<Self> {
        Ok(Server {
            listener: TcpListener::bind(addr)?,
            backend,
            cfg,
            stop: Arc::default(),
            shared: Arc::default(),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The state every connection shares (counters, process list).
    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// A handle that stops [`Server::run`].
    pub fn shutdown_handle(&self) -> std::io::Result<ShutdownHandle> {
        Ok(ShutdownHandle {
            stop: self.stop.clone(),
            addr: self.local_addr()?,
            shared: self.shared.clone(),
        })
    }

    /// Accepts and serves connections until shut down; returns when every
    /// connection thread has ended.
    pub fn run(self) -> std::io::Result<()> {
        let next_id = AtomicU32::new(1);
        let mut threads: Vec<JoinHandle<()>> = Vec::new();
        for stream in self.listener.incoming() {
            if self.stop.load(Ordering::SeqCst) {
                break;
            }
            let stream = match stream {
                Ok(s) => s,
                // A client that gave up before accept: keep serving the rest.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted => continue,
                Err(e) => return Err(e),
            };
            threads.retain(|t| !t.is_finished());
            let id = next_id.fetch_add(1, Ordering::Relaxed);
            if self.shared.processes.len() >= self.cfg.max_connections {
                refuse(stream, self.cfg.conn.max_allowed_packet);
                continue;
            }
            let _ = stream.set_nodelay(true);
            let peer = stream
                .peer_addr()
                .map(|a| a.ip().to_string())
                .unwrap_or_default();
            self.shared
                .processes
                .register(id, &peer, Some(stream.try_clone()?));
            let (backend, cfg, shared) = (
                self.backend.clone(),
                self.cfg.conn.clone(),
                self.shared.clone(),
            );
            let t = std::thread::Builder::new()
                .name(format!("conn-{id}"))
                .spawn(move || {
                    let r = serve_connection(
                        backend.as_ref(),
                        Box::new(stream),
                        id,
                        &peer,
                        &cfg,
                        &shared,
                    );
                    if let Err(e) = r {
                        tracing::debug!(connection = id, error = %e, "connection ended");
                    }
                    shared.processes.remove(id);
                })?;
            threads.push(t);
        }
        for t in threads {
            let _ = t.join();
        }
        Ok(())
    }
}

/// Too many connections: greet with the error right away, as MySQL does.
fn refuse(stream: TcpStream, max_packet: usize) {
    let mut io = PacketIo::new(stream, max_packet);
    io.write_payload(&err_packet(&SqlError::new(
        err::TOO_MANY_CONNECTIONS,
        *b"08004",
        "Too many connections",
    )));
    let _ = io.flush();
}
