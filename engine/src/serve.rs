//! Process wiring: starts the metadata thread, the storage thread, the
//! flush pipeline, the coordinators, the collector, the shards and the HTTP
//! endpoint of one agent, heartbeats its lease, and stops them in order.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use anyhow::{Context, Result};
use rutomq_meta::{Meta, Notice};
use rutomq_storage::{S3Options, Storage, StorageThread};

use crate::agent::{Agent, AgentConfig};
use crate::config::ServeArgs;
use crate::embedded_pg::EmbeddedPg;
use crate::flush::{Flush, Pipeline};
use crate::hub::Hub;
use crate::limits::{
    AGENT_LEASE, CONNECTIONS_PER_SHARD_MAX, INFLIGHT_REQUESTS_PER_CONNECTION_MAX,
    LOG_START_CACHE_TTL, SHARD_IO_MEMORY_BYTES, SHARD_MEMORY_BYTES_MIN,
};
use crate::shard::Shard;

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
    let security = args.security_config()?;
    let credentials = Arc::new(crate::security::Credentials::default());
    let tls = security
        .tls
        .clone()
        .map(|t| crate::security::tls::Tls::start(t, &security.principal_mapping_rules))
        .transpose()
        .map_err(|e| anyhow::anyhow!("TLS: {e}"))?;

    // Watermark hub: created first, because the metadata thread's LISTEN
    // feeds it.
    let (hub, hub_rxs) = Hub::new(shards_n);
    let hub = Arc::new(hub);
    let listen_hub = hub.clone();
    let credentials_changed = Arc::new(tokio::sync::Notify::new());
    let on_credentials = credentials_changed.clone();
    let acls_changed = Arc::new(tokio::sync::Notify::new());
    let on_acls = acls_changed.clone();
    let quotas_changed = Arc::new(tokio::sync::Notify::new());
    let on_quotas = quotas_changed.clone();
    let configs_changed = Arc::new(tokio::sync::Notify::new());
    let on_configs = configs_changed.clone();
    let tokens_changed = Arc::new(tokio::sync::Notify::new());
    let on_tokens = tokens_changed.clone();
    let (meta, meta_join) = Meta::start(
        url,
        Box::new(move |notice| match notice {
            Notice::Watermarks(marks) => listen_hub.notify(marks, Vec::new()),
            Notice::LogStarts(offsets) => listen_hub.notify_log_starts(offsets),
            Notice::Compacted(parts) => listen_hub.notify_compacted(parts),
            Notice::TopicChanged(name) => listen_hub.notify_topic_changed(name),
            Notice::CredentialsChanged(_) => on_credentials.notify_one(),
            Notice::AclsChanged => on_acls.notify_one(),
            Notice::QuotasChanged => on_quotas.notify_one(),
            Notice::ConfigsChanged => on_configs.notify_one(),
            Notice::TokensChanged => on_tokens.notify_one(),
        }),
    )
    .context("cannot reach PostgreSQL")?;

    let (storage, storage_thread) = start_storage(&args, &object_store_url)?;

    // The memory trade measured in benches/results/2026-12-06-ack-tail.md:
    // huge pages (unless MIMALLOC_ALLOW_THP=0) for the max rate, faulted in
    // now rather than while serving. After the object store has made its
    // read blocks: made after it, they took the memory faulted in here
    // (freed for reuse) and left the shards to fault theirs in while
    // serving.
    let prefault = args.prefault_bytes(shards_n, object_store_url.starts_with("file://"));
    let started = std::time::Instant::now();
    rutomq_shards::alloc::prefault(prefault);
    tracing::info!(
        prefault_bytes = prefault,
        prefault_ms = started.elapsed().as_millis() as u64,
        transparent_huge_pages = !rutomq_shards::alloc::transparent_huge_pages_disabled(),
        "memory faulted in ahead for buffers and caches (--prefault-bytes)"
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let endpoints = security
        .listeners
        .iter()
        .map(|l| rutomq_meta::Endpoint {
            name: l.name.clone(),
            host: l.advertised_host.clone(),
            port: l.advertised_port,
        })
        .collect();
    let agent_id = rt
        .block_on(meta.register_agent(endpoints, args.rack.clone(), AGENT_LEASE))
        .context("cannot register the agent")?;
    // Logins need the credentials: loaded before the listeners open.
    if security.listeners.iter().any(|l| l.protocol.sasl()) {
        crate::security::reload_credentials(&rt, &meta, &credentials)
            .context("cannot load the SCRAM credentials")?;
    }
    // Requests are authorized from the first one: loaded before the
    // listeners open.
    let authorizer = match &security.authorizer {
        Some(cfg) => {
            let a = Arc::new(crate::security::authorizer::Authorizer::new(cfg.clone()));
            rt.block_on(a.reload(&meta))
                .context("cannot load the ACLs")?;
            tracing::info!(acls = a.acls().len(), super_users = ?cfg.super_users,
                allow_everyone_if_no_acl_found = cfg.allow_if_no_acl, "authorizer on");
            Some(a)
        }
        None => None,
    };
    // Quotas apply from the first request too.
    let quotas = Arc::new(crate::quota::Quotas::default());
    rt.block_on(quotas.reload(&meta))
        .context("cannot load the client quotas")?;
    // Topic defaults and group configs apply from the first request too.
    let dynamic = Arc::new(crate::dynamic::Dynamic::default());
    rt.block_on(dynamic.reload(&meta))
        .context("cannot load the dynamic configs")?;
    let tokens = Arc::new(crate::security::tokens::Tokens::default());
    rt.block_on(tokens.reload(&meta))
        .context("cannot load the delegation tokens")?;
    tracing::info!(agent_id, %object_store_url, shards = shards_n, flush_interval_ms = flush_interval.as_millis() as u64, flush_interval_max_ms = args.flush_interval_max_ms(&object_store_url), "agent registered");

    let flush_interval_max =
        Duration::from_millis(args.flush_interval_max_ms(&object_store_url)).max(flush_interval);
    let flush = Flush::new(
        flush_interval,
        flush_interval_max,
        args.flush_bytes,
        args.flush_when_idle(&object_store_url),
    );
    let (sealed_tx, sealed_rx) = crate::flush::sealed_queue();
    let gc_grace = Duration::from_millis(args.gc_grace_ms.max(1000));
    let commit_hub = hub.clone();
    let pipeline = Pipeline {
        storage: storage.clone(),
        meta: meta.clone(),
        agent_id,
        gather: (flush_interval / 2).clamp(Duration::from_micros(200), Duration::from_millis(5)),
        on_commit: Arc::new(move |w, spans| {
            commit_hub.notify(
                w.iter()
                    .map(|(&(topic_id, partition), &marks)| rutomq_meta::MarksNews {
                        topic_id,
                        partition,
                        marks,
                        aborted: None,
                    })
                    .collect(),
                spans,
            )
        }),
        commit_age_max: gc_grace / 2,
        flush: flush.clone(),
    };
    storage.spawn(pipeline.run(sealed_rx));

    // Kafka: the broker's lock duration lies within its bounds.
    anyhow::ensure!(
        (args.group_share_min_record_lock_duration_ms..=args.group_share_max_record_lock_duration_ms)
            .contains(&args.group_share_record_lock_duration_ms),
        "--group-share-record-lock-duration-ms {} must lie within --group-share-min-record-lock-duration-ms {} and --group-share-max-record-lock-duration-ms {}",
        args.group_share_record_lock_duration_ms,
        args.group_share_min_record_lock_duration_ms,
        args.group_share_max_record_lock_duration_ms
    );
    let agent = Arc::new(Agent {
        cfg: AgentConfig {
            auto_create_topics: args.auto_create_topics,
            default_partitions: args.default_partitions.max(1),
            rack: args.rack.clone(),
            transaction_max_timeout_ms: args.transaction_max_timeout_ms.max(1),
            transactional_id_expiration_ms: args.transactional_id_expiration_ms.max(1),
            log_dir: crate::agent::log_dir_of(&object_store_url),
            client_telemetry_topic: args
                .client_telemetry_topic
                .clone()
                .filter(|t| !t.is_empty()),
            read_only: vec![
                (
                    "group.share.min.record.lock.duration.ms",
                    args.group_share_min_record_lock_duration_ms as i64,
                ),
                (
                    "group.share.max.record.lock.duration.ms",
                    args.group_share_max_record_lock_duration_ms as i64,
                ),
            ],
            read_verify_crc: args.read_verify_crc,
            read_ahead_fetches: args.read_ahead_fetches(),
        },
        meta: meta.clone(),
        storage: storage.clone(),
        agent_id,
        cluster_id: "rutomq".into(),
        cluster: RwLock::new(Vec::new()),
        flush,
        sealed_tx,
        stopping: Default::default(),
        shard_metrics: Mutex::new(Vec::new()),
        groups: std::sync::OnceLock::new(),
        txn_stats: Default::default(),
        compaction_stats: Default::default(),
        security: security.clone(),
        credentials: credentials.clone(),
        tls: tls.clone(),
        authorizer: authorizer.clone(),
        quotas: quotas.clone(),
        dynamic: dynamic.clone(),
        tokens: tokens.clone(),
        telemetry: Default::default(),
        share_sessions: Default::default(),
    });
    refresh_cluster(&rt, &agent);
    let weak = Arc::downgrade(&agent);
    let (groups, groups_thread) = crate::groups::Groups::start(
        meta.clone(),
        agent_id,
        Arc::new(move |group_id: &str| weak.upgrade().is_some_and(|a| a.owns_group(group_id))),
        crate::groups::GroupsConfig {
            topic_access: crate::groups::TopicAccess(authorizer.clone()),
            ..args.groups_config()
        },
    )?;
    let _ = agent.groups.set(groups.clone());

    if Duration::from_millis(args.file_delete_delay_ms) < LOG_START_CACHE_TTL {
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
        dynamic.clone(),
    ));
    // Compacted topics, by the agents leading their partitions.
    let owner = agent.clone();
    let _compactor = crate::compact::start(
        meta.clone(),
        storage.clone(),
        agent_id,
        crate::compact::CompactConfig {
            interval: Duration::from_millis(args.compaction_interval_ms.max(100)),
            key_map_bytes: args.compaction_key_map_bytes,
            delete_delay: Duration::from_millis(args.file_delete_delay_ms),
            commit_age_max: gc_grace / 2,
            swap_delay: Duration::from_millis(args.inject_compaction_swap_delay_ms),
        },
        Box::new(move |topic_id, partition| owner.compacts(topic_id, partition)),
        agent.compaction_stats.clone(),
        dynamic.clone(),
    )
    .context("cannot start the compactor thread")?;
    // Open transactions past their timeout are aborted by their coordinator.
    storage.spawn(crate::txns::run_timeouts(agent.clone()));
    if security.listeners.iter().any(|l| l.protocol.sasl()) {
        storage.spawn(crate::security::keep_credentials(
            meta.clone(),
            credentials.clone(),
            credentials_changed,
        ));
    }
    if let Some(a) = authorizer.clone() {
        let meta = meta.clone();
        storage.spawn(async move {
            let every = crate::limits::ACLS_REFRESH;
            crate::control::keep("ACLs", every, acls_changed, || a.reload(&meta)).await
        });
    }
    {
        let (meta, quotas) = (meta.clone(), quotas.clone());
        storage.spawn(async move {
            let every = crate::limits::QUOTAS_REFRESH;
            crate::control::keep("client quotas", every, quotas_changed, || {
                quotas.reload(&meta)
            })
            .await
        });
    }
    {
        let (meta, tokens) = (meta.clone(), tokens.clone());
        storage.spawn(async move {
            let every = crate::limits::TOKENS_REFRESH;
            crate::control::keep("delegation tokens", every, tokens_changed, || {
                tokens.reload(&meta)
            })
            .await
        });
    }
    {
        let (meta, dynamic) = (meta.clone(), dynamic.clone());
        storage.spawn(async move {
            let every = crate::limits::CONFIGS_REFRESH;
            crate::control::keep("dynamic configs", every, configs_changed, || {
                dynamic.reload(&meta)
            })
            .await
        });
    }
    if let Some(tls) = &tls {
        storage.spawn(crate::security::tls::keep_certificates(tls.clone()));
    }

    let hub_rxs = Mutex::new(hub_rxs.into_iter().map(Some).collect::<Vec<_>>());
    let shard_agent = agent.clone();
    let shards = rutomq_shards::Shards::start(
        rutomq_shards::ShardConfig {
            shards: shards_n,
            listeners: security
                .listeners
                .iter()
                .map(|l| rutomq_shards::ListenerConfig {
                    addr: l.bind,
                    tls: tls.as_ref().and_then(|t| t.server_for(l.protocol)),
                })
                .collect(),
            pin: shards_n <= std::thread::available_parallelism().map_or(1, |n| n.get()),
            frame_bytes_max: args.max_request_bytes,
            inflight_requests_per_connection_max: INFLIGHT_REQUESTS_PER_CONNECTION_MAX,
            shard_memory_bytes_max: args.shard_memory_bytes,
            connections_per_shard_max: CONNECTIONS_PER_SHARD_MAX,
            io_memory_bytes: SHARD_IO_MEMORY_BYTES,
            frame_io_timeout: Duration::from_millis(args.frame_io_timeout_ms.max(100)),
            tls_handshake_timeout: crate::limits::TLS_HANDSHAKE_TIMEOUT,
        },
        move |i| {
            let rx = hub_rxs.lock().expect("hub lock")[i]
                .take()
                .expect("one shard per index");
            crate::api::Service::new(Shard::new(i, shard_agent.clone(), rx))
        },
    )
    .with_context(|| {
        let binds: Vec<String> = security
            .listeners
            .iter()
            .map(|l| l.bind.to_string())
            .collect();
        format!("cannot listen on {}", binds.join(", "))
    })?;
    for (l, bound) in security.listeners.iter().zip(&shards.listeners) {
        tracing::info!(listener = %l.name, protocol = l.protocol.name(), listen = %bound,
            advertised = %format!("{}:{}", l.advertised_host, l.advertised_port), "serving Kafka");
    }

    let http = crate::http::start(&rt, args.http, agent.clone(), shards.stats.clone())
        .with_context(|| format!("cannot listen on {} (http)", args.http))?;
    tracing::info!(http = %http, "serving health and metrics");

    heartbeat_until_signal(&rt, &agent)?;

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

