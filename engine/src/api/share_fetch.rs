//! ShareFetch (key 78, KIP-932): a share group member fetches records it
//! then holds alone until it acknowledges them or its lock runs out; the
//! acknowledgements of what it fetched before ride along.
//!
//! Per partition of the member's share session: acknowledgements first;
//! then the first acquirable offset is read from the share-partition
//! state, the records from there are read as a Fetch reads them, and the
//! offsets those batches hold are acquired by compare-and-set on the state
//! (a consumer on another agent that took some first leaves the rest).
//! With nothing acquired the request waits for new records up to
//! MaxWaitMs.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use futures::future::{select, Either};
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ShareFetchRequest, ShareFetchResponse};
use uuid::Uuid;

use super::share_support::{
    acknowledge, batches, partition_error, requester, resolve_topics, rules_of, Batches, Refused,
};
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::limits::{FETCH_RESPONSE_BYTES_MAX, FETCH_WAIT_MS_MAX, SHARE_FETCH_RECHECK_MS};
use crate::records::batch_head;
use crate::shard::Shard;
use crate::share::partition::{spans_of, Acquired, Rules};
use crate::share::sessions::{release, Key, Release, Step};
use crate::share::store::{acquire, plan_read, At, StartAt};

/// ShareFetch, version 1 (v2's record-limit mode and lock renewal are
/// not served; clients use v1 for everything else).
pub const API: Api<ShareFetchRequest> = Api::new(ApiKey::ShareFetch, 1, 1);

fn top_error(code: ErrorCode, message: String) -> ShareFetchResponse {
    ShareFetchResponse::default()
        .with_error_code(code.code())
        .with_error_message(
            Some(message)
                .filter(|m| !m.is_empty())
                .map(|m| str_bytes(&m)),
        )
}

