//! TLS for the servers: rustls on the ring provider.
//!
//! A data directory gets a self-signed certificate at first start (as MySQL
//! 8's `auto_generate_certs` does): `server-cert.pem` and `server-key.pem`,
//! the key readable by the owner only. An operator can point at their own
//! files instead. Clients that verify the server certificate need the
//! generated certificate (or their own CA's).

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {reason}", path.display())]
    Pem { path: PathBuf, reason: String },
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("generating a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
}

/// The file names in a data directory.
pub const CERT_FILE: &str = "server-cert.pem";
pub const KEY_FILE: &str = "server-key.pem";

/// Loads `dir/server-{cert,key}.pem`, creating a self-signed pair first if
/// neither exists.
pub fn load_or_create(dir: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let cert = dir.join(CERT_FILE);
    let key = dir.join(KEY_FILE);
    if !cert.exists() && !key.exists() {
        let generated = rcgen::generate_simple_self_signed(vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
        ])?;
        write_private(&key, generated.signing_key.serialize_pem().as_bytes())?;
        std::fs::write(&cert, generated.cert.pem()).map_err(|source| TlsError::Io {
            op: "write",
            path: cert.clone(),
            source,
        })?;
    }
    from_pem_files(&cert, &key)
}

/// A server configuration from PEM files: a certificate chain and its key.
pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let pem_err = |path: &Path, e: rustls::pki_types::pem::Error| TlsError::Pem {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| pem_err(cert, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_err(cert, e))?;
    if chain.is_empty() {
        return Err(TlsError::Pem {
            path: cert.to_path_buf(),
            reason: "no certificate in the file".into(),
        });
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| pem_err(key, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)?;
    Ok(Arc::new(cfg))
}

/// Writes a file only its owner can read (mode 0600 from creation on).
fn write_private(path: &Path, data: &[u8]) -> Result<(), TlsError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let io = |source| TlsError::Io {
        op: "write",
        path: path.to_path_buf(),
        source,
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io)?;
    f.write_all(data).map_err(io)?;
    f.sync_all().map_err(io)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn a_new_directory_gets_a_private_key_and_reuses_it() {
        let dir = tempfile::tempdir().unwrap();
        load_or_create(dir.path()).unwrap();
        let mode = std::fs::metadata(dir.path().join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let cert = std::fs::read(dir.path().join(CERT_FILE)).unwrap();
        load_or_create(dir.path()).unwrap();
        assert_eq!(std::fs::read(dir.path().join(CERT_FILE)).unwrap(), cert);
    }

    #[test]
    fn bad_files_are_typed_errors() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("c.pem");
        let key = dir.path().join("k.pem");
        std::fs::write(&cert, "not pem").unwrap();
        std::fs::write(&key, "not pem").unwrap();
        assert!(matches!(
            from_pem_files(&cert, &key),
            Err(TlsError::Pem { .. })
        ));
        // Only one of the two present: not overwritten, an error.
        std::fs::write(dir.path().join(KEY_FILE), "x").unwrap();
        assert!(load_or_create(dir.path()).is_err());
        assert!(matches!(
            from_pem_files(&dir.path().join("missing"), &key),
            Err(TlsError::Pem { .. })
        ));
    }
}
