//! Bounded FIFO cache of whole objects, holding the very `Bytes` chunks that
//! were uploaded or read (no copy; a range is handed out as slices of
//! them): the tail cache (objects this agent uploaded last, read by tail
//! consumers on the same agent) and the read cache (objects read back
//! whole, shared by every partition in them). It counts the bytes of
//! objects nobody has read from yet, so that read-ahead can stay within a
//! share of it.
//!
//! The read cache also remembers the names of objects it evicted after
//! someone read from them (its ghosts): a read of a ghost means its readers
//! drifted apart by more than the cache holds (partitions of one object are
//! read at different speeds, or by groups far apart), so reading it whole
//! again would fetch the other partitions' bytes a second time. Such an
//! object is read by span instead, each span kept as its own part entry.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ops::Range;

use bytes::Bytes;

struct Entry {
    chunks: Vec<Bytes>,
    size: usize,
    /// Some range of it was handed out.
    read: bool,
    /// Bytes handed out (ranges read more than once count again), at most
    /// `size`.
    handed: usize,
    /// A whole object (not a part of one): becomes a ghost when evicted
    /// after it was read.
    whole: bool,
}

impl Entry {
    /// Counts `len` bytes of it handed out and marks it read; its size when
    /// it was unread until now, else 0.
    fn hand_out(&mut self, len: usize) -> usize {
        self.handed = (self.handed + len).min(self.size);
        if std::mem::replace(&mut self.read, true) {
            0
        } else {
            self.size
        }
    }
}

/// Evictions [`TailCache::whole_use`] averages over (exponentially).
const WHOLE_USE_EVICTIONS: u32 = 16;

pub struct TailCache {
    bytes_max: usize,
    bytes: usize,
    /// Bytes of the entries not read from yet.
    unread: usize,
    order: VecDeque<String>,
    objects: HashMap<String, Entry>,
    /// Whole objects evicted after they were read, oldest first; at most
    /// `ghosts_max` (0: none kept).
    ghosts_max: usize,
    ghost_order: VecDeque<String>,
    ghosts: HashSet<String>,
    /// Share of a whole object's bytes handed out before it was evicted,
    /// averaged over the last evictions (1.0 until the first).
    whole_use: f64,
}

impl TailCache {
    pub fn new(bytes_max: usize) -> Self {
        Self::with_ghosts(bytes_max, 0)
    }

    /// A cache that remembers the last `ghosts_max` whole objects it evicted
    /// after they were read.
    pub fn with_ghosts(bytes_max: usize, ghosts_max: usize) -> Self {
        TailCache {
            bytes_max,
            bytes: 0,
            unread: 0,
            order: VecDeque::new(),
            objects: HashMap::new(),
            ghosts_max,
            ghost_order: VecDeque::new(),
            ghosts: HashSet::new(),
            whole_use: 1.0,
        }
    }

    /// How much of the whole objects it evicted lately had been read: near
    /// 1 while their readers keep together, lower when the partitions of an
    /// object are read far apart (its other spans come after it is gone).
    pub fn whole_use(&self) -> f64 {
        self.whole_use
    }

    /// Whether `key` was evicted (whole, after a read) and not cached
    /// whole since.
    pub fn is_ghost(&self, key: &str) -> bool {
        self.ghosts.contains(key)
    }

