//! Connection phase messages (docs/mysql-protocol.md, "Connection phase"):
//! the server's Handshake v10, the client's HandshakeResponse41 (or its
//! 32-byte prefix, SSLRequest), and AuthSwitchRequest.
//!
//! ```text
//! server -> Handshake v10 (nonce, capabilities, default plugin)
//! client -> [SSLRequest, TLS handshake]  HandshakeResponse41 (user, token, db, plugin)
//! server -> [AuthSwitchRequest -> client token]   when the client used another plugin
//! server -> [AuthMoreData 0x03 (caching_sha2 fast auth)]  OK | ERR 1045
//! ```

use super::consts::cap;
use super::wire::{put_nul_bytes, Reader};
use super::{auth, ProtocolError};

/// The fields of Handshake v10 that vary.
pub struct Greeting<'a> {
    pub server_version: &'a str,
    pub connection_id: u32,
    pub nonce: &'a [u8; auth::NONCE_LEN],
    pub capabilities: u32,
    pub charset: u8,
    pub status: u16,
    pub plugin: &'a str,
}

/// Encodes Handshake v10.
pub fn encode_greeting(g: &Greeting<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(96);
    out.push(10); // protocol version
    put_nul_bytes(&mut out, g.server_version.as_bytes());
    out.extend_from_slice(&g.connection_id.to_le_bytes());
    let (part1, part2) = g.nonce.split_at(8);
    out.extend_from_slice(part1);
    out.push(0); // filler
    let caps = g.capabilities.to_le_bytes();
    out.extend_from_slice(&caps[..2]);
    out.push(g.charset);
    out.extend_from_slice(&g.status.to_le_bytes());
    out.extend_from_slice(&caps[2..]);
    out.push(21); // length of the nonce including its NUL terminator
    out.extend_from_slice(&[0; 10]); // reserved
    put_nul_bytes(&mut out, part2);
    put_nul_bytes(&mut out, g.plugin.as_bytes());
    out
}

/// The client's answer to the greeting.
#[derive(Debug)]
pub enum ClientHello {
    /// SSLRequest: switch to TLS, then the full response follows.
    Ssl { capabilities: u32 },
    /// HandshakeResponse41.
    Response(HandshakeResponse),
}

/// HandshakeResponse41.
#[derive(Debug, Default)]
pub struct HandshakeResponse {
    pub capabilities: u32,
    pub max_packet: u32,
    pub charset: u8,
    pub user: String,
    pub auth_response: Vec<u8>,
    pub database: Option<String>,
    /// The plugin the token was computed with (`None`: the client did not
    /// say, which means `mysql_native_password`).
    pub plugin: Option<String>,
    pub attributes: Vec<(String, String)>,
}

/// Decodes HandshakeResponse41 or SSLRequest. Pre-4.1 clients are refused.
pub fn decode_client_hello(payload: &[u8]) -> Result<ClientHello, ProtocolError> {
    let mut r = Reader::new(payload);
    let capabilities = r.u32("client capabilities")?;
    if capabilities & cap::PROTOCOL_41 == 0 {
        return Err(ProtocolError::Unsupported(
            "clients older than protocol 4.1",
        ));
    }
    let max_packet = r.u32("max packet size")?;
    let charset = r.u8("character set")?;
    r.bytes(23, "reserved bytes")?;
    if r.is_empty() && capabilities & cap::SSL != 0 {
        return Ok(ClientHello::Ssl { capabilities });
    }
    let user = text(r.nul_bytes("user name")?, "user name")?;
    let auth_response = if capabilities & cap::PLUGIN_AUTH_LENENC_DATA != 0 {
        r.lenenc_bytes("auth response")?.to_vec()
    } else if capabilities & cap::SECURE_CONNECTION != 0 {
        let n = r.u8("auth response length")?;
        r.bytes(usize::from(n), "auth response")?.to_vec()
    } else {
        r.nul_bytes("auth response")?.to_vec()
    };
    let database = if capabilities & cap::CONNECT_WITH_DB != 0 && !r.is_empty() {
        Some(text(r.nul_bytes("database")?, "database")?).filter(|d| !d.is_empty())
    } else {
        None
    };
    let plugin = if capabilities & cap::PLUGIN_AUTH != 0 && !r.is_empty() {
        Some(text(r.nul_bytes("auth plugin")?, "auth plugin")?)
    } else {
        None
    };
    let mut attributes = Vec::new();
    if capabilities & cap::CONNECT_ATTRS != 0 && !r.is_empty() {
        let attrs = r.lenenc_bytes("connection attributes")?;
        let mut a = Reader::new(attrs);
        while !a.is_empty() {
            let k = text(a.lenenc_bytes("attribute name")?, "attribute name")?;
            let v = text(a.lenenc_bytes("attribute value")?, "attribute value")?;
            attributes.push((k, v));
        }
    }
    Ok(ClientHello::Response(HandshakeResponse {
        capabilities,
        max_packet,
        charset,
        user,
        auth_response,
        database,
        plugin,
        attributes,
    }))
}

