//! Shared by the PostgreSQL-backed tests: a fresh embedded PostgreSQL (the
//! server binaries on this machine) with a started `Meta`, and objects to
//! commit through it.

#![allow(dead_code)] // each test file uses its own share of these

use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rutomq::embedded_pg::EmbeddedPg;
use rutomq_meta::{BatchOutcome, BatchRef, Meta, MetaError, Notice, ObjectCommit, PartitionAppend};
use uuid::Uuid;

/// An object of `records` records, 100 bytes, in partition 0 of `topic_id`.
pub fn object(key: &str, topic_id: Uuid, records: u32) -> ObjectCommit {
    object_of(key, &[(topic_id, 0, records, 100, 1_000)])
}

/// An object holding one batch per (topic, partition, records, bytes,
/// max timestamp), laid out one after the other.
pub fn object_of(key: &str, batches: &[(Uuid, i32, u32, u32, i64)]) -> ObjectCommit {
    let mut at = 0u64;
    let appends = batches
        .iter()
        .map(|&(topic_id, partition, records, bytes, ts)| {
            let b = BatchRef {
                byte_start: at,
                byte_len: bytes,
                offset_count: records,
                max_timestamp: ts,
                producer: None,
            };
            at += bytes as u64;
            PartitionAppend {
                topic_id,
                partition,
                batches: vec![b],
            }
        })
        .collect();
    ObjectCommit {
        object_key: key.to_owned(),
        size_bytes: at,
        agent_id: 1,
        appends,
        commit_deadline: Instant::now() + Duration::from_secs(60),
    }
}

pub async fn commit(
    meta: &Meta,
    o: ObjectCommit,
) -> Result<Vec<Vec<BatchOutcome>>, Arc<MetaError>> {
    let rx = meta.submit_commit(o).await?;
    rx.await
        .expect("the committer answers")
        .map(|(outcomes, _)| outcomes)
}

/// Notifications heard: (kind, topic, partition, offset).
/// Which notification an offset came in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Watermarks,
    LogStarts,
    /// ACLs changed (no topic, partition or offset).
    Acls,
    /// Client quotas changed (likewise).
    Quotas,
}

pub type Heard = Arc<Mutex<Vec<(Kind, Uuid, i32, i64)>>>;

pub struct Pg {
    pub meta: Meta,
    pub url: String,
    pub heard: Heard,
}

/// Runs `body` against a fresh embedded PostgreSQL and a started `Meta`
/// whose notifications land in `heard`.
pub fn with_meta<F>(name: &str, body: impl FnOnce(Pg) -> F)
where
    F: std::future::Future<Output = ()>,
{
    let dir = std::env::temp_dir().join(format!(
        "rq-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    // As root the cluster runs as `postgres`, which must reach it.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let pg = EmbeddedPg::start(&dir).expect("embedded PostgreSQL starts");
    let heard: Heard = Arc::new(Mutex::new(Vec::new()));
    let sink = heard.clone();
    let (meta, _thread) = Meta::start(
        pg.url.clone(),
        Box::new(move |notice| {
            let mut h = sink.lock().unwrap();
            match notice {
                Notice::Watermarks(marks) => h.extend(marks.iter().map(|m| {
                    (
                        Kind::Watermarks,
                        m.topic_id,
                        m.partition,
                        m.marks.high_watermark,
                    )
                })),
                Notice::LogStarts(starts) => {
                    h.extend(starts.iter().map(|&(t, p, o)| (Kind::LogStarts, t, p, o)))
                }
                Notice::AclsChanged => h.push((Kind::Acls, Uuid::nil(), 0, 0)),
                Notice::QuotasChanged => h.push((Kind::Quotas, Uuid::nil(), 0, 0)),
                Notice::Compacted(_)
                | Notice::TopicChanged(_)
                | Notice::CredentialsChanged(_)
                | Notice::ConfigsChanged
                | Notice::TokensChanged => {}
            }
        }),
    )
    .expect("meta starts");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let url = pg.url.clone();
    // The notice listener connects in the background (the agent reloads
    // its copies periodically for what it misses meanwhile); a test waits
    // until it hears a probe, so no notice the test causes is sent before
    // it listens.
    rt.block_on(async {
        let probe = rutomq_meta::connect(&url)
            .await
            .expect("a probe connection");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !heard.lock().unwrap().iter().any(|h| h.0 == Kind::Quotas) {
            assert!(
                Instant::now() < deadline,
                "the notice listener never listened"
            );
            probe.batch_execute("NOTIFY rutomq_quotas").await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Probes still on their way are heard before the test starts.
        tokio::time::sleep(Duration::from_millis(300)).await;
        heard.lock().unwrap().clear();
    });
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(body(Pg { meta, url, heard }))
    }));
    pg.stop();
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(p) = outcome {
        std::panic::resume_unwind(p);
    }
}

/// Waits until `heard` holds a notification matching `want`.
pub async fn wait_heard(heard: &Heard, what: &str, want: impl Fn(&(Kind, Uuid, i32, i64)) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !heard.lock().unwrap().iter().any(&want) {
        assert!(Instant::now() < deadline, "never heard {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
