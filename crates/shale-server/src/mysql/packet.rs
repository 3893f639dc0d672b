//! Packet framing (docs/mysql-protocol.md, "Packets").
//!
//! Every message travels as packets of `len: u24 LE | seq: u8 | payload`.
//! A payload of 2^24 - 1 bytes or more is split: full packets of exactly
//! `0xff_ffff` bytes, then a final shorter one (possibly empty), each with the
//! next sequence id. The receiver joins them. Sequence ids count up by one
//! (mod 256) within a command/reply exchange and restart at 0 with each
//! command.
//!
//! Worked example: a 16 MiB + 5 byte payload goes out as
//! `ff ff ff 00 <16 MiB - 1 bytes>` then `06 00 00 01 <6 bytes>`.
//!
//! `max_allowed_packet` bounds the *joined* payload: a larger one is
//! refused with [`ProtocolError::PacketTooLarge`] as soon as its headers say
//! so, before the bytes are buffered, so a client cannot make the server
//! allocate more than the limit.

use super::ProtocolError;
use std::io::{BufReader, Read, Write};

/// Largest payload one packet carries.
pub const MAX_PAYLOAD: usize = 0xff_ffff;

/// Reads and writes packets over a blocking stream. The server frames on
/// its I/O threads with `frame.rs` instead; this twin shares its header
/// check ([`check_header`]) and encoder ([`encode_payload`]) and serves the
/// blocking callers (the fuzz target, tests, tools).
pub struct PacketIo<S: Read + Write> {
    stream: BufReader<S>,
    /// Replies are gathered here and sent by [`PacketIo::flush`], so a
    /// result set costs one `write` call, not one per row.
    out: Vec<u8>,
    seq: u8,
    max_packet: usize,
    /// Bytes read and written since the last [`PacketIo::take_byte_counts`].
    bytes_in: u64,
    bytes_out: u64,
    /// Measure how long decoding a payload takes once its header arrived.
    pub timing: bool,
    /// The last such measurement.
    pub last_recv: std::time::Duration,
}

impl<S: Read + Write> PacketIo<S> {
    /// Frames `stream`, refusing joined payloads above `max_packet` bytes.
    pub fn new(stream: S, max_packet: usize) -> Self {
        PacketIo {
            stream: BufReader::with_capacity(16 << 10, stream),
            out: Vec::with_capacity(16 << 10),
            seq: 0,
            max_packet,
            bytes_in: 0,
            bytes_out: 0,
            timing: false,
            last_recv: std::time::Duration::ZERO,
        }
    }

    /// Bytes read and written since the last call (for `Bytes_received` /
    /// `Bytes_sent`).
    pub fn take_byte_counts(&mut self) -> (u64, u64) {
        (
            std::mem::take(&mut self.bytes_in),
            std::mem::take(&mut self.bytes_out),
        )
    }

    /// The underlying stream (for socket options and shutdown).
    pub fn get_ref(&self) -> &S {
        self.stream.get_ref()
    }

    /// Sets the limit on joined payloads (`SET GLOBAL max_allowed_packet`
    /// takes effect for new commands).
    pub fn set_max_packet(&mut self, max_packet: usize) {
        self.max_packet = max_packet;
    }

    /// Starts a new command exchange: the client's command has sequence 0.
    pub fn reset_seq(&mut self) {
        self.seq = 0;
    }

    /// Reads one (joined) payload. `Ok(None)` when the peer closed the
    /// connection cleanly between packets.
    pub fn read_payload(&mut self) -> Result<Option<Vec<u8>>, ProtocolError> {
        let mut payload = Vec::new();
        let mut first = true;
        let mut started = None;
        loop {
            let mut header = [0u8; 4];
            if first {
                if !read_exact_or_eof(&mut self.stream, &mut header)? {
                    return Ok(None);
                }
            } else {
                self.stream.read_exact(&mut header)?;
            }
            first = false;
            if self.timing && started.is_none() {
                started = Some(std::time::Instant::now());
            }
            let len = check_header(header, self.seq, payload.len(), self.max_packet)?;
            self.seq = self.seq.wrapping_add(1);
            let total = payload.len() + len;
            let start = payload.len();
            payload.resize(total, 0);
            let dst = payload
                .get_mut(start..)
                .ok_or(ProtocolError::Malformed("packet body"))?;
            self.stream.read_exact(dst)?;
            self.bytes_in += 4 + len as u64; // usize -> u64: lossless
            if len < MAX_PAYLOAD {
                if let Some(t) = started {
                    self.last_recv = t.elapsed();
                }
                return Ok(Some(payload));
            }
        }
    }

