//! Idempotent producer sequence checks, per (producer id, partition).
//!
//! The state remembers the last [`HISTORY_BATCHES_MAX`] batches so that a
//! retried batch is answered with the offsets it got the first time.

use crate::limits::HISTORY_BATCHES_MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchSeq {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerState {
    pub producer_epoch: i16,
    /// Oldest first.
    pub history: Vec<BatchSeq>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqCheck {
    /// New batch in sequence: append it.
    Append,
    /// Exactly a batch seen before: answer with its original base offset.
    Duplicate {
        base_offset: i64,
    },
    OutOfOrder,
    InvalidEpoch,
}

/// Sequence numbers wrap around at `i32::MAX` back to 0.
pub fn next_seq(seq: i32) -> i32 {
    if seq == i32::MAX {
        0
    } else {
        seq + 1
    }
}

/// The last sequence number of a batch of `record_count` records.
pub fn last_seq(first_seq: i32, record_count: i32) -> i32 {
    debug_assert!(record_count >= 1);
    ((first_seq as i64 + record_count as i64 - 1) % (i32::MAX as i64 + 1)) as i32
}

impl ProducerState {
    pub fn check(state: Option<&ProducerState>, epoch: i16, first_seq: i32, last: i32) -> SeqCheck {
        let Some(state) = state else {
            return if first_seq == 0 {
                SeqCheck::Append
            } else {
                SeqCheck::OutOfOrder
            };
        };
        if epoch < state.producer_epoch {
            return SeqCheck::InvalidEpoch;
        }
        if epoch > state.producer_epoch {
            return if first_seq == 0 {
                SeqCheck::Append
            } else {
                SeqCheck::OutOfOrder
            };
        }
        if let Some(b) = state
            .history
            .iter()
            .find(|b| b.first_seq == first_seq && b.last_seq == last)
        {
            return SeqCheck::Duplicate {
                base_offset: b.base_offset,
            };
        }
        match state.history.last() {
            Some(latest) if next_seq(latest.last_seq) == first_seq => SeqCheck::Append,
            None if first_seq == 0 => SeqCheck::Append,
            _ => SeqCheck::OutOfOrder,
        }
    }

    /// Records an appended batch (after [`SeqCheck::Append`]).
    pub fn record(state: &mut Option<ProducerState>, epoch: i16, batch: BatchSeq) {
        match state {
            Some(s) if s.producer_epoch == epoch => {
                if s.history.len() == HISTORY_BATCHES_MAX {
                    s.history.remove(0);
                }
                s.history.push(batch);
            }
            _ => {
                *state = Some(ProducerState {
                    producer_epoch: epoch,
                    history: vec![batch],
                })
            }
        }
    }

    /// Flattened `history` column: first_seq, last_seq, base_offset, ...
    pub fn history_to_sql(&self) -> String {
        let mut s = String::from("{");
        for (i, b) in self.history.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str(&format!("{},{},{}", b.first_seq, b.last_seq, b.base_offset));
        }
        s.push('}');
        s
    }

    pub fn history_from_sql(flat: &[i64]) -> Vec<BatchSeq> {
        flat.chunks_exact(3)
            .map(|c| BatchSeq {
                first_seq: c[0] as i32,
                last_seq: c[1] as i32,
                base_offset: c[2],
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(first: i32, last: i32, off: i64) -> BatchSeq {
        BatchSeq {
            first_seq: first,
            last_seq: last,
            base_offset: off,
        }
    }

    #[test]
    fn new_producer_must_start_at_zero() {
        assert_eq!(ProducerState::check(None, 0, 0, 9), SeqCheck::Append);
        assert_eq!(ProducerState::check(None, 0, 5, 9), SeqCheck::OutOfOrder);
    }

    #[test]
    fn in_order_duplicate_and_gap() {
        let mut st = None;
        ProducerState::record(&mut st, 0, b(0, 9, 100));
        let s = st.as_ref();
        assert_eq!(ProducerState::check(s, 0, 10, 19), SeqCheck::Append);
        assert_eq!(
            ProducerState::check(s, 0, 0, 9),
            SeqCheck::Duplicate { base_offset: 100 }
        );
        assert_eq!(ProducerState::check(s, 0, 11, 19), SeqCheck::OutOfOrder);
        assert_eq!(ProducerState::check(s, 0, 20, 29), SeqCheck::OutOfOrder);
    }

    #[test]
    fn history_keeps_five_batches() {
        let mut st = None;
        for i in 0..7 {
            ProducerState::record(&mut st, 0, b(i * 10, i * 10 + 9, i as i64 * 10));
        }
        let s = st.as_ref().unwrap();
        assert_eq!(s.history.len(), HISTORY_BATCHES_MAX);
        assert_eq!(s.history[0].first_seq, 20);
        assert_eq!(
            ProducerState::check(Some(s), 0, 60, 69),
            SeqCheck::Duplicate { base_offset: 60 }
        );
        // Too old to be remembered: neither duplicate nor next.
        assert_eq!(ProducerState::check(Some(s), 0, 0, 9), SeqCheck::OutOfOrder);
    }

    #[test]
    fn epochs_fence_and_reset() {
        let mut st = None;
        ProducerState::record(&mut st, 3, b(0, 4, 0));
        let s = st.as_ref();
        assert_eq!(ProducerState::check(s, 2, 5, 9), SeqCheck::InvalidEpoch);
        assert_eq!(ProducerState::check(s, 4, 0, 4), SeqCheck::Append);
        assert_eq!(ProducerState::check(s, 4, 5, 9), SeqCheck::OutOfOrder);
    }

    #[test]
    fn sequences_wrap() {
        assert_eq!(next_seq(i32::MAX), 0);
        assert_eq!(last_seq(i32::MAX - 1, 3), 0);
        let mut st = None;
        ProducerState::record(&mut st, 0, b(0, 0, 0));
        st.as_mut().unwrap().history = vec![b(i32::MAX - 4, i32::MAX, 7)];
        assert_eq!(ProducerState::check(st.as_ref(), 0, 0, 3), SeqCheck::Append);
    }

    #[test]
    fn history_sql_round_trip() {
        let s = ProducerState {
            producer_epoch: 1,
            history: vec![b(0, 9, 100), b(10, 19, 110)],
        };
        assert_eq!(s.history_to_sql(), "{0,9,100,10,19,110}");
        assert_eq!(
            ProducerState::history_from_sql(&[0, 9, 100, 10, 19, 110]),
            s.history
        );
    }
}