    fn haunt(&mut self, key: String) {
        if self.ghosts_max == 0 || !self.ghosts.insert(key.clone()) {
            return;
        }
        self.ghost_order.push_back(key);
        while self.ghost_order.len() > self.ghosts_max {
            if let Some(old) = self.ghost_order.pop_front() {
                self.ghosts.remove(&old);
            }
        }
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn bytes_max(&self) -> usize {
        self.bytes_max
    }

    /// Bytes of the cached objects that nobody read from yet.
    pub fn unread_bytes(&self) -> usize {
        self.unread
    }

    fn forget(&mut self, e: &Entry) {
        self.bytes -= e.size;
        if !e.read {
            self.unread -= e.size;
        }
    }

    pub fn insert(&mut self, key: String, chunks: Vec<Bytes>) {
        self.insert_entry(key, chunks, true);
    }

    /// Caches part of an object (a span of a ghost) under its own `key`.
    pub fn insert_part(&mut self, key: String, chunks: Vec<Bytes>) {
        self.insert_entry(key, chunks, false);
    }

    fn insert_entry(&mut self, key: String, chunks: Vec<Bytes>, whole: bool) {
        let size: usize = chunks.iter().map(Bytes::len).sum();
        if size > self.bytes_max {
            return;
        }
        while self.bytes + size > self.bytes_max {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(e) = self.objects.remove(&old) {
                self.forget(&e);
                if e.whole && e.read {
                    let used = e.handed as f64 / e.size.max(1) as f64;
                    self.whole_use += (used - self.whole_use) / WHOLE_USE_EVICTIONS as f64;
                    self.haunt(old);
                }
            }
        }
        if whole && self.ghosts.remove(&key) {
            self.ghost_order.retain(|k| *k != key);
        }
        let entry = Entry {
            chunks,
            size,
            read: false,
            handed: 0,
            whole,
        };
        if let Some(old) = self.objects.insert(key.clone(), entry) {
            self.forget(&old);
        } else {
            self.order.push_back(key);
        }
        self.bytes += size;
        self.unread += size;
        debug_assert!(self.bytes <= self.bytes_max);
    }

    pub fn contains(&self, key: &str) -> bool {
        self.objects.contains_key(key)
    }

    pub fn remove(&mut self, key: &str) {
        if let Some(e) = self.objects.remove(key) {
            self.forget(&e);
            self.order.retain(|k| k != key);
        }
    }

    /// Counts `key` as read from (its bytes were handed out another way).
    pub fn mark_read(&mut self, key: &str, len: usize) {
        if let Some(e) = self.objects.get_mut(key) {
            self.unread -= e.hand_out(len);
        }
    }

    /// The bytes of `range`, as slices of the chunks it lies in.
    pub fn get_range(&mut self, key: &str, range: Range<u64>) -> Option<Vec<Bytes>> {
        let entry = self.objects.get_mut(key)?;
        let slices = slice_chunks(&entry.chunks, range)?;
        self.unread -= entry.hand_out(slices.iter().map(Bytes::len).sum());
        Some(slices)
    }
}

/// `range` of the concatenation of `chunks`, as slices of the chunks it
/// lies in (no copy); None past the end.
pub(crate) fn slice_chunks(chunks: &[Bytes], range: Range<u64>) -> Option<Vec<Bytes>> {
    let (start, end) = (range.start as usize, range.end as usize);
    if start > end {
        return None;
    }
    let mut offset = 0usize;
    let mut out = Vec::new();
    for c in chunks {
        let (c_start, c_end) = (offset, offset + c.len());
        offset = c_end;
        if c_start >= end {
            break;
        }
        if c_end <= start {
            continue;
        }
        out.push(c.slice(start.max(c_start) - c_start..end.min(c_end) - c_start));
    }
    (offset >= end).then_some(out)
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
        assert_eq!(
            c.get_range("a", 1..3).unwrap(),
            vec![Bytes::from_static(b"12")]
        );
        let across = c.get_range("a", 2..6).unwrap();
        assert_eq!(across.len(), 2, "a slice of each chunk, not a copy");
        assert_eq!(across.concat(), b"2345");
        assert_eq!(c.get_range("a", 0..8).unwrap().concat(), b"01234567");
        assert_eq!(c.get_range("a", 4..4).unwrap(), Vec::<Bytes>::new());
        assert!(c.get_range("a", 6..9).is_none(), "past the end is a miss");
        c.insert("b".into(), vec![Bytes::from_static(b"abcd")]);
        assert!(
            c.get_range("a", 0..1).is_none(),
            "evicted to stay under the bound"
        );
        assert_eq!(c.bytes(), 4);
        c.insert("huge".into(), vec![Bytes::from(vec![0u8; 11])]);
        assert_eq!(c.bytes(), 4, "larger than the bound: not cached");
        assert_eq!(c.unread_bytes(), 4);
        c.get_range("b", 0..1).unwrap();
        assert_eq!(c.unread_bytes(), 0, "read from: no longer unread");
        c.insert("c".into(), vec![Bytes::from_static(b"efgh")]);
        assert_eq!(c.unread_bytes(), 4);
        c.insert("d".into(), vec![Bytes::from_static(b"ijkl")]);
        assert!(!c.contains("b"));
        assert_eq!((c.bytes(), c.unread_bytes()), (8, 8));
        c.remove("c");
        assert_eq!((c.bytes(), c.unread_bytes()), (4, 4));
    }

    #[test]
    fn whole_objects_evicted_after_a_read_become_ghosts() {
        let mut c = TailCache::with_ghosts(8, 2);
        let four = || vec![Bytes::from_static(b"abcd")];
        c.insert("read".into(), four());
        c.insert("unread".into(), four());
        c.get_range("read", 0..1).unwrap();
        c.insert("x".into(), four());
        c.insert("y".into(), four());
        assert!(c.is_ghost("read"), "evicted after a read");
        assert!(
            !c.is_ghost("unread"),
            "never read: read-ahead that nobody used"
        );
        // Parts never become ghosts.
        c.get_range("x", 0..1).unwrap();
        c.get_range("y", 0..1).unwrap();
        c.insert_part("read@0".into(), vec![Bytes::from_static(b"ab")]);
        c.get_range("read@0", 0..2).unwrap();
        c.insert("z".into(), four());
        c.insert("w".into(), four());
        assert!(!c.is_ghost("read@0"));
        assert!(c.is_ghost("x") && c.is_ghost("y"));
        assert!(!c.is_ghost("read"), "at most two ghosts: the oldest goes");
        // Cached whole again: no longer a ghost.
        c.insert("x".into(), four());
        assert!(!c.is_ghost("x"));
    }

    #[test]
    fn whole_use_falls_when_objects_go_half_read() {
        let mut c = TailCache::with_ghosts(8, 4);
        assert_eq!(c.whole_use(), 1.0);
        for i in 0..64 {
            c.insert(i.to_string(), vec![Bytes::from_static(b"abcd")]);
            // A quarter of each object is read before it goes.
            c.get_range(&i.to_string(), 0..1).unwrap();
        }
        assert!(c.whole_use() < 0.3, "{}", c.whole_use());
        for i in 64..128 {
            c.insert(i.to_string(), vec![Bytes::from_static(b"abcd")]);
            c.get_range(&i.to_string(), 0..2).unwrap();
            c.get_range(&i.to_string(), 2..4).unwrap();
        }
        assert!(c.whole_use() > 0.9, "read whole again: {}", c.whole_use());
    }
}
