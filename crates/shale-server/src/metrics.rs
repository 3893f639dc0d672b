//! Status counters and stage histograms over HTTP, in Prometheus' text
//! format (version 0.0.4), for `shale serve --metrics-port`.
//!
//! One small blocking listener thread: a scrape is one short request every
//! few seconds, so it needs no event loop. Requests are read with a 2 s
//! timeout and at most 8 KiB; anything but `GET /metrics` gets 404.
//!
//! Worked example of the output:
//! ```text
//! # TYPE shale_questions counter
//! shale_questions 42
//! # TYPE shale_stage_seconds histogram
//! shale_stage_seconds_bucket{stage="run",le="4.096e-6"} 40
//! shale_stage_seconds_bucket{stage="run",le="+Inf"} 42
//! shale_stage_seconds_sum{stage="run"} 0.000171
//! shale_stage_seconds_count{stage="run"} 42
//! ```

use crate::server::Shared;
use crate::stats::BUCKETS;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The metrics page.
pub fn render(shared: &Shared) -> String {
    let mut out = String::new();
    let stats = &shared.stats;
    for (name, v) in stats.status_rows() {
        let metric = format!("shale_{}", name.to_ascii_lowercase());
        let kind = if name.starts_with("Threads_") {
            "gauge"
        } else {
            "counter"
        };
        let _ = writeln!(out, "# TYPE {metric} {kind}\n{metric} {v}");
    }
    let _ = writeln!(out, "# TYPE shale_stage_seconds histogram");
    for (stage, h) in stats.stages() {
        let counts = h.snapshot();
        let total: u64 = counts.iter().map(|(_, n)| n).sum();
        let mut cumulative = 0u64;
        let mut next = counts.iter().peekable();
        for i in 0..BUCKETS {
            let lower = 1u64 << i;
            while let Some(&&(l, n)) = next.peek() {
                if l > lower {
                    break;
                }
                cumulative += n;
                next.next();
            }
            // Bucket i holds [2^i, 2^(i+1)) ns: its `le` is 2^(i+1) ns.
            let le = (lower as f64 * 2.0) / 1e9; // powers of two are exact in f64
            let _ = writeln!(
                out,
                "shale_stage_seconds_bucket{{stage=\"{stage}\",le=\"{le:e}\"}} {cumulative}"
            );
        }
        let sum = h.sum_ns() as f64 / 1e9; // a display value; rounding is fine
        let _ = writeln!(
            out,
            "shale_stage_seconds_bucket{{stage=\"{stage}\",le=\"+Inf\"}} {total}\n\
             shale_stage_seconds_sum{{stage=\"{stage}\"}} {sum}\n\
             shale_stage_seconds_count{{stage=\"{stage}\"}} {total}"
        );
    }
    out
}

/// Serves [`render`] on `addr` until `stop` is set (checked after each
/// request; set it and connect once to wake the listener).
pub fn spawn(
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<(SocketAddr, std::thread::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    let t = std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(s) = stream {
                    let _ = answer(s, &shared);
                }
            }
        })?;
    Ok((bound, t))
}

fn answer(mut s: TcpStream, shared: &Shared) -> std::io::Result<()> {
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut req = Vec::new();
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        req.extend_from_slice(buf.get(..n).unwrap_or_default());
    }
    let line = req.split(|&b| b == b'\r').next().unwrap_or_default();
    let (status, body) = if line.starts_with(b"GET /metrics ") || line == b"GET /metrics" {
        ("200 OK", render(shared))
    } else {
        ("404 Not Found", "only /metrics is served\n".to_owned())
    };
    write!(
        s,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    s.flush()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn scrape_over_http() {
        let shared = Arc::new(Shared::default());
        shared.stats.questions.fetch_add(42, Ordering::Relaxed);
        shared.stats.run.record(Duration::from_nanos(3000));
        shared.stats.run.record(Duration::from_nanos(5000));
        let stop = Arc::new(AtomicBool::new(false));
        let (addr, t) = spawn("127.0.0.1:0".parse().unwrap(), shared, stop.clone()).unwrap();
        let get = |path: &str| {
            let mut c = TcpStream::connect(addr).unwrap();
            write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            let mut out = String::new();
            c.read_to_string(&mut out).unwrap();
            out
        };
        let page = get("/metrics");
        assert!(page.starts_with("HTTP/1.1 200 OK"), "{page}");
        assert!(page.contains("\nshale_questions 42\n"), "{page}");
        // 3000 ns is in [2048, 4096): counted from le=4.096e-6 on.
        assert!(page.contains("shale_stage_seconds_bucket{stage=\"run\",le=\"2.048e-6\"} 0\n"));
        assert!(page.contains("shale_stage_seconds_bucket{stage=\"run\",le=\"4.096e-6\"} 1\n"));
        assert!(page.contains("shale_stage_seconds_bucket{stage=\"run\",le=\"8.192e-6\"} 2\n"));
        assert!(page.contains("shale_stage_seconds_count{stage=\"run\"} 2\n"));
        assert!(
            page.contains("shale_stage_seconds_sum{stage=\"run\"} 0.000008\n"),
            "{page}"
        );
        assert!(get("/other").starts_with("HTTP/1.1 404"));
        stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(addr);
        t.join().unwrap();
    }
}
