//! Sockets and threads: a thread per connection (the engine's calls block
//! on fsync and locks, like in shale-server), pipelining (every complete
//! request in the input is answered, in order, before the next read; runs
//! of data commands share one engine commit, `commands::pipeline`).

use crate::commands::pipeline::Pipeline;
use crate::commands::{Conn, Shared};
use crate::durability::Appendfsync;
use crate::reactor::Reactor;
use crate::requests::run_requests;
use crate::store::{Store, StoreError};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// Connections served at once (Redis's maxclients default).
pub const MAX_CLIENTS: u64 = 10_000;
/// How often idle connections and the accept loop look at the stop flag.
pub(crate) const POLL: Duration = Duration::from_millis(100);

#[derive(Debug, Error)]
pub enum ServerError {
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// How the endpoint runs (`shale-redis-server`'s and `shale serve`'s flags).
#[derive(Debug, Default)]
pub struct ServerConfig {
    /// The default user's password; `None` means no authentication.
    pub password: Option<String>,
    /// `appendfsync` at start (CONFIG SET changes it).
    pub appendfsync: Appendfsync,
    /// A second listener speaking TLS (Redis's `tls-port`).
    pub tls: Option<TlsListener>,
    /// Event-loop threads serving the connections (`reactor`); `None`: one
    /// per two cores, at least 1 and at most 8 (a connection whose reads
    /// wait for the device moves to a thread of its own, `device_reads`);
    /// `Some(0)`: a thread per connection.
    pub io_threads: Option<usize>,
}

/// The TLS port's listener and its rustls configuration
/// ([`crate::tls::server_config`]).
#[derive(Debug)]
pub struct TlsListener {
    pub listener: TcpListener,
    pub config: Arc<rustls::ServerConfig>,
}

/// Serves RESP2 on `listener` until `stop` is set, then waits for the
/// connection threads. `password: None` means no authentication.
pub fn serve(
    db: shaledb::Db,
    listener: TcpListener,
    password: Option<String>,
    stop: Arc<AtomicBool>,
) -> Result<(), ServerError> {
    let cfg = ServerConfig {
        password,
        ..ServerConfig::default()
    };
    serve_with(db, listener, cfg, stop)
}

/// [`serve`] with every option.
pub fn serve_with(
    db: shaledb::Db,
    listener: TcpListener,
    cfg: ServerConfig,
    stop: Arc<AtomicBool>,
) -> Result<(), ServerError> {
    let port = listener.local_addr()?.port();
    let store = Store::open(db)?;
    store.set_appendfsync(cfg.appendfsync);
    let acl = crate::acl::registry::Acl::load(&store, cfg.password.as_deref())?;
    let shared = Arc::new(Shared::new(store, acl, port, stop.clone()));
    listener.set_nonblocking(true)?;
    let mut threads = Vec::new();
    let sweeper = {
        let (shared, stop) = (shared.clone(), stop.clone());
        std::thread::spawn(move || crate::expire::run(&shared.store, &stop))
    };
    // TLS connections are relayed to the plain port over loopback.
    let tls = match cfg.tls {
        Some(t) => {
            let mut plain = listener.local_addr()?;
            if plain.ip().is_unspecified() {
                plain.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            let stop = stop.clone();
            Some(std::thread::spawn(move || {
                crate::tls::serve(t.listener, t.config, plain, stop)
            }))
        }
        None => None,
    };
    let fsyncer = {
        let (shared, stop) = (shared.clone(), stop.clone());
        std::thread::spawn(move || crate::durability::run(&shared.store, &stop))
    };
    let loops = cfg.io_threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).clamp(1, 8))
    });
    let reactors = (0..loops)
        .map(|_| Reactor::start(shared.clone(), stop.clone()))
        .collect::<std::io::Result<Vec<_>>>()?;
    let mut accepted = 0usize;
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                accepted = accepted.wrapping_add(1);
                // Under `always` every request would leave the loop at once.
                let event_loop = reactors.get(accepted % loops.max(1)).filter(|_| {
                    shared.store.appendfsync() != crate::durability::Appendfsync::Always
                });
                if let Some(r) = event_loop {
                    if let Some(stream) = admit(&shared, stream) {
                        if r.add(stream).is_err() {
                            shared.clients.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                    continue;
                }
                threads.retain(|t: &std::thread::JoinHandle<()>| !t.is_finished());
                let shared = shared.clone();
                let stop = stop.clone();
                threads.push(std::thread::spawn(move || {
                    let _ = connection(&shared, stream, &stop);
                }));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                stop.store(true, Ordering::SeqCst); // ends the expiry cycle
                return Err(e.into());
            }
        }
    }
    for t in threads {
        let _ = t.join();
    }
    for r in reactors {
        r.join();
    }
    let _ = sweeper.join();
    let _ = fsyncer.join();
    if let Some(t) = tls {
        if let Ok(Err(e)) = t.join() {
            eprintln!("TLS port: {e}");
        }
    }
    // What was acknowledged under `everysec` reaches the disk before the
    // caller closes the engine.
    shared.store.sync_wal_if_dirty()?;
    Ok(())
}

