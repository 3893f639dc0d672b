//! A `shale serve` process started by a test, and the real `mariadb`
//! client driving it (shared by the wire tests).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A running server and what it printed.
pub struct Served {
    pub child: Child,
    pub port: u16,
    /// stderr lines, as they come.
    pub stderr: mpsc::Receiver<String>,
    /// stdout lines after the first two (address, how to connect).
    pub stdout: mpsc::Receiver<String>,
}

impl Served {
    /// Starts `shale --db dir serve --port 0` and waits for its address.
    pub fn start(dir: &Path, root_password: Option<&str>) -> Served {
        Self::start_with(dir, root_password, &[])
    }

    /// [`Served::start`] with more `serve` arguments.
    pub fn start_with(dir: &Path, root_password: Option<&str>, extra: &[&str]) -> Served {
        let mut c = Command::new(env!("CARGO_BIN_EXE_shale"));
        c.arg("--db")
            .arg(dir)
            .args(["serve", "--port", "0"])
            .args(extra)
            .env_remove("SHALE_ROOT_PASSWORD")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(pw) = root_password {
            c.env("SHALE_ROOT_PASSWORD", pw);
        }
        let mut child = c.spawn().unwrap();
        let (err_tx, stderr) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = err_tx.send(line);
            }
        });
        let (tx, rx) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let first = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the server did not say where it listens");
        let addr = first
            .split(" on ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .unwrap_or_else(|| panic!("unexpected first line: {first}"));
        assert!(addr.starts_with("127.0.0.1:"), "bound to {addr}");
        let port = addr.rsplit(':').next().unwrap().parse().unwrap();
        let connect = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(
            connect.starts_with("connect: mariadb -h 127.0.0.1 -P"),
            "{connect}"
        );
        Served {
            child,
            port,
            stderr,
            stdout: rx,
        }
    }

    /// Runs `sql` with the mariadb client in batch mode.
    pub fn sql(&self, user: &str, password: &str, sql: &str) -> Output {
        self.sql_args(user, password, &[], sql)
    }

    /// [`Served::sql`] with more client options.
    pub fn sql_args(&self, user: &str, password: &str, extra: &[&str], sql: &str) -> Output {
        let mut child = Command::new("mariadb")
            .args(["--no-defaults", "-h", "127.0.0.1", "-P"])
            .arg(self.port.to_string())
            .args(["--batch", "--connect-timeout=10", "-u", user])
            .arg(format!("-p{password}"))
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the mariadb client (scripts/install-deps.sh installs it)");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(sql.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    /// `sql` must succeed; its stdout.
    pub fn ok(&self, user: &str, password: &str, sql: &str) -> String {
        let out = self.sql(user, password, sql);
        assert!(
            out.status.success(),
            "{sql}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `sql` must fail; its stderr.
    pub fn fails(&self, user: &str, password: &str, sql: &str) -> String {
        let out = self.sql(user, password, sql);
        assert!(!out.status.success(), "{sql} succeeded");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    pub fn signal(&self, sig: i32) {
        let pid = i32::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) on a child we own; no memory is touched.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    }

    /// SIGTERM, then the exit status and the rest of stderr.
    pub fn terminate(mut self) -> (bool, Vec<String>) {
        self.signal(libc::SIGTERM);
        let status = wait_with_timeout(&mut self.child, Duration::from_secs(60));
        (status, self.stderr.try_iter().collect())
    }

    pub fn kill9(mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn wait_with_timeout(child: &mut Child, limit: Duration) -> bool {
    let until = std::time::Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.success();
        }
        assert!(std::time::Instant::now() < until, "the server did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}
