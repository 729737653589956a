//! A real rutomq agent for the client's tests: `target/release/rutomq`
//! (or `$RUTOMQ_BIN`) with its embedded defaults on a private data
//! directory, which starts its own PostgreSQL.

#![allow(dead_code)]

pub mod scenarios;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Agent {
    pub bootstrap: String,
    pub http: String,
    pub dir: PathBuf,
    child: Option<Child>,
    args: Vec<String>,
}

/// A port free now and never handed out before in this process: tests
/// run in parallel threads, and a port picked by one and not yet bound by
/// its server must not be picked again by another.
pub fn free_port() -> u16 {
    loop {
        let p = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if claim_port(p) {
            return p;
        }
    }
}

/// Marks `port` handed out; false when it already was.
fn claim_port(port: u16) -> bool {
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    GIVEN.lock().unwrap().insert(port)
}

fn binary() -> PathBuf {
    if let Ok(b) = std::env::var("RUTOMQ_BIN") {
        return PathBuf::from(b);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin = root.join("target/release/rutomq");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --release --bin rutomq` first (scripts/test.sh does), or set RUTOMQ_BIN",
        bin.display()
    );
    bin
}

impl Agent {
    /// Starts an agent; `args` are extra `rutomq serve` flags.
    pub fn start(args: &[&str]) -> Agent {
        Agent::start_with(|_| args.iter().map(|s| s.to_string()).collect())
    }

    /// Starts an agent whose extra flags depend on its PLAINTEXT address
    /// (`--listeners` naming it beside others).
    pub fn start_with(args: impl FnOnce(&str) -> Vec<String>) -> Agent {
        let dir = std::env::temp_dir().join(format!(
            "datum-mq-test-{}-{}",
            std::process::id(),
            Instant::now().elapsed().as_nanos() ^ rand_suffix()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        // As root the embedded PostgreSQL runs as `postgres`, which must
        // reach the directory.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let bootstrap = format!("127.0.0.1:{}", free_port());
        let args = args(&bootstrap);
        let mut agent = Agent {
            bootstrap,
            http: format!("127.0.0.1:{}", free_port()),
            dir,
            child: None,
            args,
        };
        agent.spawn();
        agent
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("rutomq.log"))
            .unwrap();
        let child = Command::new(binary())
            .arg("serve")
            .arg("--data-dir")
            .arg(self.dir.join("data"))
            .arg("--listen")
            .arg(&self.bootstrap)
            .arg("--http")
            .arg(&self.http)
            .args(&self.args)
            .env_remove("RUST_LOG")
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("rutomq starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if self.ready() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "rutomq not ready within 60 s; log:\n{}",
            std::fs::read_to_string(self.dir.join("rutomq.log")).unwrap_or_default()
        );
    }

    fn ready(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(&self.http) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.write_all(b"GET /health/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .is_err()
        {
            return false;
        }
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out.starts_with("HTTP/1.1 200")
    }

    /// SIGKILL, then start again on the same data and ports (the new
    /// agent adopts the embedded PostgreSQL the killed one left running).
    pub fn kill_and_restart(&mut self, down_for: Duration) {
        self.kill();
        std::thread::sleep(down_for);
        self.spawn();
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops an embedded PostgreSQL left running by a killed agent.
    fn stop_pg(&self) {
        let pg_data = self.dir.join("data/pg/data");
        if pg_data.join("postmaster.pid").exists() {
            let ctl = pg_ctl();
            let mut cmd = if is_root() {
                let mut c = Command::new("su");
                c.arg("postgres")
                    .arg("-s")
                    .arg("/bin/sh")
                    .arg("-c")
                    .arg(format!(
                        "{} -D {} -m fast -w stop",
                        ctl.display(),
                        pg_data.display()
                    ));
                c
            } else {
                let mut c = Command::new(ctl);
                c.args(["-D"])
                    .arg(&pg_data)
                    .args(["-m", "fast", "-w", "stop"]);
                c
            };
            let _ = cmd.stdout(Stdio::null()).stderr(Stdio::null()).status();
        }
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn pg_ctl() -> PathBuf {
    for d in std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
    {
        let p = d.path().join("bin/pg_ctl");
        if p.exists() {
            return p;
        }
    }
    PathBuf::from("pg_ctl")
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SIGTERM: the agent stops its PostgreSQL on the way out.
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(c.id().to_string())
                .status();
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        self.stop_pg();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A real Apache Kafka 4.x broker (one KRaft node) started by
/// `benches/kafka/start-kafka.sh` from the Maven Central jars, with
/// auto-created topics of 8 partitions. Stopped on drop.
pub struct Kafka {
    pub bootstrap: String,
    dir: PathBuf,
}

impl Kafka {
    pub fn start() -> Kafka {
        Self::start_with(|_, _| String::new())
    }

    /// Started with more server properties, made from the PLAINTEXT port
    /// and the controller's.
    pub fn start_with(extra: impl Fn(u16, u16) -> String) -> Kafka {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let script = root.join("benches/kafka/start-kafka.sh");
        // Another process (an agent's embedded PostgreSQL, another test
        // binary) may still take a port between the pick and Kafka's bind:
        // start-kafka.sh refuses a taken port before it starts anything,
        // Kafka itself when it loses the race to bind; either is retried
        // on fresh ports, in a fresh directory.
        let mut attempts = 0;
        let (port, dir) = loop {
            attempts += 1;
            let dir = std::env::temp_dir().join(format!(
                "datum-mq-kafka-{}-{}",
                std::process::id(),
                rand_suffix()
            ));
            // A port whose successor (the controller's) is free too.
            let port = loop {
                let p = free_port();
                if p < 65535
                    && std::net::TcpListener::bind(("127.0.0.1", p + 1)).is_ok()
                    && claim_port(p + 1)
                {
                    break p;
                }
            };
            let out = Command::new("bash")
                .arg(&script)
                .arg(port.to_string())
                .arg(&dir)
                .env(
                    "KAFKA_EXTRA_PROPS",
                    format!(
                        "num.partitions=8\ngroup.initial.rebalance.delay.ms=200\n{}",
                        extra(port, port + 1)
                    ),
                )
                .env("KAFKA_HEAP", "768m")
                .output()
                .expect("start-kafka.sh runs");
            if out.status.success() {
                break (port, dir);
            }
            let said = format!(
                "{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                said.contains("already in use") && attempts < 4,
                "Kafka did not start: {said}"
            );
            eprintln!(
                "Kafka start refused ({}), retrying on other ports",
                said.trim()
            );
            let _ = std::fs::remove_dir_all(&dir);
        };
        Kafka {
            bootstrap: format!("127.0.0.1:{port}"),
            dir,
        }
    }
}

impl Drop for Kafka {
    fn drop(&mut self) {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let _ = Command::new("bash")
            .arg(root.join("benches/kafka/start-kafka.sh"))
            .arg("--stop")
            .arg(&self.dir)
            .output();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A record batch (magic 2, no compression) of one record with `value`, no
/// key, as a raw Produce request carries it.
pub fn record_batch(value: bytes::Bytes) -> bytes::Bytes {
    use kafka_protocol::indexmap::IndexMap;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(value),
        headers: IndexMap::new(),
    };
    let mut buf = bytes::BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, [&record], &options).unwrap();
    buf.freeze()
}

/// A protocol string.
pub fn s(v: &str) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(v.to_owned())
}

/// A CreateTopics request for `topics` (name, partitions), replication
/// factor 1.
pub fn create_topics_request(
    topics: &[(&str, i32)],
) -> kafka_protocol::messages::CreateTopicsRequest {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, TopicName};
    CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(
            topics
                .iter()
                .map(|(name, partitions)| {
                    CreatableTopic::default()
                        .with_name(TopicName(s(name)))
                        .with_num_partitions(*partitions)
                        .with_replication_factor(1)
                })
                .collect(),
        )
}
