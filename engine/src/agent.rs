//! One agent: wires the metadata thread, the storage thread, the flush
//! pipeline, the shards and the HTTP endpoint, and stops them in order.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rutomq_meta::{AgentRecord, Meta, Notice};
use rutomq_storage::{S3Options, Storage};
use uuid::Uuid;

use crate::config::ServeArgs;
use crate::embedded_pg::EmbeddedPg;
use crate::pipeline::{Pipeline, Sealed, WindowMembers, WindowStages, SEALED_QUEUE_MAX};
use crate::shard::Shard;

/// Watermark changes sent to each shard, with the spans behind them when
/// this agent committed them.
pub type HubMessage = Arc<HubNews>;

pub struct HubNews {
    pub marks: Vec<(Uuid, i32, i64)>,
    pub spans: Vec<crate::pipeline::NewSpan>,
    /// Log start offsets moved (retention, DeleteRecords).
    pub log_starts: Vec<(Uuid, i32, i64)>,
}
/// Watermark messages queued per shard; past it a change is dropped and the
/// affected long polls end at their `max_wait_ms` instead.
pub const HUB_QUEUE_MAX: usize = 4096;
/// Agent lease in PostgreSQL, renewed every third of it.
pub const AGENT_LEASE: Duration = Duration::from_secs(10);
/// The smallest admission budget per shard (`--shard-memory-bytes`).
pub const SHARD_MEMORY_BYTES_MIN: usize = 1 << 20;
/// Kafka's default `max.message.bytes`.
pub const MAX_MESSAGE_BYTES_DEFAULT: usize = 1_048_588;

#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub flush_interval: Duration,
    pub flush_bytes: usize,
    pub auto_create_topics: bool,
    pub default_partitions: i32,
    pub advertised_host: String,
    pub advertised_port: i32,
    pub rack: Option<String>,
}

/// Sends watermark changes to every shard.
pub struct Hub {
    senders: Vec<async_channel::Sender<HubMessage>>,
}

impl Hub {
    pub fn notify(&self, marks: Vec<(Uuid, i32, i64)>, spans: Vec<crate::pipeline::NewSpan>) {
        if !marks.is_empty() {
            self.send(HubNews {
                marks,
                spans,
                log_starts: Vec::new(),
            });
        }
    }

    pub fn notify_log_starts(&self, log_starts: Vec<(Uuid, i32, i64)>) {
        if !log_starts.is_empty() {
            self.send(HubNews {
                marks: Vec::new(),
                spans: Vec::new(),
                log_starts,
            });
        }
    }

    fn send(&self, news: HubNews) {
        let msg = Arc::new(news);
        for s in &self.senders {
            if s.try_send(msg.clone()).is_err() {
                tracing::debug!("watermark queue full; long polls fall back to max_wait_ms");
            }
        }
    }
}

pub struct Agent {
    pub cfg: AgentConfig,
    pub meta: Meta,
    pub storage: Storage,
    pub agent_id: i32,
    pub cluster_id: String,
    pub cluster: RwLock<Vec<AgentRecord>>,
    pub sealed_tx: tokio::sync::mpsc::Sender<Sealed>,
    epoch: Instant,
    pub stopping: AtomicBool,
    /// Each shard's metrics, registered when the shard starts.
    pub shard_metrics: Mutex<Vec<Arc<crate::metrics::ShardMetrics>>>,
    /// Time spent per flush-window stage.
    pub stages: Arc<WindowStages>,
    /// Which shards will seal a buffer in each window.
    pub windows: Arc<WindowMembers>,
    /// The group coordinator (set once, right after the agent is built:
    /// it asks the agent which groups it coordinates).
    pub groups: std::sync::OnceLock<crate::groups::Groups>,
}

impl Agent {
    /// When grid window `window` ends (window `i` spans the `i`th flush
    /// interval after the agent's epoch, counting from 1).
    pub fn window_end(&self, window: u64) -> Instant {
        let nanos = self.cfg.flush_interval.as_nanos().max(1) as u64;
        self.epoch + Duration::from_nanos(window.saturating_mul(nanos))
    }

