//! Running the requests a connection has sent: shared by the event loops
//! (`reactor`) and the thread-per-connection path (`server`).

use crate::commands::pipeline::{Pipeline, MAX_BATCH};
use crate::commands::{dispatch, is_blocking, Conn, Shared};
use crate::durability::Appendfsync;
use crate::pubsub::Sink;
use crate::resp::{parse_request, Parsed, Reply};

/// Replies are written out once this many bytes are pending.
pub(crate) const OUT_FLUSH: usize = 64 * 1024;

/// What became of a buffer of requests.
#[derive(Debug)]
pub(crate) struct Ran {
    /// Bytes of the buffer consumed (complete requests run).
    pub used: usize,
    /// Close the connection once the replies are out (QUIT, a protocol error).
    pub close: bool,
    /// `inline` only: the connection must move to a thread of its own
    /// (the next request may block, or the socket did not take the replies).
    pub handoff: bool,
}

/// Runs every complete request in `buf`, in order, appending the replies to
/// the connection's sink; runs of data commands share one commit
/// (`commands::pipeline`).
///
/// `inline`: on an event-loop thread, which serves many connections and so
/// must not block on one. A request that may wait ([`needs_thread`]) is not
/// run: `handoff` is set and `used` stops before it. So does a connection
/// that has become a target of other threads' messages (subscribed, or
/// tracking), and a reply backlog the socket does not take at once.
///
/// The batch `pipe` may already hold other connections' requests (an event
/// loop batches everything ready in one turn) and may be left unfinished:
/// the caller finishes it before the replies are written.
pub(crate) fn run_requests<'a>(
    shared: &'a Shared,
    conn: &mut Conn,
    buf: &[u8],
    inline: bool,
    pipe: &mut Pipeline<'a>,
) -> std::io::Result<Ran> {
    let sink = conn.sink.clone();
    pipe.restart_clock();
    let mut ran = Ran {
        used: 0,
        close: false,
        handoff: false,
    };
    while ran.used < buf.len() {
        match parse_request(buf.get(ran.used..).unwrap_or_default()) {
            Ok(Parsed::Incomplete) => break,
            Ok(Parsed::Request(args, used)) => {
                if inline && needs_thread(shared, &args) {
                    ran.handoff = true;
                    break;
                }
                ran.used += used;
                if args.is_empty() {
                    continue; // empty inline line or *0: no reply, like Redis
                }
                if pipe.try_run(shared, conn, &args) {
                    if conn.quit {
                        ran.close = true;
                        break;
                    }
                    if pipe.len() >= MAX_BATCH {
                        pipe.finish(shared);
                        if sink.pending() >= OUT_FLUSH && !flush(&sink, inline)? {
                            ran.handoff = true;
                            break;
                        }
                    }
                    continue;
                }
                pipe.finish(shared);
                let reply = dispatch(shared, conn, &args);
                let mut pending = sink.append(&reply, conn.resp3);
                // Invalidations of keys this client itself wrote follow its
                // reply (CLIENT TRACKING).
                for m in shared.store.tracking().take_pending(conn.id) {
                    pending = sink.append(&m, conn.resp3);
                }
                if conn.quit {
                    ran.close = true;
                    break;
                }
                if (pending >= OUT_FLUSH && !flush(&sink, inline)?)
                    || (inline && receives_messages(shared, conn))
                {
                    ran.handoff = true;
                    break;
                }
            }
            Err(e) => {
                pipe.finish(shared);
                sink.append(&Reply::err(format!("ERR Protocol error: {e}")), conn.resp3);
                ran.close = true;
                break;
            }
        }
    }
    Ok(ran)
}

/// Writes the pending replies: blocking on a thread of its own; without
/// waiting on an event loop (`false`: the socket did not take them all).
fn flush(sink: &Sink, inline: bool) -> std::io::Result<bool> {
    if inline {
        sink.try_flush()
    } else {
        sink.flush().map(|()| true)
    }
}

/// Requests an event loop does not run, because they may wait: blocking
/// pops, DEBUG (SLEEP), subscribing and CLIENT TRACKING (other threads then
/// write to the socket), and every request under `appendfsync always`
/// (each write waits for an fsync).
pub(crate) fn needs_thread(shared: &Shared, args: &[Vec<u8>]) -> bool {
    if shared.store.appendfsync() == Appendfsync::Always {
        return true;
    }
    let Some(first) = args.first() else {
        return false;
    };
    let name = String::from_utf8_lossy(first).to_ascii_lowercase();
    is_blocking(&name)
        || matches!(
            name.as_str(),
            "debug" | "subscribe" | "psubscribe" | "ssubscribe" | "monitor" | "wait"
        )
        || (name == "client"
            && args
                .get(1)
                .is_some_and(|s| s.eq_ignore_ascii_case(b"tracking")))
}

/// Whether other threads now write to this connection's socket (it
/// subscribed, e.g. inside EXEC, or turned tracking on): such a connection
/// lives on a thread of its own.
fn receives_messages(shared: &Shared, conn: &Conn) -> bool {
    let t = shared.store.tracking();
    conn.sink.subscriptions() > 0 || (t.any() && t.get(conn.id).is_some())
}
