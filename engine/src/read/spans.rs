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
    LOG_START_CACHE_TTL, READ_AHEAD_SPANS_MAX, SPANS_CACHED_PER_PARTITION_MAX,
    SPAN_CACHE_PARTITIONS_MAX,
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
}

#[derive(Default)]
pub struct SpanCache {
    map: RefCell<HashMap<(Uuid, i32), Cached>>,
}

impl SpanCache {
    /// Cached spans from the one holding `from`: when they hold at least
    /// `bytes_max` bytes or reach the high watermark `hw`. Returns the log
    /// start offset too.
    pub fn get(
        &self,
        topic_id: Uuid,
        partition: i32,
        from: i64,
        hw: i64,
        bytes_max: usize,
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
                let end = (i + 1 + READ_AHEAD_SPANS_MAX).min(spans.len());
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
                if c.spans.len() >= SPANS_CACHED_PER_PARTITION_MAX {
                    c.spans.drain(..c.spans.len() / 2);
                }
                c.spans.push(span.clone());
                c.next_offset = span.last_offset + 1;
            }
        }
    }

    /// Remembers the spans just read for a partition from offset `from`,
    /// by a query sent at `asked_at`. A log start learned meanwhile (a
    /// notification overtaking the query) is kept: log starts only grow.
    pub fn remember(
        &self,
        topic_id: Uuid,
        partition: i32,
        log_start: i64,
        from: i64,
        spans: &[SpanRecord],
        asked_at: Instant,
    ) {
        let next_offset = spans.last().map_or(from, |l| l.last_offset + 1);
        let mut map = self.map.borrow_mut();
        if map.len() >= SPAN_CACHE_PARTITIONS_MAX && !map.contains_key(&(topic_id, partition)) {
            map.clear();
        }
        let known = map
            .get(&(topic_id, partition))
            .map_or(log_start, |c| c.log_start_offset.max(log_start));
        let kept: Vec<_> = spans
            .iter()
            .filter(|s| s.last_offset >= known)
            .cloned()
            .collect();
        map.insert(
            (topic_id, partition),
            Cached {
                log_start_offset: known,
                spans: kept,
                next_offset,
                read_at: asked_at,
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
                if start > c.log_start_offset {
                    c.log_start_offset = start;
                    c.spans.retain(|s| s.last_offset >= start);
                }
            }
        }
    }
}
