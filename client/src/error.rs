//! One error type for both backends.

use kafka_protocol::error::ResponseError;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Asked for something this backend (or this build) does not do; the
    /// message names the way out.
    #[error("{0}")]
    Unsupported(String),
    /// A setting is out of range or malformed.
    #[error("invalid setting: {0}")]
    Config(String),
    /// A broker answered with a Kafka error code.
    #[error("broker error {code} ({error}){context}")]
    Kafka {
        code: i16,
        error: ResponseError,
        context: String,
    },
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The broker sent something that is not the Kafka protocol.
    #[error("protocol: {0}")]
    Protocol(String),
    /// Data failed its checksum.
    #[error("corrupt data: {0}")]
    Corrupt(String),
    #[error("timed out: {0}")]
    Timeout(String),
    #[error("authentication failed: {0}")]
    Auth(String),
    /// The TLS handshake failed (a certificate was refused, no common
    /// protocol); not retried.
    #[error("TLS: {0}")]
    Tls(String),
    /// The client was closed (or its background task ended).
    #[error("client closed")]
    Closed,
    /// From librdkafka.
    #[cfg(feature = "rdkafka")]
    #[error("librdkafka: {0}")]
    Rdkafka(#[from] rdkafka::error::KafkaError),
}

impl Error {
    /// The error for a Kafka error code (`code` != 0).
    pub fn kafka(code: i16, context: impl Into<String>) -> Error {
        let context = context.into();
        Error::Kafka {
            code,
            error: ResponseError::try_from_code(code).unwrap_or(ResponseError::Unknown(code)),
            context: if context.is_empty() {
                context
            } else {
                format!(": {context}")
            },
        }
    }

    /// Whether retrying the same operation may succeed (a retriable Kafka
    /// error, a lost connection, a timeout).
    pub fn is_retriable(&self) -> bool {
        match self {
            Error::Kafka { error, .. } => error.is_retriable(),
            Error::Io(_) | Error::Timeout(_) => true,
            _ => false,
        }
    }

    pub(crate) fn unsupported_native_producer(what: &str) -> Error {
        Error::Unsupported(format!(
            "{what} is not supported by the native producer; use KafkaProducerBackend::Rdkafka{}",
            missing_feature()
        ))
    }

    pub(crate) fn unsupported_native_consumer(what: &str) -> Error {
        Error::Unsupported(format!(
            "{what} is not supported by the native consumer; use KafkaConsumerBackend::Rdkafka{}",
            missing_feature()
        ))
    }
}

fn missing_feature() -> &'static str {
    if cfg!(feature = "rdkafka") {
        ""
    } else {
        " (this build of datum-mq lacks the `rdkafka` feature, which that backend needs)"
    }
}

impl Error {
    /// An encode or decode failure of kafka-protocol.
    pub(crate) fn codec(e: anyhow::Error) -> Error {
        Error::Protocol(format!("{e:#}"))
    }
}
