//! Change announcements between agents (`NOTIFY`), sent once the
//! transaction that made the change has committed, from a connection of
//! their own.
//!
//! Not inside that transaction: PostgreSQL serializes every committing
//! transaction that queued a notification on one database-wide lock, taken
//! before the commit record is written and held until its WAL flush is
//! done. Window commits and transaction ends that each notified waited for
//! each other's flushes one by one instead of sharing one (group commit):
//! `Lock:object` at `COMMIT` was the commonest wait in `pg_stat_activity`
//! under a transactional produce load, and gone with the notifications
//! moved here. This connection runs with `synchronous_commit` off, so the
//! lock is held for the insertion of a commit record only.
//!
//! Announcements are hints to the other agents' caches (cached watermarks
//! expire, the stable index drops an entry when it sees a gap; see the
//! listener in the crate root), so one lost when PostgreSQL is away, or
//! dropped because the queue is full, costs a cache refresh, never a wrong
//! answer. Sent in commit order from one connection, an agent's own
//! announcements arrive in order; two agents' may interleave in any order,
//! which their receivers tolerate (they keep the highest offsets).

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use futures::StreamExt;
use tokio_postgres::{AsyncMessage, NoTls};

use crate::limits::{NOTICES_QUEUED_MAX, NOTIFY_BATCH_MAX, NOTIFY_QUEUE_MAX};
use crate::{commit, sql, MetaError, MetaStats, Notice, NoticeListener};

/// The channel of new high watermarks and last stable offsets.
pub(crate) const WATERMARKS: &str = "rutomq_watermarks";
/// The channel of new log start offsets.
pub(crate) const LOG_STARTS: &str = "rutomq_log_starts";
/// The channel of partitions a compaction pass rewrote (their cached spans
/// are stale: they still read, as the older history).
pub(crate) const COMPACTED: &str = "rutomq_compacted";
/// The channel of topic rows changed (a trigger on `topics` announces them).
pub(crate) const TOPICS: &str = "rutomq_topics";
/// SCRAM credentials of a user changed (payload: the user name), by a
/// trigger (migration 7).
pub(crate) const CREDENTIALS: &str = "rutomq_credentials";
/// ACLs were created or deleted, by a trigger (migration 8).
pub(crate) const ACLS: &str = "rutomq_acls";
/// Client quotas were altered, by a trigger (migration 9).
pub(crate) const QUOTAS: &str = "rutomq_quotas";
/// Dynamic configs were altered, by a trigger (migration 10).
pub(crate) const CONFIGS: &str = "rutomq_configs";
/// Delegation tokens changed, by a trigger (migration 11).
pub(crate) const TOKENS: &str = "rutomq_tokens";

struct Announcement {
    channel: &'static str,
    payload: String,
}

/// The queue towards the notifier connection. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Notifier {
    tx: mpsc::Sender<Announcement>,
    stats: Arc<MetaStats>,
}

impl Notifier {
    /// Starts the notifier on the current runtime.
    pub(crate) fn start(url: String, stats: Arc<MetaStats>) -> Notifier {
        let (tx, rx) = mpsc::channel(NOTIFY_QUEUE_MAX);
        tokio::spawn(run(url, rx, stats.clone()));
        Notifier { tx, stats }
    }

