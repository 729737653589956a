//! What one compaction pass decides, record by record and marker by
//! marker, as Kafka's cleaner does (`Cleaner.shouldRetainRecord`,
//! `CleanedTransactionMetadata`), on rutomq's log of spans and markers:
//!
//! 1. The key map is built over the dirty part `[dirty_from, end)`: the
//!    latest offset of each key. Batches of aborted transactions are
//!    skipped (their keys must not knock out a committed value).
//! 2. The whole log below `end` is then rewritten. A record is kept when
//!    it has a key, no later record of its key is in the map, and it is not
//!    a tombstone past its delete horizon. Aborted batches go whole, at
//!    once. A tombstone kept in a batch without a horizon gets one (now +
//!    `delete.retention.ms`), so that a later pass may remove it.
//! 3. A marker whose transaction has no data left waits for a horizon too
//!    and is removed after it (an abort's horizon is at least
//!    [`ABORT_MARKER_GRACE`]: readers may still hold spans with its data
//!    for that long, and it lists the data as aborted).
//!
//! Offsets never move. Spans left unchanged stay; consecutive changed
//! spans (with the removed markers between them) become runs, each
//! written as one sparse span whose batches keep their base offsets. A
//! run always ends with a batch ending at the run's last offset (the empty
//! header of the last removed batch, or an empty batch where a removed
//! marker was), so a fetch at any offset below the high watermark finds a
//! batch to answer with.

use std::collections::HashMap;

use bytes::Bytes;
use rutomq_meta::compact::{AbortedTxn, MarkerState};
use rutomq_meta::SpanRecord;

use super::batch::{empty_batch, empty_header, Decoded, Header};
use super::keymap::KeyMap;
use crate::limits::{ABORT_MARKER_GRACE, COMPACTED_SPAN_BYTES_MAX, COMPACTION_TXN_PRODUCERS_MAX};
use crate::read::ReadBatch;
use crate::records::Invalid;

/// What a pass is bound by.
#[derive(Clone, Copy, Debug)]
pub struct PassRules {
    pub now_ms: i64,
    /// The topic's `delete.retention.ms`.
    pub delete_retention_ms: i64,
    /// Offsets at and past this are not touched.
    pub end: i64,
}

/// The aborted transactions with data, by producer.
#[derive(Default)]
pub struct Aborts(HashMap<i64, Vec<(i64, i64)>>);

impl Aborts {
    pub fn new(list: &[AbortedTxn]) -> Aborts {
        let mut m: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
        for a in list {
            m.entry(a.producer_id)
                .or_default()
                .push((a.first_offset, a.marker_offset));
        }
        for v in m.values_mut() {
            v.sort_unstable();
        }
        Aborts(m)
    }

    /// Whether the transactional batch of `h` at `base` was aborted.
    pub fn covers(&self, h: &Header, base: i64) -> bool {
        if !h.transactional() || h.producer_id < 0 {
            return false;
        }
        let Some(v) = self.0.get(&h.producer_id) else {
            return false;
        };
        let i = v.partition_point(|&(first, _)| first <= base);
        i > 0 && base <= v[i - 1].1
    }
}

