//! The committed spans a shard last read per partition, with the log start
//! offset. Spans never change once committed (compaction replaces them, and
//! keeps the objects of the old ones readable for longer than an entry
//! lives), so a consumer reading on is served from here instead of asking
//! PostgreSQL on every fetch.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;

use rutomq_meta::SpanRecord;
use uuid::Uuid;

use crate::flush::NewSpan;
use crate::limits::{
    LOG_START_CACHE_TTL, SPANS_CACHED_PER_PARTITION_MAX, SPAN_CACHE_PARTITIONS_MAX,
};

/// One partition's cached spans.
struct Cached {
    log_start_offset: i64,
    /// Sorted by offset.
    spans: Vec<SpanRecord>,
    /// The offset the next span must start at to extend `spans`.
    next_offset: i64,
    /// When the log start was read from PostgreSQL.
    read_at: Instant,
    /// Where the last read of spans ahead of a consumer started
    /// ([`SpanCache::claim_ahead`]).
    ahead_from: Option<i64>,
}

impl Cached {
    /// Appends `span`, which starts at `next_offset`; past
    /// [`SPANS_CACHED_PER_PARTITION_MAX`] the oldest half goes.
    fn push(&mut self, span: SpanRecord) {
        if self.spans.len() >= SPANS_CACHED_PER_PARTITION_MAX {
            self.spans.drain(..self.spans.len() / 2);
        }
        self.next_offset = span.last_offset + 1;
        self.spans.push(span);
    }

    /// A log start learned (they only grow): the spans below it are gone.
    fn advance_log_start(&mut self, start: i64) {
        if start > self.log_start_offset {
            self.log_start_offset = start;
            self.spans.retain(|s| s.last_offset >= start);
        }
    }
}

/// Past [`SPANS_CACHED_PER_PARTITION_MAX`], the oldest spans go.
fn keep_newest(spans: &mut Vec<SpanRecord>) {
    if spans.len() > SPANS_CACHED_PER_PARTITION_MAX {
        spans.drain(..spans.len() - SPANS_CACHED_PER_PARTITION_MAX);
    }
}

#[derive(Default)]
pub struct SpanCache {
    map: RefCell<HashMap<(Uuid, i32), Cached>>,
}

impl SpanCache {
    /// Cached spans from the one holding `from`: when they hold at least
    /// `bytes_max` bytes or reach the high watermark `hw`, plus up to
    /// `ahead` more (for read-ahead). Returns the log start offset too.
    pub fn get(
        &self,
        topic_id: Uuid,
        partition: i32,
        from: i64,
        hw: i64,
        bytes_max: usize,
        ahead: usize,
    ) -> Option<(i64, Vec<SpanRecord>)> {
        let map = self.map.borrow();
        let c = map.get(&(topic_id, partition))?;
        if c.read_at.elapsed() >= LOG_START_CACHE_TTL {
            return None;
        }
        let spans = &c.spans;
        // Sorted by offset: the first span ending at or after `from`.
        let first = spans.partition_point(|s| s.last_offset < from);
        if spans.get(first)?.base_offset > from || from < c.log_start_offset {
            return None;
        }
        let mut bytes = 0usize;
        for (i, s) in spans.iter().enumerate().skip(first) {
            bytes += s.byte_len as usize;
            if bytes >= bytes_max || s.last_offset + 1 >= hw {
                // Enough, plus what follows for read-ahead.
                let end = (i + 1 + ahead).min(spans.len());
                return Some((c.log_start_offset, spans[first..end].to_vec()));
            }
        }
        None
    }

    /// Extends cached span lists with spans this agent just committed, when
    /// they continue them (a gap means another agent wrote in between: the
    /// next read asks PostgreSQL and refreshes the list).
    pub fn extend(&self, spans: &[NewSpan]) {
        let mut map = self.map.borrow_mut();
        for (tp, span) in spans {
            let Some(c) = map.get_mut(tp) else {
                continue;
            };
            if c.next_offset == span.base_offset {
                c.push(span.clone());
            }
        }
    }

    /// Whether to read a partition's spans from `from` ahead of its
    /// consumers: its cached list ends right before `from`, and no such
    /// read started there yet (marked started now). One read per end of the
    /// list: one whose spans cannot be appended (compaction left a gap at
    /// `from`, or the list changed meanwhile) is not repeated by every fetch
    /// that follows; the fetch that gets there reads them itself.
    pub fn claim_ahead(&self, topic_id: Uuid, partition: i32, from: i64) -> bool {
        let mut map = self.map.borrow_mut();
        let Some(c) = map.get_mut(&(topic_id, partition)) else {
            return false;
        };
        if c.next_offset != from || c.ahead_from == Some(from) {
            return false;
        }
        c.ahead_from = Some(from);
        true
    }

