//! The event-driven network layer (server.rs): a slow statement or a client
//! that stops reading holds its own connection only; `max_connections`;
//! connections opened and dropped leave nothing behind; KILL and shutdown
//! reach a connection wherever it waits.
//!
//! The backend is a fixture (`SLEEP n`, `BIG n`, `SELECT 1`, `SHOW STATUS`,
//! `KILL id`) and the client is raw packets, so each test is quick. Every
//! assertion is on completion and ordering, with generous timeouts, never
//! on a timing figure.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shale_server::backend::{
    Backend, Column, ConnInfo, Executed, Prepared, Reply, Session, SqlError, Value,
};
use shale_server::mysql::auth::{native_token, Credentials};
use shale_server::mysql::consts::ColumnType;
use shale_server::server::{Server, ServerConfig, Shared, ShutdownHandle, ThreadHandling};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the fixture's statements did, for the tests to look at.
#[derive(Default)]
struct Probe {
    /// A `SLEEP` is running.
    sleeping: AtomicBool,
    /// `BIG` statements run so far.
    bigs: AtomicUsize,
}

struct Fixture(Arc<Probe>);

struct FixtureSession {
    info: ConnInfo,
    probe: Arc<Probe>,
}

impl Backend for Fixture {
    type Session = FixtureSession;
    fn credentials(&self, user: &str, _host: &str) -> Option<Credentials> {
        (user == "root").then(|| Credentials::from_password("pw"))
    }
    fn open_session(&self, info: &ConnInfo) -> Result<FixtureSession, SqlError> {
        Ok(FixtureSession {
            info: info.clone(),
            probe: self.0.clone(),
        })
    }
}

fn one_column(name: &str, rows: Vec<Vec<Value>>) -> Reply {
    Reply::Rows {
        columns: vec![Column::new(name, ColumnType::VarString)].into(),
        rows,
    }
}

impl Session for FixtureSession {
    fn query(&mut self, sql: &str) -> Vec<Result<Reply, SqlError>> {
        vec![self.one(sql.trim())]
    }
    fn set_database(&mut self, _db: &str) -> Result<(), SqlError> {
        Ok(())
    }
    fn in_transaction(&self) -> bool {
        false
    }
    fn autocommit(&self) -> bool {
        true
    }
    fn reset(&mut self) -> Result<(), SqlError> {
        Ok(())
    }
    fn prepare(&mut self, _id: u32, _sql: &str) -> Result<Prepared, SqlError> {
        Err(SqlError::new(1064, *b"42000", "fixture prepares nothing"))
    }
    fn execute(&mut self, _id: u32, _params: &[Value]) -> Result<Executed, SqlError> {
        Err(SqlError::new(1243, *b"HY000", "fixture prepares nothing"))
    }
    fn close_statement(&mut self, _id: u32) {}
}

impl FixtureSession {
    fn one(&mut self, sql: &str) -> Result<Reply, SqlError> {
        let shared = &self.info.shared;
        if let Some(secs) = sql.strip_prefix("SLEEP ") {
            // Blocks its executor thread the way a row-lock wait does, and
            // polls KILL QUERY the way a scan does.
            let flag = shared.processes.interrupt_flag(self.info.id).unwrap();
            let until = Instant::now() + Duration::from_secs(secs.parse().unwrap());
            self.probe.sleeping.store(true, Ordering::SeqCst);
            let interrupted = loop {
                if flag.load(Ordering::Acquire) {
                    break true;
                }
                if Instant::now() >= until {
                    break false;
                }
                std::thread::sleep(Duration::from_millis(5));
            };
            self.probe.sleeping.store(false, Ordering::SeqCst);
            if interrupted {
                return Err(SqlError::new(
                    1317,
                    *b"70100",
                    "Query execution was interrupted",
                ));
            }
            return Ok(one_column("SLEEP", vec![vec![Value::Int(0)]]));
        }
        if let Some(mib) = sql.strip_prefix("BIG ") {
            // `mib` MiB of result in 1 KiB rows.
            self.probe.bigs.fetch_add(1, Ordering::SeqCst);
            let n: usize = mib.parse().unwrap();
            let row = vec![Value::Bytes(vec![b'x'; 1024])];
            return Ok(one_column("big", vec![row; n * 1024]));
        }
        if sql == "SHOW STATUS" {
            let rows = shared
                .stats
                .status_rows()
                .into_iter()
                .map(|(k, v)| vec![Value::Bytes(format!("{k}={v}").into_bytes())])
                .collect();
            return Ok(one_column("status", rows));
        }
        if let Some(id) = sql.strip_prefix("KILL ") {
            shared.processes.kill(id.parse().unwrap(), true);
            return Ok(Reply::ok());
        }
        if sql == "SELECT 1" {
            return Ok(one_column("1", vec![vec![Value::Int(1)]]));
        }
        Err(SqlError::new(
            1064,
            *b"42000",
            format!("fixture cannot run: {sql}"),
        ))
    }
}

