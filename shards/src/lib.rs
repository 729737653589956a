//! The thread-per-core runtime of rutomq.
//!
//! One glommio executor per shard, each pinned to its own core, each with its
//! own `SO_REUSEPORT` listener on each configured address so the kernel
//! spreads connections across shards. A connection lives on the shard that
//! accepted it for its whole life, with the state the engine keeps for it
//! ([`Service::open`]: which listener, its authentication). This crate is the only one that touches glommio: the
//! engine supplies a [`Service`] (built inside each shard by a factory) and uses
//! [`spawn`], [`sleep`] and [`yield_if_needed`] from here.
//!
//! Framing: a Kafka frame is a big-endian `i32` size followed by that many
//! bytes. A size that is negative, zero or above `frame_bytes_max` closes the
//! connection before anything is allocated for it. Each frame must be admitted
//! by the shard's memory budget (`shard_memory_bytes_max`) before its buffer is
//! allocated; the permit is held until the response has been written, so a
//! shard under memory pressure stops reading its sockets (TCP back-pressure)
//! instead of growing. Frame buffers of bulk requests come from a per-shard
//! [`pool::FramePool`] and go back to it when the frame's last `Bytes` drops.
//!
//! Requests on one connection are admitted in order ([`Service::call`] is
//! awaited before the next frame is read), then complete concurrently, and
//! responses are written in request order, as Kafka requires. A response
//! is a [`ResponseFrame`]: one buffer or pieces (a Fetch's large batches in
//! the buffers they were read into), written to a plain TCP socket many
//! pieces per `sendmsg` ([`response`]).
//!
//! TLS: a listener with a [`tls::TlsServer`] runs the handshake (rustls,
//! bounded by [`ShardConfig::tls_handshake_timeout`]) before the connection
//! is opened; the service sees the client's certificate chain
//! ([`tls::TlsInfo`]) and the same frames as on a plain listener.

pub mod alloc;
pub mod pool;
pub mod response;
pub mod tls;

pub use response::ResponseFrame;

use std::cell::Cell;
use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

/// A muted connection's wait is slept in steps of at most this, so a
/// shard stopping is seen.
pub const HOLD_STEP: Duration = Duration::from_millis(100);

use bytes::Bytes;
use futures::channel::{mpsc, oneshot};
use futures::future::{Either, LocalBoxFuture};
use futures::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use futures::{FutureExt, SinkExt, StreamExt};
use glommio::net::{TcpListener, TcpStream};
use glommio::sync::Semaphore;
use glommio::{LocalExecutorBuilder, Placement};

