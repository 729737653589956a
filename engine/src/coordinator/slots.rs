//! The keys a coordinator holds in memory: each is loading (calls wait for
//! it) or loaded (its state, its epoch, its writes, its timer).
//!
//! Loading a key claims it in PostgreSQL, which bumps its epoch; every
//! write carries the epoch it was loaded with, so the previous owner's
//! writes are refused (fenced) and it drops the key. Each load gets a
//! number of its own (`load_id`): the result of a write issued by an
//! earlier load of a key (unloaded and loaded again meanwhile) answers its
//! caller and touches nothing else.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::timers::Timers;
use super::writes::WriteQueue;

/// What the machinery needs to know of a loaded key's state.
pub trait KeyState {
    /// Nothing in memory that a new load would not restore, and nobody
    /// waiting on it: the key may be dropped from memory.
    fn is_idle(&self) -> bool;
    /// When the key's timers next need to run.
    fn next_wake(&self) -> Option<Instant>;
}

/// A coordinator's limits on the keys it holds.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Keys in memory (loading or loaded) at most; idle ones are evicted
    /// first.
    pub keys_loaded_max: usize,
    /// Calls waiting for one key to load at most.
    pub load_waiters_max: usize,
    /// Writes queued per key before [`WriteQueue::is_full`].
    pub writes_queued_max: usize,
}

/// One key in memory. `C`: a call, `T`: the key's state, `W`: a write.
pub enum Slot<C, T, W> {
    /// Being loaded; the calls wait for it, in arrival order.
    Loading(Vec<C>),
    Loaded(Box<Loaded<T, W>>),
}

/// A loaded key.
pub struct Loaded<T, W> {
    /// Which load of the key this is (write results of an earlier load must
    /// not touch it).
    pub load_id: u64,
    /// The epoch loaded (0: the key was never stored).
    pub epoch: i64,
    pub writes: WriteQueue<W>,
    /// The wake-up time queued on the timer heap.
    scheduled: Option<Instant>,
    pub last_used: Instant,
    pub state: T,
}

impl<T: KeyState, W> Loaded<T, W> {
    /// Nothing in memory that PostgreSQL does not have, and no waiter.
    pub fn unloadable(&self) -> bool {
        self.state.is_idle() && self.writes.is_idle()
    }
}

/// Where a call goes, from [`Slots::admit`].
pub enum Admit<C> {
    /// The key is loaded: apply the call to it.
    Loaded(C),
    /// The key is loading; the call waits for it.
    Waiting,
    /// The key was not in memory: the caller starts its load (and calls
    /// [`Slots::take_waiters`] with the result); the call waits for it.
    Load,
    /// No room (too many waiters, or too many keys and none idle): the
    /// caller refuses the call with a retriable error.
    Full(C),
}

/// The keys in memory, and their timers.
pub struct Slots<C, T, W> {
    map: HashMap<String, Slot<C, T, W>>,
    timers: Timers,
    limits: Limits,
    /// Loads so far (each loaded key gets the next number).
    loads: u64,
}

impl<C, T: KeyState, W> Slots<C, T, W> {
    pub fn new(limits: Limits) -> Slots<C, T, W> {
        assert!(limits.keys_loaded_max > 0);
        assert!(limits.load_waiters_max > 0);
        Slots {
            map: HashMap::new(),
            timers: Timers::new(),
            limits,
            loads: 0,
        }
    }

    /// Routes a call for `key` (which this agent owns).
    pub fn admit(&mut self, key: &str, call: C) -> Admit<C> {
        match self.map.get_mut(key) {
            Some(Slot::Loaded(_)) => Admit::Loaded(call),
            Some(Slot::Loading(waiting)) => {
                if waiting.len() >= self.limits.load_waiters_max {
                    Admit::Full(call)
                } else {
                    waiting.push(call);
                    Admit::Waiting
                }
            }
            None => {
                if self.map.len() >= self.limits.keys_loaded_max && !self.evict_one() {
                    return Admit::Full(call);
                }
                self.map.insert(key.to_owned(), Slot::Loading(vec![call]));
                Admit::Load
            }
        }
    }

    /// Drops one idle key from memory to make room.
    fn evict_one(&mut self) -> bool {
        let victim = self
            .map
            .iter()
            .filter_map(|(key, s)| match s {
                Slot::Loaded(l) if l.unloadable() => Some((l.last_used, key.clone())),
                _ => None,
            })
            .min();
        match victim {
            Some((_, key)) => {
                self.map.remove(&key);
                true
            }
            None => false,
        }
    }

