//! Response frames and how a connection writes them.
//!
//! A response is one buffer, or pieces written in order without being
//! joined first: a Fetch's large record batches stay in the buffers they
//! were read into (the object store's blocks, the read cache) and go from
//! there to the socket, so the kernel's copy into the socket is the only
//! copy of their bytes. On a plain TCP connection the pieces go out with
//! `sendmsg` over many at once; on TLS each is handed to rustls in turn
//! (which copies it while encrypting anyway). A response whose pieces wait
//! longer than [`PIECES_WAIT_MAX`] for room (a client not reading) is
//! copied and its pieces let go, so what a slow client keeps alive is its
//! responses' bytes, as when they were copied, and not the read buffers
//! behind them.

use std::io::{self, IoSlice};
use std::os::fd::{BorrowedFd, RawFd};
use std::time::Duration;

use bytes::Bytes;
use futures::io::{AsyncWrite, AsyncWriteExt};

/// Pieces handed to one `sendmsg` at most (well under the kernel's
/// `IOV_MAX` of 1024; a Fetch response has two pieces per large batch).
pub const PIECES_PER_SEND_MAX: usize = 64;

/// A response frame, its size prefix included.
pub struct ResponseFrame {
    body: Body,
    len: usize,
}

enum Body {
    One(Bytes),
    Pieces(Vec<Bytes>),
}

impl From<Bytes> for ResponseFrame {
    fn from(frame: Bytes) -> ResponseFrame {
        ResponseFrame {
            len: frame.len(),
            body: Body::One(frame),
        }
    }
}

impl ResponseFrame {
    /// A frame written as `pieces`, in order.
    pub fn from_pieces(pieces: Vec<Bytes>) -> ResponseFrame {
        ResponseFrame {
            len: pieces.iter().map(Bytes::len).sum(),
            body: Body::Pieces(pieces),
        }
    }

    /// The frame's size in bytes, its size prefix included.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the frame has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The frame's bytes, in pieces written in order (one for a frame made
    /// from one buffer).
    pub fn pieces(&self) -> &[Bytes] {
        match &self.body {
            Body::One(b) => std::slice::from_ref(b),
            Body::Pieces(p) => p,
        }
    }

    /// The frame in one buffer (a copy when it is in pieces).
    pub fn to_bytes(&self) -> Bytes {
        match &self.body {
            Body::One(b) => b.clone(),
            Body::Pieces(p) => p.concat().into(),
        }
    }
}

/// How long a response in pieces waits for room in the socket before what
/// is left of it is copied into one buffer and the pieces are let go (with
/// the read buffers they keep alive): a client that stops reading then
/// holds what a copied response held, not the buffers its batches lie in.
pub const PIECES_WAIT_MAX: Duration = Duration::from_millis(200);

