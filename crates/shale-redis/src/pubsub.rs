//! Pub/sub and the connection's output sink.
//!
//! Every connection writes its replies through a [`Sink`]: a buffer and the
//! socket under one mutex. PUBLISH appends the message to each subscriber's
//! sink and writes it out at once (the subscriber's thread is blocked
//! reading its socket, so it could not forward it without delay). Because
//! replies and messages go through the same buffer under the same lock, a
//! message never lands inside a reply, and a connection's subscription set
//! lives in its sink: SUBSCRIBE changes it and queues the confirmation under
//! that lock, and PUBLISH checks it under that lock, so a client sees
//! `subscribe` before the first message and nothing after `unsubscribe`.
//!
//! Messages from other threads (PUBLISH, tracking invalidations) never
//! wait for the subscriber's socket: they are appended to its buffer and
//! written with a non-blocking attempt; what the socket does not take is
//! written by the connection's own thread (after its next reply, or within
//! one read poll when idle). A client whose backlog passes its class's
//! `client-output-buffer-limit` (`crate::outbuf`) is disconnected, as in
//! Redis (docs/redis.md, "Output buffers").

use crate::glob;
use crate::resp::Reply;
use parking_lot::Mutex;
use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Instant;

/// Out-of-band output (messages, invalidations) may not wait beyond this
/// for a client of a class without a hard limit (`normal 0 0 0`): the
/// server's memory is bounded whatever the configuration.
pub const OUT_OF_BAND_CAP: usize = 32 << 20;

/// A connection's output: pending bytes, the socket, its subscriptions.
pub struct Sink {
    inner: Mutex<SinkInner>,
    /// A second handle on the socket, to shut it down without the lock.
    killer: Option<TcpStream>,
    /// A third, for the connection's own thread to write without the lock
    /// (while `SinkInner::writing` keeps other threads off the socket).
    writer: Option<TcpStream>,
    limits: Arc<crate::outbuf::Limits>,
}

struct SinkInner {
    stream: Option<TcpStream>,
    buf: Vec<u8>,
    resp3: bool,
    channels: BTreeSet<Vec<u8>>,
    patterns: BTreeSet<Vec<u8>>,
    /// Inside EXEC: (un)subscribe confirmations are collected here, to be
    /// elements of EXEC's reply, instead of being written.
    collect: Option<Vec<Reply>>,
    /// The connection's own thread is writing `inflight` bytes taken from
    /// `buf` without the lock: nobody else may write to the socket.
    writing: bool,
    inflight: usize,
    /// Since when the backlog has been over the soft limit.
    soft_since: Option<Instant>,
}

impl SinkInner {
    /// A (un)subscribe confirmation.
    fn confirm(&mut self, items: Vec<Reply>) {
        match &mut self.collect {
            Some(v) => v.push(Reply::Push(items)),
            None => self.push(items),
        }
    }

    fn count(&self) -> i64 {
        i64::try_from(self.channels.len() + self.patterns.len()).unwrap_or(i64::MAX)
    }