    /// Announces `payloads` on `channel`; call it after their transaction
    /// committed. Never waits: past [`NOTIFY_QUEUE_MAX`] queued they are
    /// dropped (and counted).
    pub(crate) fn announce(&self, channel: &'static str, payloads: Vec<String>) {
        for payload in payloads {
            if self.tx.try_send(Announcement { channel, payload }).is_err() {
                self.stats.notices_dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The notifier connection's session: announcements need no durability.
async fn connect(
    url: &str,
) -> Result<(tokio_postgres::Client, tokio_postgres::Statement), MetaError> {
    let client = crate::connect(url).await?;
    client
        .batch_execute("SET synchronous_commit TO off")
        .await?;
    let notify = client.prepare(sql::NOTIFY).await?;
    Ok((client, notify))
}

/// Sends what is queued, up to [`NOTIFY_BATCH_MAX`] announcements per
/// transaction (one round trip), reconnecting with a bounded backoff; what
/// arrives while PostgreSQL is away is dropped.
async fn run(url: String, mut rx: mpsc::Receiver<Announcement>, stats: Arc<MetaStats>) {
    let mut batch = Vec::with_capacity(NOTIFY_BATCH_MAX);
    let mut conn = None;
    let mut backoff = Duration::from_millis(100);
    while rx.recv_many(&mut batch, NOTIFY_BATCH_MAX).await > 0 {
        let sent = async {
            if conn
                .as_ref()
                .is_none_or(|(c, _): &(tokio_postgres::Client, _)| c.is_closed())
            {
                conn = Some(connect(&url).await?);
            }
            let (c, notify) = conn.as_ref().expect("connected above");
            let params: Vec<[&(dyn tokio_postgres::types::ToSql + Sync); 2]> = batch
                .iter()
                .map(|a| [&a.channel as _, &a.payload as _])
                .collect();
            let (begun, notified, committed) = futures::join!(
                c.batch_execute("BEGIN"),
                futures::future::try_join_all(params.iter().map(|p| c.execute(notify, p))),
                c.batch_execute("COMMIT")
            );
            begun?;
            notified?;
            committed?;
            Ok::<_, MetaError>(())
        }
        .await;
        match sent {
            Ok(()) => {
                backoff = Duration::from_millis(100);
                stats
                    .notices_sent
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
            }
            Err(e) => {
                stats
                    .notices_dropped
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                tracing::warn!(error = %e, dropped = batch.len(), "cannot send change notifications");
                match &conn {
                    Some((c, _)) if !c.is_closed() => {
                        let _ = c.batch_execute("ROLLBACK").await;
                    }
                    _ => {
                        conn = None;
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                    }
                }
            }
        }
        batch.clear();
    }
}

/// `LISTEN`s for watermark and log start changes committed by any agent,
/// reconnecting with a bounded backoff. Changes missed while disconnected
/// are picked up when the shards' cached watermarks expire.
///
/// The notices of this agent's own window commits (`own_agent`, tagged in
/// their payloads) are passed over: the pipeline tells the shards of those
/// itself, with the new spans, and a notice that overtook it woke long
/// polls that then found the spans missing and asked PostgreSQL.
pub(crate) async fn run_listener(
    url: String,
    on_notice: Arc<NoticeListener>,
    own_agent: Arc<AtomicI32>,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        match listen_once(&url, &on_notice, &own_agent).await {
            Ok(()) => backoff = Duration::from_millis(100),
            Err(e) => tracing::warn!(error = %e, "LISTEN connection failed; reconnecting"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

async fn listen_once(
    url: &str,
    on_notice: &Arc<NoticeListener>,
    own_agent: &AtomicI32,
) -> Result<(), MetaError> {
    let (client, mut connection) = tokio_postgres::connect(url, NoTls).await?;
    type Received = Result<(String, String), tokio_postgres::Error>;
    let (ntx, mut nrx) = mpsc::channel::<Received>(NOTICES_QUEUED_MAX);
    let pump = tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(m) = messages.next().await {
            match m {
                Ok(AsyncMessage::Notification(n)) => {
                    let channel = n.channel().to_owned();
                    match ntx.try_send(Ok((channel, n.payload().to_owned()))) {
                        Ok(()) => {}
                        // A notification is a hint: the shards' cached
                        // watermarks expire and long polls end at their
                        // max_wait_ms. Blocking here instead would leave
                        // the connection unread and fill PostgreSQL's
                        // notification queue, which fails commits.
                        Err(mpsc::error::TrySendError::Full(_)) => {
                            tracing::debug!(
                                "notification queue full; a watermark notice is dropped"
                            );
                        }
                        Err(mpsc::error::TrySendError::Closed(_)) => return,
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    let _ = ntx.try_send(Err(e));
                    return;
                }
            }
        }
    });
    client
        .batch_execute(&format!(
            "LISTEN {WATERMARKS}; LISTEN {LOG_STARTS}; LISTEN {COMPACTED}; LISTEN {TOPICS}; \
             LISTEN {CREDENTIALS}; LISTEN {ACLS}; LISTEN {QUOTAS}; LISTEN {CONFIGS}; LISTEN {TOKENS}"
        ))
        .await?;
    while let Some(m) = nrx.recv().await {
        let (channel, payload) = m?;
        on_notice(match channel.as_str() {
            LOG_STARTS => Notice::LogStarts(commit::parse_offset_payload(&payload)),
            COMPACTED => Notice::Compacted(commit::parse_offset_payload(&payload)),
            TOPICS => Notice::TopicChanged(payload),
            CREDENTIALS => Notice::CredentialsChanged(payload),
            ACLS => Notice::AclsChanged,
            QUOTAS => Notice::QuotasChanged,
            CONFIGS => Notice::ConfigsChanged,
            TOKENS => Notice::TokensChanged,
            _ => {
                let own = own_agent.load(Ordering::Relaxed);
                if own != 0 && commit::payload_agent(&payload) == Some(own) {
                    continue;
                }
                Notice::Watermarks(commit::parse_marks_payload(&payload))
            }
        });
    }
    pump.abort();
    Ok(())
}
