//! A key's writes to PostgreSQL: one in flight at a time, in the order they
//! were decided, so the stored state never goes back in time.

use std::collections::VecDeque;

/// The writes of one key, queued and in flight.
pub struct WriteQueue<W> {
    queued: VecDeque<W>,
    writing: bool,
    queued_max: usize,
}

impl<W> WriteQueue<W> {
    /// A queue that [`is_full`](Self::is_full) at `queued_max` queued writes.
    pub fn new(queued_max: usize) -> WriteQueue<W> {
        assert!(queued_max > 0);
        WriteQueue {
            queued: VecDeque::new(),
            writing: false,
            queued_max,
        }
    }

    /// Whether writes a caller may be refused (and retry) should be: the
    /// queue holds `queued_max` writes. [`push`](Self::push) does not check
    /// it: a write of state already decided must not be lost.
    pub fn is_full(&self) -> bool {
        self.queued.len() >= self.queued_max
    }

    /// Queues a write after the ones already queued.
    pub fn push(&mut self, write: W) {
        self.queued.push_back(write);
    }

    /// Nothing queued and nothing in flight: PostgreSQL has everything.
    pub fn is_idle(&self) -> bool {
        !self.writing && self.queued.is_empty()
    }

    /// A write is in flight.
    pub fn is_writing(&self) -> bool {
        self.writing
    }

    pub fn is_empty(&self) -> bool {
        self.queued.is_empty()
    }

    /// The queued writes (not the one in flight), oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &W> {
        self.queued.iter()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut W> {
        self.queued.iter_mut()
    }

    /// The next write to run, if none is in flight; it is then in flight
    /// until [`finished`](Self::finished).
    pub fn start(&mut self) -> Option<W> {
        if self.writing {
            return None;
        }
        let write = self.queued.pop_front()?;
        self.writing = true;
        Some(write)
    }

    /// The write in flight ended (whatever its result).
    pub fn finished(&mut self) {
        self.writing = false;
    }

    /// Takes every queued write out (to answer their callers); the one in
    /// flight answers its own caller when it ends.
    pub fn drain(&mut self) -> impl Iterator<Item = W> + '_ {
        self.queued.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_write_in_flight_in_order() {
        let mut q = WriteQueue::new(2);
        assert!(q.is_idle());
        q.push(1);
        q.push(2);
        assert!(q.is_full());
        assert_eq!(q.start(), Some(1));
        assert_eq!(q.start(), None, "a write is in flight");
        assert!(!q.is_idle());
        q.finished();
        assert_eq!(q.start(), Some(2));
        q.finished();
        assert_eq!(q.start(), None);
        assert!(q.is_idle());
    }
}
