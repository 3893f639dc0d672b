//! Arbitrary and mutated bytes into every decoder a client can reach:
//! each returns a value or a typed error, never panics, never loops. (The
//! proptest version of the fuzz targets; it runs in CI.)
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use proptest::prelude::*;
use shale_server::admin::lex;
use shale_server::mysql::binary::{decode_execute, ParamType};
use shale_server::mysql::handshake::decode_client_hello;
use shale_server::mysql::packet::PacketIo;

/// A well-formed HandshakeResponse41 to mutate: protocol 4.1, secure
/// connection, plugin auth, connect-with-db, connect attributes.
fn valid_hello() -> Vec<u8> {
    let caps: u32 = 0x0000_0200 | 0x0000_8000 | 0x0008_0000 | 0x0000_0008 | 0x0010_0000;
    let mut b = caps.to_le_bytes().to_vec();
    b.extend_from_slice(&(16u32 << 20).to_le_bytes());
    b.push(45);
    b.extend_from_slice(&[0; 23]);
    b.extend_from_slice(b"root\0");
    b.push(20);
    b.extend_from_slice(&[7; 20]);
    b.extend_from_slice(b"shop\0");
    b.extend_from_slice(b"mysql_native_password\0");
    b.push(10); // attributes length
    b.extend_from_slice(&[4, b'_', b'p', b'i', b'd', 4, b'1', b'2', b'3', b'4']);
    b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn client_hello_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = decode_client_hello(&bytes);
    }

    #[test]
    fn mutated_client_hello_never_panics(
        cut in 0usize..120,
        flips in proptest::collection::vec((0usize..120, any::<u8>()), 0..6),
    ) {
        let mut b = valid_hello();
        for (i, v) in flips {
            if let Some(x) = b.get_mut(i) {
                *x = v;
            }
        }
        b.truncate(cut.max(1));
        let _ = decode_client_hello(&b);
    }

    #[test]
    fn execute_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        params in 0usize..40,
        bound in proptest::option::of(proptest::collection::vec((any::<u8>(), any::<bool>()), 0..40)),
    ) {
        let bound: Option<Vec<ParamType>> = bound.map(|v| {
            v.into_iter().map(|(code, unsigned)| ParamType { code, unsigned }).collect()
        });
        let long: Vec<Option<Vec<u8>>> = (0..params).map(|i| (i % 3 == 0).then(|| vec![1, 2])).collect();
        let _ = decode_execute(&bytes, params, bound.as_deref(), &long);
    }

    /// A byte stream of packets with lying headers: each read returns a
    /// payload, end of stream or an error, and the loop ends.
    #[test]
    fn packet_stream_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut io = PacketIo::new(std::io::Cursor::new(bytes), 64);
        for _ in 0..200 {
            match io.read_payload() {
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
    }

    #[test]
    fn statement_lexing_never_panics(s in "\\PC{0,80}") {
        let parts = lex::split_statements(&s);
        for p in &parts {
            prop_assert!(!p.is_empty());
            prop_assert!(s.contains(p));
        }
        let _ = lex::tokens(&s);
    }
}
