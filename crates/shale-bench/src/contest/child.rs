//! The writer child process of `contest` (crash rounds) and `recover`, and its parent side.
//!
//! The parent re-executes its own binary (`std::env::current_exe`) with the hidden flag
//! `--crash_child=DOMAIN` and the key-space flags. The child opens the DB (replaying whatever
//! earlier rounds left), starts `--threads` writer threads that each put keys `0..--num` of
//! its domain in index order (see [`super::data`]), and reports on stdout, one line each:
//!
//! ```text
//! SHALE-CHILD READY
//! SHALE-CHILD ACK 120 97 133      <- per thread: writes acknowledged so far (lower bounds)
//! SHALE-CHILD DONE                <- every write acknowledged
//! SHALE-CHILD ERROR <message>     <- an engine error; the child exits with status 1
//! ```
//!
//! A reporter thread prints an `ACK` line whenever the counters moved (polling every
//! millisecond). A thread's counter is stored after its put returned, so every printed count is
//! a lower bound of what was acknowledged — and everything the parent read from the pipe was
//! printed before the kill. After `DONE` the child waits for stdin to close and never closes
//! the engine: the parent's SIGKILL (or its exit) ends it as a crash would.

use super::data::{KeySpace, Writer};
use crate::engine::{EngineFactory, KvEngine, WriteOpts};
use crate::error::{Error, Result};
use crate::flags::Flags;
use crate::runner::engine_options;
use std::fmt;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const TAG: &str = "SHALE-CHILD";

/// What went wrong with a writer child.
#[derive(Debug)]
pub enum ChildProblem {
    /// It could not be started.
    Spawn(std::io::Error),
    /// It exited on its own before it was killed.
    Exited(ExitStatus),
    /// It reported an engine error.
    Reported(String),
}

impl fmt::Display for ChildProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChildProblem::Spawn(e) => write!(f, "cannot start: {e}"),
            ChildProblem::Exited(s) => write!(f, "exited before it was killed ({s})"),
            ChildProblem::Reported(m) => write!(f, "{m}"),
        }
    }
}

/// A line of the child protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChildLine {
    /// The DB is open; writes start.
    Ready,
    /// Acknowledged writes per thread.
    Ack(Vec<u64>),
    /// All writes acknowledged.
    Done,
    /// An engine error.
    Error(String),
}

/// Parses one stdout line of the child; other lines (none are expected) give `None`.
pub fn parse_line(line: &str) -> Option<ChildLine> {
    let rest = line.trim_end().strip_prefix(TAG)?.strip_prefix(' ')?;
    let (word, args) = rest.split_once(' ').unwrap_or((rest, ""));
    match word {
        "READY" => Some(ChildLine::Ready),
        "DONE" => Some(ChildLine::Done),
        "ERROR" => Some(ChildLine::Error(args.to_string())),
        "ACK" => args
            .split_whitespace()
            .map(|n| n.parse().ok())
            .collect::<Option<Vec<u64>>>()
            .map(ChildLine::Ack),
        _ => None,
    }
}

/// How the parent runs one child.
#[derive(Clone, Debug)]
pub struct ChildSpec {
    /// The key space (threads, writes per thread, sizes).
    pub space: KeySpace,
    /// The domain the child writes.
    pub domain: u64,
    /// `--write_buffer_size` for the child's engine.
    pub write_buffer_size: u64,
    /// SIGKILL once this many writes (all threads) were reported acknowledged; `None`: after
    /// `DONE`.
    pub kill_after: Option<u64>,
}

/// What the parent saw of a child.
#[derive(Clone, Debug, PartialEq)]
pub struct ChildOutcome {
    /// Last reported acknowledged writes per thread.
    pub acked: Vec<u64>,
    /// Whether the child reported `DONE` before the kill.
    pub finished: bool,
    /// Seconds from `READY` to the kill.
    pub write_seconds: f64,
}

/// The command line of a child: the parent's engine, DB and engine flags, plus the key space.
pub fn child_args(flags: &Flags, spec: &ChildSpec, engine: &str) -> Vec<String> {
    let ks = &spec.space;
    vec![
        format!("--engine={engine}"),
        format!("--db={}", flags.db_path().display()),
        format!("--crash_child={}", spec.domain),
        format!("--threads={}", ks.threads),
        format!("--num={}", ks.per_thread),
        format!("--key_size={}", ks.key_size),
        format!("--value_size={}", ks.value_size),
        format!("--write_buffer_size={}", spec.write_buffer_size),
        format!("--cache_size={}", flags.cache_size),
        format!("--bloom_bits={}", flags.bloom_bits),
        format!("--block_size={}", flags.block_size),
        format!("--compression_type={}", flags.compression_type),
        format!("--sync={}", flags.sync),
        "--progress_reports=0".to_string(),
    ]
}

