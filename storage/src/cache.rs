//! Bounded FIFO cache of the objects this agent uploaded last, holding the
//! very `Bytes` chunks that were uploaded (no copy). Tail consumers on the
//! same agent read from here instead of object storage.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;

use bytes::{Bytes, BytesMut};

pub struct TailCache {
    bytes_max: usize,
    bytes: usize,
    order: VecDeque<String>,
    objects: HashMap<String, Vec<Bytes>>,
}

impl TailCache {
    pub fn new(bytes_max: usize) -> Self {
        TailCache {
            bytes_max,
            bytes: 0,
            order: VecDeque::new(),
            objects: HashMap::new(),
        }
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn insert(&mut self, key: String, chunks: Vec<Bytes>) {
        let size: usize = chunks.iter().map(Bytes::len).sum();
        if size > self.bytes_max {
            return;
        }
        while self.bytes + size > self.bytes_max {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(c) = self.objects.remove(&old) {
                self.bytes -= c.iter().map(Bytes::len).sum::<usize>();
            }
        }
        if self.objects.insert(key.clone(), chunks).is_none() {
            self.order.push_back(key);
            self.bytes += size;
        }
        debug_assert!(self.bytes <= self.bytes_max);
    }

    pub fn contains(&self, key: &str) -> bool {
        self.objects.contains_key(key)
    }

    pub fn remove(&mut self, key: &str) {
        if let Some(c) = self.objects.remove(key) {
            self.bytes -= c.iter().map(Bytes::len).sum::<usize>();
            self.order.retain(|k| k != key);
        }
    }

    /// The bytes of `range`, zero-copy when it lies within one chunk.
    pub fn get_range(&self, key: &str, range: Range<u64>) -> Option<Bytes> {
        let chunks = self.objects.get(key)?;
        let (start, end) = (range.start as usize, range.end as usize);
        let mut offset = 0usize;
        let mut out: Option<BytesMut> = None;
        for c in chunks {
            let (c_start, c_end) = (offset, offset + c.len());
            offset = c_end;
            if c_end <= start {
                continue;
            }
            if c_start >= end {
                break;
            }
            let from = start.max(c_start) - c_start;
            let to = end.min(c_end) - c_start;
            if out.is_none() && c_start <= start && end <= c_end {
                return Some(c.slice(from..to));
            }
            out.get_or_insert_with(|| BytesMut::with_capacity(end - start))
                .extend_from_slice(&c[from..to]);
        }
        let out = out?;
        (out.len() == end - start).then(|| out.freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_across_chunks_and_eviction() {
        let mut c = TailCache::new(10);
        c.insert(
            "a".into(),
            vec![Bytes::from_static(b"0123"), Bytes::from_static(b"4567")],
        );
        assert_eq!(c.get_range("a", 1..3).unwrap(), Bytes::from_static(b"12"));
        assert_eq!(c.get_range("a", 2..6).unwrap(), Bytes::from_static(b"2345"));
        assert!(c.get_range("a", 6..9).is_none(), "past the end is a miss");
        c.insert("b".into(), vec![Bytes::from_static(b"abcd")]);
        assert!(
            c.get_range("a", 0..1).is_none(),
            "evicted to stay under the bound"
        );
        assert_eq!(c.bytes(), 4);
        c.insert("huge".into(), vec![Bytes::from(vec![0u8; 11])]);
        assert_eq!(c.bytes(), 4, "larger than the bound: not cached");
    }
}
