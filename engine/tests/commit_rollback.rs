//! A window commit that fails inside its transaction is rolled back whole,
//! and the commit connection goes on: against a real PostgreSQL (the
//! embedded one, started from the server binaries on this machine).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{commit, object, with_meta, Kind};
use rutomq_meta::{BatchOutcome, PartitionAppend};

#[test]
fn failed_commit_is_rolled_back_and_the_next_one_commits() {
    with_meta("rollback", |pg| async move {
        let meta = pg.meta;
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
    with_meta("notify", |pg| async move {
        let (meta, seen) = (pg.meta, pg.heard);
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
                .filter(|w| w.0 == Kind::Watermarks && w.1 == t)
                .map(|w| w.2)
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

/// Windows committed in one PostgreSQL transaction are answered together,
/// and their answers are handled in any order: they share one news (the
/// transaction's watermarks and the spans of every window of it, in offset
/// order), told once, so that whichever is handled first tells the shards
/// everything those watermarks cover.
#[test]
fn windows_committed_together_share_one_news_of_every_span_told_once() {
    const WINDOWS: usize = 16;
    with_meta("together", |pg| async move {
        let meta = pg.meta;
        let topic = meta
            .create_topic("together".into(), 1, Vec::new())
            .await
            .unwrap()
            .expect("topic created");
        let t = topic.topic_id;
        // Queued back to back: the committer takes those waiting while it
        // commits the first in one transaction.
        let mut receivers = Vec::new();
        for w in 0..WINDOWS {
            let o = object(&format!("objects/1/w{w}.rtq"), t, 2);
            receivers.push(meta.submit_commit(o).await.unwrap());
        }
        // One news per transaction, shared by its windows' answers and told
        // once: gapless and in order, ending at the high watermark, and
        // including the span of every window answered with it.
        let mut answers = Vec::new();
        for rx in receivers {
            let (_, news) = rx.await.expect("answered").expect("committed");
            answers.push(news);
        }
        let mut transactions = 0;
        for (w, news) in answers.iter().enumerate() {
            if w > 0 && Arc::ptr_eq(news, &answers[w - 1]) {
                continue;
            }
            transactions += 1;
            let hw = news.watermarks[&(t, 0)].high_watermark;
            let mut told = Vec::new();
            news.tell_once(|_, spans| told = spans);
            let mut again = false;
            news.tell_once(|_, _| again = true);
            assert!(!again, "window {w}: the news was told twice");
            let offsets: Vec<(i64, i64)> = told
                .iter()
                .map(|(_, s)| (s.base_offset, s.last_offset))
                .collect();
            assert!(
                offsets.windows(2).all(|p| p[1].0 == p[0].1 + 1),
                "window {w}: spans {offsets:?}"
            );
            assert_eq!(offsets.last().map(|o| o.1 + 1), Some(hw), "window {w}");
            let with: Vec<usize> = (w..WINDOWS)
                .take_while(|&v| Arc::ptr_eq(&answers[v], news))
                .collect();
            assert_eq!(told.len(), with.len(), "window {w}: one span per window");
            for v in with {
                let own = format!("objects/1/w{v}.rtq");
                assert!(told.iter().any(|(_, s)| s.object_key == own), "window {v}");
            }
        }
        assert!(
            transactions < WINDOWS,
            "no two of {WINDOWS} windows were committed together"
        );
    });
}