/// Runs one child to its kill and returns what it acknowledged.
pub fn run_child(flags: &Flags, spec: &ChildSpec, engine: &str) -> Result<ChildOutcome> {
    let exe = std::env::current_exe().map_err(ChildProblem::Spawn)?;
    let mut child = Command::new(exe)
        .args(child_args(flags, spec, engine))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(ChildProblem::Spawn)?;
    let threads = usize::try_from(spec.space.threads).unwrap_or(0);
    let mut outcome = ChildOutcome {
        acked: vec![0; threads],
        finished: false,
        write_seconds: 0.0,
    };
    let mut started = Instant::now();
    let mut killed = false;
    let mut reported = None;
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            match parse_line(&line?) {
                Some(ChildLine::Ready) => started = Instant::now(),
                Some(ChildLine::Ack(v)) if v.len() == threads => outcome.acked = v,
                // Printed (so every write acknowledged) before any kill, even if read after.
                Some(ChildLine::Done) => outcome.finished = true,
                Some(ChildLine::Error(m)) => reported = Some(m),
                _ => {}
            }
            let total: u64 = outcome.acked.iter().sum();
            let due = outcome.finished || spec.kill_after.is_some_and(|k| total >= k);
            if due && !killed {
                // `Child::kill` is SIGKILL on Unix: no destructor, no close, no flush.
                child.kill()?;
                killed = true;
                outcome.write_seconds = started.elapsed().as_secs_f64();
            }
            // Lines still in the pipe after the kill were printed before it: keep reading.
        }
    }
    let status = child.wait()?;
    if let Some(m) = reported {
        return Err(ChildProblem::Reported(m).into());
    }
    if !killed {
        return Err(ChildProblem::Exited(status).into());
    }
    Ok(outcome)
}

/// Writes the domain's keys with `threads` threads, printing the protocol to `out`; returns
/// after `DONE`. Shared with the tests, which run it in-process.
pub fn write_and_report(
    engine: &dyn KvEngine,
    ks: &KeySpace,
    domain: u64,
    wo: WriteOpts,
    out: &mut dyn Write,
) -> Result<()> {
    writeln!(out, "{TAG} READY")?;
    out.flush()?;
    let threads = usize::try_from(ks.threads).unwrap_or(0);
    let counters: Vec<AtomicU64> = (0..threads).map(|_| AtomicU64::new(0)).collect();
    let finished = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0u64..)
            .zip(&counters)
            .map(|(thread, counter)| {
                let (finished, failed) = (&finished, &failed);
                s.spawn(move || {
                    let r = write_thread(engine, ks, domain, thread, wo, counter, failed);
                    if r.is_err() {
                        failed.store(true, Ordering::Release);
                    }
                    finished.fetch_add(1, Ordering::AcqRel);
                    r
                })
            })
            .collect();
        let mut last: Vec<u64> = vec![0; threads];
        loop {
            // Read `finished` first: if every thread had finished, the counters read next are
            // final.
            let all_done = finished.load(Ordering::Acquire) == ks.threads;
            let now: Vec<u64> = counters.iter().map(|c| c.load(Ordering::Acquire)).collect();
            if now != last {
                let text: Vec<String> = now.iter().map(u64::to_string).collect();
                if writeln!(out, "{TAG} ACK {}", text.join(" "))
                    .and_then(|()| out.flush())
                    .is_err()
                {
                    failed.store(true, Ordering::Release); // the parent is gone: stop writing
                }
                last = now;
            }
            if all_done {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err(Error::ThreadPanicked)))
            .collect()
    });
    for r in results {
        r?;
    }
    writeln!(out, "{TAG} DONE")?;
    out.flush()?;
    Ok(())
}

fn write_thread(
    engine: &dyn KvEngine,
    ks: &KeySpace,
    domain: u64,
    thread: u64,
    wo: WriteOpts,
    counter: &AtomicU64,
    failed: &AtomicBool,
) -> Result<()> {
    let (mut key, mut value) = (Vec::new(), Vec::new());
    for index in 0..ks.per_thread {
        if failed.load(Ordering::Acquire) {
            break;
        }
        ks.key(
            Writer {
                domain,
                thread,
                index,
            },
            &mut key,
        );
        ks.value(&key, &mut value);
        engine.put(wo, &key, &value).map_err(Error::engine("put"))?;
        counter.store(index + 1, Ordering::Release);
    }
    Ok(())
}

