//! What read_committed fetches need per partition, kept per shard: the last
//! stable offset and the aborted transactions, so that a consumer reading
//! on is answered without asking PostgreSQL.
//!
//! Correct by construction rather than by freshness: an entry holds a last
//! stable offset together with the abort count (`partitions.abort_seq`) it
//! was computed under and every aborted transaction up to that count. Every
//! transaction beginning below that offset had ended when it was computed,
//! so the list holds all the aborted ones a fetch below it can return.
//! Notifications carry the offset with its count; one with the same count
//! moves the offset, one with the next count must carry that abort, and any
//! other gap drops the entry (the next fetch reads a new snapshot).

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;

use rutomq_meta::txn::StableState;
use rutomq_meta::MarksNews;
use uuid::Uuid;

use crate::limits::{ABORTED_TXNS_CACHED_MAX, STABLE_CACHE_PARTITIONS_MAX, STABLE_CACHE_TTL};

/// One aborted transaction in a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aborted {
    pub producer_id: i64,
    pub first_offset: i64,
    pub marker_offset: i64,
}

struct Entry {
    last_stable_offset: i64,
    abort_seq: i64,
    /// Valid for fetches from this offset on (aborts with an earlier
    /// marker are not held).
    floor: i64,
    /// Aborted transactions with a marker at or after `floor`, by marker.
    aborted: Vec<Aborted>,
    /// Aborts beginning at or after this offset may be missing: reads stop
    /// there.
    complete_below: i64,
    at: Instant,
}

/// What a read_committed fetch from some offset may use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StableView {
    pub last_stable_offset: i64,
    /// Reads stop below this (the last stable offset, or where the known
    /// aborted list ends).
    pub read_limit: i64,
    /// Aborted transactions whose marker is at or after the fetch offset.
    pub aborted: Vec<Aborted>,
}

#[derive(Default)]
pub struct StableIndex {
    map: RefCell<HashMap<(Uuid, i32), Entry>>,
}

impl StableIndex {
    /// The view for a fetch from `fetch_offset`, if a valid entry has it.
    pub fn get(&self, topic_id: Uuid, partition: i32, fetch_offset: i64) -> Option<StableView> {
        let map = self.map.borrow();
        let e = map.get(&(topic_id, partition))?;
        if e.at.elapsed() >= STABLE_CACHE_TTL || fetch_offset < e.floor {
            return None;
        }
        Some(view(e, fetch_offset))
    }

    /// The last stable offset a valid entry holds for fetches from
    /// `fetch_offset` (no copy of its aborted list).
    pub fn last_stable(&self, topic_id: Uuid, partition: i32, fetch_offset: i64) -> Option<i64> {
        let map = self.map.borrow();
        let e = map.get(&(topic_id, partition))?;
        (e.at.elapsed() < STABLE_CACHE_TTL && fetch_offset >= e.floor)
            .then_some(e.last_stable_offset)
    }

    /// A snapshot read from PostgreSQL for fetches from `from`, asked at
    /// `asked_at`; returns the view for `from`.
    pub fn remember(
        &self,
        topic_id: Uuid,
        partition: i32,
        from: i64,
        s: &StableState,
        asked_at: Instant,
    ) -> StableView {
        let mut aborted: Vec<Aborted> = s
            .aborted
            .iter()
            .map(|&(producer_id, first_offset, marker_offset)| Aborted {
                producer_id,
                first_offset,
                marker_offset,
            })
            .collect();
        aborted.sort_by_key(|a| a.marker_offset);
        let entry = Entry {
            last_stable_offset: s.last_stable_offset,
            abort_seq: s.abort_seq,
            floor: from,
            aborted,
            complete_below: s.complete_below.unwrap_or(i64::MAX),
            at: asked_at,
        };
        let v = view(&entry, from);
        let mut map = self.map.borrow_mut();
        if map.len() >= STABLE_CACHE_PARTITIONS_MAX && !map.contains_key(&(topic_id, partition)) {
            map.clear();
        }
        // A notification learned meanwhile may be newer than this snapshot.
        let keep_newer = map
            .get(&(topic_id, partition))
            .is_some_and(|old| old.abort_seq > entry.abort_seq && old.floor <= from);
        if !keep_newer {
            map.insert((topic_id, partition), entry);
        }
        v
    }

