//! A window commit that fails inside its transaction is rolled back whole,
//! and the commit connection goes on: against a real PostgreSQL (the
//! embedded one, started from the server binaries on this machine).

use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rutomq::embedded_pg::EmbeddedPg;
use rutomq_meta::{BatchOutcome, BatchRef, Meta, MetaError, ObjectCommit, PartitionAppend};
use uuid::Uuid;

fn object(key: &str, topic_id: Uuid, records: u32) -> ObjectCommit {
    ObjectCommit {
        object_key: key.to_owned(),
        size_bytes: 100,
        agent_id: 1,
        appends: vec![PartitionAppend {
            topic_id,
            partition: 0,
            batches: vec![BatchRef {
                byte_start: 0,
                byte_len: 100,
                offset_count: records,
                max_timestamp: 1_000,
                producer: None,
            }],
        }],
        commit_deadline: Instant::now() + Duration::from_secs(60),
    }
}

async fn commit(meta: &Meta, o: ObjectCommit) -> Result<Vec<Vec<BatchOutcome>>, Arc<MetaError>> {
    let rx = meta.submit_commit(o).await?;
    rx.await
        .expect("the committer answers")
        .map(|(outcomes, _, _)| outcomes)
}

/// Runs `body` against a fresh embedded PostgreSQL and a started `Meta`
/// whose watermark notifications land in the returned list.
fn with_meta<F>(name: &str, body: impl FnOnce(Meta, Arc<Mutex<Vec<(Uuid, i32, i64)>>>) -> F)
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
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let (meta, _thread) = Meta::start(
        pg.url.clone(),
        Box::new(move |w| sink.lock().unwrap().extend_from_slice(w)),
    )
    .expect("meta starts");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(body(meta, seen))
    }));
    pg.stop();
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(p) = outcome {
        std::panic::resume_unwind(p);
    }
}

#[test]
fn failed_commit_is_rolled_back_and_the_next_one_commits() {
    with_meta("rollback", |meta, _| async move {
        let topic = meta
            .create_topic("rollback".into(), 1, Vec::new())
            .await
            .unwrap()
            .expect("topic created");
        let t = topic.topic_id;
        let first = commit(&meta, object("objects/1/a.rtq", t, 3))
            .await
            .unwrap();
        assert_eq!(first, vec![vec![BatchOutcome::Appended { base_offset: 0 }]]);

        // The same object key again: its insert fails inside the
        // transaction, after the partition was locked and planned.
        let dup = commit(&meta, object("objects/1/a.rtq", t, 5)).await;
        assert!(dup.is_err(), "a duplicate object key must fail: {dup:?}");

        // Nothing of it stayed, and the connection is usable.
        let next = commit(&meta, object("objects/1/b.rtq", t, 2))
            .await
            .unwrap();
        assert_eq!(
            next,
            vec![vec![BatchOutcome::Appended { base_offset: 3 }]],
            "the failed commit's offsets were rolled back"
        );
        let offsets = meta.partition_offsets(t, 0).await.unwrap().unwrap();
        assert_eq!(offsets.high_watermark, 5);
        let (_, spans) = meta.fetch_spans(t, 0, 0, 10).await.unwrap();
        let keys: Vec<&str> = spans.iter().map(|s| s.object_key.as_str()).collect();
        assert_eq!(keys, ["objects/1/a.rtq", "objects/1/b.rtq"]);
    });
}

/// A window touching more partitions than one NOTIFY payload holds: every
/// payload is sent inside the transaction and every watermark arrives.
#[test]
fn wide_commit_notifies_every_partition() {
    const PARTITIONS: i32 = 400;
    with_meta("notify", |meta, seen| async move {
        let topic = meta
            .create_topic("wide".into(), PARTITIONS, Vec::new())
            .await
            .unwrap()
            .expect("topic created");
        let t = topic.topic_id;
        // The listener connects on its own: commit until it hears one.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut n = 0;
        while seen.lock().unwrap().is_empty() {
            assert!(Instant::now() < deadline, "no watermark notification heard");
            commit(&meta, object(&format!("objects/1/warm-{n}.rtq"), t, 1))
                .await
                .unwrap();
            n += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        seen.lock().unwrap().clear();
        let mut wide = object("objects/1/wide.rtq", t, 1);
        let one = wide.appends.pop().unwrap();
        wide.appends = (0..PARTITIONS)
            .map(|p| PartitionAppend {
                partition: p,
                ..one.clone()
            })
            .collect();
        let outcomes = commit(&meta, wide).await.unwrap();
        assert_eq!(outcomes.len(), PARTITIONS as usize);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut got: Vec<i32> = seen
                .lock()
                .unwrap()
                .iter()
                .filter(|w| w.0 == t)
                .map(|w| w.1)
                .collect();
            got.sort_unstable();
            got.dedup();
            if got.len() == PARTITIONS as usize {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "watermarks heard for {} of {PARTITIONS} partitions",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}