    /// Time until the next flush window boundary. All shards use the same
    /// grid so that their buffers of one window reach the pipeline together.
    /// Also returns the index of that window.
    pub fn until_next_window(&self) -> (Duration, u64) {
        let now = Instant::now();
        let interval = self.cfg.flush_interval.as_nanos().max(1);
        let index = (now.duration_since(self.epoch).as_nanos() / interval + 1) as u64;
        (self.window_end(index).saturating_duration_since(now), index)
    }

    /// The live agents, this one first if the list is still empty.
    pub fn live_agents(&self) -> Vec<AgentRecord> {
        let list = self.cluster.read().expect("cluster lock").clone();
        if list.is_empty() {
            vec![self.me()]
        } else {
            list
        }
    }

    pub fn me(&self) -> AgentRecord {
        AgentRecord {
            agent_id: self.agent_id,
            host: self.cfg.advertised_host.clone(),
            port: self.cfg.advertised_port,
            rack: self.cfg.rack.clone(),
        }
    }

    /// The group coordinator.
    pub fn groups(&self) -> &crate::groups::Groups {
        self.groups
            .get()
            .expect("group coordinator started with the agent")
    }

    /// The live agent that coordinates the group (or other coordinator key)
    /// `key`: rendezvous hashing, so only the keys of an agent that comes
    /// or goes move.
    pub fn coordinator_for(&self, key: &str) -> AgentRecord {
        let agents = self.live_agents();
        agents
            .iter()
            .max_by_key(|a| (crate::groups::rendezvous_score(key, a.agent_id), a.agent_id))
            .cloned()
            .unwrap_or_else(|| self.me())
    }

    /// Whether this agent coordinates `group_id`.
    pub fn owns_group(&self, group_id: &str) -> bool {
        self.coordinator_for(group_id).agent_id == self.agent_id
    }

    /// Whether this agent applies retention to `topic_id`: the live agent
    /// that leads its partition 0 does (all of them while the list is
    /// unknown; a round missed or doubled during a membership change is
    /// harmless, every step being idempotent).
    pub fn retains(&self, topic_id: Uuid) -> bool {
        let agents = self.cluster.read().expect("cluster lock");
        agents.is_empty() || Self::leader_for(&agents, topic_id, 0) == self.agent_id
    }

