//! The producer both backends implement.

use crate::error::{Error, Result};
use crate::native::producer::NativeProducer;
use crate::record::{Delivery, ProducerRecord};
use crate::settings::KafkaProducerSettings;
use crate::KafkaProducerBackend;

enum Backend {
    Native(NativeProducer),
    #[cfg(feature = "rdkafka")]
    Rdkafka(crate::rdk::RdProducer),
}

/// A Kafka producer over the backend its settings name.
pub struct KafkaProducer {
    backend: Backend,
}

impl KafkaProducer {
    /// Checks the settings and starts the backend (the native one reads the
    /// cluster's metadata here, so an unreachable cluster fails now).
    pub async fn new(settings: KafkaProducerSettings) -> Result<KafkaProducer> {
        settings.validate()?;
        let backend = match settings.backend {
            KafkaProducerBackend::Native => Backend::Native(NativeProducer::start(settings).await?),
            #[cfg(feature = "rdkafka")]
            KafkaProducerBackend::Rdkafka => Backend::Rdkafka(crate::rdk::RdProducer::new(&settings)?),
            #[cfg(not(feature = "rdkafka"))]
            KafkaProducerBackend::Rdkafka => {
                return Err(Error::Unsupported(
                    "KafkaProducerBackend::Rdkafka needs the `rdkafka` feature of datum-mq, which this build lacks; use KafkaProducerBackend::Native".into(),
                ))
            }
        };
        Ok(KafkaProducer { backend })
    }

    pub fn backend(&self) -> KafkaProducerBackend {
        match self.backend {
            Backend::Native(_) => KafkaProducerBackend::Native,
            #[cfg(feature = "rdkafka")]
            Backend::Rdkafka(_) => KafkaProducerBackend::Rdkafka,
        }
    }

    /// Queues `record` (waiting while the producer's buffer is full); the
    /// returned [`Delivery`] completes when Kafka confirmed it.
    pub async fn send(&self, record: ProducerRecord) -> Result<Delivery> {
        match &self.backend {
            Backend::Native(p) => {
                let rx = p.send(record).await?;
                Ok(Delivery::new(async move {
                    rx.await.map_err(|_| Error::Closed)?
                }))
            }
            #[cfg(feature = "rdkafka")]
            Backend::Rdkafka(p) => p.send(record).await,
        }
    }

    /// Sends everything queued now and waits until it is delivered or
    /// failed.
    pub async fn flush(&self) -> Result<()> {
        match &self.backend {
            Backend::Native(p) => p.flush().await,
            #[cfg(feature = "rdkafka")]
            Backend::Rdkafka(p) => p.flush().await,
        }
    }
}
