//! `/health/live`, `/health/ready`, `/metrics` and `/status` over a minimal HTTP/1.1
//! server (one request per connection, bounded request size).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::agent::Agent;
use crate::limits::HTTP_REQUEST_BYTES_MAX;
use crate::quota::Kind;

pub fn start(
    rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    agent: Arc<Agent>,
    shard_stats: Arc<rutomq_shards::ShardStats>,
) -> std::io::Result<SocketAddr> {
    let listener = rt.block_on(tokio::net::TcpListener::bind(addr))?;
    let local = listener.local_addr()?;
    rt.spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else { continue };
            let agent = agent.clone();
            let shard_stats = shard_stats.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; HTTP_REQUEST_BYTES_MAX];
                let mut n = 0;
                let head_read = tokio::time::timeout(Duration::from_secs(5), async {
                    while n < buf.len() {
                        let r = sock.read(&mut buf[n..]).await?;
                        if r == 0 {
                            break;
                        }
                        n += r;
                        if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                            break;
                        }
                    }
                    Ok::<_, std::io::Error>(())
                })
                .await;
                if !matches!(head_read, Ok(Ok(()))) {
                    return;
                }
                let head = String::from_utf8_lossy(&buf[..n]);
                let path = head.split_whitespace().nth(1).unwrap_or("/");
                let (status, body, ctype) = match path {
                    "/health/live" => ("200 OK", "live\n".to_string(), "text/plain"),
                    "/health/ready" => {
                        let ready = tokio::time::timeout(Duration::from_secs(3), async {
                            agent.meta.ping().await.is_ok() && agent.storage.ping().await.is_ok()
                        })
                        .await
                        .unwrap_or(false);
                        if ready && !agent.stopping.load(Ordering::Relaxed) {
                            ("200 OK", "ready\n".to_string(), "text/plain")
                        } else {
                            ("503 Service Unavailable", "not ready\n".to_string(), "text/plain")
                        }
                    }
                    "/metrics" => ("200 OK", metrics(&agent, &shard_stats), "text/plain; version=0.0.4"),
                    "/status" => ("200 OK", status(&agent).await, "application/json"),
                    _ => ("404 Not Found", "not found\n".to_string(), "text/plain"),
                };
                let resp = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    Ok(local)
}

/// How long one check of `/status` may take.
const STATUS_CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// `/status`: this agent's view for operators (`rutomq cluster status`):
/// its metadata store (the leases query, timed) and object store, and every
/// registered agent with its lease.
async fn status(agent: &Agent) -> String {
    async fn timed<E: std::fmt::Display>(
        check: impl std::future::Future<Output = Result<(), E>>,
    ) -> serde_json::Value {
        let start = std::time::Instant::now();
        let outcome = tokio::time::timeout(STATUS_CHECK_TIMEOUT, check).await;
        let ms = start.elapsed().as_secs_f64() * 1000.0;
        match outcome {
            Ok(Ok(())) => serde_json::json!({"ok": true, "ms": ms}),
            Ok(Err(e)) => serde_json::json!({"ok": false, "ms": ms, "error": e.to_string()}),
            Err(_) => serde_json::json!({"ok": false, "ms": ms, "error": "timed out"}),
        }
    }
    // The leases query is the PostgreSQL check too: one round trip.
    let mut leases = None;
    let postgres = timed(async {
        leases = Some(agent.meta.agent_leases().await?);
        Ok::<_, rutomq_meta::MetaError>(())
    })
    .await;
    let object_store = timed(agent.storage.ping()).await;
    let agents = match leases {
        Some(list) => serde_json::Value::Array(
            list.iter()
                .map(|a| {
                    serde_json::json!({
                        "agent_id": a.agent_id, "host": a.host, "port": a.port, "rack": a.rack,
                        "started_at_ms": a.started_at_ms, "lease_left_ms": a.lease_left_ms,
                        "live": a.lease_left_ms > 0,
                    })
                })
                .collect(),
        ),
        None => serde_json::Value::Null,
    };
    let body = serde_json::json!({
        "agent_id": agent.agent_id,
        "version": env!("CARGO_PKG_VERSION"),
        "stopping": agent.stopping.load(Ordering::Relaxed),
        "postgres": postgres,
        "object_store": object_store,
        "agents": agents,
    });
    format!("{body}\n")
}

