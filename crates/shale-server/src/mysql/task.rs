//! One connection's task (server.rs has the threading models): log in,
//! then for each command read the whole packet here, run it (on this
//! thread when the connection has its own thread; else handed with the
//! connection's state to an executor thread), and write the reply.

use super::blocking::BlockingStream;
use super::conn::{Conn, ConnConfig};
use super::consts::com;
use super::frame::AsyncPacketIo;
use super::login::{login, BoxedStream};
use super::results::err_packet;
use super::ProtocolError;
use crate::backend::{Backend, Session};
use crate::server::Shared;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The read buffer put in front of a logged-in connection's stream: one
/// `read` call usually brings a whole command; larger packets are read
/// straight into their payload. Small, since an idle connection keeps it.
const READ_BUFFER: usize = 4 << 10;

/// How a connection's commands run.
pub enum Threading {
    /// Handed to an executor thread; this task waits without a thread.
    Pool,
    /// On this thread, the connection's own. Once the client is logged in
    /// without TLS, the commands are read and the replies written through
    /// `socket` (another handle to the connection's socket) with blocking
    /// calls (`blocking.rs`): this thread's event loop then has nothing to
    /// do but this connection. `perf` put `epoll_wait` and the context
    /// switches around it at 20-30% of the server's samples under sysbench.
    /// TLS connections keep readiness polling: rustls' stream adapter
    /// stalled over a blocking socket.
    Own { socket: Option<std::net::TcpStream> },
}

/// Serves one accepted connection to the end.
pub async fn serve<B: Backend>(
    backend: Arc<B>,
    stream: BoxedStream,
    id: u32,
    peer_host: String,
    cfg: Arc<ConnConfig>,
    shared: Arc<Shared>,
    threading: Threading,
) -> Result<(), ProtocolError>
where
    B::Session: 'static,
{
    let stats = &shared.stats;
    stats.connections.fetch_add(1, Ordering::Relaxed);
    let mut io = AsyncPacketIo::new(stream, cfg.max_allowed_packet);
    let inline = matches!(threading, Threading::Own { .. });
    let (session, secure) = match login(&backend, &mut io, id, &peer_host, &cfg, &shared).await {
        Ok(s) => s,
        Err(e) => {
            stats.aborted_connects.fetch_add(1, Ordering::Relaxed);
            if let Some(sql) = e.to_sql_error() {
                io.write_payload(&err_packet(&sql));
                let _ = io.flush().await; // the socket may be gone already
            }
            count_bytes(&mut io, &shared);
            return Err(e);
        }
    };
    stats.threads_connected.fetch_add(1, Ordering::Relaxed);
    let (mut stream, seq) = io.into_inner();
    if let (
        Threading::Own {
            socket: Some(socket),
        },
        false,
    ) = (threading, secure)
    {
        // Login reads exactly its packets (no read-ahead), so whatever the
        // client sent next is still in the socket, not in `stream`.
        match BlockingStream::new(socket) {
            Ok(blocking) => stream = Box::new(blocking),
            // Readiness polling still works; only slower.
            Err(e) => tracing::debug!(connection = id, error = %e, "socket stays non-blocking"),
        }
    }
    let buffered: BoxedStream = Box::new(tokio::io::BufReader::with_capacity(READ_BUFFER, stream));
    let mut io = AsyncPacketIo::resume(buffered, seq, cfg.max_allowed_packet);
    let conn = Box::new(Conn::new(session, id, shared.clone()));
    let (conn, result) = command_loop(&mut io, conn, &shared, inline).await;
    count_bytes(&mut io, &shared);
    if let Some(c) = conn {
        if c.in_transaction {
            stats.open_transactions.fetch_sub(1, Ordering::Relaxed);
        }
        // Dropping the session rolls its transaction back, which may touch
        // the engine: an executor's job, awaited so that a finished task
        // (and a returned `Server::run`) means a finished rollback.
        if inline {
            drop(c);
        } else {
            let _ = tokio::task::spawn_blocking(move || drop(c)).await;
        }
    }
    stats.threads_connected.fetch_sub(1, Ordering::Relaxed);
    result
}

/// Commands until the client quits or a protocol error (reported to the
/// client) ends the connection. Gives the connection back, unless an
/// executor thread panicked with it (its unwinding dropped the session).
async fn command_loop<T: Session + 'static>(
    io: &mut AsyncPacketIo<BoxedStream>,
    mut conn: Box<Conn<T>>,
    shared: &Arc<Shared>,
    inline: bool,
) -> (Option<Box<Conn<T>>>, Result<(), ProtocolError>) {
    loop {
        count_bytes(io, shared);
        conn.set_command("Sleep", None);
        io.reset_seq();
        let timing = shared.stats.perf_hist.load(Ordering::Relaxed);
        io.timing = timing;
        conn.timing = timing;
        let payload = match io.read_payload().await {
            Ok(Some(p)) => p,
            Ok(None) => return (Some(conn), Ok(())), // client went away between commands
            Err(e) => return (Some(conn), fail(io, e).await),
        };
        if timing {
            shared.stats.recv.record(io.last_recv);
        }
        if payload.first() == Some(&com::QUIT) {
            return (Some(conn), Ok(()));
        }
        let seq = io.seq();
        // The hand-off (pool of threads): this connection's state and
        // command go to an executor thread; this task waits without
        // holding a thread.
        // Inline: this thread is the connection's own (one thread per
        // connection, server.rs), so the command runs right here.
        let handed = if inline {
            let r = conn.handle(&payload, seq);
            Ok((conn, r))
        } else {
            tokio::task::spawn_blocking(move || {
                let r = conn.handle(&payload, seq);
                (conn, r)
            })
            .await
        };
        let r;
        (conn, r) = match handed {
            Ok(done) => done,
            Err(_) => return (None, Err(ProtocolError::Executor)),
        };
        if let Err(e) = &r {
            if let Some(sql) = e.to_sql_error() {
                conn.out.write_payload(&err_packet(&sql));
            }
        }
        let sent = match conn.out.bytes() {
            [] => Ok(()),
            bytes => io.send_raw(bytes).await,
        };
        conn.out.clear();
        conn.record_send();
        if let Err(e) = r.and(sent) {
            return (Some(conn), Err(e));
        }
    }
}

/// Ends a connection on a protocol error: tells the client why if it can.
async fn fail(io: &mut AsyncPacketIo<BoxedStream>, e: ProtocolError) -> Result<(), ProtocolError> {
    if let Some(sql) = e.to_sql_error() {
        io.write_payload(&err_packet(&sql));
        let _ = io.flush().await; // the socket may be gone already
    }
    Err(e)
}

/// Adds the bytes moved since the last call to the server's counters.
fn count_bytes(io: &mut AsyncPacketIo<BoxedStream>, shared: &Shared) {
    let (i, o) = io.take_byte_counts();
    let st = &shared.stats;
    st.bytes_received.fetch_add(i, Ordering::Relaxed);
    st.bytes_sent.fetch_add(o, Ordering::Relaxed);
}
