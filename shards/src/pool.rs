//! Reused request-frame buffers.
//!
//! A produce frame lives on after its request is answered: its record
//! batches are slices of it, held by the object upload and then by the tail
//! cache. Allocating every frame anew cost, at the max produce rate, a
//! `memset` of every byte before the socket read overwrote it (6.4 % of the
//! agent's samples, plus 1.9 % in mimalloc's zeroing and 3.5 % in the
//! kernel's page clearing; `benches/results/2026-12-01-race4.md`). Frames
//! from this pool are buffers earlier frames left behind, already faulted in,
//! and need no zeroing: a frame is only ever seen after the socket read filled
//! its `len` bytes, and nothing past `len` is handed out.
//!
//! The pool also keeps RSS steady: the memory of answered frames stays here
//! (up to `free_bytes_max`) for the next ones instead of going back to the OS
//! and being faulted in again when a burst of requests is admitted.
//!
//! Buffers come back from any thread (the last `Bytes` of a frame may drop
//! on the storage thread), hence the mutex; one lock per frame each way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Frames smaller than this are allocated as before (the zeroing is cheap
/// and such requests are not the bulk of the bytes).
pub const POOLED_FRAME_BYTES_MIN: usize = 64 << 10;
/// Frames larger than this are allocated as before.
pub const POOLED_FRAME_BYTES_MAX: usize = 8 << 20;
/// Buffers are made in multiples of this, so frames of nearly the same size
/// share buffers (at most this much unused per frame).
pub const FRAME_CLASS_BYTES: usize = 16 << 10;

fn pooled(len: usize) -> bool {
    (POOLED_FRAME_BYTES_MIN..=POOLED_FRAME_BYTES_MAX).contains(&len)
}

/// The length of the pooled buffer a frame of `len` bytes gets.
fn class_of(len: usize) -> usize {
    len.div_ceil(FRAME_CLASS_BYTES) * FRAME_CLASS_BYTES
}

#[derive(Debug)]
pub struct FramePool {
    free_bytes_max: usize,
    inner: Mutex<Free>,
}

#[derive(Debug, Default)]
struct Free {
    /// Free buffers by class (their length).
    by_class: HashMap<usize, Vec<Vec<u8>>>,
    bytes: usize,
}

impl FramePool {
    /// A pool keeping at most `free_bytes_max` bytes of free buffers.
    pub fn new(free_bytes_max: usize) -> Arc<FramePool> {
        Arc::new(FramePool {
            free_bytes_max,
            inner: Mutex::new(Free::default()),
        })
    }

    /// A buffer for a frame of `len` bytes: `as_mut()` is its `len` bytes
    /// to read into (contents unspecified until then).
    pub fn frame(self: &Arc<Self>, len: usize) -> Frame {
        if !pooled(len) {
            return Frame {
                buf: vec![0u8; len],
                len,
                pool: None,
            };
        }
        let class = class_of(len);
        let reused = {
            let mut free = self.inner.lock().expect("frame pool lock");
            let buf = free.by_class.get_mut(&class).and_then(Vec::pop);
            if buf.is_some() {
                free.bytes -= class;
            }
            buf
        };
        Frame {
            buf: reused.unwrap_or_else(|| vec![0u8; class]),
            len,
            pool: Some(self.clone()),
        }
    }

    /// Bytes of free buffers held.
    pub fn free_bytes(&self) -> usize {
        self.inner.lock().expect("frame pool lock").bytes
    }

    fn put(&self, buf: Vec<u8>) {
        let class = buf.len();
        if class > self.free_bytes_max {
            return;
        }
        let mut free = self.inner.lock().expect("frame pool lock");
        // Full: other classes make room (the sizes in use now win over
        // those of earlier clients); if only this class is left, it is
        // full of its own kind and this buffer goes.
        if free.bytes + class > self.free_bytes_max {
            while free.bytes + class > self.free_bytes_max {
                let other = free
                    .by_class
                    .iter_mut()
                    .find(|(c, bufs)| **c != class && !bufs.is_empty())
                    .and_then(|(c, bufs)| bufs.pop().map(|_| *c));
                match other {
                    Some(c) => free.bytes -= c,
                    None => return,
                }
            }
            free.by_class.retain(|_, bufs| !bufs.is_empty());
        }
        free.by_class.entry(class).or_default().push(buf);
        free.bytes += class;
    }
}

/// One request frame's buffer; back to its pool when dropped.
#[derive(Debug)]
pub struct Frame {
    buf: Vec<u8>,
    len: usize,
    pool: Option<Arc<FramePool>>,
}

impl AsRef<[u8]> for Frame {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl AsMut<[u8]> for Frame {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }
}

impl Drop for Frame {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            pool.put(std::mem::take(&mut self.buf));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn buffers_are_reused_by_class_and_bounded() {
        let pool = FramePool::new(1 << 20);
        let mut f = pool.frame(300_000);
        assert_eq!(f.as_mut().len(), 300_000);
        f.as_mut().fill(7);
        let b = Bytes::from_owner(f);
        assert_eq!(b.len(), 300_000);
        let slice = b.slice(10..20);
        drop(b);
        assert_eq!(pool.free_bytes(), 0, "a slice still holds the frame");
        drop(slice);
        let class = class_of(300_000);
        assert_eq!(pool.free_bytes(), class);
        // A frame of a size in the same class gets that buffer back, and
        // only its own length is visible.
        let f = pool.frame(class - 5);
        assert_eq!(pool.free_bytes(), 0);
        assert_eq!(f.as_ref().len(), class - 5);
        drop(f);
        // Bounded: four frames of ~300 KB come back, three fit in 1 MiB.
        let frames: Vec<_> = (0..4).map(|_| pool.frame(300_000)).collect();
        drop(frames);
        assert_eq!(pool.free_bytes(), 3 * class);
        // Another size makes room for itself.
        drop(pool.frame(600_000));
        let c2 = class_of(600_000);
        assert!(pool.free_bytes() <= 1 << 20);
        assert_eq!(pool.inner.lock().unwrap().by_class[&c2].len(), 1);
        // Small and huge frames are not pooled.
        drop(pool.frame(100));
        drop(pool.frame(POOLED_FRAME_BYTES_MAX + 1));
        assert!(!pool.inner.lock().unwrap().by_class.contains_key(&100));
    }

    #[test]
    fn buffers_come_back_from_other_threads() {
        let pool = FramePool::new(8 << 20);
        let frames: Vec<Bytes> = (0..8)
            .map(|i| {
                let mut f = pool.frame(100_000);
                f.as_mut().fill(i);
                Bytes::from_owner(f)
            })
            .collect();
        std::thread::spawn(move || drop(frames)).join().unwrap();
        assert_eq!(pool.free_bytes(), 8 * class_of(100_000));
    }
}