    /// News of commits and markers (see the module comment).
    pub fn learn(&self, news: &[MarksNews]) {
        let mut map = self.map.borrow_mut();
        for n in news {
            let key = (n.topic_id, n.partition);
            let Some(e) = map.get_mut(&key) else {
                continue;
            };
            let m = n.marks;
            if m.abort_seq < e.abort_seq {
                continue; // older than what is held
            }
            if m.abort_seq == e.abort_seq {
                if m.last_stable_offset > e.last_stable_offset {
                    e.last_stable_offset = m.last_stable_offset;
                    e.at = Instant::now();
                }
                continue;
            }
            match n.aborted {
                Some((producer_id, first_offset)) if m.abort_seq == e.abort_seq + 1 => {
                    e.aborted.push(Aborted {
                        producer_id,
                        first_offset,
                        marker_offset: m.high_watermark - 1,
                    });
                    if e.aborted.len() > ABORTED_TXNS_CACHED_MAX {
                        // Keep the newest markers; fetches from before the
                        // dropped one ask PostgreSQL.
                        let dropped = e.aborted.remove(0);
                        e.floor = e.floor.max(dropped.marker_offset + 1);
                    }
                    e.abort_seq = m.abort_seq;
                    e.last_stable_offset = e.last_stable_offset.max(m.last_stable_offset);
                    e.at = Instant::now();
                }
                _ => {
                    // An abort was missed (a dropped notification).
                    map.remove(&key);
                }
            }
        }
    }
}

fn view(e: &Entry, fetch_offset: i64) -> StableView {
    StableView {
        last_stable_offset: e.last_stable_offset,
        read_limit: e.last_stable_offset.min(e.complete_below),
        aborted: e
            .aborted
            .iter()
            .filter(|a| a.marker_offset >= fetch_offset)
            .copied()
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rutomq_meta::PartitionMarks;

    fn news(hw: i64, lso: i64, seq: i64, aborted: Option<(i64, i64)>) -> MarksNews {
        MarksNews {
            topic_id: Uuid::from_u128(1),
            partition: 0,
            marks: PartitionMarks {
                high_watermark: hw,
                log_start_offset: -1,
                last_stable_offset: lso,
                abort_seq: seq,
            },
            aborted,
        }
    }

    fn state(lso: i64, seq: i64, aborted: Vec<(i64, i64, i64)>) -> StableState {
        StableState {
            high_watermark: lso,
            log_start_offset: 0,
            last_stable_offset: lso,
            abort_seq: seq,
            aborted,
            complete_below: None,
        }
    }

    #[test]
    fn follows_notifications_and_drops_on_a_missed_abort() {
        let idx = StableIndex::default();
        let t = Uuid::from_u128(1);
        let v = idx.remember(t, 0, 0, &state(10, 1, vec![(7, 2, 5)]), Instant::now());
        assert_eq!(v.aborted.len(), 1);
        // Same count: the offset moves.
        idx.learn(&[news(20, 20, 1, None)]);
        assert_eq!(idx.get(t, 0, 0).unwrap().last_stable_offset, 20);
        // The marker before the fetch offset is not listed.
        assert!(idx.get(t, 0, 6).unwrap().aborted.is_empty());
        // The next abort, carried: listed.
        idx.learn(&[news(31, 31, 2, Some((8, 25)))]);
        let v = idx.get(t, 0, 21).unwrap();
        assert_eq!(
            v.aborted,
            vec![Aborted {
                producer_id: 8,
                first_offset: 25,
                marker_offset: 30
            }]
        );
        // Older news changes nothing.
        idx.learn(&[news(25, 25, 1, None)]);
        assert_eq!(idx.get(t, 0, 0).unwrap().last_stable_offset, 31);
        // A jump: an abort was missed, the entry goes.
        idx.learn(&[news(40, 40, 4, None)]);
        assert!(idx.get(t, 0, 0).is_none());
    }

    #[test]
    fn fetches_below_the_floor_or_past_a_cut_list_are_bounded() {
        let idx = StableIndex::default();
        let t = Uuid::from_u128(1);
        let mut s = state(100, 3, vec![(1, 10, 12)]);
        s.complete_below = Some(50);
        let v = idx.remember(t, 0, 8, &s, Instant::now());
        assert_eq!(v.read_limit, 50);
        assert!(idx.get(t, 0, 7).is_none());
        assert!(idx.get(t, 0, 8).is_some());
    }
}
