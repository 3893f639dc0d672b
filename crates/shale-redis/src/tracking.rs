//! Client-side caching (Redis 6+ `CLIENT TRACKING`, docs/redis.md
//! "Client-side caching"): which client read which key, and the
//! invalidation messages sent when a key is written.
//!
//! Default mode remembers the keys a tracking client reads (key names,
//! across databases, as Redis's tracking table); a write to a remembered
//! key sends one `invalidate` message per key to each client that read it
//! and forgets the key. BCAST mode remembers nothing: a write to a key
//! under one of the client's prefixes is reported, one message per prefix
//! per write. FLUSHDB / FLUSHALL send every tracking client a null
//! invalidation. A message for the writing client itself is sent after
//! its reply ([`Tracking::take_pending`]), as Redis 7.0 does.

use crate::pubsub::Sink;
use crate::resp::Reply;
use parking_lot::Mutex;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The RESP2 channel invalidations are redirected to.
pub const CHANNEL: &str = "__redis__:invalidate";

/// One client's tracking options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tracker {
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// Client id the messages go to; 0: the client itself.
    pub redirect: u64,
    /// BCAST prefixes (an empty prefix matches every key).
    pub prefixes: Vec<Vec<u8>>,
    /// CLIENT CACHING yes (OPTIN) / no (OPTOUT) for the next command.
    pub caching: bool,
    /// The redirect client went away.
    pub broken: bool,
}

#[derive(Default)]
struct Inner {
    /// Every connection's sink, by client id (redirect targets).
    clients: HashMap<u64, Arc<Sink>>,
    trackers: HashMap<u64, Tracker>,
    /// Key name -> ids of the clients that read it (default mode).
    table: HashMap<Vec<u8>, BTreeSet<u64>>,
    /// Messages for a client about its own writes, sent after its reply.
    pending: HashMap<u64, Vec<Reply>>,
}

#[derive(Default)]
pub struct Tracking {
    /// Number of tracking clients: writes skip all of this when 0.
    active: AtomicUsize,
    inner: Mutex<Inner>,
}

/// Where a message for a tracking client goes, and in which form.
enum Route {
    Deliver(u64, Arc<Sink>),
    /// The redirect client is gone: RESP3 clients hear about it.
    Broken(u64),
    Nowhere,
}

impl Tracking {
    /// True when some client tracks.
    pub fn any(&self) -> bool {
        self.active.load(Ordering::SeqCst) > 0
    }

    /// Clients with tracking on (INFO `tracking_clients`).
    pub fn tracking_clients(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }

    pub fn register(&self, id: u64, sink: &Arc<Sink>) {
        self.inner.lock().clients.insert(id, sink.clone());
    }

    pub fn unregister(&self, id: u64) {
        let mut g = self.inner.lock();
        g.clients.remove(&id);
        g.pending.remove(&id);
        if g.trackers.remove(&id).is_some() {
            self.active.fetch_sub(1, Ordering::SeqCst);
        }
    }

    pub fn client_exists(&self, id: u64) -> bool {
        self.inner.lock().clients.contains_key(&id)
    }

    pub fn get(&self, id: u64) -> Option<Tracker> {
        self.inner.lock().trackers.get(&id).cloned()
    }