    /// The agent that leads `partition` of `topic_id` in Metadata responses:
    /// stable hashing over the live agents, so clients spread their load.
    pub fn leader_for(agents: &[AgentRecord], topic_id: Uuid, partition: i32) -> i32 {
        let h = topic_id.as_u128() as u64 ^ (topic_id.as_u128() >> 64) as u64;
        let h = h
            .wrapping_add(partition as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        agents[(h >> 32) as usize % agents.len()].agent_id
    }
}

pub fn serve(args: ServeArgs) -> Result<()> {
    let embedded = match &args.postgres_url {
        Some(_) => None,
        None => Some(EmbeddedPg::start(&args.data_dir)?),
    };
    let url = args
        .postgres_url
        .clone()
        .or_else(|| embedded.as_ref().map(|e| e.url.clone()))
        .expect("one of them is set");
    let result = serve_with(args, url);
    if let Some(pg) = embedded {
        pg.stop();
    }
    result
}

fn serve_with(args: ServeArgs, url: String) -> Result<()> {
    let object_store_url = match &args.object_store {
        Some(u) => u.clone(),
        None => {
            let dir = args.data_dir.join("objects");
            std::fs::create_dir_all(&dir)?;
            format!("file://{}", std::fs::canonicalize(&dir)?.display())
        }
    };
    let shards_n = args
        .shards
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let flush_interval = Duration::from_millis(args.flush_interval_ms(&object_store_url).max(1));
    anyhow::ensure!(
        args.shard_memory_bytes >= SHARD_MEMORY_BYTES_MIN,
        "--shard-memory-bytes must be at least {SHARD_MEMORY_BYTES_MIN}, got {}",
        args.shard_memory_bytes
    );
    let advertise = args
        .advertise
        .clone()
        .unwrap_or_else(|| args.listen.to_string());
    let (adv_host, adv_port) = advertise
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h.to_owned(), p.parse::<i32>().ok()?)))
        .with_context(|| format!("--advertise must be HOST:PORT, got {advertise:?}"))?;

    // Watermark hub: created first, because the metadata thread's LISTEN
    // feeds it.
    let mut hub_rxs = Vec::new();
    let mut senders = Vec::new();
    for _ in 0..shards_n {
        let (tx, rx) = async_channel::bounded(HUB_QUEUE_MAX);
        senders.push(tx);
        hub_rxs.push(Some(rx));
    }
    let hub = Arc::new(Hub { senders });
    let listen_hub = hub.clone();
    let (meta, meta_join) = Meta::start(
        url,
        Box::new(move |kind, offsets| match kind {
            Notice::Watermarks => listen_hub.notify(offsets.to_vec(), Vec::new()),
            Notice::LogStarts => listen_hub.notify_log_starts(offsets.to_vec()),
        }),
    )
    .context("cannot reach PostgreSQL")?;

    let (store, prefix) = rutomq_storage::open_store(
        &object_store_url,
        &S3Options {
            endpoint: args.s3_endpoint.clone(),
            region: args.s3_region.clone(),
            access_key_id: args.s3_access_key_id.clone(),
            secret_access_key: args.s3_secret_access_key.clone(),
            allow_http: args.s3_allow_http,
        },
    )?;
    let store = if args.inject_object_latency_ms > 0 || args.inject_object_jitter_ms > 0 {
        let latency = rutomq_storage::InjectedLatency {
            base: Duration::from_millis(args.inject_object_latency_ms),
            jitter: Duration::from_millis(args.inject_object_jitter_ms),
        };
        tracing::warn!(?latency, "injecting object-store latency (benchmarking)");
        rutomq_storage::with_injected_latency(store, latency)
    } else {
        store
    };
    let (storage, storage_thread) =
        Storage::start(store, prefix, args.tail_cache_bytes, args.read_cache_bytes)?;

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let agent_id = rt
        .block_on(meta.register_agent(adv_host.clone(), adv_port, args.rack.clone(), AGENT_LEASE))
        .context("cannot register the agent")?;
    tracing::info!(agent_id, %object_store_url, shards = shards_n, flush_interval_ms = flush_interval.as_millis() as u64, "agent registered");

    let (sealed_tx, sealed_rx) = tokio::sync::mpsc::channel(SEALED_QUEUE_MAX);
    let gc_grace = Duration::from_millis(args.gc_grace_ms.max(1000));
    let commit_hub = hub.clone();
    let stages = Arc::new(WindowStages::default());
    let windows = Arc::new(WindowMembers::default());
    let pipeline = Pipeline {
        storage: storage.clone(),
        meta: meta.clone(),
        agent_id,
        gather: (flush_interval / 2).clamp(Duration::from_micros(200), Duration::from_millis(5)),
        flush_bytes: args.flush_bytes,
        on_commit: Arc::new(move |w, spans| {
            commit_hub.notify(
                w.iter().map(|(&(t, p), &(hw, _))| (t, p, hw)).collect(),
                spans,
            )
        }),
        commit_age_max: gc_grace / 2,
        stages: stages.clone(),
        windows: windows.clone(),
    };
    storage.spawn(pipeline.run(sealed_rx));

    let agent = Arc::new(Agent {
        cfg: AgentConfig {
            flush_interval,
            flush_bytes: args.flush_bytes,
            auto_create_topics: args.auto_create_topics,
            default_partitions: args.default_partitions.max(1),
            advertised_host: adv_host,
            advertised_port: adv_port,
            rack: args.rack.clone(),
        },
        meta: meta.clone(),
        storage: storage.clone(),
        agent_id,
        cluster_id: "rutomq".into(),
        cluster: RwLock::new(Vec::new()),
        sealed_tx,
        epoch: Instant::now(),
        stopping: AtomicBool::new(false),
        shard_metrics: Mutex::new(Vec::new()),
        stages,
        windows,
        groups: std::sync::OnceLock::new(),
    });
    refresh_cluster(&rt, &agent);
    let weak = Arc::downgrade(&agent);
    let (groups, groups_thread) = crate::groups::Groups::start(
        meta.clone(),
        agent_id,
        Arc::new(move |group_id: &str| weak.upgrade().is_some_and(|a| a.owns_group(group_id))),
        args.groups_config(),
    )?;
    let _ = agent.groups.set(groups.clone());

    if Duration::from_millis(args.file_delete_delay_ms) < crate::shard::LOG_START_CACHE_TTL {
        tracing::warn!(
            file_delete_delay_ms = args.file_delete_delay_ms,
            "objects are deleted sooner than shards refresh cached log starts: a fetch below a \
             fresh log start may fail with KAFKA_STORAGE_ERROR (retriable) instead of \
             OFFSET_OUT_OF_RANGE for a few seconds"
        );
    }
    // Retention of a topic is worked out by one live agent (hashed, like
    // partition leadership); the rest of the collector is shared safely.
    let owner = agent.clone();
    storage.spawn(crate::gc::run(
        meta.clone(),
        storage.clone(),
        crate::gc::GcConfig::new(
            Duration::from_millis(args.retention_check_interval_ms.max(100)),
            Duration::from_millis(args.gc_interval_ms.max(100)),
            gc_grace,
            Duration::from_millis(args.file_delete_delay_ms),
        ),
        Box::new(move |topic_id| owner.retains(topic_id)),
    ));

    let hub_rxs = Mutex::new(hub_rxs);
    let shard_agent = agent.clone();
    let shards = rutomq_shards::Shards::start(
        rutomq_shards::ShardConfig {
            shards: shards_n,
            listen: args.listen,
            pin: shards_n <= std::thread::available_parallelism().map_or(1, |n| n.get()),
            frame_bytes_max: args.max_request_bytes,
            inflight_requests_per_connection_max: 32,
            shard_memory_bytes_max: args.shard_memory_bytes,
            connections_per_shard_max: 10_000,
            io_memory_bytes: 1 << 20,
            frame_io_timeout: Duration::from_millis(args.frame_io_timeout_ms.max(100)),
        },
        move |i| {
            let rx = hub_rxs.lock().expect("hub lock")[i]
                .take()
                .expect("one shard per index");
            crate::api::Service::new(Shard::new(i, shard_agent.clone(), rx))
        },
    )
    .with_context(|| format!("cannot listen on {}", args.listen))?;
    tracing::info!(listen = %shards.listen, "serving Kafka");

    let http = crate::http::start(&rt, args.http, agent.clone(), shards.stats.clone())
        .with_context(|| format!("cannot listen on {} (http)", args.http))?;
    tracing::info!(http = %http, "serving health and metrics");

    // Heartbeat until SIGTERM/SIGINT.
    rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut tick = tokio::time::interval(AGENT_LEASE / 3);
        loop {
            tokio::select! {
                _ = term.recv() => break,
                _ = tokio::signal::ctrl_c() => break,
                _ = tick.tick() => {
                    match meta.renew_agent(agent_id, AGENT_LEASE).await {
                        Ok(true) => {}
                        Ok(false) => tracing::warn!("agent lease row is gone; clients may not see this agent"),
                        Err(e) => tracing::warn!(error = %e, "lease renewal failed"),
                    }
                    if let Ok(list) = meta.live_agents().await {
                        *agent.cluster.write().expect("cluster lock") = list;
                    }
                }
            }
        }
        Ok::<_, std::io::Error>(())
    })?;

    tracing::info!("stopping: no new connections; finishing in-flight produce");
    agent.stopping.store(true, Ordering::Relaxed);
    // Leave the live list first, so the other agents route groups (and
    // clients) elsewhere.
    let _ = rt.block_on(meta.deregister_agent(agent_id));
    // Members waiting in JoinGroup/SyncGroup are answered NOT_COORDINATOR
    // now (they move to the group's next coordinator) instead of holding
    // the shards' drain.
    groups.shutdown();
    let _ = groups_thread.join();
    shards.stop(Duration::from_secs(30));
    // Every admitted produce request has been answered by now: its window
    // was committed (or failed) before the shards let go.
    drop(agent);
    let _ = rt.block_on(meta.deregister_agent(agent_id));
    // The HTTP tasks hold the last agent handles; end them with their runtime.
    rt.shutdown_timeout(Duration::from_secs(1));
    drop(storage_thread);
    // The metadata thread ends when its last handle is gone; nothing is left
    // for it to commit, so it is not waited for.
    drop(meta);
    drop(meta_join);
    tracing::info!("stopped");
    Ok(())
}

fn refresh_cluster(rt: &tokio::runtime::Runtime, agent: &Agent) {
    if let Ok(list) = rt.block_on(agent.meta.live_agents()) {
        *agent.cluster.write().expect("cluster lock") = list;
    }
}
