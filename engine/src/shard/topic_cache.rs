//! Topic metadata cached per shard, by name and by topic id, refreshed from
//! PostgreSQL after [`TOPIC_CACHE_TTL`].
//!
//! A refresh is one query for every entry that has expired (up to
//! [`TOPIC_REFRESH_BATCH_MAX`] names), shared by every lookup that needs
//! one of those names while it runs: with a thousand topics in use a shard
//! asks PostgreSQL a few times per TTL, not once per topic and request.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

use futures::future::{FutureExt, LocalBoxFuture, Shared};
use rutomq_meta::{Meta, TopicRecord};
use uuid::Uuid;

use crate::error::ErrorCode;
use crate::limits::{TOPIC_CACHE_ENTRIES_MAX, TOPIC_CACHE_TTL, TOPIC_REFRESH_BATCH_MAX};

/// A refresh under way: the names it asked for, and what it found.
type Refresh = Shared<LocalBoxFuture<'static, Result<Rc<Vec<TopicRecord>>, ErrorCode>>>;

pub struct TopicCache {
    meta: Meta,
    topics: RefCell<HashMap<String, (TopicRecord, Instant)>>,
    /// Topic id → name of the entries in `topics`.
    names: RefCell<HashMap<Uuid, String>>,
    /// Name → the refresh under way that asked for it.
    refreshing: RefCell<HashMap<String, Refresh>>,
}

impl TopicCache {
    pub fn new(meta: Meta) -> TopicCache {
        TopicCache {
            meta,
            topics: RefCell::new(HashMap::new()),
            names: RefCell::new(HashMap::new()),
            refreshing: RefCell::new(HashMap::new()),
        }
    }

    pub async fn by_name(&self, name: &str) -> Result<Option<TopicRecord>, ErrorCode> {
        if let Some((t, at)) = self.topics.borrow().get(name) {
            if at.elapsed() < TOPIC_CACHE_TTL {
                return Ok(Some(t.clone()));
            }
        }
        let found = self.refresh(name).await?;
        Ok(found.iter().find(|t| t.name == name).cloned())
    }

    /// Loads `name`, with every other expired entry, in one query; or
    /// joins the refresh already asking for it. Remembers what it found and
    /// forgets the names it did not find (deleted topics).
    async fn refresh(&self, name: &str) -> Result<Rc<Vec<TopicRecord>>, ErrorCode> {
        let running = self.refreshing.borrow().get(name).cloned();
        if let Some(refresh) = running {
            return refresh.await;
        }
        let mut batch = vec![name.to_owned()];
        {
            let refreshing = self.refreshing.borrow();
            batch.extend(
                self.topics
                    .borrow()
                    .iter()
                    .filter(|(n, (_, at))| {
                        at.elapsed() >= TOPIC_CACHE_TTL
                            && n.as_str() != name
                            && !refreshing.contains_key(n.as_str())
                    })
                    .map(|(n, _)| n.clone())
                    .take(TOPIC_REFRESH_BATCH_MAX - 1),
            );
        }
        let meta = self.meta.clone();
        let names = batch.clone();
        let refresh: Refresh = async move {
            meta.load_topics(Some(names))
                .await
                .map(Rc::new)
                .map_err(|e| ErrorCode::from(&e))
        }
        .boxed_local()
        .shared();
        {
            let mut refreshing = self.refreshing.borrow_mut();
            for n in &batch {
                refreshing.insert(n.clone(), refresh.clone());
            }
        }
        // Out of the map when done with it, or dropped.
        let _running = Running {
            refreshing: &self.refreshing,
            names: &batch,
        };
        let found = refresh.await?;
        for n in &batch {
            let topic = found.iter().find(|t| &t.name == n).cloned();
            self.remember(topic, n);
        }
        Ok(found)
    }

    pub async fn by_id(&self, topic_id: Uuid) -> Result<Option<TopicRecord>, ErrorCode> {
        // Fetch and Produce v13+ name topics by id: one map lookup each,
        // not a scan of the cache.
        let cached = self.names.borrow().get(&topic_id).and_then(|name| {
            self.topics
                .borrow()
                .get(name)
                .filter(|(t, at)| t.topic_id == topic_id && at.elapsed() < TOPIC_CACHE_TTL)
                .map(|(t, _)| t.clone())
        });
        if cached.is_some() {
            return Ok(cached);
        }
        // Known but expired: refreshed with the other expired names.
        let known = self.names.borrow().get(&topic_id).cloned();
        if let Some(name) = known {
            let found = self.refresh(&name).await?;
            if let Some(t) = found.iter().find(|t| t.topic_id == topic_id) {
                return Ok(Some(t.clone()));
            }
        }
        let found = self
            .meta
            .load_topic_by_id(topic_id)
            .await
            .map_err(|e| ErrorCode::from(&e))?;
        let name = found.as_ref().map(|t| t.name.clone()).unwrap_or_default();
        Ok(self.remember(found, &name))
    }

    fn remember(&self, topic: Option<TopicRecord>, name: &str) -> Option<TopicRecord> {
        let mut cache = self.topics.borrow_mut();
        match &topic {
            Some(t) => {
                if cache.len() >= TOPIC_CACHE_ENTRIES_MAX {
                    cache.retain(|_, (_, at)| at.elapsed() < TOPIC_CACHE_TTL);
                    if cache.len() >= TOPIC_CACHE_ENTRIES_MAX {
                        cache.clear();
                    }
                    self.names.borrow_mut().retain(|_, n| cache.contains_key(n));
                }
                let mut names = self.names.borrow_mut();
                if let Some((old, _)) = cache.insert(t.name.clone(), (t.clone(), Instant::now())) {
                    names.remove(&old.topic_id);
                }
                names.insert(t.topic_id, t.name.clone());
            }
            None => {
                drop(cache);
                self.forget(name);
            }
        }
        topic
    }

    pub fn forget(&self, name: &str) {
        if let Some((old, _)) = self.topics.borrow_mut().remove(name) {
            self.names.borrow_mut().remove(&old.topic_id);
        }
    }
}

/// Takes a refresh's names out of the map once its starter is done (or
/// dropped), so the next lookup of them starts a new one.
struct Running<'a> {
    refreshing: &'a RefCell<HashMap<String, Refresh>>,
    names: &'a [String],
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut refreshing = self.refreshing.borrow_mut();
        for n in self.names {
            refreshing.remove(n);
        }
    }
}