    /// Appends `spans`, read from PostgreSQL from offset `from` ahead of a
    /// consumer, to a partition's cached list when they continue it (the
    /// list still ends right before `from`, and the first of them starts
    /// there); otherwise drops them (the list changed meanwhile: a fetch
    /// reads what it needs itself). The entry keeps its age: it expires
    /// when its first read does (see [`LOG_START_CACHE_TTL`]). Past
    /// [`SPANS_CACHED_PER_PARTITION_MAX`] the oldest spans go. Whether they
    /// were appended.
    pub fn append(
        &self,
        topic_id: Uuid,
        partition: i32,
        log_start: i64,
        from: i64,
        spans: &[SpanRecord],
    ) -> bool {
        let mut map = self.map.borrow_mut();
        let Some(c) = map.get_mut(&(topic_id, partition)) else {
            return false;
        };
        let continues = spans.first().is_some_and(|s| s.base_offset == from);
        if c.next_offset != from || !continues || c.read_at.elapsed() >= LOG_START_CACHE_TTL {
            return false;
        }
        c.spans.extend_from_slice(spans);
        c.next_offset = c
            .next_offset
            .max(spans.last().map_or(from, |l| l.last_offset + 1));
        c.advance_log_start(log_start);
        keep_newest(&mut c.spans);
        true
    }

    /// Remembers the spans just read for a partition from offset `from`,
    /// by a query sent at `asked_at`. A log start learned meanwhile (a
    /// notification overtaking the query) is kept: log starts only grow.
    ///
    /// Spans that join the cached ones without a gap are merged with them
    /// (committed spans never change, so the same offsets are the same
    /// spans), so that consumers at different offsets of one partition (a
    /// lagging group and groups at the tail) share the entry instead of
    /// replacing each other's: the tail stays cached and keeps growing
    /// with new commits. Past [`SPANS_CACHED_PER_PARTITION_MAX`] the oldest
    /// spans go.
    pub fn remember(
        &self,
        topic_id: Uuid,
        partition: i32,
        log_start: i64,
        from: i64,
        spans: &[SpanRecord],
        asked_at: Instant,
    ) {
        let mut map = self.map.borrow_mut();
        if map.len() >= SPAN_CACHE_PARTITIONS_MAX && !map.contains_key(&(topic_id, partition)) {
            map.clear();
        }
        let old = map.remove(&(topic_id, partition));
        let known = old
            .as_ref()
            .map_or(log_start, |c| c.log_start_offset.max(log_start));
        let fresh: Vec<_> = spans
            .iter()
            .filter(|s| s.last_offset >= known)
            .cloned()
            .collect();
        let fresh_next = spans.last().map_or(from, |l| l.last_offset + 1);
        let (mut kept, next_offset, read_at) = match old
            .filter(|c| c.read_at.elapsed() < LOG_START_CACHE_TTL)
            .and_then(|c| merge(&c.spans, &fresh).map(|m| (m, c)))
        {
            Some((merged, c)) => (
                merged,
                c.next_offset.max(fresh_next),
                // The older of the two reads decides when the log start
                // is asked again.
                c.read_at.min(asked_at),
            ),
            None => (fresh, fresh_next, asked_at),
        };
        // Spans below a log start learned since the older read are gone.
        kept.retain(|s| s.last_offset >= known);
        keep_newest(&mut kept);
        map.insert(
            (topic_id, partition),
            Cached {
                log_start_offset: known,
                spans: kept,
                next_offset,
                read_at,
                ahead_from: None,
            },
        );
    }

    /// Partitions a compaction pass rewrote: their cached spans still read
    /// (an older history), but the next fetch asks for the new ones.
    pub fn forget(&self, compacted: &[(Uuid, i32, i64)]) {
        if compacted.is_empty() {
            return;
        }
        let mut map = self.map.borrow_mut();
        for &(t, p, _) in compacted {
            map.remove(&(t, p));
        }
    }

    /// Log starts moved by retention or DeleteRecords: cached spans before
    /// them are forgotten, and fetches below them get OFFSET_OUT_OF_RANGE.
    pub fn advance_log_starts(&self, log_starts: &[(Uuid, i32, i64)]) {
        let mut map = self.map.borrow_mut();
        for &(t, p, start) in log_starts {
            if let Some(c) = map.get_mut(&(t, p)) {
                c.advance_log_start(start);
            }
        }
    }
}

/// The union of two sorted span lists, when it has no gap: each span
/// starting right after the one before (`None` otherwise, or when either
/// list has a gap of its own: offsets left out by compaction).
fn merge(a: &[SpanRecord], b: &[SpanRecord]) -> Option<Vec<SpanRecord>> {
    let (Some(a0), Some(b0)) = (a.first(), b.first()) else {
        return None;
    };
    let (first, second) = if a0.base_offset <= b0.base_offset {
        (a, b)
    } else {
        (b, a)
    };
    let mut out: Vec<SpanRecord> = Vec::with_capacity(first.len() + second.len());
    for s in first.iter().chain(second) {
        match out.last() {
            None => out.push(s.clone()),
            Some(last) if s.last_offset <= last.last_offset => {
                // Already there (`out` is sorted); the same offsets must be
                // the same span.
                if out
                    .binary_search_by_key(&s.base_offset, |o| o.base_offset)
                    .is_err()
                {
                    return None;
                }
            }
            Some(last) if s.base_offset == last.last_offset + 1 => out.push(s.clone()),
            Some(_) => return None,
        }
    }
    Some(out)
}

