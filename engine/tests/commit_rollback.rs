//! A window commit that fails inside its transaction is rolled back whole,
//! and the commit connection goes on: against a real PostgreSQL (the
//! embedded one, started from the server binaries on this machine).

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
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

#[test]
fn failed_commit_is_rolled_back_and_the_next_one_commits() {
    let dir = std::env::temp_dir().join(format!(
        "rq-rollback-{}-{}",
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
    let (meta, _thread) = Meta::start(pg.url.clone(), Box::new(|_| {})).expect("meta starts");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async {
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
        })
    }));
    drop(meta);
    pg.stop();
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(p) = outcome {
        std::panic::resume_unwind(p);
    }
}
