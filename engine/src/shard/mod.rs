//! One shard's state, shared-nothing (`Rc`/`RefCell`, never borrowed across
//! an `.await`): its open batch buffer ([`crate::flush::ShardBuffer`]), its
//! topic cache, its read side (high watermarks with their long-poll waiters,
//! cached spans: [`crate::read::Reader`]), its fetch byte budget and its
//! metrics. Each is its own type; the shard only holds them together and
//! feeds the reader from the hub.

mod fetch_budget;
mod topic_cache;

use std::rc::Rc;
use std::sync::Arc;

pub use fetch_budget::{FetchBudget, FetchGrant};
pub use topic_cache::TopicCache;

use crate::agent::Agent;
use crate::flush::ShardBuffer;
use crate::hub::HubMessage;
use crate::limits::FETCH_BYTES_INFLIGHT_MAX;
use crate::metrics::ShardMetrics;
use crate::read::Reader;

pub struct Shard {
    pub index: usize,
    pub agent: Arc<Agent>,
    pub buffer: Rc<ShardBuffer>,
    pub topics: TopicCache,
    pub reader: Reader,
    pub fetch_budget: FetchBudget,
    pub metrics: Arc<ShardMetrics>,
}

impl Shard {
    pub fn new(
        index: usize,
        agent: Arc<Agent>,
        hub_rx: async_channel::Receiver<HubMessage>,
    ) -> Rc<Shard> {
        let shard = Rc::new(Shard {
            index,
            agent: agent.clone(),
            buffer: ShardBuffer::new(agent.flush.clone(), agent.sealed_tx.clone()),
            topics: TopicCache::new(agent.meta.clone()),
            reader: Reader::new(agent.meta.clone(), agent.storage.clone()),
            fetch_budget: FetchBudget::new(FETCH_BYTES_INFLIGHT_MAX),
            metrics: Arc::new(ShardMetrics::default()),
        });
        agent
            .shard_metrics
            .lock()
            .expect("metrics lock")
            .push(shard.metrics.clone());
        let weak = Rc::downgrade(&shard);
        rutomq_shards::spawn(async move {
            while let Ok(msg) = hub_rx.recv().await {
                let Some(shard) = weak.upgrade() else { break };
                for name in &msg.topics {
                    shard.topics.forget(name);
                }
                shard.reader.learn(&msg);
            }
        });
        shard
    }
}
