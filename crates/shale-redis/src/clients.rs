//! The connected clients, as CLIENT LIST / INFO / KILL see them (Redis
//! 7.0's `catClientInfoString` line; docs/redis.md, "Server commands").
//!
//! Each connection registers a [`ClientInfo`]; its own thread refreshes
//! the shown state ([`Shown`]) before and after each command, so another
//! client's CLIENT LIST sees it as of its last command, as in Redis.

use crate::pubsub::Sink;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// What CLIENT LIST shows of a connection that changes with its commands.
#[derive(Clone, Debug)]
pub struct Shown {
    pub name: Vec<u8>,
    pub db: u8,
    /// Last command's start (idle=).
    pub last: Instant,
    /// Last command's full name (`client|list`).
    pub cmd: String,
    pub user: String,
    pub resp: u8,
    /// Commands queued in MULTI, -1 outside.
    pub multi: i64,
    /// Redis's flag letters (`N` for none).
    pub flags: String,
    /// CLIENT TRACKING REDIRECT target, -1 for none.
    pub redir: i64,
}

/// One connection.
pub struct ClientInfo {
    pub id: u64,
    pub addr: String,
    pub laddr: String,
    fd: i64,
    created: Instant,
    pub sink: Arc<Sink>,
    pub shown: Mutex<Shown>,
    /// Set by CLIENT KILL: gone for CLIENT LIST / KILL at once, as in
    /// Redis, although its thread unregisters it a moment later.
    killed: AtomicBool,
}

impl ClientInfo {
    /// Redis's `catClientInfoString` line (without the newline). Fields
    /// this server does not keep (query buffer, argv and reply-list
    /// sizes, sharded subscriptions) are 0; docs/redis.md lists them.
    pub fn line(&self) -> String {
        let s = self.shown.lock().clone();
        let (sub, psub) = self.sink.subscription_counts();
        let now = Instant::now();
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} \
             ssub=0 multi={} qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 \
             omem={} tot-mem=0 events=r cmd={} user={} redir={} resp={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            String::from_utf8_lossy(&s.name),
            now.duration_since(self.created).as_secs(),
            now.duration_since(s.last).as_secs(),
            s.flags,
            s.db,
            sub,
            psub,
            s.multi,
            self.sink.pending(),
            if s.cmd.is_empty() { "NULL" } else { &s.cmd },
            s.user,
            s.redir,
            s.resp,
        )
    }

    /// Closes the connection (its thread sees the end of its input).
    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.sink.kill();
    }

    /// CLIENT LIST TYPE's class.
    pub fn kind(&self) -> &'static str {
        if self.sink.subscriptions() > 0 {
            "pubsub"
        } else {
            "normal"
        }
    }
}

/// Every connection, by id.
#[derive(Default)]
pub struct Clients {
    map: Mutex<BTreeMap<u64, Arc<ClientInfo>>>,
}

impl Clients {
    /// Registers connection `id` on `stream` (None: a connection without
    /// a socket, as in unit tests).
    pub fn register(
        &self,
        id: u64,
        stream: Option<&std::net::TcpStream>,
        sink: &Arc<Sink>,
    ) -> Arc<ClientInfo> {
        let addr = |a: std::io::Result<std::net::SocketAddr>| {
            a.map_or_else(|_| String::new(), |a| a.to_string())
        };
        let now = Instant::now();
        let info = Arc::new(ClientInfo {
            id,
            addr: addr(
                stream.map_or(Err(std::io::ErrorKind::NotConnected.into()), |s| {
                    s.peer_addr()
                }),
            ),
            laddr: addr(
                stream.map_or(Err(std::io::ErrorKind::NotConnected.into()), |s| {
                    s.local_addr()
                }),
            ),
            fd: stream.map_or(-1, fd_of),
            created: now,
            sink: sink.clone(),
            shown: Mutex::new(Shown {
                name: Vec::new(),
                db: 0,
                last: now,
                cmd: String::new(),
                user: "default".into(),
                resp: 2,
                multi: -1,
                flags: "N".into(),
                redir: -1,
            }),
            killed: AtomicBool::new(false),
        });
        self.map.lock().insert(id, info.clone());
        info
    }

    pub fn unregister(&self, id: u64) {
        self.map.lock().remove(&id);
    }

    pub fn get(&self, id: u64) -> Option<Arc<ClientInfo>> {
        self.map
            .lock()
            .get(&id)
            .filter(|c| !c.killed.load(Ordering::SeqCst))
            .cloned()
    }

    /// Every connection not killed, by id.
    pub fn all(&self) -> Vec<Arc<ClientInfo>> {
        self.map
            .lock()
            .values()
            .filter(|c| !c.killed.load(Ordering::SeqCst))
            .cloned()
            .collect()
    }
}

#[cfg(unix)]
fn fd_of(s: &std::net::TcpStream) -> i64 {
    use std::os::fd::AsRawFd;
    i64::from(s.as_raw_fd())
}

#[cfg(not(unix))]
fn fd_of(_: &std::net::TcpStream) -> i64 {
    -1
}
