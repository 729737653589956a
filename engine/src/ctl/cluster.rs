//! `rutomq cluster status`: the agents as clients see them (Kafka
//! metadata), their leases and the health of what they depend on (one
//! agent's `/status`), and every group's lag.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Subcommand;
use serde_json::{json, Value};

use super::{Client, Report, Table};

/// The largest `/status` answer read (a few hundred bytes per agent).
const STATUS_BYTES_MAX: u64 = 4 << 20;

#[derive(Subcommand, Debug)]
pub enum ClusterCmd {
    /// Agents, leases, PostgreSQL and object-store health, lag per group.
    Status {
        /// An agent's HTTP address (its --http), for the health checks
        /// (default: the first --brokers host, port 8080).
        #[arg(long, env = "RUTOMQ_HTTP_ADDR")]
        http: Option<String>,
    },
}

pub async fn run(c: &Client, cmd: ClusterCmd) -> Result<()> {
    let ClusterCmd::Status { http } = cmd;
    let md = c.metadata(Some(&[])).await?;
    let mut report = Report::default();
    report.fact("cluster_id", md.cluster_id.as_ref().map(|s| s.to_string()));
    report.fact("controller", md.controller_id.0);

    let http = match http {
        Some(h) => h,
        None => {
            let first = c.conn().broker();
            let host = first.rsplit_once(':').map_or(first, |(h, _)| h);
            format!("{host}:8080")
        }
    };
    let status = tokio::task::spawn_blocking({
        let http = http.clone();
        move || get_status(&http)
    })
    .await?;
    let status = match status {
        Ok(s) => Some(s),
        Err(e) => {
            report.fact("status_error", format!("{e:#}"));
            None
        }
    };
    let health = |what: &str| -> Value {
        match status.as_ref().map(|s| &s[what]) {
            Some(h) if h["ok"] == json!(true) => {
                json!(format!("ok ({:.1} ms)", h["ms"].as_f64().unwrap_or(0.0)))
            }
            Some(h) => json!(format!("FAILING: {}", h["error"].as_str().unwrap_or("?"))),
            None => Value::Null,
        }
    };
    report.fact("status_from", http.clone());
    report.fact("postgres", health("postgres"));
    report.fact("object_store", health("object_store"));

    let mut agents = Table::new(&[
        "AGENT",
        "ADDRESS",
        "RACK",
        "IN METADATA",
        "LEASE LEFT MS",
        "UPTIME S",
    ]);
    let leases = status
        .as_ref()
        .and_then(|s| s["agents"].as_array().cloned())
        .unwrap_or_default();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut ids: Vec<i32> = md.brokers.iter().map(|b| b.node_id.0).collect();
    ids.extend(
        leases
            .iter()
            .filter_map(|a| a["agent_id"].as_i64())
            .map(|i| i as i32),
    );
    ids.sort_unstable();
    ids.dedup();
    for id in ids {
        let broker = md.brokers.iter().find(|b| b.node_id.0 == id);
        let lease = leases
            .iter()
            .find(|a| a["agent_id"].as_i64() == Some(id as i64));
        let address = match (broker, lease) {
            (Some(b), _) => json!(datum_mq::native::host_port(&b.host, b.port)),
            (None, Some(l)) => json!(format!(
                "{}:{}",
                l["host"].as_str().unwrap_or("?"),
                l["port"]
            )),
            (None, None) => Value::Null,
        };
        let rack = broker
            .and_then(|b| b.rack.as_ref().map(|r| json!(r.as_str())))
            .or_else(|| lease.map(|l| l["rack"].clone()))
            .unwrap_or(Value::Null);
        agents.row(vec![
            json!(id),
            address,
            rack,
            json!(broker.is_some()),
            lease.map_or(Value::Null, |l| l["lease_left_ms"].clone()),
            lease
                .and_then(|l| l["started_at_ms"].as_i64())
                .map_or(Value::Null, |s| json!((now_ms - s).max(0) / 1000)),
        ]);
    }
    report.section("agents", agents);

    let mut lags = Table::new(&["GROUP", "TYPE", "STATE", "PARTITIONS", "LAG"]);
    let groups = super::group::list(c).await?;
    for row in &groups.rows {
        let Some(name) = row[0].as_str().map(str::to_owned) else {
            lags.row(vec![
                row[0].clone(),
                row[1].clone(),
                row[2].clone(),
                Value::Null,
                Value::Null,
            ]);
            continue;
        };
        let (parts, lag) = match super::group::lag(c, &name).await {
            Ok(l) => (
                json!(l.len()),
                json!(l
                    .iter()
                    .map(|(_, off, end)| (end - off).max(0))
                    .sum::<i64>()),
            ),
            Err(e) => (Value::Null, json!(format!("{e:#}"))),
        };
        lags.row(vec![
            row[0].clone(),
            row[1].clone(),
            row[2].clone(),
            parts,
            lag,
        ]);
    }
    report.section("groups", lags);
    report.print(c.format());
    if status.is_none() {
        bail!("no health from {http}: pass an agent's HTTP address with --http");
    }
    Ok(())
}

/// GET http://ADDR/status: a blocking HTTP/1.1 request, one answer per
/// connection (the agent's server closes after it).
fn get_status(addr: &str) -> Result<Value> {
    let mut last = anyhow!("{addr}: no address");
    let mut conn = None;
    for sock in addr
        .to_socket_addrs()
        .with_context(|| format!("resolving {addr}"))?
    {
        match TcpStream::connect_timeout(&sock, Duration::from_secs(5)) {
            Ok(s) => {
                conn = Some(s);
                break;
            }
            Err(e) => last = anyhow!(e).context(format!("connecting to {addr}")),
        }
    }
    let mut s = conn.ok_or(last)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET /status HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut body = Vec::new();
    s.take(STATUS_BYTES_MAX).read_to_end(&mut body)?;
    let text = String::from_utf8_lossy(&body);
    let (head, json) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("{addr}: not an HTTP answer"))?;
    if !head.starts_with("HTTP/1.1 200") {
        bail!("{addr}/status: {}", head.lines().next().unwrap_or(""));
    }
    serde_json::from_str(json).with_context(|| format!("{addr}/status: not JSON"))
}
