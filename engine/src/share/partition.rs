//! One share-partition's state (KIP-932): which records of a partition a
//! share group has delivered, to whom, how often, and what was done with
//! them. Pure: it is loaded from PostgreSQL, changed here, and written back
//! with a compare-and-set on its version ([`crate::share::store`]), so any
//! agent may serve any consumer of any share-partition.
//!
//! The window `[start, end)` holds the in-flight records: `start` is the
//! share-partition start offset (SPSO: everything below it is done), `end`
//! the first offset never acquired. Each offset in the window is
//! - Available: may be acquired (released, or its lock ran out),
//! - Acquired: delivered to one member until its lock's deadline,
//! - Acknowledged: accepted by its consumer,
//! - Archived: rejected, a gap (no record: a control batch, compaction),
//!   or delivered `delivery.count.limit` times.
//!
//! The window's leading done records are dropped as `start` moves up;
//! it never holds more than `max_locks` offsets
//! (group.share.partition.max.record.locks).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::ErrorCode;
use crate::limits::SHARE_WINDOW_MAX;

/// A record's state in the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecState {
    Available = 0,
    Acquired = 1,
    Acknowledged = 2,
    Archived = 4,
}

impl RecState {
    fn from_u8(v: u8) -> Option<RecState> {
        Some(match v {
            0 => RecState::Available,
            1 => RecState::Acquired,
            2 => RecState::Acknowledged,
            4 => RecState::Archived,
            _ => return None,
        })
    }

    fn done(self) -> bool {
        matches!(self, RecState::Acknowledged | RecState::Archived)
    }
}

/// Kafka's acknowledgement types (ShareFetch/ShareAcknowledge).
pub mod ack {
    pub const GAP: u8 = 0;
    pub const ACCEPT: u8 = 1;
    pub const RELEASE: u8 = 2;
    pub const REJECT: u8 = 3;
    /// v2 (KIP-1222): extend the lock; not served.
    pub const RENEW: u8 = 4;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rec {
    state: RecState,
    deliveries: u16,
    /// Index into `owners` + 1 while acquired (0: nobody).
    owner: u16,
    /// The lock's deadline (ms since the Unix epoch) while acquired.
    deadline_ms: i64,
}

const FREE: Rec = Rec {
    state: RecState::Available,
    deliveries: 0,
    owner: 0,
    deadline_ms: 0,
};

/// The rules a share group's partitions follow (its configs).
#[derive(Clone, Copy, Debug)]
pub struct Rules {
    /// group.share.delivery.count.limit
    pub delivery_limit: u16,
    /// share.record.lock.duration.ms
    pub lock_ms: i64,
    /// group.share.partition.max.record.locks
    pub max_locks: usize,
}

const _: () = assert!(
    SHARE_WINDOW_MAX < u16::MAX as usize,
    "owner indexes are u16"
);

impl Default for Rules {
    fn default() -> Self {
        Rules {
            delivery_limit: 5,
            lock_ms: 30_000,
            max_locks: 2000,
        }
    }
}

/// Offsets a consumer acquired: `(first, last, delivery count)`.
pub type Acquired = (i64, i64, u16);

/// What a read found between two offsets: a batch of records that can be
/// delivered (`data`), or offsets with nothing to deliver (a control
/// batch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub first: i64,
    pub last: i64,
    pub data: bool,
}

