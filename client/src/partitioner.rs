//! Where a record goes: Kafka's Java-compatible key hash for keyed records,
//! sticky batches for keyless ones.
//!
//! A keyed record goes to `to_positive(murmur2(key)) % partitions`, the
//! Java client's `BuiltInPartitioner.partitionForKey`, so that keys land
//! where every other Kafka client (and Kafka Streams) puts them. A keyless
//! record goes to the partition its producer is sticking to; the producer
//! moves on to the next partition (round-robin) when that partition's batch
//! was closed, so keyless records fill whole batches instead of spreading
//! one record per partition.

/// Kafka's murmur2 (`org.apache.kafka.common.utils.Utils.murmur2`): the
/// 32-bit MurmurHash2 with seed `0x9747b28c`, little-endian words.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h = SEED ^ data.len() as u32;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        let mut k = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = words.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Kafka's `Utils.toPositive`: clears the sign bit (not `abs`, which would
/// overflow on `i32::MIN`).
pub fn to_positive(n: i32) -> i32 {
    n & 0x7fff_ffff
}

/// The partition of a keyed record among `partitions` (> 0).
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    debug_assert!(partitions > 0);
    to_positive(murmur2(key)) % partitions.max(1)
}

/// The keyless placement of one producer for one topic: the current sticky
/// partition, moved round-robin when its batch closes.
#[derive(Debug, Clone)]
pub struct Sticky {
    current: Option<i32>,
}

impl Sticky {
    /// Starts at a random partition, as Kafka's producer does, so that many
    /// producers do not all begin on partition 0.
    pub fn new() -> Sticky {
        Sticky { current: None }
    }

    /// The partition keyless records go to now.
    pub fn partition(&mut self, partitions: i32) -> i32 {
        let n = partitions.max(1);
        match self.current {
            Some(p) if p < n => p,
            _ => {
                let p = rand::random_range(0..n);
                self.current = Some(p);
                p
            }
        }
    }

    /// The batch of `closed` was closed (full, or sent): the next keyless
    /// record goes to the following partition. A batch of another partition
    /// (a keyed record's) does not move the sticky one.
    pub fn batch_closed(&mut self, closed: i32, partitions: i32) {
        if self.current == Some(closed) {
            self.current = Some((closed + 1) % partitions.max(1));
        }
    }
}

impl Default for Sticky {
    fn default() -> Self {
        Sticky::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectors of Kafka's own `UtilsTest.testMurmur2`.
    #[test]
    fn murmur2_matches_kafka_test_vectors() {
        for (key, want) in [
            (&b"21"[..], -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ] {
            assert_eq!(murmur2(key), want, "{}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn to_positive_clears_only_the_sign_bit() {
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(-1), i32::MAX);
        assert_eq!(to_positive(7), 7);
        // "21" hashes negative; its partition is the masked value mod n.
        assert_eq!(
            partition_for_key(b"21", 1000),
            (-973_932_308 & 0x7fff_ffff) % 1000
        );
    }

    #[test]
    fn sticky_stays_until_its_batch_closes_then_moves_round_robin() {
        let mut s = Sticky::new();
        let first = s.partition(4);
        assert!((0..4).contains(&first));
        for _ in 0..10 {
            assert_eq!(s.partition(4), first);
        }
        // Another partition's batch closing changes nothing.
        s.batch_closed((first + 2) % 4, 4);
        assert_eq!(s.partition(4), first);
        let mut seen = vec![first];
        for _ in 0..3 {
            let p = s.partition(4);
            s.batch_closed(p, 4);
            seen.push(s.partition(4));
        }
        assert_eq!(
            seen,
            (0..4).map(|i| (first + i) % 4).collect::<Vec<_>>(),
            "round-robin from the first"
        );
        // Fewer partitions than the sticky one: starts over inside the range.
        assert!((0..2).contains(&s.partition(2)));
    }
}
