//! rutomq: a stateless, Kafka-compatible message queue.

/// mimalloc, with hostile-sized single allocations reserved lazily (see
/// `rutomq_shards::alloc`). Set here so the binary and every test use it.
#[global_allocator]
static GLOBAL: rutomq_shards::alloc::GuardedAlloc = rutomq_shards::alloc::GuardedAlloc;

pub mod agent;
pub mod api;
pub mod compact;
pub mod config;
pub mod control;
pub mod coordinator;
pub mod ctl;
pub mod dynamic;
pub mod embedded_pg;
pub mod error;
pub mod flush;
pub mod gc;
pub mod groups;
pub mod http;
pub mod hub;
pub mod limits;
pub mod logging;
pub mod metrics;
pub mod quota;
pub mod read;
pub mod records;
pub mod security;
pub mod serve;
pub mod shard;
pub mod share;
pub mod telemetry;
pub mod topics;
pub mod txns;
pub mod wall;
