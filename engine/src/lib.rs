//! rutomq: a stateless, Kafka-compatible message queue.

pub mod agent;
pub mod api;
pub mod config;
pub mod embedded_pg;
pub mod error;
pub mod http;
pub mod pipeline;
pub mod read;
pub mod records;
pub mod shard;
pub mod topics;
