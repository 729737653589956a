//! A share-partition's state changed in PostgreSQL: loaded, changed by a
//! pure function, written back if still at the version read (else loaded
//! again and changed again). Agents never hold share-partition state
//! between requests, so any agent serves any share consumer.

use rutomq_meta::share::{ShareLoaded, ShareRow, ShareWrite};
use rutomq_meta::Meta;
use uuid::Uuid;

use super::partition::{Acquired, Rules, SharePartition, Span};
use crate::error::ErrorCode;
use crate::limits::SHARE_CAS_ATTEMPTS_MAX;

/// Where a new share-partition starts (share.auto.offset.reset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartAt {
    /// The log's end when first consumed (Kafka's default).
    Latest,
    /// The log's start.
    Earliest,
}

impl StartAt {
    /// From the group config's value (`by_duration:` is read as latest).
    pub fn parse(value: Option<&str>) -> StartAt {
        match value.map(str::trim) {
            Some("earliest") => StartAt::Earliest,
            _ => StartAt::Latest,
        }
    }
}

/// The partition's log as a change sees it, and the time: PostgreSQL's
/// clock, so that lock deadlines set by any agent are on one clock.
#[derive(Clone, Copy, Debug)]
pub struct Ends {
    pub high_watermark: i64,
    pub log_start: i64,
    pub now_ms: i64,
}

/// What a change came to.
#[derive(Debug)]
pub enum Changed<T> {
    Done(T),
    /// No such partition.
    NoPartition,
    /// The group has no stored row (it never had a member).
    NoGroup,
    /// The group has no state of the partition (and none was to be made).
    NoState,
    /// Others kept changing the state first.
    Busy,
}

impl<T> Changed<T> {
    fn map<U>(self, f: impl FnOnce(T) -> U) -> Changed<U> {
        match self {
            Changed::Done(t) => Changed::Done(f(t)),
            Changed::NoPartition => Changed::NoPartition,
            Changed::NoGroup => Changed::NoGroup,
            Changed::NoState => Changed::NoState,
            Changed::Busy => Changed::Busy,
        }
    }
}

/// Applies `change` to `group_id`'s state of `key`; `change` says whether
/// it changed anything to write. A state not there yet starts at `start`
/// (and is stored: where it started must not move), or is not made when
/// `start` is `None`; one below the log's start (retention) moves up to
/// it.
pub async fn change<T>(
    meta: &Meta,
    group_id: &str,
    key: (Uuid, i32),
    start: Option<StartAt>,
    mut change: impl FnMut(&mut SharePartition, Ends) -> (T, bool),
) -> Result<Changed<T>, ErrorCode> {
    change_epoch(meta, group_id, key, start, |p, _, ends| change(p, ends)).await
}

/// Sets where the group's consumption of `key` starts (AlterShareGroupOffsets):
/// nothing in flight any more, a new state epoch.
pub async fn set_start(
    meta: &Meta,
    group_id: &str,
    key: (Uuid, i32),
    offset: i64,
) -> Result<Changed<()>, ErrorCode> {
    change_epoch(meta, group_id, key, Some(StartAt::Latest), |p, epoch, _| {
        *p = SharePartition::new(offset);
        *epoch = epoch.wrapping_add(1);
        ((), true)
    })
    .await
}

/// A share-partition as Kafka's share coordinator keeps it: (state
/// epoch, start offset, state batches); `None` when the group has none.
pub async fn read(
    meta: &Meta,
    group_id: &str,
    key: (Uuid, i32),
) -> Result<Option<(i32, i64, Vec<(i64, i64, i8, i16)>)>, ErrorCode> {
    match change_epoch(meta, group_id, key, None, |p, epoch, _| {
        ((*epoch, p.start(), p.state_batches()), false)
    })
    .await?
    {
        Changed::Done(s) => Ok(Some(s)),
        _ => Ok(None),
    }
}

/// Replaces a share-partition's state with Kafka's persisted form
/// (InitializeShareGroupState, WriteShareGroupState) at `state_epoch`,
/// which may not be older than the stored one (FENCED_STATE_EPOCH).
pub async fn replace(
    meta: &Meta,
    group_id: &str,
    key: (Uuid, i32),
    state_epoch: i32,
    state: SharePartition,
) -> Result<Changed<Result<(), ErrorCode>>, ErrorCode> {
    change_epoch(meta, group_id, key, Some(StartAt::Latest), |p, epoch, _| {
        if state_epoch < *epoch {
            return (Err(ErrorCode::FencedStateEpoch), false);
        }
        *p = state.clone();
        *epoch = state_epoch;
        (Ok(()), true)
    })
    .await
}

/// [`change`], which may also move the state epoch.
pub async fn change_epoch<T>(
    meta: &Meta,
    group_id: &str,
    key: (Uuid, i32),
    start: Option<StartAt>,
    change: impl FnMut(&mut SharePartition, &mut i32, Ends) -> (T, bool),
) -> Result<Changed<T>, ErrorCode> {
    Ok(change_from(meta, group_id, key, start, None, change)
        .await?
        .map(|(out, _)| out))
}

/// A share-partition's state as stored (after a change): what a later
/// change of the same request may start from without loading it again.
#[derive(Clone, Debug)]
pub struct Known {
    version: i64,
    epoch: i32,
    state: SharePartition,
    ends: Ends,
    /// When `ends.now_ms` was read.
    at: std::time::Instant,
}

