//! KafkaSource: records in with acknowledgement handles; offsets committed
//! only behind acknowledged work.

use crate::acks::{Ack, ConsumerRecord};
#[cfg(not(feature = "rdkafka"))]
use crate::error::Error;
use crate::error::Result;
use crate::native::consumer::NativeConsumer;
use crate::settings::KafkaConsumerSettings;
use crate::KafkaConsumerBackend;

/// Reads a group's share of the subscribed topics. Each record comes with
/// an [`Ack`]: call [`Ack::ack`] once the downstream work for it is done.
/// Per partition, the committed offset only ever moves to just below the
/// first record not yet acknowledged — periodically, before partitions are
/// given up in a rebalance, and on [`KafkaSource::close`] — so a crash or a
/// rebalance replays unfinished work (at-least-once) and never skips it.
pub struct KafkaSource {
    backend: Backend,
}

enum Backend {
    Native(NativeConsumer),
    #[cfg(feature = "rdkafka")]
    Rdkafka(crate::rdk_consumer::RdConsumer),
}

impl KafkaSource {
    /// Starts consuming `topics` over the backend the settings name; the
    /// group is joined in the background (the native backend reads the
    /// cluster's metadata first, so an unreachable cluster fails here).
    pub async fn new(settings: KafkaConsumerSettings, topics: &[&str]) -> Result<KafkaSource> {
        // Each backend checks the settings itself.
        let backend = match settings.backend {
            KafkaConsumerBackend::Native => Backend::Native(
                NativeConsumer::start(settings, topics.iter().map(|t| t.to_string()).collect())
                    .await?,
            ),
            #[cfg(feature = "rdkafka")]
            KafkaConsumerBackend::Rdkafka => {
                Backend::Rdkafka(crate::rdk_consumer::RdConsumer::start(&settings, topics)?)
            }
            #[cfg(not(feature = "rdkafka"))]
            KafkaConsumerBackend::Rdkafka => {
                return Err(Error::Unsupported(
                    "KafkaConsumerBackend::Rdkafka needs the `rdkafka` feature of datum-mq, which this build lacks; use KafkaConsumerBackend::Native".into(),
                ))
            }
        };
        Ok(KafkaSource { backend })
    }

    pub fn backend(&self) -> KafkaConsumerBackend {
        match self.backend {
            Backend::Native(_) => KafkaConsumerBackend::Native,
            #[cfg(feature = "rdkafka")]
            Backend::Rdkafka(_) => KafkaConsumerBackend::Rdkafka,
        }
    }

    /// The next record and its acknowledgement; None once closed.
    pub async fn next(&mut self) -> Option<Result<(ConsumerRecord, Ack)>> {
        match &mut self.backend {
            Backend::Native(c) => c.next().await,
            #[cfg(feature = "rdkafka")]
            Backend::Rdkafka(c) => c.next().await,
        }
    }

    /// The partitions this member holds now.
    pub fn assignment(&self) -> Vec<(String, i32)> {
        match &self.backend {
            Backend::Native(c) => c.assignment(),
            #[cfg(feature = "rdkafka")]
            Backend::Rdkafka(c) => c.assignment(),
        }
    }

    /// Stops fetching these partitions until [`KafkaSource::resume`].
    pub async fn pause(&mut self, partitions: &[(&str, i32)]) -> Result<()> {
        match &mut self.backend {
            Backend::Native(c) => c.pause(partitions).await,
            #[cfg(feature = "rdkafka")]
            Backend::Rdkafka(c) => c.pause(partitions),
        }
    }

    pub async fn resume(&mut self, partitions: &[(&str, i32)]) -> Result<()> {
        match &mut self.backend {
            Backend::Native(c) => c.resume(partitions).await,
            #[cfg(feature = "rdkafka")]
            Backend::Rdkafka(c) => c.resume(partitions),
        }
    }

    /// Consumes the partition from `offset` next. Seeking back replays
    /// records; seeking forward skips them, and the commit may then move
    /// past them (the caller decided they are done).
    pub async fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<()> {
        match &mut self.backend {
            Backend::Native(c) => c.seek(topic, partition, offset).await,
            #[cfg(feature = "rdkafka")]
            Backend::Rdkafka(c) => c.seek(topic, partition, offset).await,
        }
    }

    /// Commits what is acknowledged now.
    pub async fn commit(&self) -> Result<()> {
        match &self.backend {
            Backend::Native(c) => c.commit().await,
            #[cfg(feature = "rdkafka")]
            Backend::Rdkafka(c) => c.commit().await,
        }
    }

    /// Commits what is acknowledged and leaves the group.
    pub async fn close(self) -> Result<()> {
        match self.backend {
            Backend::Native(c) => c.close().await,
            #[cfg(feature = "rdkafka")]
            Backend::Rdkafka(c) => c.close().await,
        }
    }
}
