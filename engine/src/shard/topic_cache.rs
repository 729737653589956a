//! Topic metadata cached per shard, by name and by topic id, refreshed from
//! PostgreSQL after [`TOPIC_CACHE_TTL`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;

use rutomq_meta::{Meta, TopicRecord};
use uuid::Uuid;

use crate::error::ErrorCode;
use crate::limits::{TOPIC_CACHE_ENTRIES_MAX, TOPIC_CACHE_TTL};

pub struct TopicCache {
    meta: Meta,
    topics: RefCell<HashMap<String, (TopicRecord, Instant)>>,
    /// Topic id → name of the entries in `topics`.
    names: RefCell<HashMap<Uuid, String>>,
}

impl TopicCache {
    pub fn new(meta: Meta) -> TopicCache {
        TopicCache {
            meta,
            topics: RefCell::new(HashMap::new()),
            names: RefCell::new(HashMap::new()),
        }
    }

    pub async fn by_name(&self, name: &str) -> Result<Option<TopicRecord>, ErrorCode> {
        if let Some((t, at)) = self.topics.borrow().get(name) {
            if at.elapsed() < TOPIC_CACHE_TTL {
                return Ok(Some(t.clone()));
            }
        }
        let found = self
            .meta
            .load_topics(Some(vec![name.to_owned()]))
            .await
            .map_err(|e| ErrorCode::from(&e))?;
        Ok(self.remember(found.into_iter().next(), name))
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