/// What a request turns into once it has been admitted in connection order.
pub enum Reply {
    /// The response is known now (`None`: the request gets no response).
    Now(Option<ResponseFrame>),
    /// The response comes later (durable produce, long-poll fetch).
    Later(LocalBoxFuture<'static, Option<ResponseFrame>>),
    /// The connection's last response (a failed authentication): nothing
    /// more is read; once this is written the connection closes.
    Last(LocalBoxFuture<'static, Option<ResponseFrame>>),
}

/// Why a connection is closed instead of answered.
#[derive(Debug)]
pub struct Close(pub &'static str);

/// The engine's per-shard request handler.
///
/// `open` makes the state of a new connection; `call` receives one frame of
/// it without its size prefix. `call` runs in connection order: the next
/// frame of the same connection is not read until the future it returns
/// resolves, so anything order-sensitive (appending produce batches, an
/// authentication step) happens before it resolves. Returned frames must
/// include the size prefix.
pub trait Service: 'static {
    /// What the engine keeps per connection (cloned into each call).
    type Conn: Clone + 'static;

    /// A connection accepted on listener `listener` (its index in
    /// [`ShardConfig::listeners`]) from `peer` (when the socket knows it),
    /// after its TLS handshake on a TLS listener (`tls`). `Err`: the
    /// connection is closed at once (a certificate naming no principal).
    fn open(
        &self,
        listener: usize,
        peer: Option<SocketAddr>,
        tls: Option<&tls::TlsInfo>,
    ) -> Result<Self::Conn, Close>;

    /// A TLS handshake from `peer` failed or timed out (`why`); the
    /// connection is closed (and counted in
    /// [`ShardStats::tls_handshake_failures`]). For the service's log.
    fn tls_refused(&self, peer: Option<SocketAddr>, why: &str);

    /// How long `conn` is muted (a throttled client): its next request is
    /// not read before then.
    fn hold(&self, _conn: &Self::Conn) -> Option<Duration> {
        None
    }

    /// A connection just accepted from `peer`, before any handshake:
    /// `Some(wait)` refuses it, closing it after `wait` (a client over its
    /// connection creation rate).
    fn throttle_accept(&self, _peer: Option<SocketAddr>) -> Option<Duration> {
        None
    }

    /// The largest frame `conn` may send now (below the configured one:
    /// before a client authenticates, say).
    fn frame_bytes_max(&self, _conn: &Self::Conn) -> usize {
        usize::MAX
    }

    /// A response was written: the request with API key `api_key` took
    /// `took` from its last byte received to its response's last byte
    /// handed to the socket (waiting behind the connection's earlier
    /// responses included, as a client sees it). Not called for requests
    /// without a response (acks=0) or when the write failed.
    fn answered(&self, _api_key: i16, _took: Duration) {}

    /// Handles one request frame of connection `conn`.
    fn call(
        self: Rc<Self>,
        conn: Self::Conn,
        frame: Bytes,
    ) -> LocalBoxFuture<'static, Result<Reply, Close>>;
}

/// One address every shard accepts on, with TLS when `tls` is set.
#[derive(Clone, Debug)]
pub struct ListenerConfig {
    pub addr: SocketAddr,
    pub tls: Option<Arc<tls::TlsServer>>,
}

/// Limits and placement of the shard runtime.
#[derive(Clone, Debug)]
pub struct ShardConfig {
    pub shards: usize,
    /// Every listener; each shard accepts on all of them.
    pub listeners: Vec<ListenerConfig>,
    /// Pin shard `i` to core `i % cores`.
    pub pin: bool,
    /// A frame larger than this closes the connection.
    pub frame_bytes_max: usize,
    /// Requests admitted but not yet answered, per connection.
    pub inflight_requests_per_connection_max: usize,
    /// Request bytes admitted but not yet answered, per shard. A frame
    /// larger than this is admitted alone: it waits until nothing else is
    /// admitted and takes the whole budget (so the shard's request memory
    /// stays within the larger of this and `frame_bytes_max`).
    pub shard_memory_bytes_max: usize,
    /// Connections per shard; past this, new connections are closed at once.
    pub connections_per_shard_max: usize,
    /// Memory glommio registers for io_uring buffers, per shard.
    pub io_memory_bytes: usize,
    /// A frame body being received, or a response being sent, must make it
    /// within this; otherwise the connection is closed.
    pub frame_io_timeout: Duration,
    /// A TLS handshake must finish within this.
    pub tls_handshake_timeout: Duration,
}

/// Counters the engine exports on `/metrics`.
#[derive(Default, Debug)]
pub struct ShardStats {
    pub connections_open: AtomicUsize,
    pub connections_accepted: AtomicUsize,
    pub connections_closed_bad_frame: AtomicUsize,
    /// Connections refused at accept (closed after a delay) for their
    /// client's connection creation rate.
    pub connections_throttled: AtomicUsize,
    pub requests: AtomicUsize,
    pub tls_handshakes: AtomicUsize,
    /// Handshakes that failed or timed out (the connection was closed).
    pub tls_handshake_failures: AtomicUsize,
    /// Every shard's frame pool (for the free bytes they hold).
    pub frame_pools: std::sync::Mutex<Vec<Arc<pool::FramePool>>>,
    /// Open connections per shard (shard index, count): how the kernel's
    /// SO_REUSEPORT hashing spread them.
    pub shard_connections: std::sync::Mutex<Vec<(usize, Arc<AtomicUsize>)>>,
}

impl ShardStats {
    /// Open connections of each shard, by shard index.
    pub fn connections_by_shard(&self) -> Vec<(usize, usize)> {
        let mut v: Vec<(usize, usize)> = self
            .shard_connections
            .lock()
            .expect("shard connections lock")
            .iter()
            .map(|(i, n)| (*i, n.load(Ordering::Relaxed)))
            .collect();
        v.sort_unstable();
        v
    }

    /// Bytes of free frame buffers held by all shards' pools.
    pub fn frame_pool_free_bytes(&self) -> usize {
        self.frame_pools
            .lock()
            .expect("frame pools lock")
            .iter()
            .map(|p| p.free_bytes())
            .sum()
    }
}

/// Runs a future on the current shard.
pub fn spawn<F: Future<Output = ()> + 'static>(fut: F) {
    glommio::spawn_local(fut).detach();
}

/// Sleeps on the current shard's timer.
pub async fn sleep(duration: Duration) {
    glommio::timer::sleep(duration).await
}

/// Yields if the shard's task queue has used up its time slice.
pub async fn yield_if_needed() {
    glommio::yield_if_needed().await
}

/// Handle to running shards: stop them and wait for them to finish.
pub struct Shards {
    stop_txs: Vec<oneshot::Sender<Duration>>,
    joins: Vec<glommio::ExecutorJoinHandle<()>>,
    pub stats: Arc<ShardStats>,
    /// The bound address of each listener, in configuration order.
    pub listeners: Vec<SocketAddr>,
}

impl Shards {
    /// Starts `config.shards` executors. `factory(shard_index)` runs inside
    /// each executor and builds that shard's service. The listeners are bound
    /// before this returns, so a client may connect as soon as it does.
    pub fn start<S, F>(config: ShardConfig, factory: F) -> std::io::Result<Shards>
    where
        S: Service,
        F: Fn(usize) -> Rc<S> + Send + Sync + 'static,
    {
        assert!(config.shards >= 1);
        assert!(!config.listeners.is_empty());
        assert!(config.frame_bytes_max >= 1024);
        assert!(config.shard_memory_bytes_max >= 1024);
        let cpus = allowed_cpus();
        let factory = Arc::new(factory);
        let stats = Arc::new(ShardStats::default());
        let mut stop_txs = Vec::new();
        let mut joins = Vec::new();
        // The first shard decides each listener's port (a configured one
        // may be 0); the others bind the same ports with SO_REUSEPORT.
        let mut listen: Vec<SocketAddr> = config.listeners.iter().map(|l| l.addr).collect();
        for shard in 0..config.shards {
            let (bound_tx, bound_rx) =
                std::sync::mpsc::channel::<std::io::Result<Vec<SocketAddr>>>();
            let (stop_tx, stop_rx) = oneshot::channel();
            let placement = if config.pin {
                // One executor per core, fixed, so each shard keeps its
                // caches warm and never migrates between cores; only the
                // cores this process may run on (a cpuset from taskset,
                // systemd's CPUAffinity or Kubernetes' CPU manager).
                Placement::Fixed(cpus[shard % cpus.len()])
            } else {
                Placement::Unbound
            };
            let factory = factory.clone();
            let stats = stats.clone();
            let config = config.clone();
            let addrs = listen.clone();
            let join = LocalExecutorBuilder::new(placement)
                .name(&format!("shard-{shard}"))
                .io_memory(config.io_memory_bytes)
                .spin_before_park(Duration::from_micros(50))
                .spawn(move || async move {
                    let mut listeners = Vec::with_capacity(addrs.len());
                    for addr in addrs {
                        match TcpListener::bind(addr) {
                            Ok(l) => listeners.push(l),
                            Err(e) => {
                                let _ = bound_tx.send(Err(e.into()));
                                return;
                            }
                        }
                    }
                    let local = listeners
                        .iter()
                        .map(|l| l.local_addr().expect("bound listener has an address"))
                        .collect();
                    let _ = bound_tx.send(Ok(local));
                    let service = factory(shard);
                    run_shard(shard, listeners, service, config, stats, stop_rx).await;
                })
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            let bound = bound_rx
                .recv()
                .map_err(|_| std::io::Error::other("shard thread died before binding"))??;
            listen = bound;
            stop_txs.push(stop_tx);
            joins.push(join);
        }
        Ok(Shards {
            stop_txs,
            joins,
            stats,
            listeners: listen,
        })
    }