    /// Turns tracking on with `t` (replacing the options) or off (None).
    pub fn set(&self, id: u64, t: Option<Tracker>) {
        let mut g = self.inner.lock();
        let was = match t {
            Some(t) => g.trackers.insert(id, t).is_some(),
            None => {
                let was = g.trackers.remove(&id).is_some();
                if was {
                    self.active.fetch_sub(1, Ordering::SeqCst);
                }
                return;
            }
        };
        if !was {
            self.active.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Sets the CACHING flag of a tracking client.
    pub fn set_caching(&self, id: u64, on: bool) {
        if let Some(t) = self.inner.lock().trackers.get_mut(&id) {
            t.caching = on;
        }
    }

    /// After a read-only command of client `id`: remember `keys` if the
    /// client tracks in default mode and this command counts (OPTIN: only
    /// after CACHING yes; OPTOUT: unless CACHING no). Then the CACHING flag
    /// is spent.
    pub fn after_command(&self, id: u64, keys: &[Vec<u8>], readonly: bool, caching_cmd: bool) {
        if self.active.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut g = self.inner.lock();
        let Some(t) = g.trackers.get_mut(&id) else {
            return;
        };
        let track = !t.bcast
            && readonly
            && if t.optin {
                t.caching
            } else if t.optout {
                !t.caching
            } else {
                true
            };
        if !caching_cmd {
            t.caching = false;
        }
        if track {
            for k in keys {
                g.table.entry(k.clone()).or_default().insert(id);
            }
        }
    }

    fn route(g: &mut Inner, id: u64) -> Route {
        let Some(t) = g.trackers.get_mut(&id) else {
            return Route::Nowhere;
        };
        let target = if t.redirect == 0 { id } else { t.redirect };
        match g.clients.get(&target) {
            Some(s) => Route::Deliver(target, s.clone()),
            None => {
                t.broken = true;
                Route::Broken(t.redirect)
            }
        }
    }

    /// The message `keys` (None: flush) for `sink`'s protocol; None when it
    /// cannot take one (RESP2 without a subscription, as Redis).
    fn message(sink: &Sink, redirected: bool, keys: Option<&[Vec<u8>]>) -> Option<Reply> {
        let payload = match keys {
            Some(k) => Reply::Array(k.iter().map(|k| Reply::Bulk(k.clone())).collect()),
            None => Reply::Nil,
        };
        if sink.resp3() {
            Some(Reply::Push(vec![Reply::bulk("invalidate"), payload]))
        } else if redirected && sink.subscriptions() > 0 {
            Some(Reply::Push(vec![
                Reply::bulk("message"),
                Reply::bulk(CHANNEL),
                payload,
            ]))
        } else {
            None
        }
    }

    /// Sends `keys` (None: flush) to tracking client `id`: now, or after
    /// the reply when the recipient is the writer.
    fn send(&self, g: &mut Inner, id: u64, writer: u64, keys: Option<&[Vec<u8>]>) {
        match Self::route(g, id) {
            Route::Nowhere => {}
            Route::Broken(redir) => {
                let sink = g.clients.get(&id).cloned();
                if let Some(sink) = sink.filter(|s| s.resp3()) {
                    let n = i64::try_from(redir).unwrap_or(i64::MAX);
                    let m = Reply::Push(vec![Reply::bulk("tracking-redir-broken"), Reply::Int(n)]);
                    self.out(g, id, writer, &sink, m);
                }
            }
            Route::Deliver(target, sink) => {
                if let Some(m) = Self::message(&sink, target != id, keys) {
                    self.out(g, target, writer, &sink, m);
                }
            }
        }
    }

    fn out(&self, g: &mut Inner, target: u64, writer: u64, sink: &Sink, m: Reply) {
        if target == writer {
            g.pending.entry(target).or_default().push(m);
        } else {
            sink.push_out(&m);
        }
    }

    /// Client `writer` (0: the server) modified `keys` (names, in write
    /// order, each once).
    pub fn invalidate(&self, writer: u64, keys: &[Vec<u8>]) {
        if self.active.load(Ordering::SeqCst) == 0 || keys.is_empty() {
            return;
        }
        let mut g = self.inner.lock();
        for k in keys {
            let Some(ids) = g.table.remove(k) else {
                continue;
            };
            for id in ids {
                let skip = match g.trackers.get(&id) {
                    Some(t) => t.bcast || (t.noloop && id == writer),
                    None => true,
                };
                if !skip {
                    self.send(&mut g, id, writer, Some(std::slice::from_ref(k)));
                }
            }
        }
        let bcast: Vec<(u64, Tracker)> = g
            .trackers
            .iter()
            .filter(|(_, t)| t.bcast)
            .map(|(id, t)| (*id, t.clone()))
            .collect();
        for (id, t) in bcast {
            if t.noloop && id == writer {
                continue;
            }
            for p in &t.prefixes {
                let hit: Vec<Vec<u8>> = keys.iter().filter(|k| k.starts_with(p)).cloned().collect();
                if !hit.is_empty() {
                    self.send(&mut g, id, writer, Some(&hit));
                }
            }
        }
    }

    /// FLUSHDB / FLUSHALL by `writer`: a null invalidation to every
    /// tracking client; the table is emptied.
    pub fn flush(&self, writer: u64) {
        if self.active.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut g = self.inner.lock();
        g.table.clear();
        let ids: Vec<u64> = g.trackers.keys().copied().collect();
        for id in ids {
            self.send(&mut g, id, writer, None);
        }
    }

    /// The messages about `id`'s own writes, to send after its reply.
    pub fn take_pending(&self, id: u64) -> Vec<Reply> {
        if self.active.load(Ordering::SeqCst) == 0 {
            return Vec::new();
        }
        self.inner.lock().pending.remove(&id).unwrap_or_default()
    }
}
