//! Event loops: a few threads, each serving many connections (the default).
//!
//! Why: with a thread per connection every request costs the server two
//! context switches (the thread sleeps in `read` and is woken for the next
//! request); on the 2-core VM that was ~64% of the server's CPU under
//! `redis-benchmark -c 50 -P 1` (`perf`, docs/benchmarks.md). An event loop
//! (Redis's own design) reads every ready socket in one `epoll_wait` turn,
//! runs the requests and writes the replies without sleeping while any
//! client has work.
//!
//! How: the accept loop hands each new connection to one loop (round robin)
//! through a channel and a `mio::Waker`. A loop reads each readable socket
//! until it would block (mio is edge-triggered) and runs every complete
//! request inline (`requests::run_requests` with `inline`); the data
//! commands of all the connections ready in one turn share one batch (one
//! engine commit, `commands::pipeline`), and once it has committed the
//! replies are written without blocking.
//!
//! A connection that would make the loop wait moves, for the rest of its
//! life, to a thread of its own running `server::serve_connection` (the
//! thread-per-connection path): before a request that may block (blocking
//! pops, DEBUG, SUBSCRIBE, CLIENT TRACKING, anything under `appendfsync
//! always`; `requests::needs_thread`), when its socket does not take its
//! replies at once, or when it has become a target of other threads'
//! messages, or when its requests made the loop wait for the device
//! (`device_reads.rs`). The thread gets the unrun requests and writes the unwritten
//! replies first, so the client sees one ordered stream. What still runs
//! inline may wait briefly: for a key's lock stripe (held by another
//! command for its commit only) and for the engine's group commit.
//!
//! Invariant: a socket served by a loop is nonblocking, and no other thread
//! writes to it (`Sink::deliver` targets only subscribed or tracking
//! clients, which live on their own threads), so its replies are written
//! only by `Sink::try_flush` on the loop.

use crate::commands::pipeline::Pipeline;
use crate::commands::{Conn, Shared};
use crate::device_reads::DeviceReads;
use crate::requests::run_requests;
use crate::server::{serve_connection, ClientGuard, POLL};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};
use std::collections::HashMap;
use std::io::{ErrorKind, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

const WAKER: Token = Token(usize::MAX);

/// One event loop, as the accept loop sees it.
pub(crate) struct Reactor {
    tx: Sender<std::net::TcpStream>,
    waker: Arc<Waker>,
    handle: JoinHandle<()>,
}

impl Reactor {
    /// Starts a loop thread; it runs until `stop` is set.
    pub(crate) fn start(shared: Arc<Shared>, stop: Arc<AtomicBool>) -> std::io::Result<Reactor> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let (tx, rx) = channel();
        let handle = std::thread::Builder::new()
            .name("redis-io".into())
            .spawn(move || run(&shared, poll, &rx, &stop))?;
        Ok(Reactor { tx, waker, handle })
    }

    /// Hands a new (admitted, counted) connection to the loop.
    pub(crate) fn add(&self, stream: std::net::TcpStream) -> std::io::Result<()> {
        self.tx
            .send(stream)
            .map_err(|_| std::io::Error::other("event loop has stopped"))?;
        self.waker.wake()
    }

    /// Waits for the loop and the threads it handed connections to.
    pub(crate) fn join(self) {
        let _ = self.handle.join();
    }
}

struct Client {
    stream: TcpStream,
    conn: Conn,
    /// Received bytes not yet run (an incomplete request).
    buf: Vec<u8>,
}

enum Next {
    Keep,
    Close,
    Thread,
}