    /// Stops accepting, lets in-flight requests finish (bounded by `grace`),
    /// and joins the shard threads.
    pub fn stop(self, grace: Duration) {
        for tx in self.stop_txs {
            let _ = tx.send(grace);
        }
        for j in self.joins {
            let _ = j.join();
        }
    }
}

/// Connections still doing work on this shard, for graceful stop.
struct ShardState {
    inflight: Cell<usize>,
    connections: Cell<usize>,
    stopping: Cell<bool>,
}

async fn run_shard<S: Service>(
    shard: usize,
    listeners: Vec<TcpListener>,
    service: Rc<S>,
    config: ShardConfig,
    stats: Arc<ShardStats>,
    stop_rx: oneshot::Receiver<Duration>,
) {
    let memory = Rc::new(ShardMemory::new(config.shard_memory_bytes_max));
    stats
        .frame_pools
        .lock()
        .expect("frame pools lock")
        .push(memory.frames.clone());
    let open_here = Arc::new(AtomicUsize::new(0));
    stats
        .shard_connections
        .lock()
        .expect("shard connections lock")
        .push((shard, open_here.clone()));
    let state = Rc::new(ShardState {
        inflight: Cell::new(0),
        connections: Cell::new(0),
        stopping: Cell::new(false),
    });
    // One accept loop per listener, each until the stop signal.
    let stop = stop_rx.shared();
    let shared = Rc::new(AcceptShared {
        service,
        memory,
        config,
        stats,
        state: state.clone(),
        open_here,
    });
    let loops: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            glommio::spawn_local(accept_loop(i, l, shared.clone(), stop.clone())).detach()
        })
        .collect();
    let grace = stop.await.unwrap_or(Duration::ZERO);
    for l in loops {
        let _ = l.await;
    }
    state.stopping.set(true);
    // Let requests already admitted finish: produce waits for durability.
    let deadline = Instant::now() + grace;
    while state.inflight.get() > 0 && Instant::now() < deadline {
        glommio::timer::sleep(Duration::from_millis(5)).await;
    }
}

