//! A wrapper that makes any store behave like a distant one: every PUT and
//! GET waits a random delay drawn uniformly from `base ± jitter` before it
//! runs. Used by benchmarks to see the pipeline with S3-like latency on a
//! local directory (`--inject-object-latency-ms`, `--inject-object-jitter-ms`).

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use rand::Rng;

/// Delay of every PUT and GET: uniform in `[base - jitter, base + jitter]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InjectedLatency {
    pub base: Duration,
    pub jitter: Duration,
}

impl InjectedLatency {
    pub fn sample(&self) -> Duration {
        let lo = self.base.saturating_sub(self.jitter);
        let hi = self.base + self.jitter;
        if hi <= lo {
            return lo;
        }
        rand::rng().random_range(lo..=hi)
    }
}

/// `store` with `latency` added to every PUT and GET.
pub fn with_injected_latency(
    store: Arc<dyn ObjectStore>,
    latency: InjectedLatency,
) -> Arc<dyn ObjectStore> {
    Arc::new(LatencyStore::new(store, latency))
}

#[derive(Debug)]
pub struct LatencyStore {
    inner: Arc<dyn ObjectStore>,
    latency: InjectedLatency,
}

impl LatencyStore {
    pub fn new(inner: Arc<dyn ObjectStore>, latency: InjectedLatency) -> LatencyStore {
        LatencyStore { inner, latency }
    }

    async fn wait(&self) {
        tokio::time::sleep(self.latency.sample()).await;
    }
}

impl fmt::Display for LatencyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LatencyStore({:?}±{:?}, {})",
            self.latency.base, self.latency.jitter, self.inner
        )
    }
}

#[async_trait]
impl ObjectStore for LatencyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.wait().await;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.wait().await;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.wait().await;
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.wait().await;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;

    #[test]
    fn samples_stay_in_range() {
        let l = InjectedLatency {
            base: Duration::from_millis(30),
            jitter: Duration::from_millis(10),
        };
        for _ in 0..1000 {
            let d = l.sample();
            assert!(
                d >= Duration::from_millis(20) && d <= Duration::from_millis(40),
                "{d:?}"
            );
        }
        // Jitter wider than the base: clamped at zero, spread both sides.
        let wide = InjectedLatency {
            base: Duration::from_millis(5),
            jitter: Duration::from_millis(50),
        };
        let samples: Vec<Duration> = (0..1000).map(|_| wide.sample()).collect();
        assert!(samples.iter().any(|d| *d < Duration::from_millis(5)));
        assert!(samples.iter().any(|d| *d > Duration::from_millis(30)));
        assert!(samples.iter().all(|d| *d <= Duration::from_millis(55)));
    }

    #[tokio::test]
    async fn put_and_get_wait_then_pass_through() {
        let l = InjectedLatency {
            base: Duration::from_millis(20),
            jitter: Duration::ZERO,
        };
        let store = LatencyStore::new(Arc::new(object_store::memory::InMemory::new()), l);
        let p = Path::from("a/b");
        let t = std::time::Instant::now();
        store
            .put(&p, PutPayload::from_static(b"hello"))
            .await
            .unwrap();
        assert!(t.elapsed() >= Duration::from_millis(20));
        let t = std::time::Instant::now();
        assert_eq!(&store.get_range(&p, 1..3).await.unwrap()[..], b"el");
        assert!(t.elapsed() >= Duration::from_millis(20));
    }
}