    /// The load of `key` ended: its waiting calls, the slot removed. `None`
    /// when the key is not loading (it was dropped meanwhile).
    pub fn take_waiters(&mut self, key: &str) -> Option<Vec<C>> {
        match self.map.remove(key) {
            Some(Slot::Loading(calls)) => Some(calls),
            Some(other) => {
                self.map.insert(key.to_owned(), other);
                None
            }
            None => None,
        }
    }

    /// Holds `key` as loaded at `epoch` with `state`, as a new load.
    pub fn insert_loaded(&mut self, key: String, epoch: i64, state: T, now: Instant) {
        self.loads += 1;
        let loaded = Loaded {
            load_id: self.loads,
            epoch,
            writes: WriteQueue::new(self.limits.writes_queued_max),
            scheduled: None,
            last_used: now,
            state,
        };
        self.map.insert(key, Slot::Loaded(Box::new(loaded)));
    }

    pub fn get(&self, key: &str) -> Option<&Loaded<T, W>> {
        match self.map.get(key) {
            Some(Slot::Loaded(l)) => Some(l),
            _ => None,
        }
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Loaded<T, W>> {
        match self.map.get_mut(key) {
            Some(Slot::Loaded(l)) => Some(l),
            _ => None,
        }
    }

    /// `key` as loaded by load `load_id`, if it still is.
    pub fn current(&mut self, key: &str, load_id: u64) -> Option<&mut Loaded<T, W>> {
        self.get_mut(key).filter(|l| l.load_id == load_id)
    }

    /// Whether `key` is in memory, loading or loaded.
    pub fn contains(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    pub fn remove(&mut self, key: &str) -> Option<Slot<C, T, W>> {
        self.map.remove(key)
    }

    /// Keys in memory, loading or loaded.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The loaded keys.
    pub fn loaded(&self) -> impl Iterator<Item = (&String, &Loaded<T, W>)> {
        self.map.iter().filter_map(|(key, s)| match s {
            Slot::Loaded(l) => Some((key, &**l)),
            Slot::Loading(_) => None,
        })
    }

    /// The loaded keys, to change.
    pub fn loaded_mut(&mut self) -> impl Iterator<Item = (&String, &mut Loaded<T, W>)> {
        self.map.iter_mut().filter_map(|(key, s)| match s {
            Slot::Loaded(l) => Some((key, &mut **l)),
            Slot::Loading(_) => None,
        })
    }

    /// Takes every key out (at shutdown).
    pub fn drain(&mut self) -> impl Iterator<Item = (String, Slot<C, T, W>)> + '_ {
        self.map.drain()
    }

    /// The next write of `key` to run, with the epoch to write it under and
    /// the load issuing it, if none is in flight.
    pub fn start_write(&mut self, key: &str) -> Option<(W, i64, u64)> {
        let l = self.get_mut(key)?;
        let write = l.writes.start()?;
        Some((write, l.epoch, l.load_id))
    }

    /// A write of `key` issued by load `load_id` ended: `key` as loaded,
    /// its next write free to start, if that load is still the current one.
    pub fn write_finished(&mut self, key: &str, load_id: u64) -> Option<&mut Loaded<T, W>> {
        let l = self.current(key, load_id)?;
        l.writes.finished();
        Some(l)
    }

    /// Queues `key`'s next wake-up ([`KeyState::next_wake`]) unless an
    /// earlier one is queued.
    pub fn schedule(&mut self, key: &str) {
        let Some(Slot::Loaded(l)) = self.map.get_mut(key) else {
            return;
        };
        if let Some(wake) = l.state.next_wake() {
            if l.scheduled.is_none_or(|s| wake < s) {
                l.scheduled = Some(wake);
                self.timers.push(wake, key.to_owned());
            }
        }
    }

    /// The earliest queued wake-up.
    pub fn next_wake(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// A loaded key whose wake-up is due at `now` (it is then no longer
    /// queued; [`schedule`](Self::schedule) it again). Wake-ups of keys
    /// unloaded or superseded by an earlier one are skipped.
    pub fn pop_due(&mut self, now: Instant) -> Option<String> {
        while let Some((t, key)) = self.timers.pop_due(now) {
            if let Some(Slot::Loaded(l)) = self.map.get_mut(&key) {
                if l.scheduled == Some(t) {
                    l.scheduled = None;
                    return Some(key);
                }
            }
        }
        None
    }

    /// The periodic check: drops loaded keys that are owned, unloadable and
    /// unused for `idle_after`; returns the loaded keys this agent no longer
    /// owns, for the caller to unload with its own answer to their waiters
    /// (and then to call [`Slots::prune_timers`]).
    pub fn sweep(
        &mut self,
        now: Instant,
        idle_after: Duration,
        owns: impl Fn(&str) -> bool,
    ) -> Vec<String> {
        let mut lost = Vec::new();
        let mut idle = Vec::new();
        for (key, l) in self.loaded() {
            if !owns(key) {
                lost.push(key.clone());
            } else if l.unloadable() && now.duration_since(l.last_used) >= idle_after {
                idle.push(key.clone());
            }
        }
        for key in idle {
            self.map.remove(&key);
        }
        lost
    }

    /// Timers of unloaded keys are skipped when they fire; keeps the heap
    /// from holding many of them.
    pub fn prune_timers(&mut self) {
        let map = &self.map;
        self.timers.prune(
            map.len(),
            |t, key| matches!(map.get(key), Some(Slot::Loaded(l)) if l.scheduled == Some(*t)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct State {
        idle: bool,
        wake: Option<Instant>,
    }

    impl KeyState for State {
        fn is_idle(&self) -> bool {
            self.idle
        }
        fn next_wake(&self) -> Option<Instant> {
            self.wake
        }
    }

    const LIMITS: Limits = Limits {
        keys_loaded_max: 2,
        load_waiters_max: 2,
        writes_queued_max: 4,
    };

    /// Loads `key` at `epoch` through admit → take_waiters → insert_loaded.
    fn load<W>(slots: &mut Slots<u32, State, W>, key: &str, idle: bool, epoch: i64, now: Instant) {
        assert!(matches!(slots.admit(key, 0), Admit::Load));
        assert_eq!(slots.take_waiters(key), Some(vec![0]));
        let state = State { idle, wake: None };
        slots.insert_loaded(key.into(), epoch, state, now);
    }

    fn loaded(slots: &mut Slots<u32, State, ()>, key: &str, idle: bool, now: Instant) {
        load(slots, key, idle, 1, now);
    }

    #[test]
    fn calls_wait_for_a_load_up_to_the_limit() {
        let mut slots: Slots<u32, State, ()> = Slots::new(LIMITS);
        assert!(matches!(slots.admit("a", 1), Admit::Load));
        assert!(matches!(slots.admit("a", 2), Admit::Waiting));
        assert!(matches!(slots.admit("a", 3), Admit::Full(3)));
        assert_eq!(slots.take_waiters("a"), Some(vec![1, 2]));
        assert_eq!(slots.take_waiters("a"), None);
    }

    #[test]
    fn a_full_table_evicts_the_oldest_idle_key_only() {
        let now = Instant::now();
        let mut slots: Slots<u32, State, ()> = Slots::new(LIMITS);
        loaded(&mut slots, "busy", false, now);
        loaded(&mut slots, "idle", true, now);
        assert!(matches!(slots.admit("new", 1), Admit::Load));
        assert!(slots.contains("busy"));
        assert!(!slots.contains("idle"));
        assert!(matches!(slots.admit("other", 2), Admit::Full(2)));
    }

    #[test]
    fn writes_of_an_earlier_load_touch_nothing() {
        let now = Instant::now();
        let mut slots: Slots<u32, State, u8> = Slots::new(LIMITS);
        load(&mut slots, "a", true, 7, now);
        slots.get_mut("a").unwrap().writes.push(1);
        let (w, epoch, first) = slots.start_write("a").unwrap();
        assert_eq!((w, epoch), (1, 7));
        slots.remove("a");
        load(&mut slots, "a", true, 8, now);
        assert!(slots.write_finished("a", first).is_none());
        let second = slots.get("a").unwrap().load_id;
        assert_ne!(first, second);
        assert!(slots.write_finished("a", second).is_some());
    }

    #[test]
    fn only_the_current_wake_up_fires() {
        let now = Instant::now();
        let mut slots: Slots<u32, State, ()> = Slots::new(LIMITS);
        loaded(&mut slots, "a", false, now);
        let later = now + Duration::from_secs(10);
        slots.get_mut("a").unwrap().state.wake = Some(later);
        slots.schedule("a");
        slots.get_mut("a").unwrap().state.wake = Some(now);
        slots.schedule("a");
        assert_eq!(slots.next_wake(), Some(now));
        assert_eq!(slots.pop_due(now).as_deref(), Some("a"));
        assert_eq!(
            slots.pop_due(later),
            None,
            "the later wake-up was superseded"
        );
    }
}