/// Counts a new connection in `Shared::clients`; `None` (the client told,
/// the socket closed) past `MAX_CLIENTS`. The caller counts it out when it
/// closes.
fn admit(shared: &Shared, mut stream: TcpStream) -> Option<TcpStream> {
    let n = shared.clients.fetch_add(1, Ordering::SeqCst) + 1;
    if n > MAX_CLIENTS {
        shared.clients.fetch_sub(1, Ordering::SeqCst);
        shared.stats.rejected.fetch_add(1, Ordering::Relaxed);
        let _ = stream.set_nonblocking(false);
        let _ = stream.write_all(b"-ERR max number of clients reached\r\n");
        return None;
    }
    Some(stream)
}

/// Counts a connection in `Shared::clients` until dropped.
pub(crate) struct ClientGuard<'a>(pub(crate) &'a Shared);
impl Drop for ClientGuard<'_> {
    fn drop(&mut self) {
        self.0.clients.fetch_sub(1, Ordering::SeqCst);
    }
}

fn connection(shared: &Shared, mut stream: TcpStream, stop: &AtomicBool) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_nodelay(true)?;
    let n = shared.clients.fetch_add(1, Ordering::SeqCst) + 1;
    let _guard = ClientGuard(shared);
    if n > MAX_CLIENTS {
        shared.stats.rejected.fetch_add(1, Ordering::Relaxed);
        stream.write_all(b"-ERR max number of clients reached\r\n")?;
        return Ok(());
    }
    stream.set_read_timeout(Some(POLL))?;
    let mut conn = Conn::new(shared, Some(&stream));
    let r = serve_connection(shared, &mut stream, &mut conn, stop, Vec::new());
    conn.close(shared);
    r
}

/// Reads from a socket with a read timeout: `Some(n)` bytes, or `None` at
/// end of stream or once `stop` is set (checked at each timeout, so a
/// shutdown is seen within one timeout while the client is idle).
pub(crate) fn read_or_stop(
    stream: &mut impl Read,
    buf: &mut [u8],
    stop: &AtomicBool,
    idle: &mut dyn FnMut() -> std::io::Result<()>,
) -> std::io::Result<Option<usize>> {
    loop {
        match stream.read(buf) {
            Ok(0) => return Ok(None),
            Ok(n) => return Ok(Some(n)),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if stop.load(Ordering::SeqCst) {
                    return Ok(None);
                }
                idle()?;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Serves one connection on its own thread until it closes or `stop` is
/// set: the requests in `buf` first (left by an event loop that handed the
/// connection over, see `reactor`), then whatever the client sends.
pub(crate) fn serve_connection(
    shared: &Shared,
    stream: &mut TcpStream,
    conn: &mut Conn,
    stop: &AtomicBool,
    mut buf: Vec<u8>,
) -> std::io::Result<()> {
    let mut chunk = vec![0u8; 64 * 1024];
    let sink = conn.sink.clone();
    loop {
        let mut pipe = Pipeline::default();
        let ran = run_requests(shared, conn, &buf, false, &mut pipe);
        // The batch commits before its replies go out (and before the next
        // read: no stripe is held while waiting for the client).
        pipe.finish(shared);
        let ran = ran?;
        buf.drain(..ran.used.min(buf.len()));
        sink.flush()?;
        if ran.close {
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return Ok(());
        }
        // While idle, write out what other threads' messages left behind.
        let Some(got) = read_or_stop(stream, &mut chunk, stop, &mut || sink.flush())? else {
            return Ok(());
        };
        buf.extend_from_slice(chunk.get(..got).unwrap_or_default());
    }
}
