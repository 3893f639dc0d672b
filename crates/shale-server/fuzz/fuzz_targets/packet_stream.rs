//! Packet framing over a byte stream with lying headers and sequence ids:
//! every read ends in a payload, end of stream or an error.
#![no_main]
use shale_server::mysql::packet::PacketIo;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut io = PacketIo::new(std::io::Cursor::new(data.to_vec()), 1 << 10);
    for _ in 0..1000 {
        match io.read_payload() {
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
});
