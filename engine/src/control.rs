//! The agent's copies of control-plane state that every request may
//! consult (the ACLs, the client quotas; the SCRAM credentials are kept
//! by [`keep`] too): loaded whole from PostgreSQL, replaced as a whole when
//! a change is announced, and read by each shard through its own view
//! without a lock.
//!
//! [`AgentCopy`] holds the current value behind an `Arc` with a version
//! that moves on each replacement; a [`ShardCopy`] keeps the value it last
//! took and compares one atomic per read, taking the new `Arc` only when
//! the version moved.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rutomq_meta::MetaError;
use tokio::sync::Notify;

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

    /// Loads the rows with `load` (`true` beside them: cut at the limit)
    /// and installs `build(rows)`, one reload at a time; the value now in
    /// force. A cut load keeps the value before (installing it would lose
    /// what the cut left out), logged naming `what`.
    pub async fn reload<R>(
        &self,
        what: &str,
        load: impl Future<Output = Result<(Vec<R>, bool), MetaError>>,
        build: impl FnOnce(Vec<R>) -> T,
    ) -> Result<Arc<T>, MetaError> {
        let _one = self.reloading.lock().await;
        let (rows, cut) = load.await?;
        if cut {
            tracing::error!(
                limit = rows.len(),
                "more {what} stored than an agent loads; keeping the {what} loaded before (delete some)"
            );
            return Ok(self.get());
        }
        let n = rows.len();
        self.replace(build(rows));
        tracing::debug!(rows = n, "{what} loaded");
        Ok(self.get())
    }

    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }
}

/// Keeps a copy current: runs `reload` on every notice of `changed` and
/// every `every` (a notice lost while LISTEN reconnects). Runs on the
/// storage runtime until the process ends.
pub async fn keep<T, Fut>(
    what: &str,
    every: Duration,
    changed: Arc<Notify>,
    reload: impl Fn() -> Fut,
) where
    Fut: Future<Output = Result<T, MetaError>>,
{
    loop {
        let _ = tokio::time::timeout(every, changed.notified()).await;
        if let Err(e) = reload().await {
            tracing::warn!(error = %e, "cannot reload the {what}; keeping the old copy");
        }
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

    /// Runs `f` on the current value (taken from the agent when its
    /// version moved) without cloning its `Arc`.
    pub fn with<R>(&self, copy: &AgentCopy<T>, f: impl FnOnce(&T) -> R) -> R {
        self.with_version(copy, |value, _| f(value))
    }

    /// [`ShardCopy::with`], also telling `f` the value's version.
    pub fn with_version<R>(&self, copy: &AgentCopy<T>, f: impl FnOnce(&T, u64) -> R) -> R {
        self.refresh(copy);
        f(&self.value.borrow(), self.seen.get())
    }

    fn refresh(&self, copy: &AgentCopy<T>) {
        let now = copy.version();
        if now != self.seen.get() {
            *self.value.borrow_mut() = copy.get();
            self.seen.set(now);
        }
    }
}