/// The storage thread over the object store the URL names, with injected
/// latency when asked for (benchmarks).
fn start_storage(args: &ServeArgs, url: &str) -> Result<(Storage, StorageThread)> {
    let (store, prefix) = rutomq_storage::open_store(
        url,
        &S3Options {
            endpoint: args.s3_endpoint.clone(),
            region: args.s3_region.clone(),
            access_key_id: args.s3_access_key_id.clone(),
            secret_access_key: args.s3_secret_access_key.clone(),
            allow_http: args.s3_allow_http,
        },
        rutomq_storage::ReadBlocksOptions {
            bytes: args.read_blocks_bytes(),
            fault_in: args.prefault_bytes != Some(0),
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
    let (storage, thread) =
        Storage::start(store, prefix, args.tail_cache_bytes, args.read_cache_bytes)?;
    let storage = if args.distant_store(url) {
        storage.distant()
    } else {
        storage
    };
    Ok((storage, thread))
}

/// Renews the agent's lease and refreshes its view of the live agents
/// until SIGTERM or SIGINT.
fn heartbeat_until_signal(rt: &tokio::runtime::Runtime, agent: &Agent) -> std::io::Result<()> {
    rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut tick = tokio::time::interval(AGENT_LEASE / 3);
        loop {
            tokio::select! {
                _ = term.recv() => return Ok(()),
                _ = tokio::signal::ctrl_c() => return Ok(()),
                _ = tick.tick() => {
                    match agent.meta.renew_agent(agent.agent_id, AGENT_LEASE).await {
                        Ok(true) => {}
                        Ok(false) => tracing::warn!("agent lease row is gone; clients may not see this agent"),
                        Err(e) => tracing::warn!(error = %e, "lease renewal failed"),
                    }
                    if let Ok(list) = agent.meta.live_agents().await {
                        *agent.cluster.write().expect("cluster lock") = list;
                    }
                }
            }
        }
    })
}

fn refresh_cluster(rt: &tokio::runtime::Runtime, agent: &Agent) {
    if let Ok(list) = rt.block_on(agent.meta.live_agents()) {
        *agent.cluster.write().expect("cluster lock") = list;
    }
}