/// A plain span of offsets `base..=last` (one 100-byte batch in object
/// `o<base>`), for tests.
#[cfg(test)]
pub(crate) fn test_span(base: i64, last: i64) -> SpanRecord {
    SpanRecord {
        base_offset: base,
        last_offset: last,
        object_key: format!("o{base}"),
        byte_start: 0,
        byte_len: 100,
        batch_count: 1,
        max_timestamp: 0,
        object_size: 100,
        sparse: false,
        marker: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::test_span as span;

    fn spans(from: i64, to: i64) -> Vec<SpanRecord> {
        (from..to).map(|i| span(i * 10, i * 10 + 9)).collect()
    }

    /// Spans read ahead of a consumer extend its partition's list when
    /// they continue it, and are dropped otherwise.
    #[test]
    fn spans_read_ahead_continue_the_list_or_are_dropped() {
        let (c, t, now) = (SpanCache::default(), Uuid::from_u128(1), Instant::now());
        // No entry (evicted, or forgotten after a compaction): dropped.
        assert!(!c.append(t, 0, 0, 100, &spans(10, 20)));
        c.remember(t, 0, 0, 0, &spans(0, 10), now);
        // Not where the list ends (a newer read replaced it): dropped.
        assert!(!c.append(t, 0, 0, 110, &spans(11, 20)));
        // A gap at the junction (compaction left offsets out): dropped.
        assert!(!c.append(t, 0, 0, 100, &[span(105, 109)]));
        // One read ahead per end of the list, and only at its end.
        assert!(!c.claim_ahead(t, 0, 90));
        assert!(c.claim_ahead(t, 0, 100));
        assert!(!c.claim_ahead(t, 0, 100));
        assert!(c.append(t, 0, 0, 100, &spans(10, 20)));
        assert!(c.claim_ahead(t, 0, 200));
        let (_, got) = c.get(t, 0, 95, 200, 1 << 20, 0).expect("cached");
        assert_eq!(got.last().unwrap().last_offset, 199);
        // A log start learned with them trims the list.
        assert!(c.append(t, 0, 50, 200, &spans(20, 30)));
        assert!(c.get(t, 0, 40, 1000, 100, 0).is_none());
        let (start, got) = c.get(t, 0, 50, 1000, 100, 0).expect("cached");
        assert_eq!((start, got[0].base_offset), (50, 50));
        // Bounded: the oldest go.
        assert!(c.append(t, 0, 0, 300, &spans(30, 300)));
        let map = c.map.borrow();
        let e = &map[&(t, 0)];
        assert_eq!(e.spans.len(), SPANS_CACHED_PER_PARTITION_MAX);
        assert_eq!(
            (e.spans.last().unwrap().last_offset, e.next_offset),
            (2999, 3000)
        );
    }

    /// A reader far behind the tail asks PostgreSQL for old spans; the
    /// tail stays cached for the readers there, and both are served.
    #[test]
    fn readers_at_different_offsets_share_one_entry() {
        let (c, t, now) = (SpanCache::default(), Uuid::from_u128(1), Instant::now());
        c.remember(t, 0, 0, 500, &spans(50, 60), now);
        c.remember(t, 0, 0, 300, &spans(30, 50), now);
        let (_, tail) = c.get(t, 0, 550, 600, 1 << 20, 8).expect("the tail");
        assert_eq!(tail.first().unwrap().base_offset, 550);
        let (_, old) = c.get(t, 0, 300, 600, 300, 8).expect("the old spans");
        assert_eq!(old.first().unwrap().base_offset, 300);
        // New commits still extend it.
        c.extend(&[((t, 0), span(600, 609))]);
        let (_, tail) = c.get(t, 0, 600, 610, 1 << 20, 8).expect("extended");
        assert_eq!(tail.len(), 1);
        // A gap (compaction left offsets out) replaces instead.
        c.remember(t, 0, 0, 100, &spans(10, 20), now);
        assert!(c.get(t, 0, 550, 610, 1 << 20, 8).is_none());
        assert!(c.get(t, 0, 100, 610, 200, 8).is_some());
        // Bounded: the oldest go.
        c.remember(t, 0, 0, 0, &spans(0, 200), now);
        c.remember(t, 0, 0, 2000, &spans(200, 264), now);
        let map = c.map.borrow();
        let e = &map[&(t, 0)];
        assert_eq!(e.spans.len(), SPANS_CACHED_PER_PARTITION_MAX);
        assert_eq!(e.spans.last().unwrap().last_offset, 2639);
        assert_eq!(e.next_offset, 2640);
    }
}
