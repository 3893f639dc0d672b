//! Many blocked consumers, producers and non-blocking poppers at once on
//! shale-redis-server: every pushed element is received exactly once
//! (the hand-off from a push to a blocked client neither loses nor
//! duplicates), including through BLMOVE and MULTI/EXEC pushes.
// Tests index and unwrap freely: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::{start_shale, Raw, PW};
use std::collections::BTreeMap;
use std::thread;

const PRODUCERS: usize = 4;
const PER_PRODUCER: usize = 300;

fn connect(port: u16) -> Raw {
    let mut c = Raw::connect(port);
    assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
    c
}

/// The element of a `[key, element]` reply (None for a nil array).
fn element(reply: &str) -> Option<String> {
    if reply.starts_with("*-1") {
        return None;
    }
    let lines: Vec<&str> = reply.split("\r\n").collect();
    Some(lines[4].to_string())
}

#[test]
fn every_pushed_element_is_received_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    let port = s.port;
    // Consumers: BLPOP / BRPOP on q (and BLMOVE q -> moved, drained below),
    // until a 1 s timeout after the producers stop.
    let consumers: Vec<_> = (0..6)
        .map(|i| {
            thread::spawn(move || {
                let mut c = connect(port);
                let mut got = Vec::new();
                loop {
                    let r = match i % 3 {
                        0 => element(&c.call(&["BLPOP", "q", "other", "1"])),
                        1 => element(&c.call(&["BRPOP", "q", "1"])),
                        _ => {
                            let r = c.call(&["BLMOVE", "q", "moved", "LEFT", "RIGHT", "1"]);
                            (!r.starts_with("*-1")).then_some(r)
                        }
                    };
                    match r {
                        Some(e) if i % 3 == 2 => got.push(format!("moved:{e}")),
                        Some(e) => got.push(e),
                        None => return got,
                    }
                }
            })
        })
        .collect();
    // A client that blocks and leaves: it must not swallow an element.
    {
        let mut quitter = connect(port);
        quitter.send(&["BLPOP", "q", "0"]);
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Gone before the first push (a push handed to a client that already
    // left is lost, in Redis too; the check runs every 100 ms).
    std::thread::sleep(std::time::Duration::from_millis(300));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            thread::spawn(move || {
                let mut c = connect(port);
                for n in 0..PER_PRODUCER {
                    let v = format!("p{p}-{n}");
                    if n % 10 == 0 {
                        c.call(&["MULTI"]);
                        c.call(&["RPUSH", "q", &v]);
                        assert!(c.call(&["EXEC"]).starts_with("*1\r\n"));
                    } else {
                        assert!(c.call(&["LPUSH", "q", &v]).starts_with(':'));
                    }
                }
            })
        })
        .collect();
    // A non-blocking popper competing with the blocked clients.
    let stealer = thread::spawn(move || {
        let mut c = connect(port);
        let mut got = Vec::new();
        for _ in 0..400 {
            let r = c.call(&["RPOP", "q"]);
            if let Some(v) = r
                .split("\r\n")
                .nth(1)
                .filter(|_| r.starts_with('$') && r != "$-1\r\n")
            {
                got.push(v.to_string());
            }
        }
        got
    });
    for p in producers {
        p.join().unwrap();
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut moved = 0;
    for e in stealer.join().unwrap() {
        *seen.entry(e).or_default() += 1;
    }
    for c in consumers {
        for e in c.join().unwrap() {
            if e.starts_with("moved:") {
                moved += 1;
            } else {
                *seen.entry(e).or_default() += 1;
            }
        }
    }
    // What BLMOVE moved is in `moved`; what nobody took is still in q.
    let mut c = connect(port);
    for key in ["moved", "q"] {
        let all = c.call(&["LRANGE", key, "0", "-1"]);
        let lines: Vec<&str> = all.split("\r\n").collect();
        let n: usize = lines[0][1..].parse().unwrap();
        if key == "moved" {
            assert_eq!(n, moved, "BLMOVE replies vs destination");
        }
        for i in 0..n {
            *seen.entry(lines[2 + 2 * i].to_string()).or_default() += 1;
        }
    }
    let dups: Vec<_> = seen.iter().filter(|(_, &n)| n > 1).collect();
    assert!(dups.is_empty(), "received twice: {dups:?}");
    assert_eq!(seen.len(), PRODUCERS * PER_PRODUCER, "elements lost");
}
