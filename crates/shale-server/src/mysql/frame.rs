//! Packet framing on the I/O threads: the event-driven twin of
//! [`PacketIo`](super::packet::PacketIo), over a tokio stream.
//!
//! Same rules (docs/mysql-protocol.md, "Packets"): headers are checked by
//! [`check_header`] before the body is buffered, so a client cannot make
//! the server allocate more than `max_allowed_packet` for one command;
//! sequence ids must follow on. Waiting for bytes suspends the connection's
//! task, never a thread.

use super::packet::{check_header, encode_payload, MAX_PAYLOAD};
use super::ProtocolError;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// A connection's byte stream on the I/O threads: a socket or TLS over a
/// socket, boxed so the switch to TLS keeps one type.
pub trait AsyncTransport: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> AsyncTransport for T {}

/// Reads and writes packets on one connection from its I/O task.
pub struct AsyncPacketIo<S> {
    stream: S,
    seq: u8,
    max_packet: usize,
    out: Vec<u8>,
    /// Bytes read and written since the last [`AsyncPacketIo::take_byte_counts`].
    bytes_in: u64,
    bytes_out: u64,
    /// Measure how long a payload takes to arrive once its header did.
    pub timing: bool,
    /// The last such measurement.
    pub last_recv: Duration,
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncPacketIo<S> {
    /// Frames `stream`, refusing joined payloads above `max_packet` bytes.
    pub fn new(stream: S, max_packet: usize) -> Self {
        AsyncPacketIo {
            stream,
            seq: 0,
            max_packet,
            out: Vec::new(),
            bytes_in: 0,
            bytes_out: 0,
            timing: false,
            last_recv: Duration::ZERO,
        }
    }

    /// Continues the sequence `seq` on another stream (after the TLS switch,
    /// or when a read buffer is put in front of the socket).
    pub fn resume(stream: S, seq: u8, max_packet: usize) -> Self {
        let mut io = AsyncPacketIo::new(stream, max_packet);
        io.seq = seq;
        io
    }

    /// The stream and the next sequence id. Nothing is read ahead by this
    /// type, so no byte is lost.
    pub fn into_inner(self) -> (S, u8) {
        (self.stream, self.seq)
    }

    /// Starts a new command exchange: the client's command has sequence 0.
    pub fn reset_seq(&mut self) {
        self.seq = 0;
    }

    /// The sequence id the next packet (either way) carries.
    pub fn seq(&self) -> u8 {
        self.seq
    }

    /// Bytes read and written since the last call.
    pub fn take_byte_counts(&mut self) -> (u64, u64) {
        (
            std::mem::take(&mut self.bytes_in),
            std::mem::take(&mut self.bytes_out),
        )
    }

    /// Reads one (joined) payload. `Ok(None)` when the peer closed the
    /// connection cleanly between packets.
    pub async fn read_payload(&mut self) -> Result<Option<Vec<u8>>, ProtocolError> {
        let mut payload = Vec::new();
        let mut started = None;
        loop {
            let mut header = [0u8; 4];
            if started.is_none() {
                if !read_exact_or_eof(&mut self.stream, &mut header).await? {
                    return Ok(None);
                }
                started = Some(self.timing.then(Instant::now));
            } else {
                self.stream.read_exact(&mut header).await?;
            }
            let len = check_header(header, self.seq, payload.len(), self.max_packet)?;
            self.seq = self.seq.wrapping_add(1);
            let start = payload.len();
            payload.resize(start + len, 0);
            let dst = payload
                .get_mut(start..)
                .ok_or(ProtocolError::Malformed("packet body"))?;
            self.stream.read_exact(dst).await?;
            self.bytes_in += 4 + len as u64; // usize -> u64: lossless
            if len < MAX_PAYLOAD {
                if let Some(Some(t)) = started {
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
    pub async fn flush(&mut self) -> Result<(), ProtocolError> {
        let out = std::mem::take(&mut self.out);
        let r = self.send_raw(&out).await;
        self.out = out;
        self.out.clear();
        r
    }

    /// Sends packets framed elsewhere (a reply built on an executor
    /// thread). The task waits here while the client does not read: the
    /// back-pressure point, costing this connection's reply and nothing
    /// else.
    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<(), ProtocolError> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await?;
        self.bytes_out += bytes.len() as u64; // usize -> u64: lossless
        Ok(())
    }
}

/// Fills `buf`; `Ok(false)` if the stream ended before the first byte.
async fn read_exact_or_eof<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut [u8],
) -> Result<bool, ProtocolError> {
    let mut got = 0;
    while got < buf.len() {
        let dst = buf.get_mut(got..).unwrap_or_default();
        match r.read(dst).await {
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

    fn run<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// A payload split over packets arrives joined, in pieces of any size.
    #[test]
    fn split_payloads_are_joined_from_a_trickle() {
        run(async {
            let payload: Vec<u8> = (0..MAX_PAYLOAD + 9).map(|i| (i % 251) as u8).collect();
            let mut wire = Vec::new();
            let mut seq = 0;
            encode_payload(&mut wire, &mut seq, &payload);
            encode_payload(&mut wire, &mut seq, b"next");
            let (client, server) = tokio::io::duplex(4096);
            let writer = tokio::spawn(async move {
                let mut client = client;
                for chunk in wire.chunks(1000) {
                    client.write_all(chunk).await.unwrap();
                }
                client
            });
            let mut io = AsyncPacketIo::new(server, usize::MAX);
            assert_eq!(io.read_payload().await.unwrap().unwrap(), payload);
            assert_eq!(io.read_payload().await.unwrap().unwrap(), b"next");
            drop(writer.await.unwrap());
            assert_eq!(io.read_payload().await.unwrap(), None);
            let (i, _) = io.take_byte_counts();
            assert_eq!(i, (payload.len() + 4 + 4 + 4 + 4) as u64);
        });
    }

    #[test]
    fn bad_headers_and_truncation_are_errors() {
        run(async {
            let (mut client, server) = tokio::io::duplex(64);
            client.write_all(&[0xff, 0xff, 0xff, 0]).await.unwrap();
            let mut io = AsyncPacketIo::new(server, 1 << 20);
            assert!(matches!(
                io.read_payload().await,
                Err(ProtocolError::PacketTooLarge { .. })
            ));
            let (mut client, server) = tokio::io::duplex(64);
            client.write_all(&[1, 0, 0, 5, b'x']).await.unwrap();
            let mut io = AsyncPacketIo::new(server, 1 << 20);
            assert!(matches!(
                io.read_payload().await,
                Err(ProtocolError::OutOfOrder {
                    expected: 0,
                    got: 5
                })
            ));
            let (mut client, server) = tokio::io::duplex(64);
            client.write_all(&[5, 0]).await.unwrap();
            drop(client);
            let mut io = AsyncPacketIo::new(server, 1 << 20);
            assert!(io.read_payload().await.is_err());
        });
    }
}
