//! The hub: news of commits fanned out to every shard's reader — new high
//! watermarks and the spans behind them (from this agent's pipeline, or
//! from other agents by LISTEN/NOTIFY) and moved log start offsets.

use std::sync::Arc;

use uuid::Uuid;

use rutomq_meta::MarksNews;

use crate::flush::NewSpan;
use crate::limits::HUB_MESSAGES_QUEUED_MAX;

/// One piece of news, shared by every shard.
pub type HubMessage = Arc<HubNews>;

#[derive(Default)]
pub struct HubNews {
    /// High watermarks, last stable offsets, aborts.
    pub marks: Vec<MarksNews>,
    /// The spans behind `marks`, when this agent committed them.
    pub spans: Vec<NewSpan>,
    /// Log start offsets moved (retention, DeleteRecords).
    pub log_starts: Vec<(Uuid, i32, i64)>,
    /// Partitions a compaction pass rewrote (with the offset it cleaned to).
    pub compacted: Vec<(Uuid, i32, i64)>,
    /// Topics whose row changed (created, partitions added, deleted,
    /// configs): cached copies are dropped.
    pub topics: Vec<String>,
}

/// Sends news to every shard.
pub struct Hub {
    senders: Vec<async_channel::Sender<HubMessage>>,
}

impl Hub {
    /// A hub for `shards` shards, and each shard's receiving end.
    pub fn new(shards: usize) -> (Hub, Vec<async_channel::Receiver<HubMessage>>) {
        let (senders, receivers) = (0..shards)
            .map(|_| async_channel::bounded(HUB_MESSAGES_QUEUED_MAX))
            .unzip();
        (Hub { senders }, receivers)
    }

    pub fn notify(&self, marks: Vec<MarksNews>, spans: Vec<NewSpan>) {
        if !marks.is_empty() {
            self.send(HubNews {
                marks,
                spans,
                ..HubNews::default()
            });
        }
    }

    pub fn notify_log_starts(&self, log_starts: Vec<(Uuid, i32, i64)>) {
        if !log_starts.is_empty() {
            self.send(HubNews {
                log_starts,
                ..HubNews::default()
            });
        }
    }

    pub fn notify_compacted(&self, compacted: Vec<(Uuid, i32, i64)>) {
        if !compacted.is_empty() {
            self.send(HubNews {
                compacted,
                ..HubNews::default()
            });
        }
    }

    pub fn notify_topic_changed(&self, name: String) {
        self.send(HubNews {
            topics: vec![name],
            ..HubNews::default()
        });
    }

    fn send(&self, news: HubNews) {
        let msg = Arc::new(news);
        for s in &self.senders {
            if s.try_send(msg.clone()).is_err() {
                tracing::debug!("watermark queue full; long polls fall back to max_wait_ms");
            }
        }
    }
}