/// Writes `frame` to `writer`; `sock` is the connection's socket when
/// nothing sits between `writer` and it (plain TCP): pieces then go out
/// many per `sendmsg`, and `writer` is used to wait for room.
///
/// # Safety
///
/// `sock`, when given, must be the descriptor of the stream `writer` writes
/// to, and that stream must stay open until this returns (the caller holding
/// `writer`, a half of it, is enough).
pub(crate) async unsafe fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    sock: Option<RawFd>,
    frame: ResponseFrame,
) -> io::Result<()> {
    let rest = {
        let mut left = Cursor {
            pieces: frame.pieces(),
            offset: 0,
        };
        loop {
            let Some(piece) = left.current() else {
                return Ok(());
            };
            let more = left.pieces.len() > 1;
            if let Some(fd) = sock.filter(|_| more) {
                // SAFETY: the caller's promise above.
                match unsafe { send_pieces(fd, &left) } {
                    Ok(n) => {
                        left.advance(n);
                        continue;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    // No room: the write below waits for it.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
            let n = if more {
                match crate::within(PIECES_WAIT_MAX, writer.write(piece)).await {
                    Some(n) => n?,
                    None => break left.joined(),
                }
            } else {
                writer.write(piece).await?
            };
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            left.advance(n);
        }
    };
    drop(frame);
    writer.write_all(&rest).await
}

/// What is left of a frame's pieces: `pieces[0][offset..]` and the rest.
struct Cursor<'a> {
    pieces: &'a [Bytes],
    offset: usize,
}

impl<'a> Cursor<'a> {
    /// The unwritten part of the first piece with any left (skipping empty
    /// pieces); `None` once all is written.
    fn current(&mut self) -> Option<&'a [u8]> {
        while let Some(first) = self.pieces.first() {
            if self.offset < first.len() {
                return Some(&first[self.offset..]);
            }
            self.pieces = &self.pieces[1..];
            self.offset = 0;
        }
        None
    }

    /// What is left, as slices in order.
    fn slices(&self) -> impl Iterator<Item = &'a [u8]> + '_ {
        let pieces: &'a [Bytes] = self.pieces;
        pieces
            .iter()
            .enumerate()
            .map(|(i, p)| &p[if i == 0 { self.offset } else { 0 }..])
    }

    /// What is left, in one buffer.
    fn joined(&self) -> Vec<u8> {
        self.slices().collect::<Vec<_>>().concat()
    }

    fn advance(&mut self, mut n: usize) {
        while n > 0 {
            let Some(first) = self.pieces.first() else {
                return;
            };
            let here = first.len() - self.offset;
            if n < here {
                self.offset += n;
                return;
            }
            n -= here;
            self.pieces = &self.pieces[1..];
            self.offset = 0;
        }
    }
}

/// One non-blocking `sendmsg` of up to [`PIECES_PER_SEND_MAX`] of the
/// cursor's pieces.
///
/// # Safety
///
/// `fd` must be an open socket for the whole call.
unsafe fn send_pieces(fd: RawFd, left: &Cursor<'_>) -> io::Result<usize> {
    let mut slices = [IoSlice::new(&[]); PIECES_PER_SEND_MAX];
    let mut count = 0;
    for (slot, piece) in slices.iter_mut().zip(left.slices()) {
        *slot = IoSlice::new(piece);
        count += 1;
    }
    // SAFETY: `fd` is open for this call (this function's contract; its
    // caller, `write_frame`, has it from its own caller, who holds the
    // stream owning the descriptor).
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    socket2::SockRef::from(&fd)
        .send_vectored_with_flags(&slices[..count], libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_walks_pieces_across_any_advance() {
        let pieces: Vec<Bytes> = vec![
            Bytes::from_static(b"abc"),
            Bytes::new(),
            Bytes::from_static(b"de"),
            Bytes::from_static(b"fghij"),
        ];
        let all = b"abcdefghij";
        for step in 1..=all.len() {
            let mut c = Cursor {
                pieces: &pieces,
                offset: 0,
            };
            let mut seen = Vec::new();
            while let Some(cur) = c.current() {
                let n = step.min(cur.len());
                seen.extend_from_slice(&cur[..n]);
                c.advance(n);
            }
            assert_eq!(seen, all, "step {step}");
        }
        // An advance over several pieces at once (what sendmsg reports).
        let mut c = Cursor {
            pieces: &pieces,
            offset: 1,
        };
        c.advance(5);
        assert_eq!(c.current(), Some(&b"ghij"[..]));
        c.advance(4);
        assert_eq!(c.current(), None);
    }

    /// `all` in pieces of every size, some empty.
    fn pieces_of(all: Bytes) -> Vec<Bytes> {
        let mut out = Vec::new();
        let (mut at, mut k) = (0, 0usize);
        while at < all.len() {
            let len = [0, 1, 8, 61, 4096, 65_536, 300_000][k % 7].min(all.len() - at);
            out.push(all.slice(at..at + len));
            at += len;
            k += 1;
        }
        out
    }

    fn pieces(total: usize) -> Vec<Bytes> {
        pieces_of(Bytes::from(
            (0..total)
                .map(|i| (i * 7 + i / 251) as u8)
                .collect::<Vec<u8>>(),
        ))
    }

    use std::os::fd::AsRawFd;

    /// Runs `write_frame` of `sent` on a glommio executor, to a TCP
    /// connection to `addr` (or, without, to a `Vec`, as through TLS).
    fn write_on_glommio(addr: Option<std::net::SocketAddr>, sent: Vec<Bytes>) -> Vec<u8> {
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let frame = ResponseFrame::from_pieces(sent);
                let Some(addr) = addr else {
                    let mut out = Vec::new();
                    // SAFETY: no socket is given.
                    unsafe { write_frame(&mut out, None, frame) }.await.unwrap();
                    return out;
                };
                let stream = glommio::net::TcpStream::connect(addr).await.unwrap();
                let fd = stream.as_raw_fd();
                let (_, mut writer) = futures::AsyncReadExt::split(stream.buffered());
                // SAFETY: `fd` is `writer`'s stream, held open meanwhile.
                unsafe { write_frame(&mut writer, Some(fd), frame) }
                    .await
                    .unwrap();
                futures::AsyncWriteExt::close(&mut writer).await.unwrap();
                Vec::new()
            })
            .unwrap()
            .join()
            .unwrap()
    }

    /// A listener whose connections see a 16 KiB receive window: a sender
    /// of megabytes finds its buffer full.
    fn small_window_listener() -> std::net::TcpListener {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        socket2::SockRef::from(&listener)
            .set_recv_buffer_size(16 << 10)
            .unwrap();
        listener
    }

    fn read_all(conn: &mut std::net::TcpStream, slow_first: usize) -> Vec<u8> {
        use std::io::Read;
        let mut got = Vec::new();
        let mut buf = vec![0; 64 << 10];
        loop {
            if got.len() < slow_first {
                std::thread::sleep(Duration::from_millis(1));
            }
            match conn.read(&mut buf).unwrap() {
                0 => return got,
                n => got.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// Without a socket (TLS), the pieces go through the writer in order.
    #[test]
    fn pieces_through_a_writer_arrive_whole() {
        let sent = pieces(3 << 20);
        let want = sent.concat();
        assert!(write_on_glommio(None, sent) == want, "bytes differ");
    }

    /// On a socket whose peer reads slowly through a small window, the
    /// pieces go out many per sendmsg, wait for room when there is none,
    /// and arrive whole and in order.
    #[test]
    fn pieces_on_a_slow_socket_arrive_whole() {
        let listener = small_window_listener();
        let addr = listener.local_addr().unwrap();
        let reader =
            std::thread::spawn(move || read_all(&mut listener.accept().unwrap().0, 2 << 20));
        let sent = pieces(24 << 20);
        let want = sent.concat();
        write_on_glommio(Some(addr), sent);
        let got = reader.join().unwrap();
        assert_eq!(got.len(), want.len());
        assert!(got == want, "bytes differ");
    }

    /// A peer that stops reading: after PIECES_WAIT_MAX the rest of the
    /// frame is copied and its pieces (the buffer they lie in) let go,
    /// while the write still waits; the bytes still arrive whole.
    #[test]
    fn pieces_waiting_too_long_are_let_go() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        struct Owned(Vec<u8>, Arc<AtomicBool>);
        impl AsRef<[u8]> for Owned {
            fn as_ref(&self) -> &[u8] {
                &self.0
            }
        }
        impl Drop for Owned {
            fn drop(&mut self) {
                self.1.store(true, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicBool::new(false));
        let data: Vec<u8> = (0..24 << 20).map(|i: usize| (i % 253) as u8).collect();
        let want = data.clone();
        let sent = pieces_of(Bytes::from_owner(Owned(data, dropped.clone())));
        let listener = small_window_listener();
        let addr = listener.local_addr().unwrap();
        let seen = dropped.clone();
        let reader = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            std::thread::sleep(PIECES_WAIT_MAX * 3);
            // 24 MiB cannot all be in the socket's buffers yet.
            let let_go = seen.load(Ordering::SeqCst);
            (let_go, read_all(&mut conn, 0))
        });
        write_on_glommio(Some(addr), sent);
        let (let_go, got) = reader.join().unwrap();
        assert!(let_go, "the pieces were kept while the peer did not read");
        assert!(got == want, "bytes differ");
    }

    #[test]
    fn frames_know_their_length_and_join() {
        let f =
            ResponseFrame::from_pieces(vec![Bytes::from_static(b"ab"), Bytes::from_static(b"cde")]);
        assert_eq!(f.len(), 5);
        assert_eq!(f.to_bytes(), Bytes::from_static(b"abcde"));
        let one = ResponseFrame::from(Bytes::from_static(b"xy"));
        assert_eq!((one.len(), one.pieces().len()), (2, 1));
    }
}