pub async fn handle(shard: &Rc<Shard>, req: &Req, body: ShareFetchRequest) -> ShareFetchResponse {
    let (group, member) = match requester(
        shard,
        req,
        body.group_id.as_ref().map(|g| g.0.as_str()),
        body.member_id.as_ref().map(|m| m.as_str()),
    ) {
        Ok(who) => who,
        Err((code, message)) => {
            tracing::debug!(error = ?code, %message, "share fetch refused");
            return top_error(code, message);
        }
    };
    let (rules, start, committed) = rules_of(shard, &group);
    // What the request names: partitions added to the session (with their
    // acknowledgements) and forgotten.
    let mut added: Vec<Key> = Vec::new();
    let mut acks: Vec<(Key, Result<Batches, Refused>)> = Vec::new();
    for t in &body.topics {
        for p in &t.partitions {
            let key = (t.topic_id, p.partition_index);
            added.push(key);
            if !p.acknowledgement_batches.is_empty() {
                let wire = p
                    .acknowledgement_batches
                    .iter()
                    .map(|b| (b.first_offset, b.last_offset, &b.acknowledge_types));
                acks.push((key, batches(wire)));
            }
        }
    }
    let forgotten: Vec<Key> = body
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p)))
        .collect();
    let conn = req.conn.clone();
    let step = match conn.as_ref() {
        None => Err((ErrorCode::ShareSessionNotFound, String::new())),
        Some(c) => c.share_sessions.borrow_mut().fetch_step(
            (group.clone(), member.clone()),
            body.share_session_epoch,
            &added,
            &forgotten,
            !acks.is_empty(),
            Release {
                meta: &shard.agent.meta,
                rules,
                registry: &shard.agent.share_sessions,
            },
        ),
    };
    let step = match step {
        Ok(s) => s,
        Err((code, message)) => {
            tracing::debug!(%group, %member, error = ?code, %message, "share fetch session refused");
            if code == ErrorCode::ShareSessionLimitReached {
                // Kafka answers this after MaxWaitMs (the client retries).
                let ms = body.max_wait_ms.clamp(0, FETCH_WAIT_MS_MAX) as u64;
                rutomq_shards::sleep(Duration::from_millis(ms)).await;
            }
            return top_error(code, message);
        }
    };
    let keys = match &step {
        Step::Fetch(k) | Step::Close(k) => k.clone(),
    };
    let topics = resolve_topics(
        shard,
        req,
        keys.iter().chain(acks.iter().map(|a| &a.0)).map(|k| k.0),
    )
    .await;
    // Each partition's answer, made when first named.
    fn entry(out: &mut HashMap<Key, PartitionData>, key: Key) -> &mut PartitionData {
        out.entry(key)
            .or_insert_with(|| PartitionData::default().with_partition_index(key.1))
    }
    let mut out: HashMap<Key, PartitionData> = HashMap::new();
    for (key, batches) in &acks {
        let (code, message) = match (partition_error(&topics, *key), batches) {
            (Some(e), _) => (e, None),
            (None, Err((code, message))) => (*code, Some(message.clone())),
            (None, Ok(b)) => acknowledge(shard, &group, &member, *key, b, &rules).await,
        };
        let p = entry(&mut out, *key);
        p.acknowledge_error_code = code.code();
        p.acknowledge_error_message = message.map(|m| str_bytes(&m));
    }
    match step {
        Step::Close(keys) => release(&shard.agent.meta, &group, &member, &keys, &rules).await,
        Step::Fetch(keys) => {
            let mut fetchable = Vec::new();
            for key in keys {
                let p = entry(&mut out, key);
                match partition_error(&topics, key) {
                    Some(e) => p.error_code = e.code(),
                    None => fetchable.push(key),
                }
            }
            // Each request starts at another partition, so none starves.
            if !fetchable.is_empty() {
                let turn = body.share_session_epoch.max(0) as usize % fetchable.len();
                fetchable.rotate_left(turn);
            }
            let ask = Ask {
                group: &group,
                member: &member,
                rules: &rules,
                start,
                max_bytes: (body.max_bytes.max(0) as usize).min(FETCH_RESPONSE_BYTES_MAX),
                max_records: body.max_records.max(0) as usize,
                committed,
            };
            let fetched = fetch(shard, &body, &ask, &fetchable).await;
            for (key, records, acquired) in fetched {
                if let Some(p) = out.get_mut(&key) {
                    p.records = Some(records);
                    p.acquired_records = acquired
                        .into_iter()
                        .map(|(first, last, count)| {
                            AcquiredRecords::default()
                                .with_first_offset(first)
                                .with_last_offset(last)
                                .with_delivery_count(count.min(i16::MAX as u16) as i16)
                        })
                        .collect();
                }
            }
        }
    }
    let mut by_topic: HashMap<Uuid, Vec<PartitionData>> = HashMap::new();
    for ((topic, _), mut p) in out {
        if p.records.is_none() {
            p.records = Some(bytes::Bytes::new());
        }
        by_topic.entry(topic).or_default().push(p);
    }
    let mut responses: Vec<ShareFetchableTopicResponse> = by_topic
        .into_iter()
        .map(|(topic_id, mut partitions)| {
            partitions.sort_by_key(|p| p.partition_index);
            ShareFetchableTopicResponse::default()
                .with_topic_id(topic_id)
                .with_partitions(partitions)
        })
        .collect();
    responses.sort_by_key(|t| t.topic_id);
    ShareFetchResponse::default()
        .with_acquisition_lock_timeout_ms(rules.lock_ms.min(i32::MAX as i64) as i32)
        .with_responses(responses)
}

/// What one share fetch asks.
struct Ask<'a> {
    group: &'a str,
    member: &'a str,
    rules: &'a Rules,
    start: StartAt,
    max_bytes: usize,
    max_records: usize,
    /// share.isolation.level=read_committed: up to the last stable
    /// offset, aborted transactions' records archived, not delivered.
    committed: bool,
}

