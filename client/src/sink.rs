//! KafkaSink: records in, delivery confirmations out.

use crate::error::Result;
use crate::producer::KafkaProducer;
use crate::record::{Delivery, ProducerRecord};
use crate::settings::KafkaProducerSettings;

/// Writes records to Kafka. [`KafkaSink::send`] returns a [`Delivery`]
/// that completes only after Kafka confirmed the batch holding the record
/// (acks=all by default): that is the sink's acknowledgement, and the
/// moment a dataflow may acknowledge the record's input. With
/// [`KafkaSink::send_then`] the acknowledgement is a callback instead.
pub struct KafkaSink {
    producer: KafkaProducer,
}

impl KafkaSink {
    pub async fn new(settings: KafkaProducerSettings) -> Result<KafkaSink> {
        Ok(KafkaSink {
            producer: KafkaProducer::new(settings).await?,
        })
    }

    pub fn producer(&self) -> &KafkaProducer {
        &self.producer
    }

    /// Queues `record`; the [`Delivery`] is its acknowledgement.
    pub async fn send(&self, record: ProducerRecord) -> Result<Delivery> {
        self.producer.send(record).await
    }

    /// Queues `record` and calls `ack` with the delivery's outcome once
    /// Kafka confirmed it (on the current tokio runtime).
    pub async fn send_then<F>(&self, record: ProducerRecord, ack: F) -> Result<()>
    where
        F: FnOnce(Result<crate::RecordMetadata>) + Send + 'static,
    {
        let delivery = self.producer.send(record).await?;
        tokio::spawn(async move { ack(delivery.await) });
        Ok(())
    }

    /// Waits until every record sent so far is delivered or failed.
    pub async fn flush(&self) -> Result<()> {
        self.producer.flush().await
    }
}
