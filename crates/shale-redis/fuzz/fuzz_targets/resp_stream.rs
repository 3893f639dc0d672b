//! The RESP request parser on arbitrary bytes, the way the server reads a
//! connection's input: requests parsed one after the other until the
//! buffer is incomplete or a protocol error. Never a panic; each request
//! consumes at least one byte and no more than is there; a parsed request
//! re-encoded as a multibulk parses back to the same arguments.
#![no_main]
use shale_redis::resp::{parse_request, Parsed};

fn encode(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend(format!("${}\r\n", a.len()).into_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut pos = 0;
    while pos < data.len() {
        match parse_request(&data[pos..]) {
            Ok(Parsed::Incomplete) | Err(_) => break,
            Ok(Parsed::Request(args, used)) => {
                assert!(used > 0 && used <= data.len() - pos, "bad length {used}");
                if !args.is_empty() {
                    let again = encode(&args);
                    match parse_request(&again) {
                        Ok(Parsed::Request(back, n)) => {
                            assert_eq!(back, args);
                            assert_eq!(n, again.len());
                        }
                        other => panic!("re-encoded request did not parse: {other:?}"),
                    }
                }
                pos += used;
            }
        }
    }
});
