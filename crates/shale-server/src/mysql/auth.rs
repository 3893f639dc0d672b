//! Password authentication (docs/mysql-protocol.md, "Authentication").
//!
//! The server never stores a password, only what the two challenge-response
//! plugins need to check a client's answer to a fresh 20-byte nonce:
//!
//! * `mysql_native_password`: stored `S1 = SHA1(SHA1(pw))`; the client
//!   sends `T = SHA1(pw) XOR SHA1(nonce ++ S1)`. The server computes
//!   `X = T XOR SHA1(nonce ++ S1)` and accepts when `SHA1(X) == S1`.
//! * `caching_sha2_password` (fast path): stored `S2 = SHA256(SHA256(pw))`;
//!   the client sends `T = SHA256(pw) XOR SHA256(S2 ++ nonce)`; the server
//!   accepts when `SHA256(T XOR SHA256(S2 ++ nonce)) == S2`. Because the
//!   check needs only `S2`, every login can take the fast path: there is no
//!   cleartext "full authentication" exchange, so no password ever crosses
//!   the wire, with or without TLS.
//!
//! An empty password is an empty token under both plugins.

use sha1::Sha1;
use sha2::{Digest, Sha256};

/// `mysql_native_password`.
pub const NATIVE: &str = "mysql_native_password";
/// `caching_sha2_password`.
pub const CACHING_SHA2: &str = "caching_sha2_password";

/// True for the plugins [`Credentials::verify`] checks.
pub fn is_supported(plugin: &str) -> bool {
    plugin == NATIVE || plugin == CACHING_SHA2
}

/// Length of the nonce ("auth plugin data") the server sends.
pub const NONCE_LEN: usize = 20;

/// What is stored per account: one verifier per plugin, never the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// `SHA1(SHA1(pw))`, or `None` for an empty password.
    native: Option<[u8; 20]>,
    /// `SHA256(SHA256(pw))`, or `None` for an empty password.
    sha2: Option<[u8; 32]>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Verifiers are password equivalents for the native plugin: keep
        // them out of logs.
        f.debug_struct("Credentials")
            .field("empty_password", &self.native.is_none())
            .finish()
    }
}

impl Credentials {
    /// The verifiers of `password`.
    pub fn from_password(password: &str) -> Self {
        if password.is_empty() {
            return Credentials {
                native: None,
                sha2: None,
            };
        }
        let s1: [u8; 20] = Sha1::digest(Sha1::digest(password.as_bytes())).into();
        let s2: [u8; 32] = Sha256::digest(Sha256::digest(password.as_bytes())).into();
        Credentials {
            native: Some(s1),
            sha2: Some(s2),
        }
    }

    /// The stored form: `00` for an empty password, or `01` then `S1` (20
    /// bytes) then `S2` (32 bytes). docs/mysql-protocol.md, "Accounts".
    pub fn to_bytes(&self) -> Vec<u8> {
        match (self.native, self.sha2) {
            (Some(s1), Some(s2)) => [&[1u8][..], &s1, &s2].concat(),
            _ => vec![0],
        }
    }

    /// Decodes [`Credentials::to_bytes`]; `None` if malformed.
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        match b.split_first()? {
            (0, []) => Some(Credentials::from_password("")),
            (1, rest) if rest.len() == 52 => {
                let (s1, s2) = rest.split_at(20);
                Some(Credentials {
                    native: Some(s1.try_into().ok()?),
                    sha2: Some(s2.try_into().ok()?),
                })
            }
            _ => None,
        }
    }

    /// True when the password is empty (any plugin, empty token).
    pub fn is_empty_password(&self) -> bool {
        self.native.is_none()
    }

    /// Checks `token`, the client's answer to `nonce` under `plugin`.
    /// `None` for a plugin this server does not check.
    pub fn verify(&self, plugin: &str, nonce: &[u8; NONCE_LEN], token: &[u8]) -> Option<bool> {
        match plugin {
            NATIVE => Some(match self.native {
                None => token.is_empty(),
                Some(s1) => verify_native(&s1, nonce, token),
            }),
            CACHING_SHA2 => Some(match self.sha2 {
                None => token.is_empty(),
                Some(s2) => verify_sha2(&s2, nonce, token),
            }),
            _ => None,
        }
    }
}

fn verify_native(s1: &[u8; 20], nonce: &[u8; NONCE_LEN], token: &[u8]) -> bool {
    let Ok(token) = <[u8; 20]>::try_from(token) else {
        return false;
    };
    let mask: [u8; 20] = Sha1::new()
        .chain_update(nonce)
        .chain_update(s1)
        .finalize()
        .into();
    let stage1 = xor(&token, &mask);
    let check: [u8; 20] = Sha1::digest(stage1).into();
    constant_time_eq(&check, s1)
}

