//! Response frames and how a connection writes them.
//!
//! A response is one buffer, or pieces written in order without being
//! joined first: a Fetch's large record batches stay in the buffers they
//! were read into (the object store's blocks, the read cache) and go from
//! there to the socket, so the kernel's copy into the socket is the only
//! copy of their bytes. On a plain TCP connection the pieces go out with
//! `sendmsg` over many at once; on TLS each is handed to rustls in turn
//! (which copies it while encrypting anyway).

use std::any::Any;
use std::io::{self, IoSlice};
use std::os::fd::{BorrowedFd, RawFd};

use bytes::Bytes;
use futures::io::{AsyncWrite, AsyncWriteExt};

/// Pieces handed to one `sendmsg` at most (well under the kernel's
/// `IOV_MAX` of 1024; a Fetch response has two pieces per large batch).
pub const PIECES_PER_SEND_MAX: usize = 64;

/// A response frame, its size prefix included.
pub struct ResponseFrame {
    body: Body,
    len: usize,
    /// Dropped once the frame has been written (or dropped unwritten): what
    /// accounts for the memory its pieces keep alive.
    _hold: Option<Box<dyn Any>>,
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
            _hold: None,
        }
    }
}

impl ResponseFrame {
    /// A frame written as `pieces`, in order.
    pub fn from_pieces(pieces: Vec<Bytes>) -> ResponseFrame {
        ResponseFrame {
            len: pieces.iter().map(Bytes::len).sum(),
            body: Body::Pieces(pieces),
            _hold: None,
        }
    }

    /// The frame keeps `hold` until it has been written.
    pub fn holding<T: 'static>(mut self, hold: T) -> ResponseFrame {
        self._hold = Some(Box::new(hold));
        self
    }

    /// The frame's size in bytes, its size prefix included.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

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

/// Writes `frame` to `writer`; `sock` is the connection's socket when
/// nothing sits between `writer` and it (plain TCP): pieces then go out
/// many per `sendmsg`, and `writer` is used only to wait for room.
pub(crate) async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    sock: Option<RawFd>,
    frame: &ResponseFrame,
) -> io::Result<()> {
    let mut left = Cursor {
        pieces: frame.pieces(),
        offset: 0,
    };
    while let Some(piece) = left.current() {
        if let Some(fd) = sock.filter(|_| left.pieces.len() > 1) {
            match send_pieces(fd, &left) {
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
        let n = writer.write(piece).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        left.advance(n);
    }
    Ok(())
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
fn send_pieces(fd: RawFd, left: &Cursor<'_>) -> io::Result<usize> {
    let mut slices = [IoSlice::new(&[]); PIECES_PER_SEND_MAX];
    let mut count = 0;
    for (i, piece) in left.pieces.iter().enumerate().take(PIECES_PER_SEND_MAX) {
        let start = if i == 0 { left.offset } else { 0 };
        slices[count] = IoSlice::new(&piece[start..]);
        count += 1;
    }
    // SAFETY: `fd` is the socket of the connection whose writer the caller
    // holds (`write_frame`'s `writer`, a half of the same stream): the
    // stream, which owns the descriptor, is alive and open for this call.
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

    /// Pieces of every size, some empty, some sharing one buffer.
    fn pieces(total: usize) -> Vec<Bytes> {
        let all = Bytes::from(
            (0..total)
                .map(|i| (i * 7 + i / 251) as u8)
                .collect::<Vec<u8>>(),
        );
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

    /// Without a socket (TLS), the pieces go through the writer in order.
    #[test]
    fn pieces_through_a_writer_arrive_whole() {
        let frame = ResponseFrame::from_pieces(pieces(3 << 20));
        let mut out = Vec::new();
        futures::executor::block_on(write_frame(&mut out, None, &frame)).unwrap();
        assert_eq!(out, frame.to_bytes());
    }

    /// On a socket whose peer reads slowly through a small buffer, the
    /// pieces go out many per sendmsg, wait for room when there is none,
    /// and arrive whole and in order.
    #[test]
    fn pieces_on_a_slow_socket_arrive_whole() {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        // A small window: the sender's buffer fills (24 MiB sent).
        socket2::SockRef::from(&listener)
            .set_recv_buffer_size(16 << 10)
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let total = 24 << 20;
        let reader = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            let mut buf = vec![0; 64 << 10];
            loop {
                // Slow at first, so the sender finds its buffer full.
                if got.len() < (2 << 20) {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                match conn.read(&mut buf).unwrap() {
                    0 => return got,
                    n => got.extend_from_slice(&buf[..n]),
                }
            }
        });
        let sent = pieces(total);
        let want = sent.concat();
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let frame = ResponseFrame::from_pieces(sent);
                let stream = glommio::net::TcpStream::connect(addr).await.unwrap();
                let fd = stream.as_raw_fd();
                let (_, mut writer) = futures::AsyncReadExt::split(stream.buffered());
                write_frame(&mut writer, Some(fd), &frame).await.unwrap();
                futures::AsyncWriteExt::close(&mut writer).await.unwrap();
            })
            .unwrap()
            .join()
            .unwrap();
        let got = reader.join().unwrap();
        assert_eq!(got.len(), want.len());
        assert!(got == want, "bytes differ");
    }

    #[test]
    fn frames_know_their_length_and_join() {
        let f =
            ResponseFrame::from_pieces(vec![Bytes::from_static(b"ab"), Bytes::from_static(b"cde")])
                .holding(7u8);
        assert_eq!(f.len(), 5);
        assert_eq!(f.to_bytes(), Bytes::from_static(b"abcde"));
        let one = ResponseFrame::from(Bytes::from_static(b"xy"));
        assert_eq!((one.len(), one.pieces().len()), (2, 1));
    }
}