/// The spans of batches read from a partition (base offset, stored
/// bytes): control batches, and with `aborted` (a read_committed read's
/// aborted transactions: producer id, first offset) the data of aborted
/// transactions, are not deliverable, as a read_committed consumer skips
/// them.
pub fn spans_of(batches: &[(i64, Bytes)], aborted: Option<&[(i64, i64)]>) -> Vec<Span> {
    let mut aborting: Vec<i64> = Vec::new();
    let mut next_aborted = 0usize;
    let aborted = aborted.unwrap_or(&[]);
    let mut out = Vec::with_capacity(batches.len());
    for (base, batch) in batches {
        let Some(h) = crate::records::batch_head(batch) else {
            continue;
        };
        // Transactions aborted that began at or before this batch.
        while next_aborted < aborted.len() && aborted[next_aborted].1 <= *base {
            aborting.push(aborted[next_aborted].0);
            next_aborted += 1;
        }
        let in_aborted = h.transactional && aborting.contains(&h.producer_id);
        if h.control {
            // A marker ends its producer's transaction.
            aborting.retain(|p| *p != h.producer_id);
        }
        out.push(Span {
            first: *base,
            last: base + h.last_offset_delta as i64,
            data: !h.control && !in_aborted,
        });
    }
    out
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharePartition {
    start: i64,
    recs: std::collections::VecDeque<Rec>,
    owners: Vec<String>,
}

impl SharePartition {
    /// A share-partition starting at `start` with nothing in flight.
    pub fn new(start: i64) -> SharePartition {
        SharePartition {
            start,
            recs: Default::default(),
            owners: Vec::new(),
        }
    }

    /// The share-partition start offset (SPSO).
    pub fn start(&self) -> i64 {
        self.start
    }

    /// The first offset never acquired.
    pub fn end(&self) -> i64 {
        self.start + self.recs.len() as i64
    }

    /// How many records are in flight (acquired now).
    pub fn acquired(&self) -> usize {
        self.recs
            .iter()
            .filter(|r| r.state == RecState::Acquired)
            .count()
    }

    fn owner_index(&mut self, member: &str) -> u16 {
        if let Some(i) = self.owners.iter().position(|o| o == member) {
            return i as u16 + 1;
        }
        // Owners are compacted as records are given back (`advance`): at
        // most one per record in the window.
        self.owners.push(member.to_owned());
        self.owners.len() as u16
    }

    fn compact_owners(&mut self) {
        let mut used = vec![false; self.owners.len()];
        for r in &self.recs {
            if r.owner > 0 {
                used[r.owner as usize - 1] = true;
            }
        }
        let mut map = vec![0u16; self.owners.len()];
        let mut kept = Vec::new();
        for (i, o) in std::mem::take(&mut self.owners).into_iter().enumerate() {
            if used[i] {
                kept.push(o);
                map[i] = kept.len() as u16;
            }
        }
        for r in self.recs.iter_mut() {
            if r.owner > 0 {
                r.owner = map[r.owner as usize - 1];
            }
        }
        self.owners = kept;
    }

    fn owned_by(&self, r: &Rec, member: &str) -> bool {
        r.state == RecState::Acquired
            && r.owner > 0
            && self.owners.get(r.owner as usize - 1).map(String::as_str) == Some(member)
    }

    /// A record given back: available again, or archived once delivered
    /// as often as the rules allow.
    fn give_back(r: &mut Rec, rules: &Rules) {
        r.state = if r.deliveries >= rules.delivery_limit {
            RecState::Archived
        } else {
            RecState::Available
        };
        r.owner = 0;
        r.deadline_ms = 0;
    }

    /// A record done with: acknowledged or archived.
    fn settle(r: &mut Rec, state: RecState) {
        r.state = state;
        r.owner = 0;
        r.deadline_ms = 0;
    }

    /// Records whose lock ran out by `now_ms` are given back.
    pub fn expire(&mut self, now_ms: i64, rules: &Rules) -> usize {
        let mut n = 0;
        for r in self.recs.iter_mut() {
            if r.state == RecState::Acquired && r.deadline_ms <= now_ms {
                Self::give_back(r, rules);
                n += 1;
            }
        }
        self.advance();
        n
    }

    /// Moves the start past the leading done records, and forgets members
    /// that hold nothing any more.
    fn advance(&mut self) {
        while self.recs.front().is_some_and(|r| r.state.done()) {
            self.recs.pop_front();
            self.start += 1;
        }
        if self.recs.is_empty() {
            self.owners.clear();
        } else if !self.owners.is_empty() {
            self.compact_owners();
        }
    }

    /// Applies one member's acknowledgement batches: `(first, last,
    /// types)`, in offset order, one type for the whole batch or one per
    /// offset. All or nothing, with Kafka's answers: a malformed batch or
    /// one reaching past the window is INVALID_REQUEST; an offset not
    /// acquired by `member` (its lock ran out, another member holds it)
    /// INVALID_RECORD_STATE. Offsets below the start are done already and
    /// skipped.
    pub fn acknowledge(
        &mut self,
        member: &str,
        batches: &[(i64, i64, Vec<i8>)],
        rules: &Rules,
    ) -> Result<(), (ErrorCode, String)> {
        let invalid = |m: String| Err((ErrorCode::InvalidRequest, m));
        let mut previous_last = i64::MIN;
        for (first, last, types) in batches {
            if first > last {
                return invalid(format!(
                    "acknowledgement batch {first}..{last} ends before it starts"
                ));
            }
            if *first <= previous_last {
                return invalid(format!(
                    "acknowledgement batch {first}..{last} overlaps or precedes the one before"
                ));
            }
            previous_last = *last;
            // Offsets come from the wire: a range may be any width.
            let len = last.checked_sub(*first).and_then(|d| d.checked_add(1));
            if types.is_empty() || (types.len() != 1 && len != Some(types.len() as i64)) {
                return invalid(format!(
                    "acknowledgement batch {first}..{last} has {} types; one, or one per offset",
                    types.len()
                ));
            }
            if let Some(t) = types
                .iter()
                .find(|t| !(ack::GAP as i8..=ack::REJECT as i8).contains(t))
            {
                return invalid(format!(
                    "acknowledge type {t} is not one of 0 (gap), 1 (accept), 2 (release), 3 (reject)"
                ));
            }
            if *last < self.start {
                continue;
            }
            if *last >= self.end() {
                return invalid(format!(
                    "offsets {first}..{last} reach past the records in flight (up to {})",
                    self.end() - 1
                ));
            }
            for o in (*first).max(self.start)..=*last {
                let r = &self.recs[(o - self.start) as usize];
                if !self.owned_by(r, member) {
                    return Err((
                        ErrorCode::InvalidRecordState,
                        format!("offset {o} is not acquired by member {member} (its lock may have run out)"),
                    ));
                }
            }
        }
        for (first, last, types) in batches {
            for o in (*first).max(self.start)..=*last {
                let t = if types.len() == 1 {
                    types[0]
                } else {
                    types[(o - first) as usize]
                };
                let r = &mut self.recs[(o - self.start) as usize];
                match t as u8 {
                    ack::ACCEPT => Self::settle(r, RecState::Acknowledged),
                    ack::RELEASE => Self::give_back(r, rules),
                    _ => Self::settle(r, RecState::Archived),
                }
            }
        }
        self.advance();
        Ok(())
    }

    /// Gives back every record `member` holds (it left, or closed its
    /// share session).
    pub fn release_member(&mut self, member: &str, rules: &Rules) -> usize {
        let mut n = 0;
        for i in 0..self.recs.len() {
            if self.owned_by(&self.recs[i], member) {
                Self::give_back(&mut self.recs[i], rules);
                n += 1;
            }
        }
        self.advance();
        n
    }

    /// The first offset a fetch should read from: the first available
    /// record in the window, or the end when the window has room; `None`
    /// when nothing can be acquired until records are acknowledged.
    pub fn next_fetch(&self, rules: &Rules) -> Option<i64> {
        if let Some(i) = self
            .recs
            .iter()
            .position(|r| r.state == RecState::Available)
        {
            return Some(self.start + i as i64);
        }
        (self.recs.len() < rules.max_locks.min(SHARE_WINDOW_MAX)).then(|| self.end())
    }

    /// Acquires for `member`, until `now_ms + lock_ms`, the deliverable
    /// offsets of `spans` (what a read from offset `from` returned, in
    /// offset order) that are available or new, about `max_records` of
    /// them (a batch is not split). New offsets with nothing to deliver
    /// (control batches, and holes between spans the read covered) are
    /// archived as they join the window; when the read began past the end
    /// (the state moved back since it was planned) nothing new is taken.
    /// Returns the acquired ranges with their delivery counts.
    pub fn acquire(
        &mut self,
        member: &str,
        from: i64,
        spans: &[Span],
        max_records: usize,
        now_ms: i64,
        rules: &Rules,
    ) -> Vec<Acquired> {
        let window_max = rules.max_locks.min(SHARE_WINDOW_MAX);
        let deadline_ms = now_ms.saturating_add(rules.lock_ms);
        let mut owner = 0u16;
        let mut taken = 0usize;
        let mut out: Vec<Acquired> = Vec::new();
        'spans: for s in spans {
            if taken >= max_records.max(1) {
                break;
            }
            let first = s.first.max(self.start);
            if first > s.last {
                continue;
            }
            if first > self.end() {
                // Offsets between the end and this span hold no record only
                // if the read covered them.
                if from > self.end() || (first - self.start) as usize > window_max {
                    break;
                }
                while self.end() < first {
                    self.recs.push_back(Rec {
                        state: RecState::Archived,
                        ..FREE
                    });
                }
            }
            for o in first..=s.last {
                let i = (o - self.start) as usize;
                if i == self.recs.len() {
                    if self.recs.len() >= window_max {
                        break 'spans;
                    }
                    self.recs.push_back(FREE);
                }
                if self.recs[i].state != RecState::Available {
                    continue;
                }
                if !s.data {
                    self.recs[i].state = RecState::Archived;
                    continue;
                }
                if owner == 0 {
                    owner = self.owner_index(member);
                }
                let r = &mut self.recs[i];
                r.state = RecState::Acquired;
                r.deliveries = r.deliveries.saturating_add(1);
                r.owner = owner;
                r.deadline_ms = deadline_ms;
                taken += 1;
                match out.last_mut() {
                    Some(last) if last.1 + 1 == o && last.2 == r.deliveries => last.1 = o,
                    _ => out.push((o, o, r.deliveries)),
                }
            }
        }
        self.advance();
        out
    }

    /// Moves the start to `offset` (AlterShareGroupOffsets, or a start
    /// below the log's start after retention): records below it are done,
    /// the window from it kept.
    pub fn reset(&mut self, offset: i64) {
        if offset >= self.end() {
            self.recs.clear();
            self.owners.clear();
            self.start = offset;
            return;
        }
        while self.start < offset {
            self.recs.pop_front();
            self.start += 1;
        }
    }

    // ---- Kafka's persisted form (the share-state APIs) -----------------------

    /// The window as Kafka's share coordinator keeps it: runs of `(first,
    /// last, delivery state, delivery count)`; an acquired record is kept
    /// as available (locks do not outlive their holder's agent).
    pub fn state_batches(&self) -> Vec<(i64, i64, i8, i16)> {
        let mut out: Vec<(i64, i64, i8, i16)> = Vec::new();
        for (i, r) in self.recs.iter().enumerate() {
            let o = self.start + i as i64;
            let state = match r.state {
                RecState::Acquired => RecState::Available,
                s => s,
            } as i8;
            let count = r.deliveries.min(i16::MAX as u16) as i16;
            match out.last_mut() {
                Some(last) if last.1 + 1 == o && last.2 == state && last.3 == count => last.1 = o,
                _ => out.push((o, o, state, count)),
            }
        }
        out
    }

    /// A share-partition from Kafka's persisted form
    /// (WriteShareGroupState): offsets between the batches are available.
    pub fn from_state_batches(
        start: i64,
        batches: &[(i64, i64, i8, i16)],
    ) -> Result<SharePartition, String> {
        let mut p = SharePartition::new(start);
        for &(first, last, state, count) in batches {
            if first > last || first < p.end() {
                return Err(format!(
                    "state batch {first}..{last} overlaps, is out of order or precedes the start offset {start}"
                ));
            }
            if (last - start) as u64 >= SHARE_WINDOW_MAX as u64 {
                return Err(format!(
                    "state batches reach {} offsets past the start; at most {SHARE_WINDOW_MAX}",
                    last - start + 1
                ));
            }
            let state = match state {
                0 | 1 => RecState::Available,
                2 => RecState::Acknowledged,
                4 => RecState::Archived,
                other => return Err(format!("delivery state {other} is not 0, 1, 2 or 4")),
            };
            while p.end() < first {
                p.recs.push_back(FREE);
            }
            for _ in first..=last {
                p.recs.push_back(Rec {
                    state,
                    deliveries: count.max(0) as u16,
                    ..FREE
                });
            }
        }
        p.advance();
        Ok(p)
    }

    // ---- stored form -------------------------------------------------------

    /// The stored bytes: version 1, start, owners, then runs of equal
    /// records.
    pub fn encode(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(32 + self.owners.len() * 40);
        b.put_u8(1);
        b.put_i64(self.start);
        b.put_u16(self.owners.len() as u16);
        for o in &self.owners {
            b.put_u16(o.len() as u16);
            b.put_slice(o.as_bytes());
        }
        let mut runs: Vec<(u32, Rec)> = Vec::new();
        for r in &self.recs {
            match runs.last_mut() {
                Some((n, last)) if last == r => *n += 1,
                _ => runs.push((1, *r)),
            }
        }
        b.put_u32(runs.len() as u32);
        for (n, r) in runs {
            b.put_u32(n);
            b.put_u8(r.state as u8);
            b.put_u16(r.deliveries);
            b.put_u16(r.owner);
            b.put_i64(r.deadline_ms);
        }
        b.freeze()
    }

    /// Reads stored bytes back; `None` when they are not a state this
    /// code wrote.
    pub fn decode(mut b: &[u8]) -> Option<SharePartition> {
        if b.remaining() < 11 || b.get_u8() != 1 {
            return None;
        }
        let start = b.get_i64();
        let owners_n = b.get_u16() as usize;
        let mut owners = Vec::with_capacity(owners_n.min(1024));
        for _ in 0..owners_n {
            if b.remaining() < 2 {
                return None;
            }
            let n = b.get_u16() as usize;
            if b.remaining() < n {
                return None;
            }
            owners.push(String::from_utf8(b[..n].to_vec()).ok()?);
            b.advance(n);
        }
        if b.remaining() < 4 {
            return None;
        }
        let runs = b.get_u32() as usize;
        let mut recs = std::collections::VecDeque::new();
        for _ in 0..runs {
            if b.remaining() < 17 {
                return None;
            }
            let n = b.get_u32() as usize;
            let rec = Rec {
                state: RecState::from_u8(b.get_u8())?,
                deliveries: b.get_u16(),
                owner: b.get_u16(),
                deadline_ms: b.get_i64(),
            };
            if rec.owner as usize > owners.len() || recs.len() + n > SHARE_WINDOW_MAX {
                return None;
            }
            recs.extend(std::iter::repeat_n(rec, n));
        }
        if b.has_remaining() {
            return None;
        }
        Some(SharePartition {
            start,
            recs,
            owners,
        })
    }
}

#[cfg(test)]
mod tests;