/// Acquires records of `keys` for `member`, waiting up to MaxWaitMs for
/// some: each partition's batches (whole, as stored) and what of them the
/// member holds now. While it waits it looks again when a partition's high
/// watermark moves, and every `SHARE_FETCH_RECHECK_MS` (records given back
/// or whose lock ran out need no new record).
async fn fetch(
    shard: &Rc<Shard>,
    body: &ShareFetchRequest,
    ask: &Ask<'_>,
    keys: &[Key],
) -> Vec<(Key, bytes::Bytes, Vec<Acquired>)> {
    let deadline =
        Instant::now() + Duration::from_millis(body.max_wait_ms.clamp(0, FETCH_WAIT_MS_MAX) as u64);
    if keys.is_empty() || ask.max_bytes == 0 || ask.max_records == 0 {
        return Vec::new();
    }
    let marks = || -> Vec<Option<i64>> {
        keys.iter()
            .map(|k| shard.reader.watermarks.known(k.0, k.1))
            .collect()
    };
    loop {
        // Register before reading, so a commit in between is not missed.
        let mut changed = shard.reader.watermarks.changed();
        let seen = marks();
        let got = fetch_once(shard, ask, keys).await;
        let any = got.iter().any(|(_, _, a)| !a.is_empty());
        let stopping = shard
            .agent
            .stopping
            .load(std::sync::atomic::Ordering::Relaxed);
        if any || stopping || Instant::now() >= deadline {
            return got;
        }
        let recheck =
            (Instant::now() + Duration::from_millis(SHARE_FETCH_RECHECK_MS)).min(deadline);
        loop {
            let wait = recheck.saturating_duration_since(Instant::now());
            let timer = Box::pin(rutomq_shards::sleep(wait));
            match select(changed, timer).await {
                // Another partition's commit: wait on.
                Either::Left(_) if marks() == seen => changed = shard.reader.watermarks.changed(),
                _ => break,
            }
        }
    }
}

async fn fetch_once(
    shard: &Rc<Shard>,
    ask: &Ask<'_>,
    keys: &[Key],
) -> Vec<(Key, bytes::Bytes, Vec<Acquired>)> {
    let mut out = Vec::with_capacity(keys.len());
    let mut bytes_left = ask.max_bytes;
    let mut records_left = ask.max_records;
    for &key in keys {
        let empty = (key, bytes::Bytes::new(), Vec::new());
        if bytes_left == 0 || records_left == 0 {
            out.push(empty);
            continue;
        }
        let at = At {
            meta: &shard.agent.meta,
            group_id: ask.group,
            key,
            rules: ask.rules,
        };
        let Some(planned) = plan_read(&at, ask.start).await else {
            out.push(empty);
            continue;
        };
        let mut grant = shard.fetch_budget.reserve(bytes_left);
        if grant.bytes == 0 {
            out.push(empty);
            continue;
        }
        let read = match shard
            .reader
            .read_partition(
                key.0,
                key.1,
                planned.from,
                grant.bytes,
                ask.committed,
                true,
                None,
            )
            .await
        {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(group = ask.group, topic = %key.0, partition = key.1, error = ?e, "share fetch read failed");
                out.push(empty);
                continue;
            }
        };
        let spans = spans_of(&read.records.batches, read.aborted.as_deref());
        let acquired = acquire(&at, ask.member, planned, &spans, records_left).await;
        if acquired.is_empty() {
            out.push(empty);
            continue;
        }
        let taken: usize = acquired.iter().map(|a| (a.1 - a.0 + 1) as usize).sum();
        let again: usize = acquired
            .iter()
            .filter(|a| a.2 > 1)
            .map(|a| (a.1 - a.0 + 1) as usize)
            .sum();
        let m = &shard.metrics;
        m.share_records_acquired
            .fetch_add(taken as u64, std::sync::atomic::Ordering::Relaxed);
        m.share_records_redelivered
            .fetch_add(again as u64, std::sync::atomic::Ordering::Relaxed);
        records_left = records_left.saturating_sub(taken);
        // Only the batches holding acquired offsets go back.
        let (lo, hi) = (acquired[0].0, acquired[acquired.len() - 1].1);
        let mut buf = BytesMut::new();
        for (base, batch) in &read.records.batches {
            let last = batch_head(batch).map_or(*base, |h| base + h.last_offset_delta as i64);
            if last >= lo && *base <= hi {
                crate::records::put_with_base_offset(&mut buf, batch, *base);
            }
        }
        grant.shrink_to(buf.len());
        bytes_left = bytes_left.saturating_sub(buf.len());
        m.fetch_bytes
            .fetch_add(buf.len() as u64, std::sync::atomic::Ordering::Relaxed);
        out.push((key, buf.freeze(), acquired));
    }
    out
}
