//! The agent's copies of control-plane state that every request may
//! consult (the ACLs, the client quotas): loaded whole from PostgreSQL,
//! replaced as a whole when a change is announced, and read by each shard
//! through its own view without a lock.
//!
//! [`AgentCopy`] holds the current value behind an `Arc` with a version
//! that moves on each replacement; a [`ShardCopy`] keeps the value it last
//! took and compares one atomic per read, taking the new `Arc` only when
//! the version moved.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// The agent-wide copy of one piece of control-plane state.
pub struct AgentCopy<T> {
    current: RwLock<Arc<T>>,
    version: AtomicU64,
    /// One reload at a time (the refresher's and an admin request's may
    /// meet): an older load never replaces a newer one.
    reloading: tokio::sync::Mutex<()>,
}

impl<T> AgentCopy<T> {
    pub fn new(value: T) -> AgentCopy<T> {
        AgentCopy {
            current: RwLock::new(Arc::new(value)),
            version: AtomicU64::new(0),
            reloading: tokio::sync::Mutex::new(()),
        }
    }

    /// The current value.
    pub fn get(&self) -> Arc<T> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Installs `value` (the shards take it at their next read).
    pub fn replace(&self, value: T) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(value);
        self.version.fetch_add(1, Ordering::Release);
    }

    /// Held by a reload from its load to its `replace`.
    pub async fn reloading(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.reloading.lock().await
    }

    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }
}

/// One shard's view of an [`AgentCopy`]: the value it last saw and that
/// value's version.
pub struct ShardCopy<T> {
    seen: Cell<u64>,
    value: RefCell<Arc<T>>,
}

impl<T> ShardCopy<T> {
    pub fn new(copy: &AgentCopy<T>) -> ShardCopy<T> {
        let seen = copy.version();
        ShardCopy {
            seen: Cell::new(seen),
            value: RefCell::new(copy.get()),
        }
    }

    /// The current value (taken from the agent when its version moved)
    /// and its version.
    pub fn current(&self, copy: &AgentCopy<T>) -> (Arc<T>, u64) {
        self.refresh(copy);
        (self.value.borrow().clone(), self.seen.get())
    }

    /// Runs `f` on the current value without cloning its `Arc`.
    pub fn with<R>(&self, copy: &AgentCopy<T>, f: impl FnOnce(&T) -> R) -> R {
        self.refresh(copy);
        f(&self.value.borrow())
    }

    fn refresh(&self, copy: &AgentCopy<T>) {
        let now = copy.version();
        if now != self.seen.get() {
            *self.value.borrow_mut() = copy.get();
            self.seen.set(now);
        }
    }
}