    /// Queues one payload, split into packets as needed.
    pub fn write_payload(&mut self, payload: &[u8]) {
        encode_payload(&mut self.out, &mut self.seq, payload);
    }

    /// Sends everything queued.
    pub fn flush(&mut self) -> Result<(), ProtocolError> {
        let s = self.stream.get_mut();
        s.write_all(&self.out)?;
        s.flush()?;
        self.bytes_out += self.out.len() as u64; // usize -> u64: lossless
        self.out.clear();
        Ok(())
    }

    /// Bytes queued but not sent (lets a long result set flush part-way).
    pub fn queued(&self) -> usize {
        self.out.len()
    }

    /// The stream, with the bytes already read ahead of the caller put back
    /// in front of it, and the next sequence id: for the switch to TLS. A
    /// client sends its TLS ClientHello right after SSLRequest without
    /// waiting, so those bytes may already sit in the read buffer.
    pub fn into_inner(self) -> (Prefixed<S>, u8) {
        let prefix = self.stream.buffer().to_vec();
        (
            Prefixed {
                prefix,
                pos: 0,
                inner: self.stream.into_inner(),
            },
            self.seq,
        )
    }

    /// Continues the sequence `seq` on a new stream (after the TLS switch).
    pub fn resume(stream: S, seq: u8, max_packet: usize) -> Self {
        let mut io = PacketIo::new(stream, max_packet);
        io.seq = seq;
        io
    }
}

/// Checks one packet header against the sequence id expected next and the
/// bytes already joined; returns the body length. The one place both the
/// blocking [`PacketIo`] and the event-driven reader (`mysql/frame.rs`)
/// validate what a client sends.
pub fn check_header(
    header: [u8; 4],
    expected_seq: u8,
    joined: usize,
    max_packet: usize,
) -> Result<usize, ProtocolError> {
    let [a, b, c, seq] = header;
    let len = usize::from(a) | usize::from(b) << 8 | usize::from(c) << 16;
    if seq != expected_seq {
        return Err(ProtocolError::OutOfOrder {
            expected: expected_seq,
            got: seq,
        });
    }
    let total = joined + len;
    if total > max_packet {
        return Err(ProtocolError::PacketTooLarge {
            size: total,
            max: max_packet,
        });
    }
    Ok(len)
}

/// Appends `payload` to `out` as packets (split as needed), numbering them
/// from `*seq` on.
pub fn encode_payload(out: &mut Vec<u8>, seq: &mut u8, payload: &[u8]) {
    let mut rest = payload;
    loop {
        let n = rest.len().min(MAX_PAYLOAD);
        let (chunk, tail) = rest.split_at(n);
        // n <= 0xff_ffff, so its three low bytes are the whole length.
        let len = (n as u32).to_le_bytes();
        out.extend_from_slice(&[len[0], len[1], len[2], *seq]);
        out.extend_from_slice(chunk);
        *seq = seq.wrapping_add(1);
        rest = tail;
        if n < MAX_PAYLOAD {
            return;
        }
    }
}

/// A reply being built on an executor thread: packets queued in memory,
/// sent by the connection's I/O task once the command is done
/// (docs/mysql-protocol.md, "Threads and shutdown").
#[derive(Default)]
pub struct PacketWriter {
    out: Vec<u8>,
    seq: u8,
    /// One payload being built by [`Self::write_payload_with`], kept
    /// across payloads (rows) so that building one allocates nothing.
    scratch: Vec<u8>,
}

/// A reply buffer larger than this is given back after it was sent, so an
/// idle connection does not keep the memory of its largest result.
const KEEP_CAPACITY: usize = 64 << 10;

impl PacketWriter {
    /// Starts a reply whose first packet has sequence id `seq`.
    pub fn start(&mut self, seq: u8) {
        self.out.clear();
        self.seq = seq;
    }

    /// Queues one payload, split into packets as needed.
    pub fn write_payload(&mut self, payload: &[u8]) {
        encode_payload(&mut self.out, &mut self.seq, payload);
    }

    /// Queues the payload `build` writes into an empty buffer (a result
    /// row), split into packets as needed; nothing is queued if it fails.
    pub fn write_payload_with<E>(
        &mut self,
        build: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let built = build(&mut scratch);
        if built.is_ok() {
            encode_payload(&mut self.out, &mut self.seq, &scratch);
        }
        if scratch.capacity() <= KEEP_CAPACITY {
            self.scratch = scratch;
        }
        built
    }

    /// The packets queued.
    pub fn bytes(&self) -> &[u8] {
        &self.out
    }

