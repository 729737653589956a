//! The latest offset of each key in the dirty part of a partition, in a
//! fixed amount of memory: Kafka's `SkimpyOffsetMap`. A key is its MD5
//! digest (byte equality of keys, as Kafka compares them; headers and value
//! play no part; an empty key is a key); each slot is the 16-byte digest
//! and an offset, 24 bytes. The table is allocated once and never grows: a
//! pass stops adding keys when it is [`LOAD_FACTOR`] full, and the rest of
//! the dirty part waits for the next pass.

use md5::{Digest, Md5};

/// Slots filled at most, as a fraction (Kafka's
/// `log.cleaner.io.buffer.load.factor`, 0.9).
pub const LOAD_FACTOR: f64 = 0.9;
/// Bytes per slot.
pub const SLOT_BYTES: usize = 24;

const EMPTY: i64 = -1;

pub struct KeyMap {
    digests: Vec<[u8; 16]>,
    offsets: Vec<i64>,
    used: usize,
    limit: usize,
}

impl KeyMap {
    /// A map in about `bytes` of memory (at least 16 slots).
    pub fn with_memory(bytes: usize) -> KeyMap {
        let slots = (bytes / SLOT_BYTES).max(16);
        KeyMap {
            digests: vec![[0; 16]; slots],
            offsets: vec![EMPTY; slots],
            used: 0,
            limit: ((slots as f64 * LOAD_FACTOR) as usize).max(1),
        }
    }

    pub fn clear(&mut self) {
        self.offsets.fill(EMPTY);
        self.used = 0;
    }

    /// Keys that may still be added.
    pub fn room(&self) -> usize {
        self.limit - self.used
    }

    pub fn len(&self) -> usize {
        self.used
    }

    /// Keys it holds at most.
    pub fn capacity(&self) -> usize {
        self.limit
    }

    /// Records `offset` as the latest of `key`; false (and nothing
    /// recorded) when the map is full and `key` is new.
    pub fn put(&mut self, key: &[u8], offset: i64) -> bool {
        let d = digest(key);
        let i = self.slot_of(&d);
        if self.offsets[i] == EMPTY {
            if self.used >= self.limit {
                return false;
            }
            self.used += 1;
            self.digests[i] = d;
        }
        self.offsets[i] = offset;
        true
    }

    /// The latest offset recorded for `key`.
    pub fn get(&self, key: &[u8]) -> Option<i64> {
        let i = self.slot_of(&digest(key));
        (self.offsets[i] != EMPTY).then_some(self.offsets[i])
    }

    /// The slot holding `d`, or the empty one where it would go (linear
    /// probing; never full, the load factor keeps empty slots).
    fn slot_of(&self, d: &[u8; 16]) -> usize {
        let n = self.offsets.len();
        let mut i = (u64::from_le_bytes(d[..8].try_into().expect("8 bytes")) % n as u64) as usize;
        loop {
            if self.offsets[i] == EMPTY || &self.digests[i] == d {
                return i;
            }
            i = (i + 1) % n;
        }
    }
}

fn digest(key: &[u8]) -> [u8; 16] {
    Md5::digest(key).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_latest_offset_per_key_and_stops_when_full() {
        let mut m = KeyMap::with_memory(100 * SLOT_BYTES);
        assert_eq!(m.capacity(), 90);
        assert!(m.put(b"a", 1));
        assert!(m.put(b"", 2));
        assert!(m.put(b"a", 3));
        assert_eq!(m.get(b"a"), Some(3));
        assert_eq!(m.get(b""), Some(2));
        assert_eq!(m.get(b"b"), None);
        for i in 0..88 {
            assert!(m.put(format!("k{i}").as_bytes(), 10 + i));
        }
        assert_eq!(m.room(), 0);
        assert!(!m.put(b"new", 500), "full: a new key is refused");
        assert!(m.put(b"k5", 501), "a known key still moves");
        assert_eq!(m.get(b"k5"), Some(501));
        m.clear();
        assert_eq!((m.len(), m.get(b"a")), (0, None));
    }
}
