//! datum-mq: a Kafka client for Rust dataflow programs.
//!
//! [`KafkaSink`] sends records and reports each one delivered only after
//! Kafka confirmed the batch that holds it. Producers come in two backends
//! ([`KafkaProducerBackend`]): `Native`, this crate's own protocol code
//! (pure Rust, on top of the `kafka-protocol` crate), and `Rdkafka`,
//! librdkafka through the `rdkafka` crate (the `rdkafka` feature, on by
//! default). What a backend does not do fails fast with an error naming the
//! other one; there is never a silent fallback.
//!
//! Guarantees: acks=all by default; bounded retries give at-least-once
//! delivery, not idempotence (a response lost after the broker appended a
//! batch, followed by a retry, duplicates its records). Transactions and
//! exactly-once are out of scope.
#![forbid(unsafe_code)]

mod acks;
pub mod batch;
mod error;
pub mod native;
pub mod partitioner;
mod producer;
#[cfg(feature = "rdkafka")]
mod rdk;
#[cfg(feature = "rdkafka")]
mod rdk_consumer;
mod record;
mod settings;
mod sink;
mod source;

pub use acks::{Ack, ConsumerRecord};
pub use error::{Error, Result};
pub use native::connect;
pub use native::sasl::SaslMechanism;
pub use native::tls::{Pem, TlsSettings};
pub use producer::KafkaProducer;
pub use record::{Delivery, ProducerRecord, RecordMetadata};
pub use settings::{
    Acks, AutoOffsetReset, GroupProtocol, KafkaConsumerSettings, KafkaProducerSettings,
    RebalanceEvent, RebalanceListener, Security,
};
pub use sink::KafkaSink;
pub use source::KafkaSource;

/// Record batch compression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    #[default]
    None,
    /// rdkafka backend only.
    Gzip,
    /// rdkafka backend only.
    Snappy,
    Lz4,
    Zstd,
}

/// The codecs the native backends read and write.
pub const NATIVE_COMPRESSIONS: [Compression; 3] =
    [Compression::None, Compression::Lz4, Compression::Zstd];

/// Which implementation a producer uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KafkaProducerBackend {
    /// This crate's own protocol code.
    Native,
    /// librdkafka (needs the `rdkafka` feature).
    Rdkafka,
}

impl Default for KafkaProducerBackend {
    /// librdkafka when the crate has it, native otherwise.
    fn default() -> Self {
        if cfg!(feature = "rdkafka") {
            KafkaProducerBackend::Rdkafka
        } else {
            KafkaProducerBackend::Native
        }
    }
}

/// Which implementation a consumer uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum KafkaConsumerBackend {
    /// This crate's own protocol code (the default).
    #[default]
    Native,
    /// librdkafka (needs the `rdkafka` feature).
    Rdkafka,
}