    /// Forgets the queued packets (they were sent).
    pub fn clear(&mut self) {
        self.out.clear();
        if self.out.capacity() > KEEP_CAPACITY {
            self.out = Vec::new();
        }
    }
}

/// A stream that first returns `prefix`, then reads `inner`; writes go to
/// `inner`.
pub struct Prefixed<S> {
    prefix: Vec<u8>,
    pos: usize,
    inner: S,
}

impl<S: Read> Read for Prefixed<S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let rest = self.prefix.get(self.pos..).unwrap_or_default();
        if rest.is_empty() {
            return self.inner.read(buf);
        }
        let n = rest.len().min(buf.len());
        if let (Some(dst), Some(src)) = (buf.get_mut(..n), rest.get(..n)) {
            dst.copy_from_slice(src);
        }
        self.pos += n;
        Ok(n)
    }
}

impl<S: Write> Write for Prefixed<S> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Fills `buf`; `Ok(false)` if the stream ended before the first byte.
fn read_exact_or_eof(r: &mut impl Read, buf: &mut [u8]) -> Result<bool, ProtocolError> {
    let mut got = 0;
    while got < buf.len() {
        let dst = buf.get_mut(got..).unwrap_or_default();
        match r.read(dst) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(ProtocolError::Malformed("truncated packet header")),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(true)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use std::io::Cursor;

    /// A stream whose reads come from `input` and whose writes are kept.
    struct Pipe {
        input: Cursor<Vec<u8>>,
        output: Vec<u8>,
    }
    impl Read for Pipe {
        fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
            self.input.read(b)
        }
    }
    impl Write for Pipe {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.output.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn io(input: Vec<u8>, max: usize) -> PacketIo<Pipe> {
        PacketIo::new(
            Pipe {
                input: Cursor::new(input),
                output: Vec::new(),
            },
            max,
        )
    }

    #[test]
    fn payloads_at_and_around_the_split_point_round_trip() {
        for len in [
            0,
            1,
            MAX_PAYLOAD - 1,
            MAX_PAYLOAD,
            MAX_PAYLOAD + 5,
            2 * MAX_PAYLOAD,
        ] {
            let payload: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let mut w = io(Vec::new(), usize::MAX);
            w.write_payload(&payload);
            w.flush().unwrap();
            let wire = std::mem::take(&mut w.stream.get_mut().output);
            // Full packets are followed by a final shorter one, maybe empty.
            let packets = len / MAX_PAYLOAD + 1;
            assert_eq!(wire.len(), len + 4 * packets, "len {len}");
            let mut r = io(wire, usize::MAX);
            assert_eq!(r.read_payload().unwrap().unwrap(), payload, "len {len}");
            assert_eq!(r.read_payload().unwrap(), None);
        }
    }

    /// Bytes the peer sent right after a packet (a TLS ClientHello after
    /// SSLRequest) are read ahead into the buffer; `into_inner` keeps them.
    #[test]
    fn bytes_read_ahead_survive_into_inner() {
        let mut r = io(vec![1, 0, 0, 0, b'a', b'T', b'L', b'S'], 1024);
        assert_eq!(r.read_payload().unwrap().unwrap(), b"a");
        let (mut rest, seq) = r.into_inner();
        assert_eq!(seq, 1);
        let mut got = Vec::new();
        rest.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"TLS");
    }

    #[test]
    fn sequence_ids_must_follow_on() {
        let mut r = io(vec![1, 0, 0, 3, b'x'], 1024);
        assert!(matches!(
            r.read_payload(),
            Err(ProtocolError::OutOfOrder {
                expected: 0,
                got: 3
            })
        ));
    }

    #[test]
    fn oversized_payloads_are_refused_before_they_are_buffered() {
        // Header claims a full 16 MiB packet; only 3 body bytes follow.
        let mut r = io(vec![0xff, 0xff, 0xff, 0, 1, 2, 3], 1 << 20);
        assert!(matches!(
            r.read_payload(),
            Err(ProtocolError::PacketTooLarge { size, max }) if size == MAX_PAYLOAD && max == 1 << 20
        ));
    }

    #[test]
    fn truncated_input_is_an_error_and_clean_eof_is_not() {
        let mut r = io(vec![5, 0, 0, 0, b'a', b'b'], 1024);
        assert!(r.read_payload().is_err());
        let mut r = io(vec![5, 0], 1024);
        assert!(r.read_payload().is_err());
        let mut r = io(vec![], 1024);
        assert_eq!(r.read_payload().unwrap(), None);
    }
}
