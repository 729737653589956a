//! Retention and DeleteRecords against a real PostgreSQL (the embedded one):
//! log starts move as retention.ms and retention.bytes say, the retained
//! size follows, every agent hears of it, retired spans are dropped and
//! their objects deleted once no partition needs them, and so are the
//! transaction markers below the log start, a bounded number per round; a
//! deleted topic's spans go with it.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{commit, object_of, wait_heard, with_meta, Kind, Pg};
use rutomq::gc::{self, GcConfig};
use rutomq::topics::TopicDefaults;
use rutomq_meta::{BatchOutcome, LogStartOutcome, Meta};
use uuid::Uuid;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

async fn topic(meta: &Meta, name: &str, partitions: i32, configs: &[(&str, &str)]) -> Uuid {
    let configs = configs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    meta.create_topic(name.into(), partitions, configs)
        .await
        .unwrap()
        .expect("topic created")
        .topic_id
}

/// (log start, high watermark, retained bytes) of a partition.
async fn state(pg: &Pg, t: Uuid, p: i32) -> (i64, i64, i64) {
    let c = rutomq_meta::connect(&pg.url).await.unwrap();
    let r = c
        .query_one(
            "SELECT log_start_offset, next_offset, size_bytes FROM partitions
             WHERE topic_id = $1 AND partition = $2",
            &[&t, &p],
        )
        .await
        .unwrap();
    (r.get(0), r.get(1), r.get(2))
}

/// A new one-partition topic whose partition 0 agent 1 claimed for
/// compaction.
async fn compacting_topic(meta: &Meta, name: &str) -> Uuid {
    let t = topic(meta, name, 1, &[]).await;
    meta.claim_compaction(t, 0, 1, Duration::from_secs(60))
        .await
        .unwrap()
        .expect("claimed");
    t
}