/// The records of `batches` a key map must know (the pass's first step);
/// false when the map filled up (nothing more should be added).
pub fn index(map: &mut KeyMap, aborts: &Aborts, batches: &[ReadBatch]) -> Result<bool, Invalid> {
    for rb in batches {
        let h = Header::parse(&rb.batch.bytes)?;
        if h.control() || aborts.covers(&h, rb.base_offset) {
            continue;
        }
        let d = Decoded::new(&rb.batch.bytes, rb.base_offset)?;
        for i in 0..d.len() {
            let r = d.record(i)?;
            if let Some(k) = r.key {
                if !map.put(k, r.offset) {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}

/// Records in `batches` by their headers (an upper bound of the keys they
/// add to a map).
pub fn record_count(batches: &[ReadBatch]) -> usize {
    batches
        .iter()
        .map(|b| Header::parse(&b.batch.bytes).map_or(0, |h| h.record_count.max(0) as usize))
        .sum()
}

/// One sparse span to write.
pub struct Run {
    pub base_offset: i64,
    pub last_offset: i64,
    pub batches: Vec<Bytes>,
    pub bytes: usize,
    pub max_timestamp: i64,
}

#[derive(Default)]
struct OpenRun {
    first: Option<i64>,
    next: i64,
    batches: Vec<Bytes>,
    bytes: usize,
    /// The batch that ends the run if nothing kept follows.
    tail: Option<Bytes>,
    max_timestamp: i64,
}

/// What a pass removed and kept, for its log line and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassStats {
    pub bytes_read: u64,
    pub records_read: u64,
    pub records_removed: u64,
    pub batches_rebuilt: u64,
    pub markers_removed: u64,
}

/// The second step of a pass: fed every span and marker below the pass's
/// end in offset order, it decides what stays and gathers the runs.
pub struct Rewriter<'a> {
    rules: PassRules,
    map: &'a KeyMap,
    aborts: &'a Aborts,
    /// Producers with a transaction whose data survives, since their
    /// last marker.
    txn_data: HashMap<i64, bool>,
    /// Too many producers to follow: no marker is removed this pass.
    txn_overflow: bool,
    run: OpenRun,
    /// Runs complete, for the caller to write.
    pub runs: Vec<Run>,
    /// Base offsets of the spans the runs replace.
    pub replaced: Vec<i64>,
    pub markers_removed: Vec<i64>,
    pub markers_stamped: Vec<(i64, i64)>,
    /// The earliest horizon left waiting.
    pub next_horizon: Option<i64>,
    pub stats: PassStats,
}

enum Out {
    Kept(Bytes, i64, i64),
    Removed(Bytes, i64),
}

impl<'a> Rewriter<'a> {
    pub fn new(rules: PassRules, map: &'a KeyMap, aborts: &'a Aborts) -> Rewriter<'a> {
        Rewriter {
            rules,
            map,
            aborts,
            txn_data: HashMap::new(),
            txn_overflow: false,
            run: OpenRun::default(),
            runs: Vec::new(),
            replaced: Vec::new(),
            markers_removed: Vec::new(),
            markers_stamped: Vec::new(),
            next_horizon: None,
            stats: PassStats::default(),
        }
    }

    fn wait_for(&mut self, horizon: i64) {
        self.next_horizon = Some(self.next_horizon.map_or(horizon, |h| h.min(horizon)));
    }

    fn saw_txn_data(&mut self, pid: i64) {
        if self.txn_data.len() >= COMPACTION_TXN_PRODUCERS_MAX && !self.txn_data.contains_key(&pid)
        {
            self.txn_overflow = true;
            return;
        }
        self.txn_data.insert(pid, true);
    }

    /// One data span and its batches.
    pub fn span(&mut self, span: &SpanRecord, batches: &[ReadBatch]) -> Result<(), Invalid> {
        let r = self.rules;
        let mut outs = Vec::with_capacity(batches.len());
        let mut changed = false;
        self.stats.bytes_read += span.byte_len as u64;
        for rb in batches {
            let bytes = &rb.batch.bytes;
            let h = Header::parse(bytes)?;
            let base = rb.base_offset;
            let last = base + h.last_offset_delta as i64;
            let positioned = || {
                let mut b = bytes::BytesMut::with_capacity(bytes.len());
                crate::records::put_with_base_offset(&mut b, bytes, base);
                b.freeze()
            };
            self.stats.records_read += h.record_count.max(0) as u64;
            if h.control() || base >= r.end {
                outs.push(Out::Kept(positioned(), last, h.max_timestamp));
                continue;
            }
            if self.aborts.covers(&h, base) {
                self.stats.records_removed += h.record_count.max(0) as u64;
                outs.push(Out::Removed(empty_header(&h, base), last));
                changed = true;
                continue;
            }
            let d = Decoded::new(bytes, base)?;
            let horizon = h.delete_horizon();
            let mut keep = vec![false; d.len()];
            let mut stamp = false;
            for (i, k) in keep.iter_mut().enumerate() {
                let rec = d.record(i)?;
                *k = rec.offset >= r.end
                    || rec.key.is_some_and(|key| {
                        self.map.get(key).is_none_or(|latest| rec.offset >= latest)
                            && !(rec.tombstone && horizon.is_some_and(|hz| r.now_ms >= hz))
                    });
                if *k && rec.tombstone && rec.offset < r.end {
                    match horizon {
                        None => stamp = true,
                        Some(hz) => self.wait_for(hz),
                    }
                }
            }
            let kept = keep.iter().filter(|&&k| k).count();
            self.stats.records_removed += (d.len() - kept) as u64;
            if kept > 0 && h.transactional() && h.producer_id >= 0 {
                self.saw_txn_data(h.producer_id);
            }
            if kept == d.len() && !stamp {
                outs.push(Out::Kept(positioned(), last, h.max_timestamp));
            } else if kept == 0 {
                outs.push(Out::Removed(empty_header(&h, base), last));
                changed = true;
            } else {
                let new_horizon = if stamp {
                    let hz = r.now_ms.saturating_add(r.delete_retention_ms.max(0));
                    self.wait_for(hz);
                    Some(hz)
                } else {
                    horizon
                };
                let b = d.rebuild(&keep, new_horizon)?;
                let ts = Header::parse(&b)?.max_timestamp;
                self.stats.batches_rebuilt += 1;
                outs.push(Out::Kept(b, last, ts));
                changed = true;
            }
        }
        if !changed {
            // Left as it is.
            self.close_run();
            return Ok(());
        }
        self.replaced.push(span.base_offset);
        self.open_at(span.base_offset);
        for o in outs {
            match o {
                Out::Kept(b, last, ts) => {
                    if self.run.bytes > 0 && self.run.bytes + b.len() > COMPACTED_SPAN_BYTES_MAX {
                        let at = self.run.next;
                        self.close_run();
                        self.open_at(at);
                    }
                    self.run.bytes += b.len();
                    self.run.batches.push(b);
                    self.run.tail = None;
                    self.run.next = last + 1;
                    self.run.max_timestamp = self.run.max_timestamp.max(ts);
                }
                Out::Removed(header, last) => {
                    self.run.tail = Some(header);
                    self.run.next = last + 1;
                }
            }
        }
        debug_assert_eq!(self.run.next, span.last_offset + 1);
        Ok(())
    }

    /// One marker.
    pub fn marker(&mut self, m: &MarkerState) {
        let data_left = self.txn_data.remove(&m.producer_id).unwrap_or(false) || self.txn_overflow;
        let r = self.rules;
        if data_left || m.offset >= r.end {
            self.close_run();
            return;
        }
        match m.delete_horizon_ms {
            None => {
                let mut wait = r.delete_retention_ms.max(0);
                if !m.commit && m.first_offset.is_some() {
                    wait = wait.max(ABORT_MARKER_GRACE.as_millis() as i64);
                }
                let hz = r.now_ms.saturating_add(wait);
                self.markers_stamped.push((m.offset, hz));
                self.wait_for(hz);
                self.close_run();
            }
            Some(hz) if r.now_ms < hz => {
                self.wait_for(hz);
                self.close_run();
            }
            Some(_) => {
                self.stats.markers_removed += 1;
                self.markers_removed.push(m.offset);
                self.open_at(m.offset);
                self.run.tail = Some(empty_batch(m.offset, m.timestamp_ms));
                self.run.next = m.offset + 1;
            }
        }
    }

    /// Ends the pass: the last run is complete.
    pub fn finish(&mut self) {
        self.close_run();
    }

    fn open_at(&mut self, offset: i64) {
        if self.run.first.is_none() {
            self.run = OpenRun {
                first: Some(offset),
                next: offset,
                max_timestamp: -1,
                ..OpenRun::default()
            };
        }
    }

    fn close_run(&mut self) {
        let Some(first) = self.run.first.take() else {
            return;
        };
        let mut run = std::mem::take(&mut self.run);
        if let Some(t) = run.tail.take() {
            run.bytes += t.len();
            let ts = Header::parse(&t).map_or(-1, |h| h.max_timestamp);
            run.max_timestamp = run.max_timestamp.max(ts);
            run.batches.push(t);
        }
        self.runs.push(Run {
            base_offset: first,
            last_offset: run.next - 1,
            batches: run.batches,
            bytes: run.bytes,
            max_timestamp: run.max_timestamp,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::batch::tests::{make_batch, Rec};
    use super::*;
    use crate::records::StoredBatch;

    use crate::read::test_span as span;

    fn rb(base: i64, recs: &[Rec<'_>], pid: i64, txn: bool) -> ReadBatch {
        let b = Bytes::from(make_batch(recs, 0, pid, txn));
        ReadBatch {
            base_offset: base,
            batch: StoredBatch {
                last_offset_delta: recs.len() as i32 - 1,
                max_timestamp: 0,
                bytes: b,
            },
        }
    }

    fn rules(end: i64) -> PassRules {
        PassRules {
            now_ms: 10_000,
            delete_retention_ms: 1000,
            end,
        }
    }

    /// (offset, key, tombstone) of every record in a run.
    fn records(run: &Run) -> Vec<(i64, Vec<u8>, bool)> {
        let mut out = Vec::new();
        for b in &run.batches {
            let base = i64::from_be_bytes(b[..8].try_into().unwrap());
            let d = Decoded::new(b, base).unwrap();
            for i in 0..d.len() {
                let r = d.record(i).unwrap();
                out.push((r.offset, r.key.unwrap().to_vec(), r.tombstone));
            }
        }
        out
    }

    #[test]
    fn keeps_the_latest_value_per_key_at_its_offset() {
        let s0 = [rb(
            0,
            &[(Some(b"a"), Some(b"1"), 1), (Some(b"b"), Some(b"1"), 2)],
            -1,
            false,
        )];
        let s1 = [rb(2, &[(Some(b"a"), Some(b"2"), 3)], -1, false)];
        let s2 = [rb(
            3,
            &[(Some(b"b"), None, 4), (Some(b"c"), Some(b"1"), 5)],
            -1,
            false,
        )];
        let mut map = KeyMap::with_memory(1 << 12);
        let aborts = Aborts::default();
        for s in [&s0[..], &s1, &s2] {
            assert!(index(&mut map, &aborts, s).unwrap());
        }
        let mut w = Rewriter::new(rules(5), &map, &aborts);
        w.span(&span(0, 1), &s0).unwrap();
        w.span(&span(2, 2), &s1).unwrap();
        w.span(&span(3, 4), &s2).unwrap();
        w.finish();
        // s1 holds only the latest a: unchanged, so it splits the runs.
        assert_eq!(w.replaced, vec![0, 3]);
        assert_eq!(w.runs.len(), 2);
        assert_eq!((w.runs[0].base_offset, w.runs[0].last_offset), (0, 1));
        // Nothing of span 0 survives: one empty header, ending at 1.
        let h = Header::parse(&w.runs[0].batches[0]).unwrap();
        assert_eq!((h.record_count, h.last_offset_delta), (0, 1));
        assert_eq!(records(&w.runs[0]), vec![]);
        // The tombstone of b stays, stamped with a horizon.
        assert_eq!(
            records(&w.runs[1]),
            vec![(3, b"b".to_vec(), true), (4, b"c".to_vec(), false)]
        );
        let h = Header::parse(&w.runs[1].batches[0]).unwrap();
        assert_eq!(h.delete_horizon(), Some(11_000));
        assert_eq!(w.next_horizon, Some(11_000));
    }

    #[test]
    fn tombstones_go_after_their_horizon_and_aborted_data_at_once() {
        // A tombstone stamped by an earlier pass (horizon 9000 < now).
        let stamped = {
            let b = make_batch(&[(Some(b"k"), None, 1)], 0, -1, false);
            let d = Decoded::new(&b, 0).unwrap();
            d.rebuild(&[true], Some(9000)).unwrap()
        };
        let s0 = [ReadBatch {
            base_offset: 0,
            batch: StoredBatch {
                last_offset_delta: 0,
                max_timestamp: 1,
                bytes: stamped,
            },
        }];
        let s1 = [
            rb(1, &[(Some(b"x"), Some(b"aborted"), 2)], 50, true),
            rb(2, &[(Some(b"y"), Some(b"kept"), 3)], 51, true),
        ];
        let aborts = Aborts::new(&[AbortedTxn {
            producer_id: 50,
            first_offset: 1,
            marker_offset: 3,
        }]);
        let mut map = KeyMap::with_memory(1 << 12);
        index(&mut map, &aborts, &s1).unwrap();
        assert_eq!(map.get(b"x"), None, "aborted keys stay out of the map");
        let mut w = Rewriter::new(rules(6), &map, &aborts);
        w.span(&span(0, 0), &s0).unwrap();
        w.span(&span(1, 2), &s1).unwrap();
        // The abort marker at 3 (data gone): stamped, with the grace.
        let abort = MarkerState {
            offset: 3,
            producer_id: 50,
            producer_epoch: 0,
            commit: false,
            timestamp_ms: 5,
            first_offset: Some(1),
            delete_horizon_ms: None,
        };
        w.marker(&abort);
        // The commit marker of 51 at 4: its data survives, kept as is.
        w.marker(&MarkerState {
            offset: 4,
            producer_id: 51,
            commit: true,
            first_offset: None,
            ..abort
        });
        // An old commit marker at 5, past its horizon: removed.
        w.marker(&MarkerState {
            offset: 5,
            producer_id: 52,
            commit: true,
            first_offset: None,
            delete_horizon_ms: Some(9_500),
            ..abort
        });
        w.finish();
        assert_eq!(w.replaced, vec![0, 1]);
        assert_eq!(w.runs.len(), 2);
        assert_eq!((w.runs[0].base_offset, w.runs[0].last_offset), (0, 2));
        assert_eq!(records(&w.runs[0]), vec![(2, b"y".to_vec(), false)]);
        assert_eq!(
            w.markers_stamped,
            vec![(3, 10_000 + ABORT_MARKER_GRACE.as_millis() as i64)]
        );
        // The removed marker's offset is covered by an empty batch.
        assert_eq!((w.runs[1].base_offset, w.runs[1].last_offset), (5, 5));
        let h = Header::parse(&w.runs[1].batches[0]).unwrap();
        assert_eq!((h.record_count, h.producer_id), (0, -1));
        assert_eq!(w.markers_removed, vec![5]);
    }
}
