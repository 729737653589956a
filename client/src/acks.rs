//! Acknowledgement tracking shared by the consumer backends: per
//! partition, the records handed to the caller in offset order and whether
//! each is acknowledged; the commit point is the first one that is not.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

/// (topic, partition)
pub(crate) type Tp = (Arc<str>, i32);

/// A record from the consumer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// Acknowledges one record: the work for it is done. Its offset (and
/// every one before it in its partition, once those are acknowledged too)
/// may then be committed. Dropping it unacknowledged keeps the partition's
/// commit point below it, so the record is consumed again after a restart
/// or rebalance.
#[derive(Debug)]
pub struct Ack {
    pub(crate) acks: Arc<Mutex<Acks>>,
    pub(crate) tp: Tp,
    pub(crate) offset: i64,
    /// The partition's tracking epoch at delivery.
    pub(crate) epoch: u64,
}

impl Ack {
    pub fn ack(self) {
        let mut a = self.acks.lock().expect("acks lock");
        // A partition given up (or seeked) since has a new epoch: its
        // records are delivered again, and this one no longer counts.
        if let Some(p) = a
            .partitions
            .get_mut(&self.tp)
            .filter(|p| p.epoch == self.epoch)
        {
            p.ack(self.offset);
        }
    }

    pub fn topic(&self) -> &str {
        &self.tp.0
    }
    pub fn partition(&self) -> i32 {
        self.tp.1
    }
    pub fn offset(&self) -> i64 {
        self.offset
    }
}

/// Delivered records of one partition, oldest first, with their
/// acknowledgement.
#[derive(Debug, Default)]
pub(crate) struct PartitionAcks {
    /// New whenever the partition is taken or seeked; [`Ack`]s of an older
    /// epoch are ignored.
    epoch: u64,
    pub(crate) delivered: VecDeque<(i64, bool)>,
    /// The offset after the last delivered record.
    pub(crate) next: i64,
    /// Committed (or to commit) up to here.
    pub(crate) committed: i64,
}

impl PartitionAcks {
    fn ack(&mut self, offset: i64) {
        // Offsets increase; binary search finds the record.
        if let Ok(i) = self.delivered.binary_search_by_key(&offset, |d| d.0) {
            self.delivered[i].1 = true;
        }
        while self.delivered.front().is_some_and(|d| d.1) {
            self.delivered.pop_front();
        }
    }

    /// Everything below this was acknowledged (or never delivered: control
    /// records and gaps).
    pub(crate) fn commit_point(&self) -> i64 {
        self.delivered.front().map_or(self.next, |d| d.0)
    }
}

/// The acknowledgement state shared by the task and the [`Ack`]s.
#[derive(Debug, Default)]
pub(crate) struct Acks {
    /// The last epoch given out.
    epochs: u64,
    pub(crate) partitions: HashMap<Tp, PartitionAcks>,
}

impl Acks {
    /// Starts tracking `tp` (newly assigned), its position and committed
    /// offset at `at`.
    pub(crate) fn take(&mut self, tp: Tp, at: i64) {
        self.epochs += 1;
        self.partitions.insert(
            tp,
            PartitionAcks {
                epoch: self.epochs,
                delivered: VecDeque::new(),
                next: at,
                committed: at,
            },
        );
    }

    /// The record at `offset` of `tp` is handed out: the epoch for its
    /// [`Ack`] (0, which no partition has, when `tp` is not tracked) and
    /// how many of the partition's records now await acknowledgement.
    pub(crate) fn deliver(&mut self, tp: &Tp, offset: i64) -> (u64, usize) {
        match self.partitions.get_mut(tp) {
            Some(p) => {
                p.delivered.push_back((offset, false));
                p.next = offset + 1;
                (p.epoch, p.delivered.len())
            }
            None => (0, 0),
        }
    }

    /// The next record of `tp` handed out is the one at `offset`; what
    /// was delivered before no longer counts (commits still only move
    /// forward).
    pub(crate) fn seek(&mut self, tp: &Tp, offset: i64) {
        self.epochs += 1;
        if let Some(p) = self.partitions.get_mut(tp) {
            p.epoch = self.epochs;
            p.delivered.clear();
            p.next = offset;
        }
    }

    /// Records of `tp` handed out and not acknowledged.
    pub(crate) fn unacked(&self, tp: &Tp) -> usize {
        self.partitions.get(tp).map_or(0, |p| p.delivered.len())
    }

    /// (partition, commit point) where the point moved past what was
    /// committed.
    pub(crate) fn due(&self) -> Vec<(Tp, i64)> {
        self.partitions
            .iter()
            .filter(|(_, p)| p.commit_point() > p.committed)
            .map(|(tp, p)| (tp.clone(), p.commit_point()))
            .collect()
    }

    /// Notes `points` as committed.
    pub(crate) fn committed(&mut self, points: &[(Tp, i64)]) {
        for (tp, o) in points {
            if let Some(p) = self.partitions.get_mut(tp) {
                p.committed = p.committed.max(*o);
            }
        }
    }
}
