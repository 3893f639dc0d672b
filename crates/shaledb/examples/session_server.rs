//! A tiny transactional key-value server built on the public API only.
//!
//! Requests are stateless, as in HTTP: every TCP connection carries one line,
//! `SESSION COMMAND [ARGS]`, gets one reply line and is closed. Open
//! transactions live in a session map, so one transaction spans many
//! requests, each served by whichever worker thread accepted it. That works
//! because a [`Txn`] owns its database handle: it is `Send + 'static`.
//!
//! ```text
//! 7 begin            -> OK          (SI by default; `begin rc` / `begin ser`)
//! 7 put k v          -> OK
//! 7 get k            -> VALUE v     (own write, not yet visible to others)
//! 8 get k            -> NIL         (session 8 has no transaction: autocommit read)
//! 7 commit           -> OK
//! ```
//!
//! Run it: `cargo run -p shaledb --example session_server -- /tmp/kvdb 127.0.0.1:7878`
//! then `echo "1 put k v" | nc -q1 127.0.0.1 7878`. Its test drives four
//! clients at once (`cargo test -p shaledb --example session_server`).

use shaledb::txn::{Isolation, Txn, TxnOptions};
use shaledb::{Db, Error, Options};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// Open transactions by session id. The mutex guards only the map: a worker
/// takes the session's transaction out, works on it unlocked, and puts it
/// back, so sessions never wait for one another here (two requests of the
/// same session at once: the second finds no transaction and says so).
type Sessions = Arc<Mutex<HashMap<u64, Txn>>>;

