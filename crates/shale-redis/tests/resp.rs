//! The RESP2 request parser and reply encoder, including malformed input.
// Tests index and unwrap freely: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use proptest::prelude::*;
use shale_redis::resp::{parse_request, split_args, Parsed, ProtocolError, Reply};

fn req(args: &[&str], used: usize) -> Parsed {
    Parsed::Request(args.iter().map(|a| a.as_bytes().to_vec()).collect(), used)
}

#[test]
fn multibulk_complete_and_pipelined() {
    let buf = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n";
    let first = parse_request(buf).unwrap();
    assert_eq!(first, req(&["GET", "k"], 20));
    assert_eq!(parse_request(&buf[20..]).unwrap(), req(&["PING"], 14));
}

#[test]
fn every_prefix_is_incomplete() {
    let buf = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n";
    for n in 0..buf.len() {
        assert_eq!(
            parse_request(&buf[..n]).unwrap(),
            Parsed::Incomplete,
            "prefix {n}"
        );
    }
    assert_eq!(
        parse_request(buf).unwrap(),
        req(&["SET", "k", "hello"], buf.len())
    );
}

#[test]
fn binary_bulk_with_crlf_inside() {
    let buf = b"*1\r\n$4\r\na\r\nb\r\n";
    assert_eq!(parse_request(buf).unwrap(), req(&["a\r\nb"], buf.len()));
}

#[test]
fn empty_and_negative_multibulk_are_empty_requests() {
    assert_eq!(parse_request(b"*0\r\n").unwrap(), req(&[], 4));
    assert_eq!(parse_request(b"*-1\r\n").unwrap(), req(&[], 5));
}

#[test]
fn bad_lengths() {
    assert_eq!(
        parse_request(b"*x\r\n"),
        Err(ProtocolError::MultibulkLength)
    );
    assert_eq!(parse_request(b"*\r\n"), Err(ProtocolError::MultibulkLength));
    assert_eq!(
        parse_request(b"*+1\r\n"),
        Err(ProtocolError::MultibulkLength)
    );
    assert_eq!(
        parse_request(b"*1048577\r\n"),
        Err(ProtocolError::MultibulkLength)
    );
    assert_eq!(
        parse_request(b"*1\r\n$abc\r\n"),
        Err(ProtocolError::BulkLength)
    );
    assert_eq!(
        parse_request(b"*1\r\n$-1\r\n"),
        Err(ProtocolError::BulkLength)
    );
    // 2^40 and 512 MB + 1: refused before any allocation.
    assert_eq!(
        parse_request(b"*1\r\n$1099511627776\r\n"),
        Err(ProtocolError::BulkLength)
    );
    assert_eq!(
        parse_request(b"*1\r\n$536870913\r\n"),
        Err(ProtocolError::BulkLength)
    );
    // 512 MB itself is allowed (and incomplete here).
    assert_eq!(
        parse_request(b"*1\r\n$536870912\r\n").unwrap(),
        Parsed::Incomplete
    );
    assert_eq!(
        parse_request(b"*99999999999999999999\r\n"),
        Err(ProtocolError::MultibulkLength)
    );
}

#[test]
fn nested_or_wrong_type_inside_multibulk() {
    assert_eq!(
        parse_request(b"*1\r\n*1\r\n$1\r\na\r\n"),
        Err(ProtocolError::ExpectedDollar('*'))
    );
    assert_eq!(
        parse_request(b"*1\r\n:1\r\n"),
        Err(ProtocolError::ExpectedDollar(':'))
    );
    // 100k nested arrays: still one error, no recursion.
    let deep = "*1\r\n".repeat(100_000);
    assert_eq!(
        parse_request(deep.as_bytes()),
        Err(ProtocolError::ExpectedDollar('*'))
    );
}

#[test]
fn missing_crlf_after_bulk() {
    assert_eq!(
        parse_request(b"*1\r\n$1\r\naXY"),
        Err(ProtocolError::MissingCrlf)
    );
    assert_eq!(
        parse_request(b"*1\r\n$1\r\na\rX"),
        Err(ProtocolError::MissingCrlf)
    );
    assert_eq!(
        parse_request(b"*1\r\n$1\r\na\r").unwrap(),
        Parsed::Incomplete
    );
}

#[test]
fn header_without_crlf_is_bounded() {
    let mut long = b"*1".to_vec();
    long.extend(std::iter::repeat_n(b'1', 70_000));
    assert_eq!(parse_request(&long), Err(ProtocolError::BigCount));
    let mut bulk = b"*1\r\n$".to_vec();
    bulk.extend(std::iter::repeat_n(b'1', 70_000));
    assert_eq!(parse_request(&bulk), Err(ProtocolError::BigBulkCount));
    let inline = vec![b'a'; 70_000];
    assert_eq!(parse_request(&inline), Err(ProtocolError::BigInline));
}

