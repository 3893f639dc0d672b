//! HandshakeResponse41 / SSLRequest decoding: any bytes give a value or a
//! typed error.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = shale_server::mysql::handshake::decode_client_hello(data);
});