fn verify_sha2(s2: &[u8; 32], nonce: &[u8; NONCE_LEN], token: &[u8]) -> bool {
    let Ok(token) = <[u8; 32]>::try_from(token) else {
        return false;
    };
    let mask: [u8; 32] = Sha256::new()
        .chain_update(s2)
        .chain_update(nonce)
        .finalize()
        .into();
    let stage1 = xor(&token, &mask);
    let check: [u8; 32] = Sha256::digest(stage1).into();
    constant_time_eq(&check, s2)
}

fn xor<const N: usize>(a: &[u8; N], b: &[u8; N]) -> [u8; N] {
    let mut out = [0u8; N];
    for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
        *o = x ^ y;
    }
    out
}

/// Compares without an early exit, so timing does not tell how many leading
/// bytes of a guess were right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A fresh nonce: random bytes in 1..=127 except `$` (clients treat the nonce
/// as a C string, and MySQL servers avoid `$`, so this matches them).
pub fn new_nonce() -> [u8; NONCE_LEN] {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    let mut n = [0u8; NONCE_LEN];
    for b in &mut n {
        *b = loop {
            let c: u8 = rng.gen_range(1..=127);
            if c != b'$' {
                break c;
            }
        };
    }
    n
}

/// What a client computes for `mysql_native_password` (tests and tools).
pub fn native_token(password: &str, nonce: &[u8; NONCE_LEN]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let stage1: [u8; 20] = Sha1::digest(password.as_bytes()).into();
    let s1: [u8; 20] = Sha1::digest(stage1).into();
    let mask: [u8; 20] = Sha1::new()
        .chain_update(nonce)
        .chain_update(s1)
        .finalize()
        .into();
    xor(&stage1, &mask).to_vec()
}

/// What a client computes for `caching_sha2_password` (tests and tools).
pub fn sha2_token(password: &str, nonce: &[u8; NONCE_LEN]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let stage1: [u8; 32] = Sha256::digest(password.as_bytes()).into();
    let s2: [u8; 32] = Sha256::digest(stage1).into();
    let mask: [u8; 32] = Sha256::new()
        .chain_update(s2)
        .chain_update(nonce)
        .finalize()
        .into();
    xor(&stage1, &mask).to_vec()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn right_password_passes_and_wrong_one_fails_under_both_plugins() {
        let creds = Credentials::from_password("s3cret");
        let nonce = new_nonce();
        for (plugin, token) in [
            (NATIVE, native_token("s3cret", &nonce)),
            (CACHING_SHA2, sha2_token("s3cret", &nonce)),
        ] {
            assert_eq!(creds.verify(plugin, &nonce, &token), Some(true), "{plugin}");
            let mut bad = token.clone();
            bad[0] ^= 1;
            assert_eq!(creds.verify(plugin, &nonce, &bad), Some(false), "{plugin}");
            assert_eq!(creds.verify(plugin, &nonce, &[]), Some(false), "{plugin}");
            assert_eq!(
                creds.verify(plugin, &nonce, &token[..token.len() - 1]),
                Some(false)
            );
            // A token answers one nonce only (no replay).
            let other = new_nonce();
            assert_eq!(creds.verify(plugin, &other, &token), Some(false));
        }
        assert_eq!(creds.verify("dialog", &nonce, b"x"), None);
    }

    /// The published test vector of the native scheme: SHA1(SHA1("password"))
    /// is what `SELECT PASSWORD('password')` shows (after the `*`).
    #[test]
    fn native_verifier_matches_mysql_password_function() {
        let creds = Credentials::from_password("password");
        let hex: String = creds
            .native
            .unwrap()
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect();
        assert_eq!(hex, "2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19");
    }

    #[test]
    fn stored_form_round_trips_and_rejects_damage() {
        for pw in ["", "pw"] {
            let c = Credentials::from_password(pw);
            assert_eq!(Credentials::from_bytes(&c.to_bytes()), Some(c.clone()));
            let b = c.to_bytes();
            assert_eq!(Credentials::from_bytes(&b[..b.len() - 1]), None, "{pw:?}");
        }
        assert_eq!(Credentials::from_bytes(&[2]), None);
        assert_eq!(Credentials::from_bytes(&[]), None);
    }

    #[test]
    fn empty_password_accepts_only_an_empty_token() {
        let creds = Credentials::from_password("");
        let nonce = new_nonce();
        assert!(creds.is_empty_password());
        assert_eq!(creds.verify(NATIVE, &nonce, &[]), Some(true));
        assert_eq!(
            creds.verify(NATIVE, &nonce, &native_token("x", &nonce)),
            Some(false)
        );
    }

    #[test]
    fn nonces_are_printable_c_strings() {
        for _ in 0..100 {
            assert!(new_nonce()
                .iter()
                .all(|&b| (1..=127).contains(&b) && b != b'$'));
        }
    }
}
