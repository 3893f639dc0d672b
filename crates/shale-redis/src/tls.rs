//! TLS on a separate port, as Redis's `tls-port` (docs/redis.md, "TLS"):
//! rustls on the ring provider, a certificate chain and key from PEM files,
//! and, with a CA file, client certificates required (Redis's default
//! `tls-auth-clients yes`).
//!
//! Each TLS connection is terminated here and relayed over a loopback TCP
//! connection to the endpoint's own plain port, so the connection code
//! (which hands socket clones to pub/sub and tracking deliveries on other
//! threads) serves it unchanged. Two relay threads per connection: one
//! decrypts client bytes into the loopback socket, one encrypts replies.

use parking_lot::Mutex;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{}: {reason}", path.display())]
    Pem { path: PathBuf, reason: String },
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("client certificate verifier: {0}")]
    Verifier(String),
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = |e: rustls::pki_types::pem::Error| TlsError::Pem {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let v = CertificateDer::pem_file_iter(path)
        .map_err(pem)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem)?;
    if v.is_empty() {
        return Err(TlsError::Pem {
            path: path.to_path_buf(),
            reason: "no certificate in the file".into(),
        });
    }
    Ok(v)
}

/// A server configuration from `cert` (chain) and `key`; with `ca`, clients
/// must present a certificate signed by one of its certificates.
pub fn server_config(
    cert: &Path,
    key: &Path,
    ca: Option<&Path>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let chain = certs(cert)?;
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Pem {
        path: key.to_path_buf(),
        reason: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let cfg = match ca {
        None => builder
            .with_no_client_auth()
            .with_single_cert(chain, key_der)?,
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for c in certs(ca)? {
                roots.add(c)?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| TlsError::Verifier(e.to_string()))?;
            builder
                .with_client_cert_verifier(verifier)
                .with_single_cert(chain, key_der)?
        }
    };
    Ok(Arc::new(cfg))
}

/// Accepts TLS connections on `listener` until `stop`, relaying each to
/// the plain endpoint at `plain`.
pub fn serve(
    listener: TcpListener,
    cfg: Arc<ServerConfig>,
    plain: SocketAddr,
    stop: Arc<AtomicBool>,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let mut threads: Vec<std::thread::JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                threads.retain(|t| !t.is_finished());
                let (cfg, stop) = (cfg.clone(), stop.clone());
                threads.push(std::thread::spawn(move || {
                    let _ = relay(stream, cfg, plain, &stop);
                }));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}

fn tls_err(e: rustls::Error) -> std::io::Error {
    std::io::Error::new(ErrorKind::InvalidData, e)
}

/// One TLS connection: this thread decrypts, a second one encrypts.
fn relay(
    tls_sock: TcpStream,
    cfg: Arc<ServerConfig>,
    plain: SocketAddr,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    tls_sock.set_nonblocking(false)?;
    tls_sock.set_nodelay(true)?;
    tls_sock.set_read_timeout(Some(crate::server::POLL))?;
    let conn = Arc::new(Mutex::new(ServerConnection::new(cfg).map_err(tls_err)?));
    let inner = TcpStream::connect(plain)?;
    inner.set_nodelay(true)?;
    let writer = {
        let (conn, mut out, mut from) = (conn.clone(), tls_sock.try_clone()?, inner.try_clone()?);
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match from.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let mut c = conn.lock();
                if c.writer()
                    .write_all(buf.get(..n).unwrap_or_default())
                    .is_err()
                {
                    break;
                }
                if flush_tls(&mut c, &mut out).is_err() {
                    break;
                }
            }
            let mut c = conn.lock();
            c.send_close_notify();
            let _ = flush_tls(&mut c, &mut out);
            let _ = out.shutdown(std::net::Shutdown::Both);
        })
    };
    let r = decrypt_loop(&conn, tls_sock.try_clone()?, &inner, stop);
    let _ = inner.shutdown(std::net::Shutdown::Both);
    let _ = tls_sock.shutdown(std::net::Shutdown::Both);
    let _ = writer.join();
    r
}

fn flush_tls(c: &mut ServerConnection, out: &mut TcpStream) -> std::io::Result<()> {
    while c.wants_write() {
        c.write_tls(out)?;
    }
    Ok(())
}

/// Client bytes -> TLS session -> plaintext into the loopback socket (and
/// handshake records back to the client).
fn decrypt_loop(
    conn: &Mutex<ServerConnection>,
    mut sock: TcpStream,
    mut inner: &TcpStream,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut plain = vec![0u8; 64 * 1024];
    loop {
        let Some(n) = crate::server::read_or_stop(&mut sock, &mut buf, stop, &mut || Ok(()))?
        else {
            return Ok(());
        };
        let mut rest = buf.get(..n).unwrap_or_default();
        // Decrypted under the session's lock, written to the loopback
        // socket after it: the encrypting thread may need the lock to
        // drain the replies the server is blocked writing.
        let mut out = Vec::new();
        let mut closed = false;
        {
            let mut c = conn.lock();
            while !rest.is_empty() {
                c.read_tls(&mut rest)?;
                let state = match c.process_new_packets() {
                    Ok(s) => s,
                    Err(e) => {
                        // Tell the client why (an alert), then close.
                        let _ = flush_tls(&mut c, &mut sock);
                        return Err(tls_err(e));
                    }
                };
                if state.plaintext_bytes_to_read() > 0 {
                    loop {
                        match c.reader().read(&mut plain) {
                            Ok(0) => break,
                            Ok(m) => out.extend_from_slice(plain.get(..m).unwrap_or_default()),
                            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                            Err(e) => return Err(e),
                        }
                    }
                }
                closed |= state.peer_has_closed();
            }
            flush_tls(&mut c, &mut sock)?;
        }
        inner.write_all(&out)?;
        if closed {
            return Ok(());
        }
    }
}
