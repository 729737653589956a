//! One connection to one broker: requests are framed with kafka-protocol,
//! pipelined, and matched to their responses in order (Kafka answers a
//! connection's requests in the order they were sent).
//!
//! A writer task sends frames; a reader task reads responses and hands each
//! to the caller that waits for it. When either side fails, every pending
//! call fails and the connection is dead; callers reconnect.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, Result};

/// Requests queued towards one connection's writer at most.
pub const CONN_QUEUE_MAX: usize = 64;
/// Largest response frame accepted (a fetch answers at most its
/// `fetch.max.bytes`, 50 MiB by default, plus framing).
pub const RESPONSE_BYTES_MAX: usize = 128 << 20;

/// A byte stream to a broker: TCP, or TLS over TCP.
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

type Reply = oneshot::Sender<Result<Bytes>>;

struct Pending {
    correlation_id: i32,
    response_header_version: i16,
    reply: Reply,
}

struct Outgoing {
    frame: Bytes,
    pending: Pending,
}

/// A connection; cheap to clone.
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

struct Inner {
    broker: String,
    client_id: StrBytes,
    tx: mpsc::Sender<Outgoing>,
    next_correlation_id: AtomicI32,
    dead: Arc<AtomicBool>,
    request_timeout: Duration,
    /// The broker's version range per API key (from ApiVersions).
    versions: Mutex<HashMap<i16, (i16, i16)>>,
}

impl Connection {
    /// Starts the connection's tasks over `stream` and asks the broker for
    /// its API versions.
    pub async fn start(
        stream: Box<dyn Stream>,
        broker: String,
        client_id: &str,
        request_timeout: Duration,
    ) -> Result<Connection> {
        let (read, write) = tokio::io::split(stream);
        let (tx, rx) = mpsc::channel(CONN_QUEUE_MAX);
        let pending = Arc::new(Mutex::new(VecDeque::new()));
        let dead = Arc::new(AtomicBool::new(false));
        tokio::spawn(write_loop(write, rx, pending.clone(), dead.clone()));
        tokio::spawn(read_loop(read, pending, dead.clone(), broker.clone()));
        let conn = Connection {
            inner: Arc::new(Inner {
                broker,
                client_id: StrBytes::from_string(client_id.to_owned()),
                tx,
                next_correlation_id: AtomicI32::new(1),
                dead,
                request_timeout,
                versions: Mutex::new(HashMap::new()),
            }),
        };
        conn.api_versions().await?;
        Ok(conn)
    }

    pub fn broker(&self) -> &str {
        &self.inner.broker
    }

    /// False once the connection failed; calls on it fail at once.
    pub fn is_alive(&self) -> bool {
        !self.inner.dead.load(Ordering::Relaxed)
    }

    /// ApiVersions v3, or v0 when the broker is older (it answers
    /// UNSUPPORTED_VERSION with its own range in a v0 body).
    async fn api_versions(&self) -> Result<()> {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("datum-mq"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        // A broker without v3 answers UNSUPPORTED_VERSION in a v0 body,
        // which does not decode as v3: either way, ask again at v0.
        let resp: ApiVersionsResponse = match self.call_version(&req, 3).await {
            Ok(r) if r.error_code != 35 => r,
            Ok(_) | Err(Error::Protocol(_)) => self.call_version(&req, 0).await?,
            Err(e) => return Err(e),
        };
        if resp.error_code != 0 {
            return Err(Error::kafka(resp.error_code, "ApiVersions"));
        }
        let mut v = self.inner.versions.lock().expect("versions lock");
        for k in resp.api_keys {
            v.insert(k.api_key, (k.min_version, k.max_version));
        }
        Ok(())
    }

    /// The highest version of `R` both sides speak, within `ours`.
    pub fn version<R: Request>(&self, ours: (i16, i16)) -> Result<i16> {
        let v = self.inner.versions.lock().expect("versions lock");
        let Some(&(min, max)) = v.get(&R::KEY) else {
            return Err(Error::Unsupported(format!(
                "broker {} does not offer API key {}",
                self.inner.broker,
                R::KEY
            )));
        };
        let hi = max.min(ours.1);
        if hi < min.max(ours.0) {
            return Err(Error::Unsupported(format!(
                "broker {} speaks API {} v{min}-{max}, this client v{}-{}",
                self.inner.broker,
                R::KEY,
                ours.0,
                ours.1
            )));
        }
        Ok(hi)
    }

    /// Sends `req` at the highest common version within `ours`.
    pub async fn call<R: Request>(&self, req: &R, ours: (i16, i16)) -> Result<R::Response> {
        let version = self.version::<R>(ours)?;
        self.call_version(req, version).await
    }

    /// Sends `req` at `version` and waits for its response.
    pub async fn call_version<R: Request>(&self, req: &R, version: i16) -> Result<R::Response> {
        let rx = self.send::<R>(req, version).await?;
        let mut body = match tokio::time::timeout(self.inner.request_timeout, rx).await {
            Ok(Ok(r)) => r?,
            Ok(Err(_)) => return Err(self.gone()),
            Err(_) => {
                // The response may still come; the connection is no longer
                // trusted to pair responses with callers.
                self.inner.dead.store(true, Ordering::Relaxed);
                return Err(Error::Timeout(format!(
                    "API {} to {} after {:?}",
                    R::KEY,
                    self.inner.broker,
                    self.inner.request_timeout
                )));
            }
        };
        let resp = R::Response::decode(&mut body, version).map_err(Error::codec)?;
        Ok(resp)
    }

    /// Queues `req`; the receiver yields the response body (after its
    /// header).
    pub async fn send<R: Request>(
        &self,
        req: &R,
        version: i16,
    ) -> Result<oneshot::Receiver<Result<Bytes>>> {
        if !self.is_alive() {
            return Err(self.gone());
        }
        let correlation_id = self
            .inner
            .next_correlation_id
            .fetch_add(1, Ordering::Relaxed)
            & i32::MAX;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.inner.client_id.clone()));
        let header_version = R::header_version(version);
        let size = header
            .compute_size(header_version)
            .and_then(|h| Ok(h + req.compute_size(version)?))
            .map_err(Error::codec)?;
        let mut frame = BytesMut::with_capacity(4 + size);
        frame.put_i32(size as i32);
        header
            .encode(&mut frame, header_version)
            .map_err(Error::codec)?;
        req.encode(&mut frame, version).map_err(Error::codec)?;
        let (reply, rx) = oneshot::channel();
        let out = Outgoing {
            frame: frame.freeze(),
            pending: Pending {
                correlation_id,
                response_header_version: R::Response::header_version(version),
                reply,
            },
        };
        self.inner.tx.send(out).await.map_err(|_| self.gone())?;
        Ok(rx)
    }

    /// Whether `self` and `other` are the same connection.
    pub fn same(&self, other: &Connection) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    fn gone(&self) -> Error {
        Error::Io(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            format!("connection to {} closed", self.inner.broker),
        ))
    }
}