/// [`change_epoch`], starting from `known` when given (a compare-and-set
/// without a load first; a load and another try when it raced), and
/// giving the state as it was left.
async fn change_from<T>(
    meta: &Meta,
    group_id: &str,
    key: (Uuid, i32),
    start: Option<StartAt>,
    mut known: Option<Known>,
    mut change: impl FnMut(&mut SharePartition, &mut i32, Ends) -> (T, bool),
) -> Result<Changed<(T, Known)>, ErrorCode> {
    for _ in 0..SHARE_CAS_ATTEMPTS_MAX {
        // One attempt: load (or start from what is known), change, write if
        // still at the version read.
        let (mut state, version, mut state_epoch, ends, read_at) = match known.take() {
            Some(k) => (k.state, Some(k.version), k.epoch, k.ends, k.at),
            None => {
                let loaded = meta
                    .share_load(group_id.to_owned(), vec![key])
                    .await
                    .map_err(|e| {
                        tracing::warn!(group = %group_id, error = %e, "cannot load a share-partition");
                        ErrorCode::from(&e)
                    })?;
                let Some(ShareLoaded {
                    ends: Some((high_watermark, log_start)),
                    row,
                    now_ms,
                    ..
                }) = loaded.into_iter().next()
                else {
                    return Ok(Changed::NoPartition);
                };
                let ends = Ends {
                    high_watermark,
                    log_start,
                    now_ms,
                };
                let at = std::time::Instant::now();
                match &row {
                    None => {
                        let at_offset = match start {
                            None => return Ok(Changed::NoState),
                            Some(StartAt::Latest) => high_watermark,
                            Some(StartAt::Earliest) => log_start,
                        };
                        (SharePartition::new(at_offset), None, 0, ends, at)
                    }
                    Some(r) => (
                        SharePartition::decode(&r.state).unwrap_or_else(|| {
                            tracing::warn!(group = %group_id, topic = %key.0, partition = key.1,
                                "unreadable share-partition state; starting again from its start offset");
                            SharePartition::new(r.start_offset)
                        }),
                        Some(r.version),
                        r.state_epoch,
                        ends,
                        at,
                    ),
                }
            }
        };
        let moved = state.start() < ends.log_start;
        if moved {
            state.reset(ends.log_start);
        }
        let (out, changed) = change(&mut state, &mut state_epoch, ends);
        if let (false, false, Some(v)) = (changed, moved, version) {
            let known = Known {
                version: v,
                epoch: state_epoch,
                state,
                ends,
                at: read_at,
            };
            return Ok(Changed::Done((out, known)));
        }
        let row = ShareRow {
            version: version.unwrap_or(0),
            state_epoch,
            start_offset: state.start(),
            state: state.encode().to_vec(),
        };
        match meta
            .share_write(group_id.to_owned(), key, version, row)
            .await
            .map_err(|e| {
                tracing::warn!(group = %group_id, error = %e, "cannot write a share-partition");
                ErrorCode::from(&e)
            })? {
            ShareWrite::Written => {
                let known = Known {
                    version: version.map_or(1, |v| v + 1),
                    epoch: state_epoch,
                    state,
                    ends,
                    at: read_at,
                };
                return Ok(Changed::Done((out, known)));
            }
            ShareWrite::NoGroup => return Ok(Changed::NoGroup),
            ShareWrite::Raced => {
                // Others change it at once: back off a little (jittered),
                // so consumers of one partition take turns.
                let us = 200 + (Uuid::new_v4().as_u128() % 1_000) as u64;
                rutomq_shards::sleep(std::time::Duration::from_micros(us)).await;
            }
        }
    }
    Ok(Changed::Busy)
}

/// One share-partition of one group, as a share fetch works on it.
pub struct At<'a> {
    pub meta: &'a Meta,
    pub group_id: &'a str,
    pub key: (Uuid, i32),
    pub rules: &'a Rules,
}

/// Where a read for a share fetch starts: the first acquirable offset, the
/// state epoch it was planned at, and the state as the plan left it (the
/// acquisition's compare-and-set starts from it).
#[derive(Clone, Debug)]
pub struct Planned {
    pub from: i64,
    pub epoch: i32,
    known: Known,
}

/// Where a share fetch reads from: the first acquirable offset below the
/// high watermark (`None`: nothing to acquire now). A share-partition
/// first consumed is stored where it starts, so its start does not move
/// with the log.
pub async fn plan_read(at: &At<'_>, start: StartAt) -> Option<Planned> {
    let rules = at.rules;
    let planned = change_from(
        at.meta,
        at.group_id,
        at.key,
        Some(start),
        None,
        |p, epoch, ends| {
            p.expire(ends.now_ms, rules);
            let from = p.next_fetch(rules).filter(|f| *f < ends.high_watermark);
            (from.map(|from| (from, *epoch)), false)
        },
    )
    .await;
    match planned {
        Ok(Changed::Done((Some((from, epoch)), known))) => Some(Planned { from, epoch, known }),
        _ => None,
    }
}

/// Acquires for `member` the offsets of `spans`, read as `planned`
/// (nothing when the state was set anew since): a compare-and-set on the
/// state the plan saw, loaded again only when another change came first.
pub async fn acquire(
    at: &At<'_>,
    member: &str,
    planned: Planned,
    spans: &[Span],
    max_records: usize,
) -> Vec<Acquired> {
    let rules = at.rules;
    let (from, epoch) = (planned.from, planned.epoch);
    let mut known = planned.known;
    // The read took a while since the plan's clock reading.
    known.ends.now_ms += known.at.elapsed().as_millis() as i64;
    let result = change_from(
        at.meta,
        at.group_id,
        at.key,
        None,
        Some(known),
        |p, current, ends| {
            if *current != epoch {
                return (Vec::new(), false);
            }
            let before = p.clone();
            p.expire(ends.now_ms, rules);
            let got = p.acquire(member, from, spans, max_records, ends.now_ms, rules);
            let changed = *p != before;
            (got, changed)
        },
    )
    .await;
    match result {
        Ok(Changed::Done((got, _))) => got,
        _ => Vec::new(),
    }
}