    /// Writes what the socket takes now without waiting (other threads'
    /// messages), unless the owner is writing. Err: the socket failed.
    fn write_nonblocking(&mut self) -> std::io::Result<()> {
        if self.writing || self.buf.is_empty() {
            return Ok(());
        }
        let Some(s) = &self.stream else {
            return Ok(());
        };
        // The flag is the file's: the owner's read loop sees a WouldBlock
        // (a poll timeout to it) while it is set.
        s.set_nonblocking(true)?;
        let mut done = 0;
        let mut w = s;
        let result = loop {
            match w.write(self.buf.get(done..).unwrap_or_default()) {
                Ok(0) => break Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    done += n;
                    if done >= self.buf.len() {
                        break Ok(());
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        let restored = s.set_nonblocking(false);
        self.buf.drain(..done.min(self.buf.len()));
        result.and(restored)
    }

    fn backlog(&self) -> usize {
        self.buf.len() + self.inflight
    }

    fn push(&mut self, items: Vec<Reply>) {
        Reply::Push(items).encode(&mut self.buf, self.resp3);
    }
}

impl Sink {
    /// A sink writing to `stream` (`None`: replies are only buffered).
    pub fn new(stream: Option<TcpStream>, limits: Arc<crate::outbuf::Limits>) -> Sink {
        let killer = stream.as_ref().and_then(|s| s.try_clone().ok());
        let writer = stream.as_ref().and_then(|s| s.try_clone().ok());
        Sink {
            writer,
            limits,
            inner: Mutex::new(SinkInner {
                stream,
                buf: Vec::with_capacity(16 * 1024),
                resp3: false,
                channels: BTreeSet::new(),
                patterns: BTreeSet::new(),
                collect: None,
                writing: false,
                inflight: 0,
                soft_since: None,
            }),
            killer,
        }
    }

    /// Appends `r`; returns the number of bytes now pending.
    pub fn append(&self, r: &Reply, resp3: bool) -> usize {
        let mut g = self.inner.lock();
        g.resp3 = resp3;
        r.encode(&mut g.buf, resp3);
        g.buf.len()
    }

    /// Writes what the socket takes now (an event-loop connection's socket
    /// is nonblocking) and keeps the rest; `Ok(true)` when nothing is left.
    /// The connection's own thread only.
    pub fn try_flush(&self) -> std::io::Result<bool> {
        let Some(w) = &self.writer else {
            self.inner.lock().buf.clear();
            return Ok(true);
        };
        let mut g = self.inner.lock();
        let mut done = 0;
        let result = loop {
            let Some(rest) = g.buf.get(done..).filter(|r| !r.is_empty()) else {
                break Ok(());
            };
            match (&mut &*w).write(rest) {
                Ok(0) => break Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        let len = g.buf.len();
        g.buf.drain(..done.min(len));
        result.map(|()| g.buf.is_empty())
    }

    /// Writes out everything pending, blocking (the connection's own
    /// thread only). The socket is written without the lock, so other
    /// threads' messages queue meanwhile instead of waiting for it.
    pub fn flush(&self) -> std::io::Result<()> {
        let Some(w) = &self.writer else {
            self.inner.lock().buf.clear();
            return Ok(());
        };
        loop {
            let mut bytes = {
                let mut g = self.inner.lock();
                if g.buf.is_empty() {
                    return Ok(());
                }
                let b = std::mem::take(&mut g.buf);
                g.writing = true;
                g.inflight = b.len();
                b
            };
            let r = (&mut &*w).write_all(&bytes);
            let mut g = self.inner.lock();
            g.writing = false;
            g.inflight = 0;
            r?;
            if g.buf.is_empty() {
                bytes.clear();
                g.buf = bytes; // keep the capacity
                return Ok(());
            }
        }
    }

    /// Appends an out-of-band message with `add` (false: nothing added),
    /// writes what the socket takes at once, and disconnects the client
    /// when its backlog passes its class's limits.
    fn deliver(&self, add: impl FnOnce(&mut SinkInner) -> bool) -> bool {
        let mut g = self.inner.lock();
        if !add(&mut g) {
            return false;
        }
        let failed = g.write_nonblocking().is_err();
        let backlog = g.backlog();
        let class = if g.count() > 0 {
            &self.limits.pubsub
        } else {
            &self.limits.normal
        };
        let (hard, soft, secs) = class.get();
        let as_u64 = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        let over_hard = (hard > 0 && as_u64(backlog) > hard) || backlog > OUT_OF_BAND_CAP;
        let over_soft = soft > 0 && as_u64(backlog) > soft;
        let soft_expired = if over_soft {
            let since = *g.soft_since.get_or_insert_with(Instant::now);
            since.elapsed().as_secs() >= secs
        } else {
            g.soft_since = None;
            false
        };
        if failed || over_hard || soft_expired {
            g.buf = Vec::new();
            drop(g);
            self.kill();
        }
        true
    }

    /// Channels plus patterns subscribed to.
    pub fn subscriptions(&self) -> i64 {
        self.inner.lock().count()
    }

    /// Bytes of output not written out yet (CLIENT LIST's omem).
    pub fn pending(&self) -> usize {
        self.inner.lock().backlog()
    }

    /// (channels, patterns) subscribed to (CLIENT LIST's sub / psub).
    pub fn subscription_counts(&self) -> (usize, usize) {
        let g = self.inner.lock();
        (g.channels.len(), g.patterns.len())
    }

    /// From now on (un)subscribe confirmations are collected (EXEC).
    pub fn start_collecting(&self) {
        self.inner.lock().collect = Some(Vec::new());
    }

    /// The confirmations collected since [`Sink::start_collecting`];
    /// confirmations are written again after this.
    pub fn take_collected(&self) -> Vec<Reply> {
        self.inner.lock().collect.take().unwrap_or_default()
    }

    /// The protocol of the connection's last reply (RESP3 after HELLO 3).
    pub fn resp3(&self) -> bool {
        self.inner.lock().resp3
    }

    /// Sends an out-of-band message (a tracking invalidation) from another
    /// connection's thread: appended after what is pending, never waiting
    /// for the socket (see `Sink::deliver`).
    pub fn push_out(&self, r: &Reply) {
        self.deliver(|g| {
            let resp3 = g.resp3;
            r.encode(&mut g.buf, resp3);
            true
        });
    }

    /// Shuts the socket down (CLIENT KILL, a slow subscriber): the
    /// connection's thread sees the end of its input and closes.
    pub fn kill(&self) {
        if let Some(k) = &self.killer {
            let _ = k.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// A subscriber: its connection id and sink.
type Subscriber = (u64, Arc<Sink>);

/// Who is subscribed to which channel and pattern (the server-wide index;
/// each sink holds the authoritative set of its own subscriptions).
#[derive(Default)]
pub struct PubSub {
    reg: Mutex<Registry>,
}

#[derive(Default)]
struct Registry {
    channels: HashMap<Vec<u8>, Vec<Subscriber>>,
    patterns: HashMap<Vec<u8>, Vec<Subscriber>>,
}

fn add(map: &mut HashMap<Vec<u8>, Vec<Subscriber>>, name: &[u8], id: u64, sink: &Arc<Sink>) {
    let list = map.entry(name.to_vec()).or_default();
    if !list.iter().any(|(c, _)| *c == id) {
        list.push((id, sink.clone()));
    }
}

fn remove(map: &mut HashMap<Vec<u8>, Vec<Subscriber>>, name: &[u8], id: u64) {
    if let Some(list) = map.get_mut(name) {
        list.retain(|(c, _)| *c != id);
        if list.is_empty() {
            map.remove(name);
        }
    }
}

/// Which kind of subscription a command changes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Pattern,
}

impl PubSub {
    /// SUBSCRIBE / PSUBSCRIBE: one confirmation per name, queued in the sink.
    pub fn subscribe(&self, id: u64, sink: &Arc<Sink>, kind: Kind, names: &[Vec<u8>]) {
        let mut g = sink.inner.lock();
        for n in names {
            let (set, word) = match kind {
                Kind::Channel => (&mut g.channels, "subscribe"),
                Kind::Pattern => (&mut g.patterns, "psubscribe"),
            };
            if set.insert(n.clone()) {
                let mut r = self.reg.lock();
                let map = match kind {
                    Kind::Channel => &mut r.channels,
                    Kind::Pattern => &mut r.patterns,
                };
                add(map, n, id, sink);
            }
            let count = g.count();
            g.confirm(vec![
                Reply::bulk(word),
                Reply::bulk(n.clone()),
                Reply::Int(count),
            ]);
        }
    }

    /// UNSUBSCRIBE / PUNSUBSCRIBE: `names` empty means all of that kind
    /// (one confirmation with a null name when there were none).
    pub fn unsubscribe(&self, id: u64, sink: &Sink, kind: Kind, names: &[Vec<u8>]) {
        let mut g = sink.inner.lock();
        let word = match kind {
            Kind::Channel => "unsubscribe",
            Kind::Pattern => "punsubscribe",
        };
        let names: Vec<Vec<u8>> = if names.is_empty() {
            match kind {
                Kind::Channel => g.channels.iter().cloned().collect(),
                Kind::Pattern => g.patterns.iter().cloned().collect(),
            }
        } else {
            names.to_vec()
        };
        if names.is_empty() {
            let count = g.count();
            g.confirm(vec![Reply::bulk(word), Reply::Nil, Reply::Int(count)]);
        }
        for n in names {
            let set = match kind {
                Kind::Channel => &mut g.channels,
                Kind::Pattern => &mut g.patterns,
            };
            if set.remove(&n) {
                let mut r = self.reg.lock();
                let map = match kind {
                    Kind::Channel => &mut r.channels,
                    Kind::Pattern => &mut r.patterns,
                };
                remove(map, &n, id);
            }
            let count = g.count();
            g.confirm(vec![Reply::bulk(word), Reply::bulk(n), Reply::Int(count)]);
        }
    }

    /// Drops every subscription of a closing connection (no confirmations).
    pub fn forget(&self, id: u64, sink: &Sink) {
        let mut g = sink.inner.lock();
        let mut r = self.reg.lock();
        for c in std::mem::take(&mut g.channels) {
            remove(&mut r.channels, &c, id);
        }
        for p in std::mem::take(&mut g.patterns) {
            remove(&mut r.patterns, &p, id);
        }
    }

    /// PUBLISH: delivers to the channel's subscribers and to every matching
    /// pattern's; returns the number of deliveries (a client once per
    /// channel subscription and once per matching pattern, as Redis counts).
    pub fn publish(&self, channel: &[u8], msg: &[u8]) -> i64 {
        // (sink, the pattern it matched; None: the channel itself)
        let mut targets: Vec<(Arc<Sink>, Option<Vec<u8>>)> = Vec::new();
        {
            let r = self.reg.lock();
            if let Some(list) = r.channels.get(channel) {
                targets.extend(list.iter().map(|(_, s)| (s.clone(), None)));
            }
            for (p, list) in &r.patterns {
                if glob::matches(p, channel) {
                    targets.extend(list.iter().map(|(_, s)| (s.clone(), Some(p.clone()))));
                }
            }
        }
        let mut delivered = 0;
        for (sink, pattern) in targets {
            let added = sink.deliver(|g| {
                let items = match &pattern {
                    None if g.channels.contains(channel) => vec![
                        Reply::bulk("message"),
                        Reply::bulk(channel),
                        Reply::bulk(msg),
                    ],
                    Some(p) if g.patterns.contains(p) => vec![
                        Reply::bulk("pmessage"),
                        Reply::bulk(p.clone()),
                        Reply::bulk(channel),
                        Reply::bulk(msg),
                    ],
                    _ => return false,
                };
                g.push(items);
                true
            });
            delivered += i64::from(added);
        }
        delivered
    }

    /// PUBSUB CHANNELS \[pattern\]: channels with at least one subscriber.
    pub fn channels(&self, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        let r = self.reg.lock();
        let mut out: Vec<Vec<u8>> = r
            .channels
            .keys()
            .filter(|c| pattern.is_none_or(|p| glob::matches(p, c)))
            .cloned()
            .collect();
        out.sort();
        out
    }

    /// PUBSUB NUMSUB: subscribers of `channel`.
    pub fn numsub(&self, channel: &[u8]) -> i64 {
        let r = self.reg.lock();
        r.channels
            .get(channel)
            .map_or(0, |l| i64::try_from(l.len()).unwrap_or(i64::MAX))
    }

    /// PUBSUB NUMPAT: distinct patterns subscribed to.
    pub fn numpat(&self) -> i64 {
        i64::try_from(self.reg.lock().patterns.len()).unwrap_or(i64::MAX)
    }
}
