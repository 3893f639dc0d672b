//! A connection's socket read and written with plain blocking calls, for
//! a plain (not TLS) connection with its own thread (`task.rs`,
//! `Threading::Own`).
//!
//! There the connection's thread runs a single-threaded event loop with
//! this connection's task alone on it, so a blocking call holds up nothing
//! else. Waiting in `recv` costs one system call per command, where the
//! event loop's readiness dance costs three (a `read` that finds nothing,
//! `epoll_wait`, the `read` again). Putting tokio's own socket in blocking
//! mode does not do it: after a short read tokio assumes the socket
//! drained and waits for readiness before it reads again, so this adapter
//! reads directly. KILL and shutdown still end a blocked read: they shut
//! the socket down from another thread (process.rs), and `recv` returns end
//! of stream.

use std::io::{Read, Write};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A blocking TCP socket behind the async traits the protocol code uses.
/// Each poll completes: it blocks until the call is done.
pub struct BlockingStream(std::net::TcpStream);

impl BlockingStream {
    /// Wraps `stream`, switching it to blocking mode.
    pub fn new(stream: std::net::TcpStream) -> std::io::Result<BlockingStream> {
        stream.set_nonblocking(false)?;
        Ok(BlockingStream(stream))
    }
}

/// Retries a call interrupted by a signal, as the blocking `std` helpers do.
fn retry<T>(mut f: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    loop {
        match f() {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

impl AsyncRead for BlockingStream {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let mut socket = &self.0;
        let n = retry(|| socket.read(buf.initialize_unfilled()))?;
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for BlockingStream {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let mut socket = &self.0;
        Poll::Ready(retry(|| socket.write(buf)))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(self.0.shutdown(std::net::Shutdown::Write))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::BlockingStream;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Bytes go both ways, and a shutdown from another thread ends a read
    /// blocked on the socket (what KILL relies on).
    #[test]
    fn reads_writes_and_wakes_on_shutdown() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let killer = server.try_clone().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut s = BlockingStream::new(server).unwrap();
            std::io::Write::write_all(&mut client, b"ping").unwrap();
            let mut buf = [0u8; 4];
            s.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"ping");
            s.write_all(b"pong").await.unwrap();
            let mut back = [0u8; 4];
            std::io::Read::read_exact(&mut client, &mut back).unwrap();
            assert_eq!(&back, b"pong");
            let t = std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(50));
                killer.shutdown(std::net::Shutdown::Both).unwrap();
            });
            let n = s.read(&mut buf).await.unwrap();
            assert_eq!(n, 0, "end of stream after the shutdown");
            t.join().unwrap();
        });
    }
}