fn run(
    shared: &Arc<Shared>,
    mut poll: Poll,
    rx: &Receiver<std::net::TcpStream>,
    stop: &Arc<AtomicBool>,
) {
    let mut events = Events::with_capacity(256);
    let mut clients: HashMap<usize, Client> = HashMap::new();
    let mut next_token = 0usize;
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut device = DeviceReads::for_this_thread();
    while !stop.load(Ordering::SeqCst) {
        if let Err(e) = poll.poll(&mut events, Some(POLL)) {
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            eprintln!("redis event loop: {e}");
            break;
        }
        let mut ready: Vec<usize> = Vec::with_capacity(events.iter().count());
        for ev in events.iter() {
            if ev.token() == WAKER {
                while let Ok(s) = rx.try_recv() {
                    let token = next_token;
                    next_token = next_token.wrapping_add(1) % (usize::MAX - 1);
                    match admit(shared, &poll, s, token) {
                        Some(c) => {
                            clients.insert(token, c);
                            // Data may have arrived before registration.
                            ready.push(token);
                        }
                        None => {
                            shared.clients.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                }
            } else {
                ready.push(ev.token().0);
            }
        }
        // Every ready connection's requests run in one batch (one engine
        // commit for the turn, `commands::pipeline`); the replies are written
        // once it has committed.
        let mut pipe = Pipeline::default();
        let mut outcomes = Vec::with_capacity(ready.len());
        for token in ready {
            if let Some(c) = clients.get_mut(&token) {
                let started = Instant::now();
                let mut ran = run_ready(shared, c, &mut chunk, &mut pipe);
                if matches!(ran, Ran::Done { close: false })
                    && device.waited_for_device(started.elapsed())
                {
                    // Its reads wait for the device: on a thread of its
                    // own they no longer hold up the loop (device_reads.rs).
                    ran = Ran::Thread;
                }
                outcomes.push((token, ran));
            }
        }
        pipe.finish(shared);
        for (token, outcome) in outcomes {
            let Some(c) = clients.get_mut(&token) else {
                continue;
            };
            match write_replies(c, outcome) {
                Next::Keep => {}
                Next::Close => {
                    if let Some(c) = clients.remove(&token) {
                        close(shared, &poll, c);
                    }
                }
                Next::Thread => {
                    if let Some(c) = clients.remove(&token) {
                        threads.retain(|t| !t.is_finished());
                        if let Some(t) = handoff(shared, &poll, c, stop) {
                            threads.push(t);
                        }
                    }
                }
            }
        }
    }
    for (_, c) in clients.drain() {
        close(shared, &poll, c);
    }
    for t in threads {
        let _ = t.join();
    }
}

/// Registers a new connection; `None` (and the socket closed) on failure.
fn admit(shared: &Shared, poll: &Poll, s: std::net::TcpStream, token: usize) -> Option<Client> {
    s.set_nodelay(true).ok()?;
    s.set_nonblocking(true).ok()?;
    let conn = Conn::new(shared, Some(&s));
    let mut stream = TcpStream::from_std(s);
    if poll
        .registry()
        .register(&mut stream, Token(token), Interest::READABLE)
        .is_err()
    {
        let mut conn = conn;
        conn.close(shared);
        return None;
    }
    Some(Client {
        stream,
        conn,
        buf: Vec::new(),
    })
}

/// What reading and running a ready connection's requests left to do.
enum Ran {
    /// Its requests ran (replies may wait for the turn's batch); close it
    /// after writing them when `close` (QUIT, a protocol error, EOF).
    Done { close: bool },
    /// Hand it to a thread of its own (after the turn's batch commits).
    Thread,
    /// The socket failed.
    Failed,
}

/// Reads what the socket has and runs the complete requests, batching data
/// commands into `pipe`.
fn run_ready<'a>(
    shared: &'a Shared,
    c: &mut Client,
    chunk: &mut [u8],
    pipe: &mut Pipeline<'a>,
) -> Ran {
    let mut eof = false;
    loop {
        match c.stream.read(chunk) {
            Ok(0) => {
                eof = true;
                break;
            }
            Ok(n) => {
                c.buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
                // A short read emptied the socket's receive queue: skip
                // the read that would only say WouldBlock (one syscall per
                // ready connection per turn). mio's epoll is edge-triggered,
                // and bytes (or the FIN) arriving after this read raise a
                // new edge, so nothing is left unnoticed.
                if n < chunk.len() {
                    break;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Ran::Failed,
        }
    }
    let ran = match run_requests(shared, &mut c.conn, &c.buf, true, pipe) {
        Ok(r) => r,
        Err(_) => return Ran::Failed,
    };
    c.buf.drain(..ran.used.min(c.buf.len()));
    if ran.handoff {
        return Ran::Thread;
    }
    Ran::Done {
        close: ran.close || eof,
    }
}

/// Writes a connection's replies once the turn's batch has committed.
fn write_replies(c: &mut Client, ran: Ran) -> Next {
    let close = match ran {
        Ran::Done { close } => close,
        Ran::Thread => return Next::Thread,
        Ran::Failed => return Next::Close,
    };
    match c.conn.sink.try_flush() {
        Ok(true) if close => Next::Close,
        Ok(true) => Next::Keep,
        // A client that sent QUIT or garbage, or left, gets what fits.
        Ok(false) if close => Next::Close,
        Ok(false) => Next::Thread,
        Err(_) => Next::Close,
    }
}

fn close(shared: &Shared, poll: &Poll, mut c: Client) {
    let _ = poll.registry().deregister(&mut c.stream);
    let _ = c.stream.shutdown(std::net::Shutdown::Both);
    c.conn.close(shared);
    shared.clients.fetch_sub(1, Ordering::SeqCst);
}

/// Moves a connection to a thread of its own (blocking socket, read
/// timeouts to notice `stop`), with its unrun requests.
fn handoff(
    shared: &Arc<Shared>,
    poll: &Poll,
    mut c: Client,
    stop: &Arc<AtomicBool>,
) -> Option<JoinHandle<()>> {
    let _ = poll.registry().deregister(&mut c.stream);
    let stream: std::net::TcpStream = c.stream.into();
    let (owned, stop) = (shared.clone(), stop.clone());
    let (mut conn, buf) = (c.conn, c.buf);
    // Named so that `top -H` (and the tests) tell moved connections apart.
    let spawned = std::thread::Builder::new()
        .name("redis-moved".into())
        .spawn(move || {
            let shared = owned;
            let _guard = ClientGuard(&shared);
            let mut stream = stream;
            if stream.set_nonblocking(false).is_ok() && stream.set_read_timeout(Some(POLL)).is_ok()
            {
                let _ = conn.sink.flush();
                let _ = serve_connection(&shared, &mut stream, &mut conn, &stop, buf);
            }
            conn.close(&shared);
        });
    // A failed spawn drops the closure (and with it the socket) before its
    // guard existed: count the connection out here.
    match spawned {
        Ok(t) => Some(t),
        Err(_) => {
            shared.clients.fetch_sub(1, Ordering::SeqCst);
            None
        }
    }
}