fn metrics(agent: &Agent, shards: &rutomq_shards::ShardStats) -> String {
    let m = &agent.meta.stats;
    let s = &agent.storage.stats;
    let w = &agent.flush.stages;
    let g = &agent.groups().stats;
    let t = &agent.txn_stats;
    let k = &agent.compaction_stats;
    let q = &agent.quotas.stats;
    let r = Ordering::Relaxed;
    const C: &str = "counter";
    const G: &str = "gauge";
    #[rustfmt::skip]
    let rows: &[(&str, &str, &str, u64)] = &[
        ("rutomq_object_puts_total", "Objects uploaded.", C, s.puts.load(r)),
        ("rutomq_object_put_bytes_total", "Bytes uploaded.", C, s.put_bytes.load(r)),
        ("rutomq_object_put_failures_total", "Failed uploads.", C, s.put_failures.load(r)),
        ("rutomq_sealed_buffers_total", "Shard buffers gathered into uploaded objects.", C, s.sealed_buffers.load(r)),
        ("rutomq_object_gets_total", "Ranged reads from the object store.", C, s.gets.load(r)),
        ("rutomq_object_get_bytes_total", "Bytes read from the object store.", C, s.get_bytes.load(r)),
        ("rutomq_tail_cache_hits_total", "Reads served by the tail cache.", C, s.cache_hits.load(r)),
        ("rutomq_tail_cache_bytes", "Bytes held by the tail cache.", G, agent.storage.cache_bytes() as u64),
        ("rutomq_read_cache_hits_total", "Reads served by the read cache.", C, s.read_cache_hits.load(r)),
        ("rutomq_read_joins_total", "Reads that joined a GET in flight (of a whole object or a span).", C, s.read_joins.load(r)),
        ("rutomq_read_prefetches_total", "Object (or span) reads started ahead of consumers.", C, s.prefetches.load(r)),
        ("rutomq_object_span_gets_total", "GETs of one span: of objects too large to read whole, evicted from the read cache after a read (their readers far apart), while whole objects are read only in part (see rutomq_read_cache_whole_use_percent), or of 1 MiB or more on a distant store (S3).", C, s.span_gets.load(r)),
        ("rutomq_read_prefetches_refused_total", "Read-ahead not started: the read cache's share for it was full.", C, s.prefetches_refused.load(r)),
        ("rutomq_read_cache_bytes", "Bytes held by the read cache.", G, agent.storage.read_cache_bytes() as u64),
        ("rutomq_read_cache_whole_use_percent", "Share of whole objects' bytes read before the read cache evicted them, lately (%): below 90, spans of 128 KiB or more are read by themselves (but for one object in 8, still read whole to measure).", G, (agent.storage.read_cache_whole_use() * 100.0).round() as u64),
        ("rutomq_windows_total", "Flush windows taken by the pipeline.", C, w.windows.load(r)),
        ("rutomq_flush_idle_seals_total", "Shard buffers sealed as soon as a request was appended, the pipeline being idle (--flush-when-idle), not at their window's end.", C, w.idle_seals.load(r)),
        ("rutomq_flush_window_intervals", "Flush intervals a window spans now (adaptive flush: more at low traffic).", G, agent.flush.stretch.stride()),
        ("rutomq_flush_buffer_bytes", "Size a shard buffer is sealed at now (adaptive flush: up to 3 x --flush-bytes while windows wait for PostgreSQL).", G, agent.flush.stretch.seal_bytes(agent.flush.flush_bytes) as u64),
        ("rutomq_window_queued_microseconds_total", "Windows: sealed until taken by the pipeline.", C, w.queued_us.load(r)),
        ("rutomq_window_gather_microseconds_total", "Windows: gathering the shards' buffers.", C, w.gather_us.load(r)),
        ("rutomq_window_upload_microseconds_total", "Windows: object upload.", C, w.upload_us.load(r)),
        ("rutomq_window_commit_microseconds_total", "Windows: uploaded until committed (in order).", C, w.commit_us.load(r)),
        ("rutomq_commit_transactions_total", "PostgreSQL window-commit transactions.", C, m.commit_transactions.load(r)),
        ("rutomq_committed_windows_total", "Flush windows (objects) committed.", C, m.committed_windows.load(r)),
        ("rutomq_committed_spans_total", "Spans (one partition's batches in one object) committed.", C, m.committed_spans.load(r)),
        ("rutomq_commit_failures_total", "Failed window commits.", C, m.commit_failures.load(r)),
        ("rutomq_meta_queries_total", "Other metadata queries.", C, m.queries.load(r)),
        ("rutomq_notices_sent_total", "Change announcements sent to the other agents (NOTIFY).", C, m.notices_sent.load(r)),
        ("rutomq_notices_dropped_total", "Change announcements dropped: queue full or PostgreSQL away (the other agents' caches refresh).", C, m.notices_dropped.load(r)),
        ("rutomq_retention_log_starts_moved_total", "Partition log starts moved by retention.", C, m.log_starts_moved.load(r)),
        ("rutomq_group_rebalances_total", "Rebalances started by groups this agent coordinates.", C, g.rebalances.load(r)),
        ("rutomq_group_members_expired_total", "Group members removed because their session expired.", C, g.members_expired.load(r)),
        ("rutomq_group_offset_commits_total", "Offset commits accepted.", C, g.offset_commits.load(r)),
        ("rutomq_group_loads_total", "Groups loaded from PostgreSQL (taken over).", C, g.groups_loaded.load(r)),
        ("rutomq_group_fenced_total", "Groups dropped because another agent took them over.", C, g.fenced.load(r)),
        ("rutomq_txn_inits_total", "Transactional InitProducerId answered.", C, t.inits.load(r)),
        ("rutomq_txn_commits_total", "EndTxn commits accepted.", C, t.commits.load(r)),
        ("rutomq_txn_aborts_total", "EndTxn aborts accepted.", C, t.aborts.load(r)),
        ("rutomq_txn_timeout_aborts_total", "Open transactions aborted past their timeout.", C, t.timeout_aborts.load(r)),
        ("rutomq_txn_operator_aborts_total", "Transactions aborted by WriteTxnMarkers (kafka-transactions.sh abort).", C, t.operator_aborts.load(r)),
        ("rutomq_txn_refused_total", "Transaction coordinator requests answered with an error.", C, t.refused.load(r)),
        ("rutomq_txn_expired_ids_total", "Idle transactional ids forgotten.", C, t.expired_ids.load(r)),
        ("rutomq_compaction_passes_total", "Compaction passes committed.", C, k.passes.load(r)),
        ("rutomq_compaction_passes_failed_total", "Compaction passes that failed (logged).", C, k.passes_failed.load(r)),
        ("rutomq_compaction_passes_abandoned_total", "Compaction passes that committed nothing: the lease was lost or the log changed under them.", C, k.passes_abandoned.load(r)),
        ("rutomq_compaction_read_bytes_total", "Bytes of spans compaction passes read and rewrote.", C, k.bytes_read.load(r)),
        ("rutomq_compaction_written_bytes_total", "Bytes of objects compaction passes wrote.", C, k.bytes_written.load(r)),
        ("rutomq_compaction_removed_bytes_total", "Bytes compaction took off the retained logs.", C, k.bytes_removed.load(r)),
        ("rutomq_compaction_removed_records_total", "Records compaction removed (superseded, expired tombstones, aborted, keyless).", C, k.records_removed.load(r)),
        ("rutomq_compaction_removed_markers_total", "Transaction markers compaction removed.", C, k.markers_removed.load(r)),
        ("rutomq_retention_spans_dropped_total", "Spans dropped after the log start passed them.", C, m.spans_dropped.load(r)),
        ("rutomq_object_deletes_total", "Objects deleted (retired or orphaned).", C, s.deletes.load(r)),
        ("rutomq_connections_open", "Open Kafka connections.", G, shards.connections_open.load(r) as u64),
        ("rutomq_connections_accepted_total", "Accepted Kafka connections.", C, shards.connections_accepted.load(r) as u64),
        ("rutomq_connections_closed_bad_frame_total", "Connections closed for bad frames.", C, shards.connections_closed_bad_frame.load(r) as u64),
        ("rutomq_connections_throttled_total", "Connections refused for their IP's connection creation rate (closed after the throttle time).", C, shards.connections_throttled.load(r) as u64),
        ("rutomq_quota_produce_throttles_total", "Produce requests over their client's producer_byte_rate (throttle_time_ms set, the connection muted).", C, q.throttles(Kind::Produce)),
        ("rutomq_quota_produce_throttle_ms_total", "Throttle time given for producer_byte_rate.", C, q.throttle_ms(Kind::Produce)),
        ("rutomq_quota_fetch_throttles_total", "Fetch requests over their client's consumer_byte_rate (answered empty, throttled).", C, q.throttles(Kind::Fetch)),
        ("rutomq_quota_fetch_throttle_ms_total", "Throttle time given for consumer_byte_rate.", C, q.throttle_ms(Kind::Fetch)),
        ("rutomq_quota_request_throttles_total", "Requests over their client's request_percentage.", C, q.throttles(Kind::Request)),
        ("rutomq_quota_request_throttle_ms_total", "Throttle time given for request_percentage.", C, q.throttle_ms(Kind::Request)),
        ("rutomq_acls", "ACLs the agent holds (0 without --authorizer).", G, agent.authorizer.as_ref().map_or(0, |a| a.acls().len() as u64)),
        ("rutomq_client_quota_values", "Client quota values the agent holds.", G, agent.quotas.copy.get().values() as u64),
        ("rutomq_quota_sensors", "Quota sensors the agent keeps (one per quota entity and kind in use).", G, agent.quotas.sensors.registered() as u64),
        ("rutomq_quota_mutation_throttles_total", "CreateTopics, CreatePartitions and DeleteTopics requests over their client's controller_mutation_rate.", C, q.throttles(Kind::Mutation)),
        ("rutomq_quota_mutation_throttle_ms_total", "Throttle time given for controller_mutation_rate.", C, q.throttle_ms(Kind::Mutation)),
        ("rutomq_requests_total", "Kafka requests read.", C, shards.requests.load(r) as u64),
        ("rutomq_tls_handshakes_total", "TLS handshakes completed.", C, shards.tls_handshakes.load(r) as u64),
        ("rutomq_tls_handshake_failures_total", "TLS handshakes that failed or timed out (each closed its connection; logged once per client address per minute per shard).", C, shards.tls_handshake_failures.load(r) as u64),
        ("rutomq_tls_certificate_reloads_total", "TLS certificate reloads that took effect.", C, agent.tls.as_ref().map_or(0, |t| t.reloads.load(r))),
        ("rutomq_tls_certificate_reload_failures_total", "TLS certificate reloads that failed (the old certificate stays).", C, agent.tls.as_ref().map_or(0, |t| t.reload_failures.load(r))),
        ("rutomq_tls_certificate_not_after_seconds", "When the served TLS certificate expires (seconds since the epoch; 0 without TLS).", G, agent.tls.as_ref().map_or(0, |t| t.not_after.load(r).max(0) as u64)),
        ("rutomq_frame_pool_free_bytes", "Free request-frame buffers kept for reuse, all shards.", G, shards.frame_pool_free_bytes() as u64),
        ("rutomq_decoder_panics_total", "Requests that made a decoder panic (each closed its connection).", C, crate::api::DECODER_PANICS.load(r)),
    ];
    let mut out = String::new();
    for &(name, help, kind, v) in rows {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
        );
    }
    let shard_metrics = agent.shard_metrics.lock().expect("metrics lock").clone();
    crate::metrics::render(&mut out, &shard_metrics);
    w.render(&mut out);
    t.render(&mut out);
    k.render(&mut out);
    g.render_lags(&mut out);
    agent.telemetry.render(&mut out, crate::wall::now_ms());
    let name = "rutomq_shard_connections_open";
    let _ = writeln!(
        out,
        "# HELP {name} Open Kafka connections per shard (the kernel spreads them by SO_REUSEPORT hashing).\n# TYPE {name} gauge"
    );
    for (shard, n) in shards.connections_by_shard() {
        let _ = writeln!(out, "{name}{{shard=\"{shard}\"}} {n}");
    }
    out
}
