//! Helpers shared by the integration tests: start shale-redis-server and
//! redis-server on free loopback ports, drive them with redis-cli or raw RESP.
// Tests index and unwrap freely: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const PW: &str = "pw";

/// A server process, killed (SIGKILL) when dropped.
pub struct Proc {
    pub child: Child,
    pub port: u16,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    /// SIGTERM, then wait for a clean exit.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        self.child.wait().unwrap()
    }
}

/// Starts shale-redis-server on `dir` with `--port 0`; reads the port it prints.
pub fn start_shale(dir: &Path) -> Proc {
    start_shale_with(dir, &[])
}

/// [`start_shale`] with more arguments.
pub fn start_shale_with(dir: &Path, extra: &[&str]) -> Proc {
    let mut child = Command::new(env!("CARGO_BIN_EXE_shale-redis-server"))
        .args([
            "--db",
            dir.to_str().unwrap(),
            "--port",
            "0",
            "--requirepass",
            PW,
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .strip_prefix("ShaleDB Redis endpoint on 127.0.0.1:")
        .unwrap_or_else(|| panic!("unexpected banner {line:?}"))
        .parse()
        .unwrap();
    Proc { child, port }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts the real redis-server (no persistence) in `dir`; fails loudly when missing.
pub fn start_redis(dir: &Path) -> Proc {
    assert!(
        Path::new("/usr/bin/redis-server").exists() || which("redis-server"),
        "redis-server is not installed: run scripts/install-deps.sh (Debian package redis-server)"
    );
    // free_port() releases the port before redis-server binds it, so a
    // server started meanwhile (a parallel test's `--port 0`) may take it:
    // redis-server then exits. Retry on a new port until it stays up.
    for _attempt in 0..10 {
        let port = free_port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--requirepass", PW, "--dir", dir.to_str().unwrap()])
            .stdout(Stdio::null())
            .spawn()
            .expect("cannot run redis-server: install it with scripts/install-deps.sh");
        let mut p = Proc { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        let exited = loop {
            if p.child.try_wait().unwrap().is_some() {
                break true;
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                // Connected: make sure it is redis-server that answered,
                // not another process that took the port first.
                std::thread::sleep(Duration::from_millis(100));
                break p.child.try_wait().unwrap().is_some();
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not start on port {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        if !exited {
            return p;
        }
    }
    panic!("redis-server exited at start on 10 ports in a row");
}

fn which(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `redis-cli -p P -a pw ARGS...`: stdout and stderr, trimmed.
pub fn cli(port: u16, args: &[&str]) -> String {
    assert!(
        which("redis-cli"),
        "redis-cli is not installed: run scripts/install-deps.sh (redis-tools)"
    );
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "-a", PW, "--no-auth-warning"])
        .args(args)
        .output()
        .unwrap();
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    s.trim_end().to_string()
}

/// `redis-cli -p P` fed `script` on stdin (one command a line, one connection).
pub fn cli_script(port: u16, script: &str, auth: bool) -> String {
    let mut cmd = Command::new("redis-cli");
    cmd.args(["-p", &port.to_string(), "--no-auth-warning"]);
    if auth {
        cmd.args(["-a", PW]);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    s
}

/// A raw RESP connection.
pub struct Raw {
    pub r: BufReader<TcpStream>,
    pub w: TcpStream,
}

impl Raw {
    pub fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Raw {
            r: BufReader::new(s.try_clone().unwrap()),
            w: s,
        }
    }

    pub fn encode(args: &[&[u8]]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend(format!("${}\r\n", a.len()).into_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    pub fn send(&mut self, args: &[&str]) {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.w.write_all(&Self::encode(&a)).unwrap();
    }

    /// One command, its reply's exact bytes.
    pub fn call(&mut self, args: &[&str]) -> String {
        self.send(args);
        self.reply()
    }

    /// The exact bytes of one reply (nested arrays included).
    pub fn reply(&mut self) -> String {
        let mut line = String::new();
        self.r.read_line(&mut line).unwrap();
        assert!(line.ends_with("\r\n"), "short reply {line:?}");
        let mut out = line.clone();
        let body = &line[1..line.len() - 2];
        match line.as_bytes()[0] {
            // Bulk, RESP3 verbatim and bulk error.
            b'$' | b'=' | b'!' => {
                let n: i64 = body.parse().unwrap();
                if n >= 0 {
                    let mut b = vec![0u8; n as usize + 2];
                    self.r.read_exact(&mut b).unwrap();
                    out.push_str(&String::from_utf8_lossy(&b));
                }
            }
            // Array, RESP3 set and push; a map has two items per entry.
            b'*' | b'~' | b'>' | b'%' => {
                let n: i64 = body.parse().unwrap();
                let per = if line.starts_with('%') { 2 } else { 1 };
                for _ in 0..n.max(0) * per {
                    out.push_str(&self.reply());
                }
            }
            _ => {}
        }
        out
    }

    /// Reads until EOF (the server closed): what was left.
    pub fn rest(&mut self) -> String {
        let mut s = String::new();
        let _ = self.r.read_to_string(&mut s);
        s
    }
}

/// A RESP reply with every array's elements sorted (recursively).
pub fn normalize(raw: &str) -> String {
    fn item(s: &str) -> (String, &str) {
        let (line, rest) = s.split_once("\r\n").unwrap();
        match &line[..1] {
            "*" | "~" | "%" => {
                let n: i64 = line[1..].parse().unwrap();
                let per = if line.starts_with('%') { 2 } else { 1 };
                let mut rest = rest;
                let mut items = Vec::new();
                for _ in 0..n.max(0) {
                    let mut entry = String::new();
                    for _ in 0..per {
                        let (it, r) = item(rest);
                        entry.push_str(&it);
                        rest = r;
                    }
                    items.push(entry);
                }
                items.sort();
                (format!("{line}\r\n{}", items.concat()), rest)
            }
            "$" if line != "$-1" => {
                let n: usize = line[1..].parse().unwrap();
                (format!("{line}\r\n{}\r\n", &rest[..n]), &rest[n + 2..])
            }
            _ => (format!("{line}\r\n"), rest),
        }
    }
    item(raw).0
}

/// One step of a multi-client scenario (see [`run_scenario`]).
pub enum Step {
    /// Client n sends a command and reads its reply.
    Call(usize, &'static [&'static str]),
    /// Client n sends a command without reading (it blocks).
    Send(usize, &'static [&'static str]),
    /// Client n reads one reply (a served BLPOP, a pub/sub message).
    Read(usize),
    /// Client n closes its connection.
    Close(usize),
    /// Lets the server act (a blocked command register, a timeout pass).
    Sleep(u64),
}

/// Runs `steps` with `clients` authenticated connections to `port` (after
/// HELLO 3 for the clients in `resp3`); the transcript of every reply read.
pub fn run_scenario(port: u16, clients: usize, resp3: &[usize], steps: &[Step]) -> Vec<String> {
    let mut cs: Vec<Option<Raw>> = (0..clients)
        .map(|i| {
            let mut c = Raw::connect(port);
            assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
            if resp3.contains(&i) {
                c.call(&["HELLO", "3"]);
            }
            Some(c)
        })
        .collect();
    let mut out = Vec::new();
    for (n, step) in steps.iter().enumerate() {
        match step {
            Step::Call(i, cmd) => {
                let r = cs[*i].as_mut().unwrap().call(cmd);
                out.push(format!("{n}: c{i} {cmd:?} -> {r:?}"));
            }
            Step::Send(i, cmd) => cs[*i].as_mut().unwrap().send(cmd),
            Step::Read(i) => {
                let r = cs[*i].as_mut().unwrap().reply();
                out.push(format!("{n}: c{i} read -> {r:?}"));
            }
            Step::Close(i) => cs[*i] = None,
            Step::Sleep(ms) => std::thread::sleep(Duration::from_millis(*ms)),
        }
    }
    out
}

/// Runs a scenario on redis-server and on shale-redis-server; asserts the
/// same transcript.
pub fn compare_scenario(clients: usize, resp3: &[usize], steps: &[Step]) {
    on_both_servers(|port| run_scenario(port, clients, resp3, steps));
}

/// Runs `session(port)` against a fresh redis-server, then a fresh
/// shale-redis-server; asserts the same transcript and returns redis's.
pub fn on_both_servers(session: impl Fn(u16) -> Vec<String>) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let redis_dir = tempfile::tempdir().unwrap();
    let redis = start_redis(redis_dir.path());
    let shale = start_shale(dir.path());
    let want = session(redis.port);
    assert_same(&want, &session(shale.port));
    want
}

/// Asserts two transcripts are equal, listing every differing line.
pub fn assert_same(want: &[String], got: &[String]) {
    let diffs: Vec<String> = want
        .iter()
        .zip(got)
        .filter(|(w, g)| w != g)
        .map(|(w, g)| format!("redis: {w:?}\nshale: {g:?}"))
        .collect();
    assert!(
        diffs.is_empty() && want.len() == got.len(),
        "{} differences ({} vs {} replies):\n{}",
        diffs.len(),
        want.len(),
        got.len(),
        diffs.join("\n")
    );
}

/// HELLO's map holds the connection id, which differs between servers.
pub fn mask_id(reply: &str) -> String {
    let Some(at) = reply.find("$2\r\nid\r\n:") else {
        return reply.to_string();
    };
    let start = at + "$2\r\nid\r\n:".len();
    let end = start + reply[start..].find("\r\n").unwrap();
    format!("{}ID{}", &reply[..start], &reply[end..])
}

/// Runs `script` on redis-server and shale-redis-server, one connection
/// each (after AUTH when `auth`, after HELLO 3 when `resp3`), and asserts
/// identical replies; commands named in `unordered` are compared sorted.
pub fn compare_script(script: &[&[&str]], auth: bool, resp3: bool, unordered: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let redis_dir = tempfile::tempdir().unwrap();
    let redis = start_redis(redis_dir.path());
    let shale = start_shale(dir.path());
    let (mut a, mut b) = (Raw::connect(redis.port), Raw::connect(shale.port));
    let mut prelude: Vec<&[&str]> = Vec::new();
    if auth {
        prelude.push(&["AUTH", PW]);
    }
    if resp3 {
        prelude.push(&["HELLO", "3"]);
    }
    let call = |c: &mut Raw, cmd: &[&str]| {
        let raw = mask_id(&c.call(cmd));
        if unordered.contains(&cmd[0].to_ascii_uppercase().as_str()) {
            normalize(&raw)
        } else {
            raw
        }
    };
    let (mut want, mut got) = (Vec::new(), Vec::new());
    for cmd in prelude.into_iter().chain(script.iter().copied()) {
        want.push(format!("{cmd:?} -> {}", call(&mut a, cmd)));
        got.push(format!("{cmd:?} -> {}", call(&mut b, cmd)));
    }
    assert_same(&want, &got);
}