/// The child's `main`: open, write and report, then wait to be killed.
pub fn child_main(flags: &Flags, factory: &dyn EngineFactory) -> ExitCode {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let result = (|| -> Result<()> {
        let domain = u64::try_from(flags.crash_child).unwrap_or(0);
        let ks = KeySpace::new(
            u64::try_from(flags.threads).unwrap_or(0),
            u64::try_from(flags.num).unwrap_or(0),
            flags.key_size,
            flags.value_size,
            domain + 1,
        )?;
        let engine = factory
            .open(&engine_options(flags))
            .map_err(Error::engine("open"))?;
        let wo = WriteOpts {
            sync: flags.sync,
            disable_wal: false,
        };
        write_and_report(engine.as_ref(), &ks, domain, wo, &mut out)?;
        // Keep the engine open until the parent kills us (or goes away: stdin closes).
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        std::process::exit(0)
    })();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(out, "{TAG} ERROR {e}");
            let _ = out.flush();
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::contest::verify;
    use crate::memory::MemoryEngine;

    #[test]
    fn protocol_lines() {
        assert_eq!(parse_line("SHALE-CHILD READY\n"), Some(ChildLine::Ready));
        assert_eq!(parse_line("SHALE-CHILD DONE"), Some(ChildLine::Done));
        assert_eq!(
            parse_line("SHALE-CHILD ACK 1 20 300"),
            Some(ChildLine::Ack(vec![1, 20, 300]))
        );
        assert_eq!(
            parse_line("SHALE-CHILD ERROR put error: disk full"),
            Some(ChildLine::Error("put error: disk full".into()))
        );
        assert_eq!(parse_line("SHALE-CHILD ACK 1 x"), None);
        assert_eq!(parse_line("SHALE-CHILDREN DONE"), None);
        assert_eq!(parse_line("hello"), None);
    }

    #[test]
    fn the_writer_reports_what_it_wrote() {
        let ks = KeySpace::new(3, 200, 8, 100, 2).unwrap();
        let e = MemoryEngine::new();
        let mut out = Vec::new();
        write_and_report(&e, &ks, 1, WriteOpts::default(), &mut out).unwrap();
        let lines: Vec<ChildLine> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| parse_line(l).unwrap())
            .collect();
        assert_eq!(lines.first(), Some(&ChildLine::Ready));
        assert_eq!(lines.last(), Some(&ChildLine::Done));
        // Counts only grow, and the last ACK covers every write.
        let acks: Vec<&Vec<u64>> = lines
            .iter()
            .filter_map(|l| match l {
                ChildLine::Ack(v) => Some(v),
                _ => None,
            })
            .collect();
        for pair in acks.windows(2) {
            assert!(pair[0].iter().zip(pair[1]).all(|(a, b)| a <= b));
        }
        assert_eq!(acks.last().unwrap().as_slice(), &[200, 200, 200]);
        // Domain 1 written, domain 0 empty: the crash checks pass with these counts.
        let acked = vec![vec![0, 0, 0], vec![200, 200, 200]];
        assert_eq!(verify::check_acked_gets(&e, &ks, &acked).unwrap(), 600);
        let t = verify::scan_verify(&e, &ks, 2, &mut || {}).unwrap();
        verify::check_prefixes(&ks, &t, &acked).unwrap();
        assert_eq!(t.entries, 600);
    }

    #[test]
    fn child_command_line_parses_back() {
        let flags = Flags::default();
        let spec = ChildSpec {
            space: KeySpace::new(4, 10, 8, 4096, 1).unwrap(),
            domain: 2,
            write_buffer_size: 1 << 30,
            kill_after: Some(5),
        };
        let args = child_args(&flags, &spec, "shale");
        let crate::Command::Run(f) = Flags::parse(&args).unwrap() else {
            panic!("help")
        };
        assert_eq!((f.crash_child, f.threads, f.num), (2, 4, 10));
        assert_eq!((f.key_size, f.value_size), (8, 4096));
        assert_eq!(f.write_buffer_size, 1 << 30);
        assert_eq!(f.engine.as_deref(), Some("shale"));
    }
}