struct Running {
    addr: SocketAddr,
    shared: Arc<Shared>,
    probe: Arc<Probe>,
    stop: ShutdownHandle,
    done: std::sync::mpsc::Receiver<std::io::Result<()>>,
}

impl Running {
    /// Shuts the server down; it must have returned within 20 s.
    fn stop(self) {
        self.stop.shutdown();
        let r = self
            .done
            .recv_timeout(Duration::from_secs(20))
            .expect("Server::run did not return after shutdown");
        r.unwrap();
    }
}

/// One I/O thread, and `executors` executor threads (pool of threads):
/// the tightest setup, where any stall of an I/O or executor thread would
/// show. With one thread per connection the executors are not used.
fn start(handling: ThreadHandling, executors: usize, max_connections: usize) -> Running {
    let probe = Arc::new(Probe::default());
    let cfg = ServerConfig {
        max_connections,
        io_threads: 1,
        executor_threads: Some(executors),
        thread_handling: handling,
        ..ServerConfig::default()
    };
    let backend = Arc::new(Fixture(probe.clone()));
    let server = Server::bind("127.0.0.1:0".parse().unwrap(), backend, cfg).unwrap();
    let addr = server.local_addr().unwrap();
    let stop = server.shutdown_handle().unwrap();
    let shared = server.shared();
    let (tx, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(server.run());
    });
    Running {
        addr,
        shared,
        probe,
        stop,
        done,
    }
}

fn read_packet(c: &mut TcpStream) -> Vec<u8> {
    let mut h = [0u8; 4];
    c.read_exact(&mut h).unwrap();
    let len = usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16;
    let mut body = vec![0; len];
    c.read_exact(&mut body).unwrap();
    body
}

fn connect(addr: SocketAddr) -> TcpStream {
    let c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c
}

/// Logs in as root (HandshakeResponse41, mysql_native_password); returns
/// the first packet after the response (OK on success).
fn try_login(addr: SocketAddr) -> (TcpStream, Vec<u8>) {
    let mut c = connect(addr);
    let g = read_packet(&mut c);
    if g[0] == 0xff {
        return (c, g); // refused at the greeting (1040)
    }
    let ver_end = g.iter().position(|&b| b == 0).unwrap();
    let p = ver_end + 1 + 4;
    let mut nonce = [0u8; 20];
    nonce[..8].copy_from_slice(&g[p..p + 8]);
    let p2 = p + 8 + 1 + 2 + 1 + 2 + 2 + 1 + 10;
    nonce[8..].copy_from_slice(&g[p2..p2 + 12]);
    let caps: u32 = (1 << 9) | (1 << 15) | (1 << 19);
    let mut r = Vec::new();
    r.extend_from_slice(&caps.to_le_bytes());
    r.extend_from_slice(&(16u32 << 20).to_le_bytes());
    r.push(45);
    r.extend_from_slice(&[0; 23]);
    r.extend_from_slice(b"root\0");
    let token = native_token("pw", &nonce);
    r.push(u8::try_from(token.len()).unwrap());
    r.extend_from_slice(&token);
    r.extend_from_slice(b"mysql_native_password\0");
    let l = u32::try_from(r.len()).unwrap().to_le_bytes();
    c.write_all(&[l[0], l[1], l[2], 1]).unwrap();
    c.write_all(&r).unwrap();
    let reply = read_packet(&mut c);
    (c, reply)
}

fn login(addr: SocketAddr) -> TcpStream {
    let (c, reply) = try_login(addr);
    assert_eq!(reply[0], 0x00, "login failed: {reply:?}");
    c
}

/// Sends `COM_QUERY sql` without reading the reply.
fn send_query(c: &mut TcpStream, sql: &str) {
    let mut p = vec![0x03];
    p.extend_from_slice(sql.as_bytes());
    let l = u32::try_from(p.len()).unwrap().to_le_bytes();
    c.write_all(&[l[0], l[1], l[2], 0]).unwrap();
    c.write_all(&p).unwrap();
}