/// What every accept loop of a shard shares.
struct AcceptShared<S: Service> {
    service: Rc<S>,
    memory: Rc<ShardMemory>,
    config: ShardConfig,
    stats: Arc<ShardStats>,
    state: Rc<ShardState>,
    open_here: Arc<AtomicUsize>,
}

/// Accepts connections on listener `index` until `stop` resolves (the
/// listener closes with the loop), each served by its own task.
async fn accept_loop<S: Service>(
    index: usize,
    listener: TcpListener,
    shared: Rc<AcceptShared<S>>,
    stop: futures::future::Shared<oneshot::Receiver<Duration>>,
) {
    let mut stop = stop.fuse();
    loop {
        let accept = listener.accept().fuse();
        futures::pin_mut!(accept);
        let r = futures::select! {
            _ = stop => return,
            r = accept => r,
        };
        let stream = match r {
            Ok(stream) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                glommio::timer::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let (state, stats) = (&shared.state, &shared.stats);
        stats.connections_accepted.fetch_add(1, Ordering::Relaxed);
        if state.connections.get() >= shared.config.connections_per_shard_max {
            tracing::warn!(
                max = shared.config.connections_per_shard_max,
                "connection limit reached; closing new connection"
            );
            drop(stream);
            continue;
        }
        let _ = stream.set_nodelay(true);
        state.connections.set(state.connections.get() + 1);
        stats.connections_open.fetch_add(1, Ordering::Relaxed);
        shared.open_here.fetch_add(1, Ordering::Relaxed);
        let shared = shared.clone();
        glommio::spawn_local(async move {
            let s = &*shared;
            open_connection(stream, index, s).await;
            s.state.connections.set(s.state.connections.get() - 1);
            s.stats.connections_open.fetch_sub(1, Ordering::Relaxed);
            s.open_here.fetch_sub(1, Ordering::Relaxed);
        })
        .detach();
    }
}

/// A shard's request memory: the admission budget and the frame buffers.
struct ShardMemory {
    budget: Rc<Semaphore>,
    budget_bytes: usize,
    /// Free frame buffers are kept up to the budget: with them, a shard
    /// admitting its whole budget again needs no new memory.
    frames: Arc<pool::FramePool>,
}

impl ShardMemory {
    fn new(budget_bytes: usize) -> ShardMemory {
        ShardMemory {
            budget: Rc::new(Semaphore::new(budget_bytes as u64)),
            budget_bytes,
            frames: pool::FramePool::new(budget_bytes),
        }
    }

    /// Admits a frame of `size` bytes (waiting for the budget; one larger
    /// than the whole budget waits for all of it) and hands out its buffer.
    /// `None`: the budget is closed.
    async fn admit(&self, size: usize) -> Option<(glommio::sync::StaticPermit, pool::Frame)> {
        let charge = size.min(self.budget_bytes) as u64;
        let permit = self
            .budget
            .clone()
            .acquire_static_permit(charge)
            .await
            .ok()?;
        Some((permit, self.frames.frame(size)))
    }
}

/// Runs the TLS handshake when listener `index` has TLS, opens the
/// connection with the service and serves it until it closes.
async fn open_connection<S: Service>(stream: TcpStream, index: usize, s: &AcceptShared<S>) {
    let peer = stream.peer_addr().ok();
    if let Some(wait) = s.service.throttle_accept(peer) {
        s.stats
            .connections_throttled
            .fetch_add(1, Ordering::Relaxed);
        glommio::timer::sleep(wait).await;
        return;
    }
    let Some(server) = &s.config.listeners[index].tls else {
        let Ok(conn) = s.service.open(index, peer, None) else {
            return;
        };
        // Written to directly too (pieces of a response, many per call).
        let sock = stream.as_raw_fd();
        let (reader, writer) = stream.buffered().split();
        serve_connection(reader, writer, Some(sock), conn, s).await;
        return;
    };
    // rustls reads records in small pieces and writes one record per call:
    // buffered below it, each costs a copy instead of a system call.
    let io = futures::io::BufWriter::with_capacity(
        tls::WRITE_BUFFER_BYTES,
        stream.buffered_with(glommio::net::Preallocated::new(tls::READ_BUFFER_BYTES)),
    );
    let acceptor = futures_rustls::TlsAcceptor::from(server.current());
    let handshake = acceptor.accept(io).into_fallible();
    let stream = match within(s.config.tls_handshake_timeout, handshake).await {
        Some(Ok(stream)) => stream,
        failed => {
            s.stats
                .tls_handshake_failures
                .fetch_add(1, Ordering::Relaxed);
            let why = match failed {
                Some(Err((e, mut io))) => {
                    // rustls wrote its alert (certificate_expired,
                    // unknown_ca...) into the buffer: send it, so the client
                    // reports why instead of a bare disconnect.
                    let _ = within(tls::ALERT_FLUSH_TIMEOUT, io.flush()).await;
                    e.to_string()
                }
                _ => format!(
                    "not done within {} ms",
                    s.config.tls_handshake_timeout.as_millis()
                ),
            };
            s.service.tls_refused(peer, &why);
            return;
        }
    };
    s.stats.tls_handshakes.fetch_add(1, Ordering::Relaxed);
    let conn = match s
        .service
        .open(index, peer, Some(&tls::TlsInfo::of(stream.get_ref().1)))
    {
        Ok(conn) => conn,
        Err(Close(why)) => {
            // The service logs why (it knows the certificate).
            tracing::debug!(peer = ?peer, why, "TLS connection refused after the handshake");
            s.stats
                .tls_handshake_failures
                .fetch_add(1, Ordering::Relaxed);
            // Closed with TLS's close_notify, so the client reads an end
            // of stream rather than a reset.
            let mut stream = stream;
            let _ = within(s.config.tls_handshake_timeout, stream.close()).await;
            return;
        }
    };
    let (reader, writer) = stream.split();
    serve_connection(reader, writer, None, conn, s).await;
}

/// A request whose response the writer sends in turn: its memory permit,
/// its response (now or later), its API key and when it was received.
type Pending = (
    glommio::sync::StaticPermit,
    Either<Option<ResponseFrame>, glommio::task::JoinHandle<Option<ResponseFrame>>>,
    i16,
    Instant,
);

/// Serves one connection: `sock` is its socket when `writer` writes to it
/// directly (plain TCP), for responses in pieces.
async fn serve_connection<S, R, W>(
    mut reader: R,
    mut writer: W,
    sock: Option<RawFd>,
    conn: S::Conn,
    s: &AcceptShared<S>,
) where
    S: Service,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + 'static,
{
    let (service, memory, config, stats, state) =
        (&s.service, &s.memory, &s.config, &s.stats, &s.state);
    let (mut tx, mut rx) = mpsc::channel::<Pending>(config.inflight_requests_per_connection_max);
    let writer_state = state.clone();
    let frame_io_timeout = config.frame_io_timeout;
    let queued = Rc::new(Cell::new(0usize));
    let writer_queued = queued.clone();
    let writer_service = service.clone();
    let writer_task = glommio::spawn_local(async move {
        while let Some((permit, reply, api_key, received)) = rx.next().await {
            writer_queued.set(writer_queued.get() - 1);
            let frame = match reply {
                Either::Left(frame) => frame,
                Either::Right(mut handle) => match futures::poll!(&mut handle) {
                    Poll::Ready(frame) => frame.flatten(),
                    Poll::Pending => {
                        // What is written stays in the TLS write buffer
                        // until a flush: never hold it behind a response
                        // still being worked on (a produce waiting for its
                        // window, a long-poll fetch).
                        let _ = writer.flush().await;
                        handle.await.flatten()
                    }
                },
            };
            let ok = match frame {
                // A peer that stops reading is cut off instead of holding
                // its responses' memory forever.
                Some(frame) => {
                    // SAFETY: `sock` is the descriptor of the stream
                    // `writer` is a half of, open while this task holds it.
                    let write = unsafe { response::write_frame(&mut writer, sock, frame) };
                    let ok = matches!(within(frame_io_timeout, write).await, Some(Ok(())));
                    if ok {
                        writer_service.answered(api_key, received.elapsed());
                    }
                    ok
                }
                None => true,
            };
            drop(permit);
            writer_state.inflight.set(writer_state.inflight.get() - 1);
            if !ok {
                // The peer is gone; drain so the in-flight count settles.
                // Requests still running (produce waiting for durability)
                // keep their memory permits until they finish.
                while let Some((permit, reply, _, _)) = rx.next().await {
                    if let Either::Right(handle) = reply {
                        let _ = handle.await;
                    }
                    drop(permit);
                    writer_state.inflight.set(writer_state.inflight.get() - 1);
                }
                return;
            }
            if writer_queued.get() == 0 {
                let _ = writer.flush().await;
            }
        }
        let _ = writer.flush().await;
        let _ = writer.close().await;
    });

    loop {
        // A muted connection (a throttled client) is not read: its next
        // request waits in the socket, holding no memory here. Waked in
        // steps to see a stop.
        while let Some(wait) = service.hold(&conn) {
            if state.stopping.get() {
                break;
            }
            glommio::timer::sleep(wait.min(HOLD_STEP)).await;
        }
        if state.stopping.get() {
            break;
        }
        let mut size_buf = [0u8; 4];
        if reader.read_exact(&mut size_buf).await.is_err() {
            break;
        }
        let size = i32::from_be_bytes(size_buf);
        let size_max = config.frame_bytes_max.min(service.frame_bytes_max(&conn));
        if size <= 0 || size as usize > size_max {
            stats
                .connections_closed_bad_frame
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!(size, "closing connection: frame size out of range");
            break;
        }
        let size = size as usize;
        let Some((permit, mut buf)) = memory.admit(size).await else {
            break;
        };
        // A started frame must arrive within the timeout: a client that
        // stalls mid-frame would otherwise hold its memory permit forever.
        // (A frame is seen only once this filled all of it: a reused
        // buffer's old bytes never are.)
        match within(config.frame_io_timeout, reader.read_exact(buf.as_mut())).await {
            Some(Ok(())) => {}
            Some(Err(_)) => break,
            None => {
                tracing::debug!(size, "closing connection: frame body not received in time");
                break;
            }
        }
        let received = Instant::now();
        // (-1 for a frame too short to name one: the service closes it.)
        let api_key = match buf.as_ref() {
            [a, b, ..] => i16::from_be_bytes([*a, *b]),
            _ => -1,
        };
        stats.requests.fetch_add(1, Ordering::Relaxed);
        state.inflight.set(state.inflight.get() + 1);
        let mut last = false;
        let reply = match service
            .clone()
            .call(conn.clone(), Bytes::from_owner(buf))
            .await
        {
            Ok(Reply::Now(frame)) => Either::Left(frame),
            Ok(Reply::Later(fut)) => Either::Right(glommio::spawn_local(fut).detach()),
            Ok(Reply::Last(fut)) => {
                last = true;
                Either::Right(glommio::spawn_local(fut).detach())
            }
            Err(Close(why)) => {
                state.inflight.set(state.inflight.get() - 1);
                stats
                    .connections_closed_bad_frame
                    .fetch_add(1, Ordering::Relaxed);
                tracing::debug!(why, "closing connection");
                break;
            }
        };
        queued.set(queued.get() + 1);
        if tx.send((permit, reply, api_key, received)).await.is_err() || last {
            break;
        }
    }
    drop(tx);
    let _ = writer_task.await;
}

/// `fut`'s output, or `None` if `limit` passes first.
async fn within<F: Future>(limit: Duration, fut: F) -> Option<F::Output> {
    let timer = glommio::timer::sleep(limit);
    futures::pin_mut!(fut);
    futures::pin_mut!(timer);
    match futures::future::select(fut, timer).await {
        Either::Left((out, _)) => Some(out),
        Either::Right(_) => None,
    }
}

/// Boxes a future for [`Reply::Later`].
pub fn later<F: Future<Output = Option<ResponseFrame>> + 'static>(fut: F) -> Reply {
    Reply::Later(fut.boxed_local())
}

