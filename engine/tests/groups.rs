//! Consumer-group storage against a real PostgreSQL (the embedded one): a
//! coordinator that loaded a group writes under its epoch; once another
//! agent claims the group, every write of the first one is refused (group,
//! offsets, delete), committed offsets survive the takeover, commits to
//! partitions that do not exist are skipped, and deleting a topic removes
//! its offsets. The pending offsets of a transaction (TxnOffsetCommit) are
//! fenced by a takeover of the group the same way.

mod common;

use common::with_meta;
use rutomq::txns::{add_to_txn, init_producer_id, AddTo, InitAsk};
use rutomq_meta::groups::{OffsetCommit, StoredGroup, StoredMember};
use rutomq_meta::txn::TxnOffsetCheck;

fn group(id: &str, generation: i32) -> StoredGroup {
    StoredGroup {
        group_id: id.into(),
        group_type: "classic".into(),
        protocol_type: "consumer".into(),
        protocol_name: Some("range".into()),
        generation,
        assignment_epoch: 0,
        leader_id: Some("m1".into()),
        state: "Stable".into(),
        state_since_ms: 1_700_000_000_000,
        data: Vec::new(),
        members: vec![StoredMember {
            member_id: "m1".into(),
            instance_id: Some("i1".into()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            subscription: vec![0, 1, 0, 0],
            assignment: vec![9, 9, 0],
        }],
    }
}

fn offset(topic_id: uuid::Uuid, partition: i32, offset: i64) -> OffsetCommit {
    OffsetCommit {
        topic_id,
        partition,
        offset,
        leader_epoch: 3,
        // Clients send NUL inside metadata (librdkafka via confluent-kafka).
        metadata: Some(b"meta\0".to_vec()),
    }
}

/// Topic "t" with `partitions` partitions, and group "g" (generation 1)
/// created by agent 1: the topic's id and agent 1's coordinator epoch.
async fn topic_and_new_group(meta: &rutomq_meta::Meta, partitions: i32) -> (uuid::Uuid, i64) {
    let t = meta
        .create_topic("t".into(), partitions, vec![])
        .await
        .unwrap()
        .unwrap()
        .topic_id;
    assert!(meta.claim_group("g".into(), 1).await.unwrap().is_none());
    let e1 = meta
        .store_group(group("g", 1), 0, 1)
        .await
        .unwrap()
        .expect("a new group is stored");
    (t, e1)
}

#[test]
fn a_takeover_fences_the_previous_coordinator() {
    with_meta("groups-fence", |pg| async move {
        let meta = &pg.meta;
        let (t, e1) = topic_and_new_group(meta, 2).await;
        assert_eq!(e1, 1);
        // A second "new" store (another agent racing) is refused.
        assert_eq!(meta.store_group(group("g", 1), 0, 2).await.unwrap(), None);
        let written = meta
            .commit_offsets("g".into(), e1, vec![offset(t, 0, 10), offset(t, 5, 1)])
            .await
            .unwrap()
            .expect("not fenced");
        assert_eq!(written, vec![(t, 0)], "partition 5 does not exist");

        // Agent 2 takes over: it sees what agent 1 stored.
        let (stored, e2) = meta.claim_group("g".into(), 2).await.unwrap().unwrap();
        assert!(e2 > e1);
        assert_eq!(stored, group("g", 1));
        // Agent 1 is fenced from now on.
        assert_eq!(meta.store_group(group("g", 2), e1, 1).await.unwrap(), None);
        assert_eq!(
            meta.commit_offsets("g".into(), e1, vec![offset(t, 0, 99)])
                .await
                .unwrap(),
            None
        );
        assert!(!meta.delete_group("g".into(), e1).await.unwrap());
        // Agent 2 writes.
        assert_eq!(
            meta.store_group(group("g", 2), e2, 2).await.unwrap(),
            Some(e2)
        );
        meta.commit_offsets("g".into(), e2, vec![offset(t, 1, 7)])
            .await
            .unwrap()
            .expect("not fenced");
        let got = meta.fetch_offsets("g".into(), None).await.unwrap();
        let got: Vec<(i32, i64, i32, Option<Vec<u8>>)> = got
            .into_iter()
            .map(|c| (c.partition, c.offset, c.leader_epoch, c.metadata))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, 10, 3, Some(b"meta\0".to_vec())),
                (1, 7, 3, Some(b"meta\0".to_vec()))
            ],
            "agent 1's fenced commit did not land"
        );
        let listed = meta.list_groups().await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].state, "Stable");

        // Offsets go with their topic.
        meta.delete_topic("t".into()).await.unwrap();
        assert!(meta
            .fetch_offsets("g".into(), None)
            .await
            .unwrap()
            .is_empty());
        // Deleting under the current epoch removes the group.
        assert!(meta.delete_group("g".into(), e2).await.unwrap());
        assert!(meta.claim_group("g".into(), 2).await.unwrap().is_none());
    });
}