/// Reads one reply: the rows of a result set (each a single lenenc
/// string), or `Err(code)` for an ERR packet; OK is no rows.
fn read_reply(c: &mut TcpStream) -> Result<Vec<Vec<u8>>, u16> {
    let first = read_packet(c);
    match first[0] {
        0x00 => return Ok(Vec::new()),
        0xff => return Err(u16::from_le_bytes([first[1], first[2]])),
        _ => {}
    }
    let columns = usize::from(first[0]);
    for _ in 0..columns {
        read_packet(c);
    }
    assert_eq!(read_packet(c)[0], 0xfe, "EOF after the column definitions");
    let mut rows = Vec::new();
    loop {
        let p = read_packet(c);
        if p[0] == 0xfe && p.len() < 9 {
            return Ok(rows);
        }
        if p[0] == 0xff {
            return Err(u16::from_le_bytes([p[1], p[2]]));
        }
        // A lenenc string: 1-byte length, or 0xfc + 2 bytes.
        let v = if p[0] == 0xfc {
            p[3..].to_vec()
        } else {
            p[1..].to_vec()
        };
        rows.push(v);
    }
}

fn query(c: &mut TcpStream, sql: &str) -> Result<Vec<Vec<u8>>, u16> {
    send_query(c, sql);
    read_reply(c)
}

fn status(c: &mut TcpStream, name: &str) -> u64 {
    let rows = query(c, "SHOW STATUS").unwrap();
    let prefix = format!("{name}=");
    rows.iter()
        .find_map(|r| {
            std::str::from_utf8(r)
                .unwrap()
                .strip_prefix(&prefix)
                .map(|v| v.parse().unwrap())
        })
        .unwrap()
}

/// Waits up to 20 s for `cond`.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < until, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A statement that blocks its executor thread for seconds does not delay
/// other connections: on one I/O thread and two executor threads, three
/// other connections answer 20 `SELECT 1` each while it still runs.
fn a_slow_statement_does_not_stall_other_connections(handling: ThreadHandling) {
    let s = start(handling, 2, 10);
    let mut slow = login(s.addr);
    send_query(&mut slow, "SLEEP 8");
    let probe = s.probe.clone();
    eventually("the slow statement started", || {
        probe.sleeping.load(Ordering::SeqCst)
    });
    let mut others: Vec<TcpStream> = (0..3).map(|_| login(s.addr)).collect();
    for _ in 0..20 {
        for c in &mut others {
            assert_eq!(query(c, "SELECT 1").unwrap(), vec![b"1".to_vec()]);
        }
    }
    assert!(
        s.probe.sleeping.load(Ordering::SeqCst),
        "the others finished only after the slow statement"
    );
    // KILL QUERY's flag reaches it on its executor thread; its connection
    // gets 1317 and lives on.
    let id = s
        .shared
        .processes
        .rows()
        .iter()
        .find(|r| r.command == "Query")
        .unwrap()
        .id;
    s.shared.processes.kill(id, false);
    assert_eq!(read_reply(&mut slow), Err(1317));
    assert_eq!(query(&mut slow, "SELECT 1").unwrap(), vec![b"1".to_vec()]);
    s.stop();
}

/// A client that asks for a large result and stops reading holds its own
/// reply only: with one executor thread, other clients keep being served;
/// the server reads none of the reader's further commands until the reply
/// is taken (so it buffers one reply, not five); then all five arrive
/// whole.
#[test]
fn a_client_that_stops_reading_does_not_block_others() {
    let s = start(ThreadHandling::PoolOfThreads, 1, 10);
    let mut lazy = login(s.addr);
    for _ in 0..5 {
        send_query(&mut lazy, "BIG 32");
    }
    let probe = s.probe.clone();
    eventually("the first BIG ran", || {
        probe.bigs.load(Ordering::SeqCst) >= 1
    });
    let mut other = login(s.addr);
    for _ in 0..50 {
        assert_eq!(query(&mut other, "SELECT 1").unwrap(), vec![b"1".to_vec()]);
    }
    assert_eq!(
        s.probe.bigs.load(Ordering::SeqCst),
        1,
        "commands were read while a reply was still unsent"
    );
    for _ in 0..5 {
        let rows = read_reply(&mut lazy).unwrap();
        assert_eq!(rows.len(), 32 * 1024);
        assert!(rows.iter().all(|r| r.len() == 1024 && r[0] == b'x'));
    }
    assert_eq!(s.probe.bigs.load(Ordering::SeqCst), 5);
    // KILL CONNECTION reaches a connection blocked in its write.
    send_query(&mut lazy, "BIG 32");
    eventually("the sixth BIG ran", || {
        probe.bigs.load(Ordering::SeqCst) == 6
    });
    let id = s
        .shared
        .processes
        .rows()
        .iter()
        .map(|r| r.id)
        .min()
        .unwrap();
    assert_eq!(
        query(&mut other, &format!("KILL {id}")).unwrap(),
        Vec::<Vec<u8>>::new()
    );
    eventually("the killed connection ended", || {
        s.shared.processes.len() == 1
    });
    s.stop();
}

