//! Sockets and threads: accept connections, serve them on a few I/O
//! threads, run their statements on a bounded executor pool, shut down
//! cleanly.
//!
//! Two threading models, chosen by [`ServerConfig::thread_handling`] (as
//! MariaDB's `thread_handling`):
//!
//! - **One thread per connection** (the default): the accept loop gives
//!   each connection a thread of its own (from the runtime's blocking
//!   pool, so ended connections' threads are reused) running a
//!   single-threaded tokio event loop over that one socket; the same task
//!   code as below runs, but a command runs right where its packet was
//!   read. One thread wake-up per command: on this project's 2-core
//!   machines it measured 2.2x the pool's point-select throughput and
//!   0.85x the old blocking thread-per-connection server's
//!   (docs/benchmarks.md). An idle connection keeps its thread.
//! - **Pool of threads** (seed 004, PolarDB-X XRPC: event-driven I/O on a
//!   few threads, work handed to executor threads), described below: an
//!   idle connection costs a task and its buffers (10.5 KiB against 80.7
//!   KiB), a command three thread wake-ups.
//!
//! - I/O threads ([`ServerConfig::io_threads`], default: the cores, at
//!   most 4) run a tokio runtime. They own every socket: the accept loop,
//!   and one task per connection (`mysql/task.rs`) that greets, switches to
//!   TLS, authenticates (`mysql/login.rs`), reads whole command packets and
//!   writes replies. Waiting for a client costs its task and buffers (a 4
//!   KiB read buffer, the reply being sent), not a thread.
//! - Executor threads (the runtime's blocking pool, at most
//!   [`ServerConfig::executor_threads`]) run what blocks: a connection's
//!   command (SQL layer and engine: row-lock waits, fsync), opening a
//!   session, and dropping it (rollback). The I/O task moves the
//!   connection's state (`mysql/conn.rs`, `Conn`: session, prepared
//!   statements, reply buffer) to an executor thread with the command and
//!   gets it back with the reply's packets; exactly one thread holds it at
//!   a time, so it needs no lock. A slow statement holds one executor
//!   thread; the I/O threads and the other connections go on.
//! - Threads are made on demand and leave after 10 s idle, so an idle
//!   server keeps its I/O threads only.
//!
//! Bounds and back-pressure: a connection has at most one command in
//! flight. Its I/O task reads no further command until the reply to the
//! last one has been written, so a client that does not read its results
//! makes the server hold one reply (the result it asked for) and nothing
//! more; the executor thread that built the reply is free again before the
//! first byte is sent. The executor queue therefore holds at most one job
//! per connection, and `max_connections` (error 1040 beyond it) bounds
//! both. The executor cap defaults to `max_connections`: with fewer
//! threads than sessions that may wait on row locks, the lock holders'
//! `COMMIT` could queue behind their waiters until `innodb_lock_wait_timeout`
//! (seed 004 grows its pool for the same reason).
//!
//! Shutdown ([`ShutdownHandle::shutdown`]): stop accepting, then raise every
//! connection's interrupt flag and shut its socket down, so a running
//! statement stops at its next check (1317), the I/O task's read or write
//! fails, and the session is dropped on an executor thread (rolling its
//! transaction back); [`Server::run`] returns when every connection task
//! has ended.

use crate::backend::{Backend, SqlError};
use crate::mysql::conn::ConnConfig;
use crate::mysql::consts::err;
use crate::mysql::frame::AsyncPacketIo;
use crate::mysql::results::err_packet;
use crate::mysql::task::Threading;
use crate::process::ProcessList;
use crate::stats::ServerStats;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Server settings.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub conn: ConnConfig,
    /// Connections served at once; more are refused with error 1040.
    pub max_connections: usize,
    /// Threads doing network I/O (the tokio runtime's workers).
    pub io_threads: usize,
    /// Most executor threads running commands at once; `None`:
    /// `max_connections` (see the module doc for why).
    pub executor_threads: Option<usize>,
    /// One thread per connection (the default, as MariaDB's
    /// `thread_handling`) or the event-driven pool of threads.
    pub thread_handling: ThreadHandling,
}

/// How connections are given threads (MariaDB's `thread_handling`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ThreadHandling {
    /// Each connection runs on a thread of its own, with its own
    /// single-threaded event loop: a command runs where its packet was
    /// read, with no hand-off (the fastest on few cores; an idle
    /// connection keeps a thread).
    #[default]
    OneThreadPerConnection,
    /// The I/O threads serve every connection and hand each command to an
    /// executor thread: an idle connection costs a task and its buffers,
    /// a command three thread wake-ups.
    PoolOfThreads,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            conn: ConnConfig::default(),
            max_connections: 151, // MySQL's default
            io_threads: default_io_threads(),
            executor_threads: None,
            thread_handling: ThreadHandling::default(),
        }
    }
}

/// One I/O thread per core, at most 4: they only frame packets and copy
/// bytes, so more would mostly contend with the executors for the cores.
pub fn default_io_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().min(4))
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
    stop: Arc<Stop>,
    shared: Arc<Shared>,
}

/// The shutdown request: a flag for whoever checks, a wake-up for the
/// accept loop (a permit is kept if it is not waiting yet).
#[derive(Default)]
struct Stop {
    requested: AtomicBool,
    wake: Notify,
}

/// Stops a running server from another thread (or a signal handler thread).
#[derive(Clone)]
pub struct ShutdownHandle {
    stop: Arc<Stop>,
    shared: Arc<Shared>,
}

impl ShutdownHandle {
    /// Stops accepting and disconnects every client.
    pub fn shutdown(&self) {
        self.stop.requested.store(true, Ordering::SeqCst);
        self.stop.wake.notify_one();
        self.shared.processes.kill_all();
    }
}