/// Starts deleting topic `name` and checks, 300 ms later, that it waits
/// (for `what`, a lock another connection holds).
async fn deletion_waiting(
    meta: &Meta,
    name: String,
    what: &str,
) -> tokio::task::JoinHandle<Result<Option<Uuid>, rutomq_meta::MetaError>> {
    let deletion = {
        let meta = meta.clone();
        tokio::spawn(async move { meta.delete_topic(name).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !deletion.is_finished(),
        "the deletion did not wait for {what}"
    );
    deletion
}

async fn span_count(pg: &Pg, t: Uuid) -> i64 {
    let c = rutomq_meta::connect(&pg.url).await.unwrap();
    c.query_one("SELECT count(*) FROM spans WHERE topic_id = $1", &[&t])
        .await
        .unwrap()
        .get(0)
}

#[test]
fn retention_bytes_keeps_the_newest_spans_over_the_limit() {
    with_meta("ret-bytes", |pg| async move {
        let meta = &pg.meta;
        let t = topic(meta, "sized", 1, &[("retention.bytes", "250")]).await;
        // Five objects of one 100-byte span (10 records each): 500 bytes.
        for i in 0..5 {
            commit(
                meta,
                object_of(&format!("objects/1/s{i}.rtq"), &[(t, 0, 10, 100, now_ms())]),
            )
            .await
            .unwrap();
        }
        assert_eq!(state(&pg, t, 0).await, (0, 50, 500));
        // Another agent's topic: left alone.
        assert_eq!(
            gc::apply_retention(meta, &|_| false, &TopicDefaults::NONE)
                .await
                .unwrap(),
            0
        );
        assert_eq!(state(&pg, t, 0).await, (0, 50, 500));
        let moved = gc::apply_retention(meta, &|_| true, &TopicDefaults::NONE)
            .await
            .unwrap();
        assert_eq!(moved, 1);
        // As Kafka: retire the oldest while what is left stays >= 250.
        assert_eq!(state(&pg, t, 0).await, (20, 50, 300));
        wait_heard(&pg.heard, "the new log start", |h| {
            *h == (Kind::LogStarts, t, 0, 20)
        })
        .await;
        // Nothing more to retire: a second round is a no-op.
        assert_eq!(
            gc::apply_retention(meta, &|_| true, &TopicDefaults::NONE)
                .await
                .unwrap(),
            0
        );

        // The retired spans go, their objects become due (no delay here).
        let dropped = meta
            .drop_retired_spans(1000, Duration::ZERO)
            .await
            .unwrap()
            .expect("no other agent holds the lock");
        assert_eq!(dropped, (2, 2));
        assert_eq!(span_count(&pg, t).await, 3);
        let mut due = meta.objects_to_delete(100).await.unwrap();
        due.sort();
        assert_eq!(due, ["objects/1/s0.rtq", "objects/1/s1.rtq"]);
        // Fetching below the log start finds nothing to serve.
        let offsets = meta.partition_offsets(t, 0).await.unwrap().unwrap();
        assert_eq!(offsets.log_start_offset, 20);
    });
}

#[test]
fn retention_ms_retires_old_spans_and_a_shared_object_waits_for_all() {
    with_meta("ret-ms", |pg| async move {
        let meta = &pg.meta;
        let t = topic(meta, "timed", 2, &[("retention.ms", "60000")]).await;
        let old = now_ms() - 120_000;
        // One object shared by both partitions: partition 0's batch is old,
        // partition 1's is new.
        commit(
            meta,
            object_of(
                "objects/1/shared.rtq",
                &[(t, 0, 5, 100, old), (t, 1, 5, 100, now_ms())],
            ),
        )
        .await
        .unwrap();
        commit(
            meta,
            object_of("objects/1/old0.rtq", &[(t, 0, 5, 100, old)]),
        )
        .await
        .unwrap();
        commit(
            meta,
            object_of("objects/1/new0.rtq", &[(t, 0, 5, 100, now_ms())]),
        )
        .await
        .unwrap();
        assert_eq!(
            gc::apply_retention(meta, &|_| true, &TopicDefaults::NONE)
                .await
                .unwrap(),
            1
        );
        assert_eq!(state(&pg, t, 0).await, (10, 15, 100));
        assert_eq!(state(&pg, t, 1).await, (0, 5, 100));

        let dropped = meta
            .drop_retired_spans(1000, Duration::ZERO)
            .await
            .unwrap()
            .unwrap();
        // Two spans dropped; only old0 is left without spans: partition 1
        // still reads the shared object.
        assert_eq!(dropped, (2, 1));
        assert_eq!(
            meta.objects_to_delete(100).await.unwrap(),
            ["objects/1/old0.rtq"]
        );

        // A later DeleteRecords of partition 1 frees the shared object too.
        let out = meta.advance_log_starts(t, vec![(1, -1)]).await.unwrap();
        assert_eq!(out, vec![(1, LogStartOutcome::Moved { low_watermark: 5 })]);
        let dropped = meta
            .drop_retired_spans(1000, Duration::ZERO)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(dropped, (1, 1));
        let mut due = meta.objects_to_delete(100).await.unwrap();
        due.sort();
        assert_eq!(due, ["objects/1/old0.rtq", "objects/1/shared.rtq"]);
    });
}

#[test]
fn delete_records_moves_log_starts_like_kafka() {
    with_meta("delete-records", |pg| async move {
        let meta = &pg.meta;
        let t = topic(meta, "dr", 2, &[("retention.ms", "-1")]).await;
        for i in 0..3 {
            commit(
                meta,
                object_of(&format!("objects/1/d{i}.rtq"), &[(t, 0, 10, 100, now_ms())]),
            )
            .await
            .unwrap();
        }
        // Inside the second span: the span stays (and its bytes count)
        // until the log start passes it.
        let out = meta
            .advance_log_starts(t, vec![(0, 15), (1, 1), (7, 0)])
            .await
            .unwrap();
        assert_eq!(
            out,
            vec![
                (0, LogStartOutcome::Moved { low_watermark: 15 }),
                (1, LogStartOutcome::OffsetOutOfRange),
                (7, LogStartOutcome::UnknownPartition),
            ]
        );
        assert_eq!(state(&pg, t, 0).await, (15, 30, 200));
        // Below the log start: no change, the low watermark is answered.
        let out = meta.advance_log_starts(t, vec![(0, 3)]).await.unwrap();
        assert_eq!(out, vec![(0, LogStartOutcome::Moved { low_watermark: 15 })]);
        // Past the high watermark: refused.
        let out = meta.advance_log_starts(t, vec![(0, 31)]).await.unwrap();
        assert_eq!(out, vec![(0, LogStartOutcome::OffsetOutOfRange)]);
        // retention.ms=-1 (and no retention.bytes): retention leaves it.
        assert_eq!(
            gc::apply_retention(meta, &|_| true, &TopicDefaults::NONE)
                .await
                .unwrap(),
            0
        );
        let out = meta.advance_log_starts(t, vec![(0, 20)]).await.unwrap();
        assert_eq!(out, vec![(0, LogStartOutcome::Moved { low_watermark: 20 })]);
        assert_eq!(state(&pg, t, 0).await, (20, 30, 100));
    });
}

async fn marker_offsets(pg: &Pg, t: Uuid) -> Vec<i64> {
    let c = rutomq_meta::connect(&pg.url).await.unwrap();
    c.query(
        "SELECT marker_offset FROM markers WHERE topic_id = $1 ORDER BY marker_offset",
        &[&t],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

#[test]
fn markers_below_the_log_start_are_dropped_a_bounded_number_per_round() {
    with_meta("drop-markers", |pg| async move {
        let meta = &pg.meta;
        let t = topic(meta, "dm", 1, &[("retention.ms", "-1")]).await;
        commit(
            meta,
            object_of("objects/1/m.rtq", &[(t, 0, 10, 100, now_ms())]),
        )
        .await
        .unwrap();
        // Five markers among the ten offsets (the rows are all this test
        // needs; a real end of a transaction writes them past its data).
        let c = rutomq_meta::connect(&pg.url).await.unwrap();
        for offset in [1i64, 3, 5, 7, 9] {
            c.execute(
                "INSERT INTO markers (topic_id, partition, marker_offset, producer_id, producer_epoch,
                                      committed, coordinator_epoch, timestamp_ms)
                 VALUES ($1, 0, $2, 42, 0, true, 0, 0)",
                &[&t, &offset],
            )
            .await
            .unwrap();
        }
        let out = meta.advance_log_starts(t, vec![(0, 8)]).await.unwrap();
        assert_eq!(out, vec![(0, LogStartOutcome::Moved { low_watermark: 8 })]);
        // Two per round, oldest first; the one above the log start stays.
        for left in [vec![5, 7, 9], vec![9], vec![9]] {
            meta.drop_retired_spans(2, Duration::ZERO)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(marker_offsets(&pg, t).await, left);
        }
    });
}

/// A whole collector round with a real object store (in memory): retired
/// objects are deleted from the store and their rows dropped.
#[test]
fn a_collector_round_deletes_retired_objects() {
    with_meta("gc-round", |pg| async move {
        let meta = &pg.meta;
        let (store, prefix) =
            rutomq_storage::open_store("memory://", &Default::default(), Default::default())
                .unwrap();
        let (storage, _thread) =
            rutomq_storage::Storage::start(store, prefix, 1 << 20, 1 << 20).unwrap();
        let t = topic(meta, "round", 1, &[("retention.bytes", "0")]).await;
        let mut keys = Vec::new();
        for _ in 0..3 {
            let key = storage.new_object_key(1);
            storage
                .put(key.clone(), vec![Bytes::from(vec![0u8; 100])])
                .await
                .unwrap();
            commit(meta, object_of(&key, &[(t, 0, 1, 100, now_ms())]))
                .await
                .unwrap();
            keys.push(key);
        }
        let cfg = GcConfig::new(
            Duration::from_secs(1),
            Duration::from_secs(60),
            Duration::from_secs(3600),
            Duration::ZERO,
        );
        assert_eq!((cfg.retention_every, cfg.orphan_every), (1, 60));
        let done = gc::round(
            meta,
            &storage,
            &cfg,
            Some(&|_| true),
            &TopicDefaults::NONE,
            true,
            &mut None,
        )
        .await
        .unwrap();
        // retention.bytes=0 retires everything: the log is empty, at 3.
        assert_eq!(
            (
                done.log_starts_moved,
                done.spans_dropped,
                done.objects_deleted
            ),
            (1, 3, 3)
        );
        assert_eq!(state(&pg, t, 0).await, (3, 3, 0));
        for key in &keys {
            assert!(
                storage.get_range(key.clone(), 0..1, 0).await.is_err(),
                "{key} was deleted"
            );
        }
        assert!(meta.objects_to_delete(100).await.unwrap().is_empty());
    });
}

/// Log starts moving while window commits lock the same partitions: the two
/// lock in the same order, so no commit fails (PostgreSQL would break a
/// deadlock by failing one of them).
#[test]
fn log_start_moves_never_deadlock_with_window_commits() {
    with_meta("no-deadlock", |pg| async move {
        let meta = pg.meta.clone();
        let t = topic(&meta, "busy", 8, &[("retention.ms", "-1")]).await;
        let writer = {
            let meta = meta.clone();
            tokio::spawn(async move {
                for i in 0..400 {
                    let batches: Vec<_> = (0..8).map(|p| (t, p, 10, 100, now_ms())).collect();
                    commit(
                        &meta,
                        object_of(&format!("objects/1/busy-{i}.rtq"), &batches),
                    )
                    .await
                    .expect("no window commit fails");
                }
            })
        };
        let mut moves = 0;
        while !writer.is_finished() {
            let wanted = (0..8).rev().map(|p| (p, -1)).collect();
            for (_, o) in meta.advance_log_starts(t, wanted).await.unwrap() {
                assert!(matches!(o, LogStartOutcome::Moved { .. }), "{o:?}");
            }
            moves += 1;
        }
        writer.await.unwrap();
        assert!(
            moves > 10,
            "only {moves} log start moves ran alongside the commits"
        );
    });
}

/// Spans carry no foreign keys (schema 14): deleting a topic drops its spans
/// (the partitions' trigger), another topic's spans in the same object stay,
/// and the objects only it used are left to the collector's backstop.
#[test]
fn deleting_a_topic_drops_its_spans_and_leaves_shared_objects() {
    with_meta("del-topic", |pg| async move {
        let meta = &pg.meta;
        let gone = topic(meta, "gone", 2, &[]).await;
        let kept = topic(meta, "kept", 1, &[]).await;
        commit(
            meta,
            object_of(
                "objects/1/both.rtq",
                &[(gone, 0, 5, 100, now_ms()), (kept, 0, 5, 100, now_ms())],
            ),
        )
        .await
        .unwrap();
        commit(
            meta,
            object_of("objects/1/only.rtq", &[(gone, 1, 5, 100, now_ms())]),
        )
        .await
        .unwrap();
        assert_eq!(
            (span_count(&pg, gone).await, span_count(&pg, kept).await),
            (2, 1)
        );

        assert_eq!(meta.delete_topic("gone".into()).await.unwrap(), Some(gone));
        assert_eq!(
            (span_count(&pg, gone).await, span_count(&pg, kept).await),
            (0, 1)
        );
        assert_eq!(meta.delete_topic("gone".into()).await.unwrap(), None);
        // Only the object no span references any more is marked.
        assert_eq!(
            meta.mark_unreferenced_objects(Duration::ZERO, Duration::ZERO)
                .await
                .unwrap(),
            1
        );
        assert_eq!(
            meta.objects_to_delete(100).await.unwrap(),
            ["objects/1/only.rtq"]
        );
        // A window commit to the deleted topic writes no span.
        let late = commit(
            meta,
            object_of("objects/1/late.rtq", &[(gone, 0, 5, 100, now_ms())]),
        )
        .await;
        assert!(
            matches!(
                late.as_deref(),
                Ok([batches]) if matches!(batches[..], [BatchOutcome::UnknownTopicOrPartition])
            ),
            "a commit to a deleted topic: {late:?}"
        );
        assert_eq!(span_count(&pg, gone).await, 0);
    });
}

/// A compaction swap holds its partition's compaction row from its fence on
/// and then drops (or stamps) the partition's markers. A topic's deletion
/// that cascaded meanwhile took the markers first and then waited for the
/// compaction row: PostgreSQL aborted it as a deadlock (40P01) and the
/// client got KAFKA_STORAGE_ERROR. The deletion now locks the topic's
/// partitions and compaction rows first, so it waits for the swap's commit
/// and then deletes everything.
#[test]
fn a_topic_deletion_waits_for_a_compaction_swap_that_drops_markers() {
    with_meta("del-swap", |pg| async move {
        let meta = &pg.meta;
        let name = "swapping".to_string();
        let t = compacting_topic(meta, &name).await;
        let mut swap = rutomq_meta::connect(&pg.url).await.unwrap();
        swap.execute(
            "INSERT INTO markers (topic_id, partition, marker_offset, producer_id, producer_epoch,
                                  committed, coordinator_epoch, timestamp_ms)
             VALUES ($1, 0, 7, 1, 0, true, 0, 0)",
            &[&t],
        )
        .await
        .unwrap();
        // The swap's fence...
        let tx = swap.transaction().await.unwrap();
        let fenced = tx
            .query(
                "SELECT 1 FROM compaction WHERE topic_id = $1 AND partition = 0 FOR UPDATE",
                &[&t],
            )
            .await
            .unwrap();
        assert_eq!(fenced.len(), 1);
        let deletion = deletion_waiting(meta, name, "the swap").await;
        // ... then its markers, as COMPACTION_DROP_MARKERS does.
        tx.execute(
            "DELETE FROM markers WHERE topic_id = $1 AND partition = 0 AND marker_offset = 7",
            &[&t],
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(deletion.await.unwrap().unwrap(), Some(t));
        let left: i64 = swap
            .query_one(
                "SELECT (SELECT count(*) FROM markers WHERE topic_id = $1)
                      + (SELECT count(*) FROM compaction WHERE topic_id = $1)
                      + (SELECT count(*) FROM partitions WHERE topic_id = $1)",
                &[&t],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(left, 0, "rows of the deleted topic left behind");
    });
}

/// The race the dropped `spans → partitions` cascade used to close: a
/// transaction writing spans of a partition while its topic is deleted.
/// Whether it holds the partition (a window commit) or the compaction row (a
/// compaction swap), the deletion waits for it and then drops what it wrote
/// (the trigger's statement sees what committed while it waited).
#[test]
fn a_topic_deletion_waits_for_span_writers_and_drops_their_spans() {
    with_meta("del-race", |pg| async move {
        let meta = &pg.meta;
        for (i, lock) in [
            "SELECT 1 FROM partitions WHERE topic_id = $1 AND partition = 0 FOR NO KEY UPDATE",
            "SELECT 1 FROM compaction WHERE topic_id = $1 AND partition = 0 FOR UPDATE",
        ]
        .into_iter()
        .enumerate()
        {
            let name = format!("racing-{i}");
            let t = compacting_topic(meta, &name).await;
            let mut writer = rutomq_meta::connect(&pg.url).await.unwrap();
            let tx = writer.transaction().await.unwrap();
            assert_eq!(tx.query(lock, &[&t]).await.unwrap().len(), 1, "{lock}");
            let key = format!("objects/1/racing-{i}.rtq");
            tx.execute(
                "INSERT INTO objects (object_key, size_bytes, agent_id) VALUES ($1, 100, 1)",
                &[&key],
            )
            .await
            .unwrap();
            tx.execute(
                "INSERT INTO spans (topic_id, partition, base_offset, last_offset, object_key,
                                    byte_start, byte_len, batch_count, max_timestamp)
                 VALUES ($1, 0, 0, 4, $2, 0, 100, 1, 0)",
                &[&t, &key],
            )
            .await
            .unwrap();
            let deletion = deletion_waiting(meta, name, lock).await;
            tx.commit().await.unwrap();
            assert_eq!(deletion.await.unwrap().unwrap(), Some(t));
            assert_eq!(span_count(&pg, t).await, 0, "spans left behind ({lock})");
        }
    });
}