/// `max_connections` connections are served; one more is refused with 1040
/// at the greeting; a slot freed is usable again.
fn connections_beyond_max_connections_get_1040(handling: ThreadHandling) {
    let s = start(handling, 4, 3);
    let mut held: Vec<TcpStream> = (0..3).map(|_| login(s.addr)).collect();
    let (_, refused) = try_login(s.addr);
    assert_eq!(refused[0], 0xff);
    assert_eq!(u16::from_le_bytes([refused[1], refused[2]]), 1040);
    assert_eq!(&refused[3..9], b"#08004");
    drop(held.pop());
    let shared = s.shared.clone();
    eventually("the slot was freed", || shared.processes.len() == 2);
    let mut again = login(s.addr);
    assert_eq!(query(&mut again, "SELECT 1").unwrap(), vec![b"1".to_vec()]);
    s.stop();
}

/// Many connections opened and dropped at every stage (before the
/// greeting is read, mid-handshake, logged in, mid-command, with a result
/// unread) leave no task, session or process-list entry behind.
fn connections_opened_and_dropped_leave_nothing_behind(handling: ThreadHandling) {
    let s = start(handling, 4, 1000);
    for i in 0..300 {
        match i % 5 {
            0 => drop(TcpStream::connect(s.addr).unwrap()),
            1 => {
                let mut c = connect(s.addr);
                read_packet(&mut c);
                c.write_all(&[50, 0, 0, 1, 1, 2]).unwrap(); // half a response
            }
            2 => drop(login(s.addr)),
            3 => {
                let mut c = login(s.addr);
                c.write_all(&[9, 0, 0, 0, 3, b'S']).unwrap(); // half a command
            }
            _ => {
                let mut c = login(s.addr);
                send_query(&mut c, "BIG 1");
            }
        }
    }
    let mut me = login(s.addr);
    let shared = s.shared.clone();
    eventually("every dropped connection ended", || {
        shared.processes.len() == 1
    });
    assert_eq!(status(&mut me, "Threads_connected"), 1);
    assert!(status(&mut me, "Connections") >= 301);
    s.stop();
}

/// Shutdown ends connections wherever they wait: one running a statement,
/// one not reading its result, one idle, one mid-handshake.
fn shutdown_reaches_every_connection(handling: ThreadHandling) {
    let s = start(handling, 4, 10);
    let mut sleeper = login(s.addr);
    send_query(&mut sleeper, "SLEEP 60");
    let mut lazy = login(s.addr);
    send_query(&mut lazy, "BIG 32");
    let _idle = login(s.addr);
    let mut half = connect(s.addr);
    read_packet(&mut half);
    let probe = s.probe.clone();
    eventually("the statements ran", || {
        probe.sleeping.load(Ordering::SeqCst) && probe.bigs.load(Ordering::SeqCst) == 1
    });
    let shared = s.shared.clone();
    s.stop();
    assert_eq!(shared.processes.len(), 0);
    assert_eq!(shared.stats.threads_connected.load(Ordering::SeqCst), 0);
    // The sleeper saw its statement interrupted or its socket closed.
    let mut rest = Vec::new();
    let _ = sleeper.read_to_end(&mut rest);
}

#[test]
fn a_slow_statement_does_not_stall_other_connections_pool_of_threads() {
    a_slow_statement_does_not_stall_other_connections(ThreadHandling::PoolOfThreads);
}

#[test]
fn a_slow_statement_does_not_stall_other_connections_one_thread_per_connection() {
    a_slow_statement_does_not_stall_other_connections(ThreadHandling::OneThreadPerConnection);
}

#[test]
fn connections_beyond_max_connections_get_1040_pool_of_threads() {
    connections_beyond_max_connections_get_1040(ThreadHandling::PoolOfThreads);
}

#[test]
fn connections_beyond_max_connections_get_1040_one_thread_per_connection() {
    connections_beyond_max_connections_get_1040(ThreadHandling::OneThreadPerConnection);
}

#[test]
fn connections_opened_and_dropped_leave_nothing_behind_pool_of_threads() {
    connections_opened_and_dropped_leave_nothing_behind(ThreadHandling::PoolOfThreads);
}

#[test]
fn connections_opened_and_dropped_leave_nothing_behind_one_thread_per_connection() {
    connections_opened_and_dropped_leave_nothing_behind(ThreadHandling::OneThreadPerConnection);
}

#[test]
fn shutdown_reaches_every_connection_pool_of_threads() {
    shutdown_reaches_every_connection(ThreadHandling::PoolOfThreads);
}

#[test]
fn shutdown_reaches_every_connection_one_thread_per_connection() {
    shutdown_reaches_every_connection(ThreadHandling::OneThreadPerConnection);
}
