//! The connection phase on the I/O thread: greeting, optional switch to
//! TLS, authentication (docs/mysql-protocol.md, "Connection phase").
//!
//! It runs on the connection's I/O task, not on an executor thread: it
//! mostly waits for the client (a slow or silent client then holds a task,
//! not a thread), and its CPU work is a few SHA digests. Only opening the
//! session, which may read the engine, goes to the executor pool.

use super::consts::{cap, charset, err, status};
use super::frame::{AsyncPacketIo, AsyncTransport};
use super::handshake::{self, ClientHello, Greeting, HandshakeResponse};
use super::results::ok_packet;
use super::{auth, ProtocolError};
use crate::backend::{Backend, ConnInfo, SqlError};
use crate::mysql::conn::{session_status, ConnConfig};
use crate::server::Shared;
use std::sync::Arc;

/// A connection's stream on the I/O threads.
pub type BoxedStream = Box<dyn AsyncTransport>;

/// Greets the client and authenticates it; on success the OK packet is
/// sent and the session is open. Also says whether the client switched to
/// TLS.
pub(super) async fn login<B: Backend>(
    backend: &Arc<B>,
    io: &mut AsyncPacketIo<BoxedStream>,
    connection_id: u32,
    peer_host: &str,
    cfg: &ConnConfig,
    shared: &Arc<Shared>,
) -> Result<(B::Session, bool), ProtocolError>
where
    B::Session: 'static,
{
    let nonce = auth::new_nonce();
    io.write_payload(&handshake::encode_greeting(&Greeting {
        server_version: &cfg.server_version,
        connection_id,
        nonce: &nonce,
        capabilities: if cfg.tls.is_some() {
            cap::SERVER | cap::SSL
        } else {
            cap::SERVER
        },
        charset: u8::try_from(charset::UTF8MB4_BIN).unwrap_or(46),
        status: status::AUTOCOMMIT,
        plugin: cfg.default_plugin,
    }));
    io.flush().await?;
    let payload = io.read_payload().await?.ok_or(ProtocolError::Closed)?;
    let mut secure = false;
    let resp: HandshakeResponse = match handshake::decode_client_hello(&payload)? {
        ClientHello::Response(r) => {
            if cfg.require_tls {
                return Err(ProtocolError::Refused(SqlError::new(
                    3159,
                    *b"HY000",
                    "Connections using insecure transport are prohibited while \
                     --require_secure_transport=ON.",
                )));
            }
            r
        }
        ClientHello::Ssl { .. } => {
            let tls = cfg
                .tls
                .clone()
                .ok_or(ProtocolError::Unsupported("TLS was not offered"))?;
            start_tls(io, tls, cfg.max_allowed_packet).await?;
            secure = true;
            let payload = io.read_payload().await?.ok_or(ProtocolError::Closed)?;
            match handshake::decode_client_hello(&payload)? {
                ClientHello::Response(r) => r,
                ClientHello::Ssl { .. } => {
                    return Err(ProtocolError::Malformed("second SSLRequest"))
                }
            }
        }
    };
    let denied = |using_password: bool| {
        ProtocolError::AccessDenied(SqlError::new(
            err::ACCESS_DENIED,
            *b"28000",
            format!(
                "Access denied for user '{}'@'{peer_host}' (using password: {})",
                resp.user,
                if using_password { "YES" } else { "NO" }
            ),
        ))
    };
    let creds = backend.credentials(&resp.user, peer_host);
    let plugin = resp.plugin.as_deref().unwrap_or(auth::NATIVE);
    // The token is checked under the client's plugin when we know it;
    // otherwise the client is asked to answer a new nonce with ours.
    let has_password = creds.as_ref().is_some_and(|c| !c.is_empty_password());
    let (plugin, nonce, token) =
        if auth::is_supported(plugin) && (!resp.auth_response.is_empty() || !has_password) {
            (plugin.to_owned(), nonce, resp.auth_response.clone())
        } else {
            // A client whose plugin differs from the greeting's may send an
            // empty token and wait to be asked: ask under its own plugin
            // (or ours, for a plugin we do not know).
            let asked = if auth::is_supported(plugin) {
                plugin
            } else {
                auth::NATIVE
            };
            let fresh = auth::new_nonce();
            io.write_payload(&handshake::encode_auth_switch(asked, &fresh));
            io.flush().await?;
            let token = io.read_payload().await?.ok_or(ProtocolError::Closed)?;
            (asked.to_owned(), fresh, token)
        };
    let using_password = !token.is_empty();
    // An unknown user is checked against a throwaway verifier so the reply
    // takes as long and says the same as a wrong password.
    let ok = match &creds {
        Some(c) => c.verify(&plugin, &nonce, &token) == Some(true),
        None => {
            let _ = auth::Credentials::from_password("x").verify(&plugin, &nonce, &token);
            false
        }
    };
    if !ok {
        return Err(denied(using_password));
    }
    if plugin == auth::CACHING_SHA2 && using_password {
        io.write_payload(&handshake::SHA2_FAST_AUTH_OK);
    }
    let info = ConnInfo {
        id: connection_id,
        user: resp.user.clone(),
        host: peer_host.to_owned(),
        database: resp.database.clone(),
        shared: shared.clone(),
    };
    let opener = backend.clone();
    let session = tokio::task::spawn_blocking(move || opener.open_session(&info))
        .await
        .map_err(|_| ProtocolError::Unsupported("the session could not be opened"))?
        .map_err(ProtocolError::Refused)?;
    shared
        .processes
        .logged_in(connection_id, &resp.user, resp.database.as_deref());
    let status = session_status(&session);
    io.write_payload(&ok_packet(0, 0, status, 0, ""));
    io.flush().await?;
    Ok((session, secure))
}

/// Switches `io` to TLS after an SSLRequest; the sequence id carries on.
/// The SSLRequest was read without read-ahead, so the client's TLS
/// ClientHello is still in the socket, whole.
async fn start_tls(
    io: &mut AsyncPacketIo<BoxedStream>,
    tls: Arc<rustls::ServerConfig>,
    max_packet: usize,
) -> Result<(), ProtocolError> {
    // Stands in for the moment the plain stream is handed to the acceptor.
    let placeholder: BoxedStream = Box::new(tokio::io::duplex(1).0);
    let plain = std::mem::replace(io, AsyncPacketIo::new(placeholder, max_packet));
    let (stream, seq) = plain.into_inner();
    let secure = tokio_rustls::TlsAcceptor::from(tls).accept(stream).await?;
    *io = AsyncPacketIo::resume(Box::new(secure), seq, max_packet);
    Ok(())
}
