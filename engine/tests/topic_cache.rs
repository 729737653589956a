//! A shard's topic cache against a real PostgreSQL (the embedded one): once
//! entries expire, lookups of many topics at once cost one query, not one
//! per topic and request; a topic deleted meanwhile is forgotten, and a
//! lookup by id of an expired entry joins the same refresh.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{with_meta, Pg};
use rutomq::limits::TOPIC_CACHE_TTL;
use rutomq::shard::topic_cache::TopicCache;

const TOPICS: usize = 40;

#[test]
fn expired_topics_are_refreshed_together_and_deleted_ones_forgotten() {
    with_meta("topic-cache", |pg: Pg| async move {
        let meta = pg.meta.clone();
        let mut ids = Vec::new();
        for i in 0..TOPICS {
            let t = meta
                .create_topic(format!("tc-{i}"), 1, Default::default())
                .await
                .unwrap()
                .expect("created");
            ids.push(t.topic_id);
        }
        let cache = TopicCache::new(meta.clone());
        let queries = || meta.stats.queries.load(Ordering::Relaxed);
        for i in 0..TOPICS {
            assert!(cache.by_name(&format!("tc-{i}")).await.unwrap().is_some());
        }
        // Fresh entries: no query at all.
        let before = queries();
        for i in 0..TOPICS {
            assert!(cache.by_name(&format!("tc-{i}")).await.unwrap().is_some());
        }
        assert_eq!(queries(), before, "fresh entries asked PostgreSQL");

        tokio::time::sleep(TOPIC_CACHE_TTL + Duration::from_millis(200)).await;
        // Deleted behind the cache's back (as when its notice is lost).
        meta.delete_topic("tc-0".into())
            .await
            .unwrap()
            .expect("deleted");
        let before = queries();
        let lookups = (0..TOPICS).map(|i| {
            let cache = &cache;
            async move { cache.by_name(&format!("tc-{i}")).await.unwrap() }
        });
        let (found, by_id) =
            futures::join!(futures::future::join_all(lookups), cache.by_id(ids[1]));
        let by_id = by_id.unwrap();
        assert_eq!(
            queries() - before,
            1,
            "{TOPICS} expired topics looked up at once should cost one query"
        );
        assert!(found[0].is_none(), "a deleted topic is still answered");
        for (i, t) in found.iter().enumerate().skip(1) {
            let t = t.as_ref().unwrap_or_else(|| panic!("tc-{i} lost"));
            assert_eq!(
                (t.name.as_str(), t.topic_id),
                (format!("tc-{i}").as_str(), ids[i])
            );
        }
        assert_eq!(by_id.map(|t| t.topic_id), Some(ids[1]));
        // The deleted one is gone from the cache: asking again asks again
        // (and still finds nothing).
        assert!(cache.by_name("tc-0").await.unwrap().is_none());
    });
}