#[test]
fn inline_commands() {
    assert_eq!(parse_request(b"PING\r\n").unwrap(), req(&["PING"], 6));
    assert_eq!(
        parse_request(b"set  k   v\n").unwrap(),
        req(&["set", "k", "v"], 11)
    );
    assert_eq!(parse_request(b"\r\n").unwrap(), req(&[], 2));
    assert_eq!(parse_request(b"PING").unwrap(), Parsed::Incomplete);
    assert_eq!(
        parse_request(b"set \"a b\r\n"),
        Err(ProtocolError::UnbalancedQuotes)
    );
    assert_eq!(
        parse_request(b"set 'a\r\n"),
        Err(ProtocolError::UnbalancedQuotes)
    );
}

#[test]
fn inline_quoting_like_sdssplitargs() {
    let got = split_args(br#"set "a\x41\n" 'it\'s' "q"x"#);
    assert_eq!(got, None, "closing quote must be followed by a blank");
    let got = split_args(br#"set "a\x41\n" 'it\'s'"#).unwrap();
    assert_eq!(
        got,
        vec![b"set".to_vec(), b"aA\n".to_vec(), b"it's".to_vec()]
    );
}

#[test]
fn encoder() {
    let mut out = Vec::new();
    Reply::Array(vec![
        Reply::ok(),
        Reply::err("ERR bad\r\nthing"),
        Reply::Int(-3),
        Reply::bulk("hi"),
        Reply::Nil,
        Reply::Array(vec![]),
    ])
    .encode(&mut out, false);
    assert_eq!(
        out,
        b"*6\r\n+OK\r\n-ERR bad  thing\r\n:-3\r\n$2\r\nhi\r\n$-1\r\n*0\r\n"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    /// Random bytes never panic; a request consumes at least one byte and no more than given.
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(Parsed::Request(_, used)) = parse_request(&bytes) {
            prop_assert!(used >= 1 && used <= bytes.len());
        }
    }

    /// Random bytes after a valid header: still no panic.
    #[test]
    fn random_after_header(tail in proptest::collection::vec(any::<u8>(), 0..200), n in 0u8..4) {
        let mut buf = format!("*{n}\r\n$").into_bytes();
        buf.extend(tail);
        let _ = parse_request(&buf);
    }

    /// Any encoded request parses back to itself, and byte-by-byte feeding agrees.
    #[test]
    fn roundtrip(args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 1..6)) {
        let mut buf = format!("*{}\r\n", args.len()).into_bytes();
        for a in &args {
            buf.extend(format!("${}\r\n", a.len()).into_bytes());
            buf.extend(a);
            buf.extend(b"\r\n");
        }
        prop_assert_eq!(parse_request(&buf).unwrap(), Parsed::Request(args.clone(), buf.len()));
        for n in 0..buf.len() {
            prop_assert_eq!(parse_request(&buf[..n]).unwrap(), Parsed::Incomplete);
        }
    }
}

/// Doubles print like C's `%.17g` (what Redis 7.0 sends), in RESP2 as bulk
/// strings and in RESP3 as `,` lines.
#[test]
fn doubles_print_like_redis_7_0() {
    use shale_redis::resp::format_double;
    for (x, want) in [
        (1.1, "1.1000000000000001"),
        (100.0, "100"),
        (0.5, "0.5"),
        (-2.5, "-2.5"),
        (1e17, "1e+17"),
        (1e16, "10000000000000000"),
        (0.0001, "0.0001"),
        (0.00001, "1.0000000000000001e-05"),
        (123456789012345678.0, "1.2345678901234568e+17"),
        (f64::INFINITY, "inf"),
        (f64::NEG_INFINITY, "-inf"),
        (0.0, "0"),
    ] {
        assert_eq!(format_double(x), want, "{x}");
    }
    let mut out = Vec::new();
    Reply::Double(1.5).encode(&mut out, false);
    Reply::Double(1.5).encode(&mut out, true);
    assert_eq!(out, b"$3\r\n1.5\r\n,1.5\r\n");
}

/// RESP3 aggregates and their RESP2 fallbacks.
#[test]
fn resp3_types_and_resp2_fallbacks() {
    let pairs = vec![(Reply::bulk("m"), Reply::Double(2.0))];
    let cases = [
        (Reply::Nil, "$-1\r\n", "_\r\n"),
        (Reply::NilArray, "*-1\r\n", "_\r\n"),
        (
            Reply::Map(vec![(Reply::bulk("k"), Reply::Int(1))]),
            "*2\r\n$1\r\nk\r\n:1\r\n",
            "%1\r\n$1\r\nk\r\n:1\r\n",
        ),
        (
            Reply::Set(vec![Reply::bulk("a")]),
            "*1\r\n$1\r\na\r\n",
            "~1\r\n$1\r\na\r\n",
        ),
        (
            Reply::Pairs(pairs),
            "*2\r\n$1\r\nm\r\n$1\r\n2\r\n",
            "*1\r\n*2\r\n$1\r\nm\r\n,2\r\n",
        ),
    ];
    for (r, two, three) in cases {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        r.encode(&mut a, false);
        r.encode(&mut b, true);
        assert_eq!(String::from_utf8(a).unwrap(), two, "{r:?}");
        assert_eq!(String::from_utf8(b).unwrap(), three, "{r:?}");
    }
}