async fn write_loop(
    mut w: tokio::io::WriteHalf<Box<dyn Stream>>,
    mut rx: mpsc::Receiver<Outgoing>,
    pending: Arc<Mutex<VecDeque<Pending>>>,
    dead: Arc<AtomicBool>,
) {
    while let Some(out) = rx.recv().await {
        if dead.load(Ordering::Relaxed) {
            let _ = out.pending.reply.send(Err(Error::Closed));
            continue;
        }
        // Registered before the frame leaves, so the reader finds it; under
        // the lock `fail_all` takes, so a reader that just failed cannot
        // leave it unanswered.
        {
            let mut p = pending.lock().expect("pending lock");
            if dead.load(Ordering::Relaxed) {
                let _ = out.pending.reply.send(Err(Error::Closed));
                continue;
            }
            p.push_back(out.pending);
        }
        if let Err(e) = w.write_all(&out.frame).await {
            tracing::debug!(error = %e, "connection write failed");
            fail_all(&pending, &dead);
            continue;
        }
    }
    let _ = w.shutdown().await;
}

async fn read_loop(
    mut r: tokio::io::ReadHalf<Box<dyn Stream>>,
    pending: Arc<Mutex<VecDeque<Pending>>>,
    dead: Arc<AtomicBool>,
    broker: String,
) {
    let outcome: Result<()> = async {
        loop {
            let size = r.read_i32().await?;
            if size < 4 || size as usize > RESPONSE_BYTES_MAX {
                return Err(Error::Protocol(format!("response frame of {size} bytes")));
            }
            let mut buf = vec![0u8; size as usize];
            r.read_exact(&mut buf).await?;
            let mut body = Bytes::from(buf);
            let Some(p) = pending.lock().expect("pending lock").pop_front() else {
                return Err(Error::Protocol("a response nobody asked for".into()));
            };
            let header = ResponseHeader::decode(&mut body, p.response_header_version)
                .map_err(Error::codec)?;
            if header.correlation_id != p.correlation_id {
                let e = Error::Protocol(format!(
                    "response correlation id {} where {} was due",
                    header.correlation_id, p.correlation_id
                ));
                let _ = p.reply.send(Err(Error::Protocol(e.to_string())));
                return Err(e);
            }
            let _ = p.reply.send(Ok(body));
        }
    }
    .await;
    if let Err(e) = outcome {
        tracing::debug!(broker, error = %e, "connection closed");
    }
    fail_all(&pending, &dead);
}

fn fail_all(pending: &Mutex<VecDeque<Pending>>, dead: &AtomicBool) {
    let mut pending = pending.lock().expect("pending lock");
    dead.store(true, Ordering::Relaxed);
    for p in pending.drain(..) {
        let _ = p.reply.send(Err(Error::Io(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "connection closed with the request in flight",
        ))));
    }
}
