//! KafkaSource: records in with acknowledgement handles; offsets committed
//! only behind acknowledged work.

use crate::error::{Error, Result};
use crate::native::consumer::{Ack, ConsumerRecord, NativeConsumer};
use crate::settings::KafkaConsumerSettings;
use crate::KafkaConsumerBackend;

/// Reads a group's share of the subscribed topics. Each record comes with
/// an [`Ack`]: call [`Ack::ack`] once the downstream work for it is done.
/// Per partition, the committed offset only ever moves to just below the
/// first record not yet acknowledged — periodically, before partitions are
/// given up in a rebalance, and on [`KafkaSource::close`] — so a crash or a
/// rebalance replays unfinished work (at-least-once) and never skips it.
pub struct KafkaSource {
    consumer: NativeConsumer,
}

impl KafkaSource {
    pub async fn new(settings: KafkaConsumerSettings, topics: &[&str]) -> Result<KafkaSource> {
        match settings.backend {
            KafkaConsumerBackend::Native => Ok(KafkaSource {
                consumer: NativeConsumer::start(
                    settings,
                    topics.iter().map(|t| t.to_string()).collect(),
                )
                .await?,
            }),
            KafkaConsumerBackend::Rdkafka => Err(Error::Unsupported(
                "KafkaSource over KafkaConsumerBackend::Rdkafka is not built yet (rutomq issue 5); use KafkaConsumerBackend::Native".into(),
            )),
        }
    }

    /// The next record and its acknowledgement; None once closed.
    pub async fn next(&mut self) -> Option<Result<(ConsumerRecord, Ack)>> {
        self.consumer.next().await
    }

    /// The partitions this member holds now.
    pub fn assignment(&self) -> Vec<(String, i32)> {
        self.consumer.assignment()
    }

    /// Stops fetching these partitions until [`KafkaSource::resume`].
    pub async fn pause(&self, partitions: &[(&str, i32)]) -> Result<()> {
        self.consumer.pause(partitions).await
    }

    pub async fn resume(&self, partitions: &[(&str, i32)]) -> Result<()> {
        self.consumer.resume(partitions).await
    }

    /// Consumes the partition from `offset` next. Seeking back replays
    /// records; seeking forward skips them, and the commit may then move
    /// past them (the caller decided they are done).
    pub async fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<()> {
        self.consumer.seek(topic, partition, offset).await
    }

    /// Commits what is acknowledged now.
    pub async fn commit(&self) -> Result<()> {
        self.consumer.commit().await
    }

    /// Commits what is acknowledged and leaves the group.
    pub async fn close(self) -> Result<()> {
        self.consumer.close().await
    }
}
