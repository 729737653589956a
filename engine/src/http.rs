//! `/health/live`, `/health/ready` and `/metrics` over a minimal HTTP/1.1
//! server (one request per connection, bounded request size).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::agent::Agent;

/// Largest HTTP request head read.
const REQUEST_BYTES_MAX: usize = 8 << 10;

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
                let mut buf = vec![0u8; REQUEST_BYTES_MAX];
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

fn metrics(agent: &Agent, shards: &rutomq_shards::ShardStats) -> String {
    let mut out = String::new();
    let mut counter = |name: &str, help: &str, kind: &str, v: u64| {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
        );
    };
    let m = &agent.meta.stats;
    let s = &agent.storage.stats;
    let r = Ordering::Relaxed;
    counter(
        "rutomq_object_puts_total",
        "Objects uploaded.",
        "counter",
        s.puts.load(r),
    );
    counter(
        "rutomq_object_put_bytes_total",
        "Bytes uploaded.",
        "counter",
        s.put_bytes.load(r),
    );
    counter(
        "rutomq_object_put_failures_total",
        "Failed uploads.",
        "counter",
        s.put_failures.load(r),
    );
    counter(
        "rutomq_object_gets_total",
        "Ranged reads from the object store.",
        "counter",
        s.gets.load(r),
    );
    counter(
        "rutomq_object_get_bytes_total",
        "Bytes read from the object store.",
        "counter",
        s.get_bytes.load(r),
    );
    counter(
        "rutomq_tail_cache_hits_total",
        "Reads served by the tail cache.",
        "counter",
        s.cache_hits.load(r),
    );
    counter(
        "rutomq_tail_cache_bytes",
        "Bytes held by the tail cache.",
        "gauge",
        agent.storage.cache_bytes() as u64,
    );
    counter(
        "rutomq_commit_transactions_total",
        "PostgreSQL window-commit transactions.",
        "counter",
        m.commit_transactions.load(r),
    );
    counter(
        "rutomq_committed_windows_total",
        "Flush windows (objects) committed.",
        "counter",
        m.committed_windows.load(r),
    );
    counter(
        "rutomq_commit_failures_total",
        "Failed window commits.",
        "counter",
        m.commit_failures.load(r),
    );
    counter(
        "rutomq_meta_queries_total",
        "Other metadata queries.",
        "counter",
        m.queries.load(r),
    );
    counter(
        "rutomq_connections_open",
        "Open Kafka connections.",
        "gauge",
        shards.connections_open.load(r) as u64,
    );
    counter(
        "rutomq_connections_accepted_total",
        "Accepted Kafka connections.",
        "counter",
        shards.connections_accepted.load(r) as u64,
    );
    counter(
        "rutomq_connections_closed_bad_frame_total",
        "Connections closed for bad frames.",
        "counter",
        shards.connections_closed_bad_frame.load(r) as u64,
    );
    counter(
        "rutomq_requests_total",
        "Kafka requests read.",
        "counter",
        shards.requests.load(r) as u64,
    );
    counter(
        "rutomq_decoder_panics_total",
        "Requests that made a decoder panic (each closed its connection).",
        "counter",
        crate::api::DECODER_PANICS.load(r),
    );
    let shard_metrics = agent.shard_metrics.lock().expect("metrics lock").clone();
    crate::metrics::render(&mut out, &shard_metrics);
    out
}
