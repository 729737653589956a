//! The records a producer sends and what it reports back, shared by the
//! producer facade and both backends.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::FutureExt;

use crate::error::Result;

/// A record to send.
#[derive(Clone, Debug, Default)]
pub struct ProducerRecord {
    pub topic: String,
    /// None: by key hash, or sticky for keyless records.
    pub partition: Option<i32>,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
    /// CreateTime; None: now.
    pub timestamp_ms: Option<i64>,
}

impl ProducerRecord {
    pub fn new(topic: impl Into<String>) -> ProducerRecord {
        ProducerRecord {
            topic: topic.into(),
            ..Default::default()
        }
    }
    pub fn with_key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }
    pub fn with_value(mut self, value: impl Into<Bytes>) -> Self {
        self.value = Some(value.into());
        self
    }
    pub fn with_partition(mut self, p: i32) -> Self {
        self.partition = Some(p);
        self
    }
    pub fn with_header(mut self, k: impl Into<String>, v: Option<Bytes>) -> Self {
        self.headers.push((k.into(), v));
        self
    }
    pub fn with_timestamp_ms(mut self, ts: i64) -> Self {
        self.timestamp_ms = Some(ts);
        self
    }
}

/// Where a delivered record landed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordMetadata {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// The record's CreateTime, or the broker's LogAppendTime.
    pub timestamp_ms: i64,
}

/// Completes once Kafka confirmed (or refused) the batch holding the record.
pub struct Delivery(BoxFuture<'static, Result<RecordMetadata>>);

impl Delivery {
    pub(crate) fn new(
        f: impl Future<Output = Result<RecordMetadata>> + Send + 'static,
    ) -> Delivery {
        Delivery(Box::pin(f))
    }
}

impl Future for Delivery {
    type Output = Result<RecordMetadata>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.poll_unpin(cx)
    }
}