impl<B: Backend> Server<B>
where
    B::Session: 'static,
{
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
            shared: self.shared.clone(),
        })
    }

    /// Accepts and serves connections until shut down; returns when every
    /// connection has ended.
    pub fn run(self) -> std::io::Result<()> {
        let executors = match self.cfg.thread_handling {
            // Each connection's own thread comes from the blocking pool.
            ThreadHandling::OneThreadPerConnection => self.cfg.max_connections,
            ThreadHandling::PoolOfThreads => self
                .cfg
                .executor_threads
                .unwrap_or(self.cfg.max_connections),
        }
        .max(1);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(self.cfg.io_threads.max(1))
            .max_blocking_threads(executors)
            .thread_keep_alive(Duration::from_secs(10))
            .thread_name("shale-net")
            .enable_io()
            .enable_time()
            .build()?;
        self.listener.set_nonblocking(true)?;
        runtime.block_on(self.accept_loop())
    }

    async fn accept_loop(self) -> std::io::Result<()> {
        let listener = tokio::net::TcpListener::from_std(self.listener)?;
        let cfg = Arc::new(self.cfg.conn.clone());
        let mut tasks = tokio::task::JoinSet::new();
        let mut next_id: u32 = 1;
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                () = self.stop.wake.notified() => break,
            };
            if self.stop.requested.load(Ordering::SeqCst) {
                break;
            }
            while tasks.try_join_next().is_some() {} // reap ended connections
            let (stream, peer) = match accepted {
                Ok(s) => s,
                // A client that gave up before accept: serve the rest.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted => continue,
                // Out of file descriptors (a connection flood): refuse
                // nothing on purpose, wait for connections to end.
                Err(e) if is_fd_exhaustion(&e) => {
                    tracing::warn!(error = %e, "accept failed; retrying");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let id = next_id;
            next_id = next_id.wrapping_add(1).max(1);
            let max_packet = cfg.max_allowed_packet;
            if self.shared.processes.len() >= self.cfg.max_connections {
                tasks.spawn(refuse(stream, max_packet));
                continue;
            }
            let _ = stream.set_nodelay(true);
            // A duplicate of the socket for KILL and shutdown, which shut it
            // down from other threads (`process.rs`); the task then sees
            // its read or write end.
            let killer = socket2::SockRef::from(&stream)
                .try_clone()
                .ok()
                .map(std::net::TcpStream::from);
            let host = peer.ip().to_string();
            self.shared.processes.register(id, &host, killer);
            let (backend, cfg, shared) = (self.backend.clone(), cfg.clone(), self.shared.clone());
            let owner = self.shared.clone();
            let serve = move |stream: crate::mysql::login::BoxedStream, threading: Threading| {
                serve_one(backend, stream, id, host, cfg, shared, threading)
            };
            if self.cfg.thread_handling == ThreadHandling::OneThreadPerConnection {
                // The connection's own thread (a blocking-pool thread, so
                // ended connections' threads are reused) runs its own
                // single-threaded event loop over the socket.
                let stream = stream.into_std()?;
                // Shares the socket's file status flags: switching it to
                // blocking switches the connection's (mysql/task.rs).
                let socket = stream.try_clone().ok();
                let own = tokio::task::spawn_blocking(move || {
                    let local = tokio::runtime::Builder::new_current_thread()
                        .enable_io()
                        .enable_time()
                        .build();
                    let stream = local.as_ref().ok().and_then(|rt| {
                        let _in = rt.enter();
                        tokio::net::TcpStream::from_std(stream).ok()
                    });
                    match (local, stream) {
                        (Ok(rt), Some(stream)) => {
                            rt.block_on(serve(Box::new(stream), Threading::Own { socket }))
                        }
                        _ => {
                            tracing::warn!(connection = id, "no event loop for the connection");
                            owner.processes.remove(id);
                        }
                    }
                });
                tasks.spawn(async move {
                    let _ = own.await;
                });
                continue;
            }
            tasks.spawn(serve(Box::new(stream), Threading::Pool));
        }
        drop(listener);
        // Connections registered after `shutdown` looked at the list.
        self.shared.processes.kill_all();
        while tasks.join_next().await.is_some() {}
        Ok(())
    }
}

/// Serves one connection to its end (`inline`: on this thread, which is
/// the connection's own), then takes it off the process list.
async fn serve_one<B: Backend>(
    backend: Arc<B>,
    stream: crate::mysql::login::BoxedStream,
    id: u32,
    host: String,
    cfg: Arc<ConnConfig>,
    shared: Arc<Shared>,
    threading: Threading,
) where
    B::Session: 'static,
{
    let r =
        crate::mysql::task::serve(backend, stream, id, host, cfg, shared.clone(), threading).await;
    if let Err(e) = r {
        tracing::debug!(connection = id, error = %e, "connection ended");
    }
    shared.processes.remove(id);
}

fn is_fd_exhaustion(e: &std::io::Error) -> bool {
    // EMFILE (24), ENFILE (23), ENOBUFS (105), ENOMEM (12) on Linux.
    matches!(e.raw_os_error(), Some(12 | 23 | 24 | 105))
}

/// Too many connections: greet with the error right away, as MySQL does.
async fn refuse(stream: tokio::net::TcpStream, max_packet: usize) {
    let mut io = AsyncPacketIo::new(stream, max_packet);
    io.write_payload(&err_packet(&SqlError::new(
        err::TOO_MANY_CONNECTIONS,
        *b"08004",
        "Too many connections",
    )));
    let _ = io.flush().await;
}
