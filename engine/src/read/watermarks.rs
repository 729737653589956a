//! A shard's known high watermarks and the long polls waiting for them to
//! move.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;

use futures::channel::oneshot;
use uuid::Uuid;

use crate::limits::{HW_CACHE_TTL, WAITERS_PRUNE_AT};

/// High watermarks learned from commits (this agent's and, by
/// notification, the others') and from PostgreSQL, each with when.
#[derive(Default)]
pub struct Watermarks {
    marks: RefCell<HashMap<(Uuid, i32), (i64, Instant)>>,
    waiters: RefCell<Vec<oneshot::Sender<()>>>,
}

impl Watermarks {
    /// New high watermarks were committed: remember them and wake every
    /// long poll.
    pub fn learn(&self, marks: &[rutomq_meta::MarksNews]) {
        let now = Instant::now();
        {
            let mut hw = self.marks.borrow_mut();
            for m in marks {
                let (t, p, w) = (m.topic_id, m.partition, m.marks.high_watermark);
                let e = hw.entry((t, p)).or_insert((w, now));
                if w >= e.0 {
                    *e = (w, now);
                }
            }
        }
        for w in self.waiters.borrow_mut().drain(..) {
            let _ = w.send(());
        }
    }

    /// Records a high watermark read from PostgreSQL.
    pub fn set(&self, topic_id: Uuid, partition: i32, hw: i64) {
        let mut map = self.marks.borrow_mut();
        let e = map
            .entry((topic_id, partition))
            .or_insert((hw, Instant::now()));
        if hw >= e.0 {
            *e = (hw, Instant::now());
        }
    }

    /// A recent high watermark, if one is known.
    pub fn known(&self, topic_id: Uuid, partition: i32) -> Option<i64> {
        self.marks
            .borrow()
            .get(&(topic_id, partition))
            .filter(|(_, at)| at.elapsed() < HW_CACHE_TTL)
            .map(|(w, _)| *w)
    }

    /// Resolves once any high watermark changes (or the waiter is dropped).
    pub fn changed(&self) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let mut waiters = self.waiters.borrow_mut();
        // Finished long polls leave their senders behind until the next
        // change; on an idle cluster that could grow without end.
        if waiters.len() >= WAITERS_PRUNE_AT {
            waiters.retain(|w| !w.is_canceled());
        }
        waiters.push(tx);
        rx
    }
}