#[test]
fn a_takeover_fences_the_previous_coordinators_transactional_offsets() {
    with_meta("groups-txn-fence", |pg| async move {
        let meta = &pg.meta;
        let (t, e1) = topic_and_new_group(meta, 1).await;
        // A transaction with the group added.
        let id = b"tx".to_vec();
        let (pid, epoch) = meta
            .txn_apply(id.clone(), true, true, |found| {
                let ask = InitAsk {
                    timeout_ms: 60_000,
                    expected: None,
                };
                init_producer_id(b"tx", ask, found)
            })
            .await
            .unwrap()
            .unwrap();
        let added = AddTo::Group("g".into());
        let code = meta
            .txn_apply(id.clone(), false, false, move |found| {
                add_to_txn(pid, epoch, &added, found)
            })
            .await
            .unwrap();
        assert_eq!(code, rutomq::error::ErrorCode::None);
        // TxnOffsetCommit of `value` for partition 0, as the coordinator of
        // epoch `group_epoch`.
        let commit = |group_epoch, value| {
            meta.txn_commit_offsets(
                id.clone(),
                pid,
                epoch,
                "g".into(),
                group_epoch,
                vec![offset(t, 0, value)],
            )
        };
        let (check, written) = commit(e1, 5).await.unwrap();
        assert_eq!((check, written), (TxnOffsetCheck::Written, vec![(t, 0)]));
        // Agent 2 takes the group over: agent 1's next write is fenced.
        let (_, e2) = meta.claim_group("g".into(), 2).await.unwrap().unwrap();
        let (check, written) = commit(e1, 9).await.unwrap();
        assert_eq!((check, written), (TxnOffsetCheck::GroupFenced, vec![]));
        let (check, _) = commit(e2, 9).await.unwrap();
        assert_eq!(check, TxnOffsetCheck::Written);
    });
}

#[test]
fn empty_groups_expire_after_the_offsets_retention() {
    with_meta("groups-expire", |pg| async move {
        let meta = &pg.meta;
        let t = meta
            .create_topic("t".into(), 1, vec![])
            .await
            .unwrap()
            .unwrap()
            .topic_id;
        let mut empty = group("old", 3);
        empty.state = "Empty".into();
        empty.members.clear();
        let e = meta.store_group(empty, 0, 1).await.unwrap().unwrap();
        meta.commit_offsets("old".into(), e, vec![offset(t, 0, 1)])
            .await
            .unwrap()
            .unwrap();
        let e2 = meta
            .store_group(group("busy", 1), 0, 1)
            .await
            .unwrap()
            .unwrap();
        meta.commit_offsets("busy".into(), e2, vec![offset(t, 0, 2)])
            .await
            .unwrap()
            .unwrap();
        // Retention far longer than their age: nothing goes.
        assert_eq!(
            meta.expire_groups(std::time::Duration::from_secs(3600 * 24 * 365 * 100))
                .await
                .unwrap(),
            (0, 0)
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        // A short retention: the empty group's offsets and then the group
        // go; the group with members keeps everything.
        assert_eq!(
            meta.expire_groups(std::time::Duration::from_millis(1))
                .await
                .unwrap(),
            (1, 1)
        );
        assert!(meta.claim_group("old".into(), 1).await.unwrap().is_none());
        assert_eq!(
            meta.fetch_offsets("busy".into(), None).await.unwrap().len(),
            1
        );
    });
}

/// An offset commit that updates one partition's row and adds another's,
/// while a deletion of their topic holds its partitions (as `delete_topic`
/// does before its cascade): the commit waits for the partitions before it
/// touches any offset row, so the cascade deletes the row it would have
/// updated and the commit then writes nothing. (Before, the commit updated
/// the first row, then waited at the second's foreign-key check for the
/// partition the deletion held, while the cascade waited for the first
/// row: PostgreSQL aborted one of them, 40P01.) A commit inside EndTxn
/// (`txn_apply_offsets.sql`) takes the partitions the same way.
#[test]
fn an_offset_commit_waits_for_the_deletion_of_its_topic() {
    with_meta("groups-deletion", |pg| async move {
        let meta = &pg.meta;
        let (t, e1) = topic_and_new_group(meta, 2).await;
        meta.commit_offsets("g".into(), e1, vec![offset(t, 0, 10)])
            .await
            .unwrap()
            .unwrap();
        let mut deleting = rutomq_meta::connect(&pg.url).await.unwrap();
        let tx = deleting.transaction().await.unwrap();
        for lock in [
            "SELECT 1 FROM topics WHERE topic_id = $1 FOR UPDATE",
            "SELECT 1 FROM partitions WHERE topic_id = $1 ORDER BY partition FOR UPDATE",
        ] {
            tx.query(lock, &[&t]).await.unwrap();
        }
        let commit = {
            let meta = meta.clone();
            tokio::spawn(async move {
                meta.commit_offsets("g".into(), e1, vec![offset(t, 0, 11), offset(t, 1, 5)])
                    .await
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(
            !commit.is_finished(),
            "the commit did not wait for the deletion"
        );
        tx.execute("DELETE FROM topics WHERE topic_id = $1", &[&t])
            .await
            .expect("the deletion's cascade");
        tx.commit().await.unwrap();
        assert_eq!(commit.await.unwrap().unwrap(), Some(vec![]));
        assert!(meta
            .fetch_offsets("g".into(), None)
            .await
            .unwrap()
            .is_empty());
    });
}