/// The CPUs this process may run on, in order: its affinity mask as the
/// kernel reports it (`Cpus_allowed_list` in /proc/self/status), or the
/// first `available_parallelism` CPUs when that cannot be read.
pub fn allowed_cpus() -> Vec<usize> {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .and_then(|list| parse_cpu_list(list.trim()))
        })
        .filter(|cpus| !cpus.is_empty())
        .unwrap_or_else(|| {
            (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
        })
}

/// The largest CPU number taken from a CPU list: bounds the list a
/// malformed range could make.
const CPU_NUMBER_MAX: usize = 1 << 16;

/// "0-3,8,10-11" as [0, 1, 2, 3, 8, 10, 11]; None when malformed.
fn parse_cpu_list(list: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo.parse::<usize>().ok()?, hi.parse::<usize>().ok()?),
            None => {
                let one = part.parse::<usize>().ok()?;
                (one, one)
            }
        };
        if lo > hi || hi > CPU_NUMBER_MAX {
            return None;
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

#[cfg(test)]
mod cpu_tests {
    #[test]
    fn cpu_lists_parse_like_the_kernel_prints_them() {
        assert_eq!(
            super::parse_cpu_list("0-3,8,10-11"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(super::parse_cpu_list("1"), Some(vec![1]));
        assert_eq!(super::parse_cpu_list(""), Some(vec![]));
        assert_eq!(super::parse_cpu_list("3-1"), None);
        assert_eq!(super::parse_cpu_list("0-99999999"), None);
        assert_eq!(super::parse_cpu_list("x"), None);
        assert!(!super::allowed_cpus().is_empty());
    }
}