/// Serves `workers` threads on `listener` until a `0 shutdown` request.
pub fn serve(db: Db, listener: TcpListener, workers: usize) -> std::io::Result<()> {
    let sessions: Sessions = Arc::default();
    let listener = Arc::new(listener);
    let handles: Vec<_> = (0..workers)
        .map(|_| {
            let (db, sessions, listener) = (db.clone(), sessions.clone(), listener.clone());
            std::thread::spawn(move || -> std::io::Result<()> {
                loop {
                    let (stream, _) = listener.accept()?;
                    if !handle(&db, &sessions, stream)? {
                        return Ok(());
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join()
            .map_err(|_| std::io::Error::other("worker panicked"))??;
    }
    Ok(())
}

/// One request. Returns false after `shutdown` (the worker stops; the
/// caller wakes the other workers with further `shutdown` requests).
fn handle(db: &Db, sessions: &Sessions, stream: TcpStream) -> std::io::Result<bool> {
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let (reply, go_on) = match words.as_slice() {
        [_, "shutdown"] => ("OK".to_string(), false),
        [session, cmd, args @ ..] => match session.parse::<u64>() {
            Ok(id) => (execute(db, sessions, id, cmd, args), true),
            Err(_) => ("ERR session id must be a number".to_string(), true),
        },
        _ => ("ERR expected: SESSION COMMAND [ARGS]".to_string(), true),
    };
    let mut stream = stream;
    writeln!(stream, "{reply}")?;
    Ok(go_on)
}

fn execute(db: &Db, sessions: &Sessions, id: u64, cmd: &str, args: &[&str]) -> String {
    let taken = lock(sessions).remove(&id);
    let (reply, keep) = match (taken, cmd, args) {
        (Some(t), "begin", _) => ("ERR transaction already open".into(), Some(t)),
        (None, "begin", level) => {
            let isolation = match level.first() {
                Some(&"rc") => Isolation::ReadCommitted,
                Some(&"ser") => Isolation::Serializable,
                _ => Isolation::SnapshotIsolation,
            };
            let t = db.begin(TxnOptions {
                isolation,
                ..Default::default()
            });
            ("OK".into(), Some(t))
        }
        (Some(t), "commit", []) => (reply_unit(t.commit()), None),
        (Some(t), "rollback", []) => {
            t.rollback();
            ("OK".into(), None)
        }
        (Some(mut t), "put", [k, v]) => (reply_unit(t.put(k.as_bytes(), v.as_bytes())), Some(t)),
        (Some(t), "get", [k]) => (reply_value(t.get(k.as_bytes())), Some(t)),
        (None, "put", [k, v]) => (reply_unit(db.put(k.as_bytes(), v.as_bytes())), None),
        (None, "get", [k]) => (reply_value(db.get(k.as_bytes())), None),
        (t, _, _) => ("ERR unknown command or wrong arguments".into(), t),
    };
    if let Some(t) = keep {
        lock(sessions).insert(id, t);
    }
    reply
}

fn lock(s: &Sessions) -> std::sync::MutexGuard<'_, HashMap<u64, Txn>> {
    // A worker that panicked while holding the map left it consistent (every
    // update is one insert or remove), so a poisoned lock is still usable.
    s.lock().unwrap_or_else(|p| p.into_inner())
}

fn reply_unit(r: Result<(), Error>) -> String {
    match r {
        Ok(()) => "OK".into(),
        Err(e) => format!("ERR {e}"),
    }
}

fn reply_value(r: Result<Option<Vec<u8>>, Error>) -> String {
    match r {
        Ok(Some(v)) => format!("VALUE {}", String::from_utf8_lossy(&v)),
        Ok(None) => "NIL".into(),
        Err(e) => format!("ERR {e}"),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: session_server DIR [ADDR]")?;
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:7878".into());
    let db = Db::open(&dir, Options::default())?;
    let listener = TcpListener::bind(&addr)?;
    println!("serving {dir} on {}", listener.local_addr()?);
    serve(db.clone(), listener, 4)?;
    db.close()?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic in a test is a failure
mod tests {
    use super::*;

    fn request(addr: std::net::SocketAddr, line: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        writeln!(s, "{line}").unwrap();
        let mut reply = String::new();
        BufReader::new(s).read_line(&mut reply).unwrap();
        reply.trim_end().to_string()
    }

    #[test]
    fn transactions_span_requests_served_by_different_workers() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        const WORKERS: usize = 4;
        let server = std::thread::spawn({
            let db = db.clone();
            move || serve(db, listener, WORKERS)
        });
        // Four clients, each one session, interleaved by the OS scheduler.
        std::thread::scope(|s| {
            for id in 1..=4u64 {
                s.spawn(move || {
                    assert_eq!(request(addr, &format!("{id} begin")), "OK");
                    for i in 0..20 {
                        let put = format!("{id} put k{id}-{i} v{i}");
                        assert_eq!(request(addr, &put), "OK");
                    }
                    // Own writes are visible inside, not outside.
                    assert_eq!(request(addr, &format!("{id} get k{id}-3")), "VALUE v3");
                    assert_eq!(request(addr, &format!("{} get k{id}-3", id + 100)), "NIL");
                    let end = if id % 2 == 0 { "commit" } else { "rollback" };
                    assert_eq!(request(addr, &format!("{id} {end}")), "OK");
                });
            }
        });
        // Two sessions writing the same key under SI: first committer wins.
        assert_eq!(request(addr, "50 begin"), "OK");
        assert_eq!(request(addr, "51 begin"), "OK");
        assert_eq!(request(addr, "50 get hot"), "NIL");
        assert_eq!(request(addr, "51 put hot a"), "OK");
        assert_eq!(request(addr, "51 commit"), "OK");
        assert!(request(addr, "50 put hot b").starts_with("ERR write conflict"));
        assert_eq!(request(addr, "50 rollback"), "OK");
        assert!(request(addr, "nope get x").starts_with("ERR"));
        for _ in 0..WORKERS {
            assert_eq!(request(addr, "0 shutdown"), "OK");
        }
        server.join().unwrap().unwrap();
        for id in 1..=4u64 {
            let want = (id % 2 == 0).then(|| b"v7".to_vec());
            assert_eq!(db.get(format!("k{id}-7").as_bytes()).unwrap(), want);
        }
        assert_eq!(db.get(b"hot").unwrap(), Some(b"a".to_vec()));
    }
}
