//! The TLS port with redis-cli --tls (Debian's redis-cli is built with
//! TLS): commands, a pipeline and a 2 MB value through the relay; with a
//! CA file, a client without a certificate is refused and one with a
//! certificate signed by the CA is served. Certificates are made by rcgen.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::PW;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use shale_redis::server::{serve_with, ServerConfig, TlsListener};
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

struct Pki {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

fn pki(dir: &Path) -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "shale-redis test CA");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let leaf = |names: Vec<String>, usage: ExtendedKeyUsagePurpose, stem: &str| {
        let mut p = CertificateParams::new(names).unwrap();
        p.distinguished_name.push(DnType::CommonName, stem);
        p.extended_key_usages = vec![usage];
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &ca).unwrap();
        let (c, k) = (
            dir.join(format!("{stem}.pem")),
            dir.join(format!("{stem}-key.pem")),
        );
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c, k)
    };
    let (cert, key) = leaf(
        vec!["localhost".into(), "127.0.0.1".into()],
        ExtendedKeyUsagePurpose::ServerAuth,
        "server",
    );
    let (client_cert, client_key) = leaf(
        vec!["client".into()],
        ExtendedKeyUsagePurpose::ClientAuth,
        "client",
    );
    let ca_path = dir.join("ca.pem");
    std::fs::write(&ca_path, ca.pem()).unwrap();
    Pki {
        ca: ca_path,
        cert,
        key,
        client_cert,
        client_key,
    }
}

struct Running {
    tls_port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

fn start(p: &Pki, client_ca: bool) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let db = shaledb::Db::open(dir.path(), shale_redis::engine_options()).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let tls = TcpListener::bind("127.0.0.1:0").unwrap();
    let tls_port = tls.local_addr().unwrap().port();
    let config =
        shale_redis::tls::server_config(&p.cert, &p.key, client_ca.then_some(p.ca.as_path()))
            .unwrap();
    let cfg = ServerConfig {
        password: Some(PW.into()),
        tls: Some(TlsListener {
            listener: tls,
            config,
        }),
        ..ServerConfig::default()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = std::thread::spawn(move || {
        serve_with(db, listener, cfg, s).unwrap();
        drop(dir);
    });
    Running {
        tls_port,
        stop,
        thread: Some(thread),
    }
}

/// redis-cli --tls with `extra` arguments, `stdin` piped in; stdout+stderr.
fn cli(port: u16, p: &Pki, extra: &[&str], args: &[&str], stdin: &[u8]) -> String {
    let mut child = Command::new("redis-cli")
        .args([
            "--tls",
            "--cacert",
            p.ca.to_str().unwrap(),
            "-h",
            "127.0.0.1",
        ])
        .args(["-p", &port.to_string(), "-a", PW, "--no-auth-warning"])
        .args(extra)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    s.trim_end().to_string()
}

#[test]
fn redis_cli_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let p = pki(dir.path());
    let s = start(&p, false);
    assert_eq!(cli(s.tls_port, &p, &[], &["PING"], b""), "PONG");
    assert_eq!(cli(s.tls_port, &p, &[], &["SET", "k", "v"], b""), "OK");
    assert_eq!(cli(s.tls_port, &p, &[], &["GET", "k"], b""), "v");
    // A pipeline of many commands on one connection.
    let script: String = (0..500).map(|i| format!("INCR n{}\n", i % 7)).collect();
    let out = cli(s.tls_port, &p, &[], &[], script.as_bytes());
    assert_eq!(out.lines().count(), 500);
    assert_eq!(cli(s.tls_port, &p, &[], &["GET", "n0"], b""), "72");
    // A value larger than a TLS record and than the relay's buffers.
    let big = vec![b'x'; 2 << 20];
    assert_eq!(cli(s.tls_port, &p, &["-x"], &["SET", "big"], &big), "OK");
    assert_eq!(
        cli(s.tls_port, &p, &[], &["STRLEN", "big"], b""),
        (2 << 20).to_string()
    );
}

#[test]
fn client_certificates_when_a_ca_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let p = pki(dir.path());
    let s = start(&p, true);
    let refused = cli(s.tls_port, &p, &[], &["PING"], b"");
    assert_ne!(refused, "PONG", "served without a client certificate");
    let with_cert = [
        "--cert",
        p.client_cert.to_str().unwrap(),
        "--key",
        p.client_key.to_str().unwrap(),
    ];
    assert_eq!(cli(s.tls_port, &p, &with_cert, &["PING"], b""), "PONG");
}