/// AuthSwitchRequest: "answer this nonce with `plugin`".
pub fn encode_auth_switch(plugin: &str, nonce: &[u8; auth::NONCE_LEN]) -> Vec<u8> {
    let mut out = vec![0xfe];
    put_nul_bytes(&mut out, plugin.as_bytes());
    put_nul_bytes(&mut out, nonce);
    out
}

/// AuthMoreData "fast authentication succeeded" of caching_sha2_password.
pub const SHA2_FAST_AUTH_OK: [u8; 2] = [0x01, 0x03];

fn text(b: &[u8], what: &'static str) -> Result<String, ProtocolError> {
    String::from_utf8(b.to_vec()).map_err(|_| ProtocolError::Malformed(what))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use crate::mysql::wire::{put_lenenc_bytes, put_nul_bytes};

    fn response(caps: u32) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&caps.to_le_bytes());
        p.extend_from_slice(&(16u32 << 20).to_le_bytes());
        p.push(45);
        p.extend_from_slice(&[0; 23]);
        put_nul_bytes(&mut p, b"root");
        put_lenenc_bytes(&mut p, &[7; 20]);
        put_nul_bytes(&mut p, b"sbtest");
        put_nul_bytes(&mut p, auth::NATIVE.as_bytes());
        let mut attrs = Vec::new();
        put_lenenc_bytes(&mut attrs, b"_client_name");
        put_lenenc_bytes(&mut attrs, b"libmariadb");
        put_lenenc_bytes(&mut p, &attrs);
        p
    }

    #[test]
    fn a_full_response_decodes() {
        let caps = cap::PROTOCOL_41
            | cap::PLUGIN_AUTH_LENENC_DATA
            | cap::SECURE_CONNECTION
            | cap::CONNECT_WITH_DB
            | cap::PLUGIN_AUTH
            | cap::CONNECT_ATTRS;
        let ClientHello::Response(r) = decode_client_hello(&response(caps)).unwrap() else {
            panic!("not a response");
        };
        assert_eq!(r.user, "root");
        assert_eq!(r.auth_response, vec![7; 20]);
        assert_eq!(r.database.as_deref(), Some("sbtest"));
        assert_eq!(r.plugin.as_deref(), Some(auth::NATIVE));
        assert_eq!(
            r.attributes,
            vec![("_client_name".into(), "libmariadb".into())]
        );
    }

    #[test]
    fn every_truncation_of_a_response_is_an_error_or_a_shorter_valid_one() {
        let caps = cap::PROTOCOL_41
            | cap::PLUGIN_AUTH_LENENC_DATA
            | cap::SECURE_CONNECTION
            | cap::CONNECT_WITH_DB
            | cap::PLUGIN_AUTH
            | cap::CONNECT_ATTRS;
        let full = response(caps);
        for n in 0..full.len() {
            // Must not panic; most prefixes are malformed.
            let _ = decode_client_hello(&full[..n]);
        }
        assert!(decode_client_hello(&full[..10]).is_err());
    }

    #[test]
    fn ssl_request_is_the_32_byte_prefix() {
        let caps = cap::PROTOCOL_41 | cap::SSL;
        let full = response(caps | cap::SECURE_CONNECTION);
        assert!(matches!(
            decode_client_hello(&full[..32]).unwrap(),
            ClientHello::Ssl { .. }
        ));
    }

    #[test]
    fn old_protocol_clients_are_refused() {
        let p = response(cap::SECURE_CONNECTION);
        assert!(matches!(
            decode_client_hello(&p),
            Err(ProtocolError::Unsupported(_))
        ));
    }

    #[test]
    fn greeting_layout() {
        let nonce = [b'a'; 20];
        let g = encode_greeting(&Greeting {
            server_version: "8.0.36-ShaleDB",
            connection_id: 9,
            nonce: &nonce,
            capabilities: cap::SERVER,
            charset: 46,
            status: 2,
            plugin: auth::NATIVE,
        });
        let mut r = Reader::new(&g);
        assert_eq!(r.u8("v").unwrap(), 10);
        assert_eq!(r.nul_bytes("ver").unwrap(), b"8.0.36-ShaleDB");
        assert_eq!(r.u32("id").unwrap(), 9);
        assert_eq!(r.bytes(8, "n1").unwrap(), &nonce[..8]);
        assert_eq!(r.u8("filler").unwrap(), 0);
        let lo = r.u16("caps").unwrap();
        assert_eq!(r.u8("cs").unwrap(), 46);
        assert_eq!(r.u16("st").unwrap(), 2);
        let hi = r.u16("caps").unwrap();
        assert_eq!(u32::from(lo) | u32::from(hi) << 16, cap::SERVER);
        assert_eq!(r.u8("len").unwrap(), 21);
        r.bytes(10, "res").unwrap();
        assert_eq!(r.nul_bytes("n2").unwrap(), &nonce[8..]);
        assert_eq!(r.nul_bytes("plugin").unwrap(), auth::NATIVE.as_bytes());
        assert!(r.is_empty());
    }
}
