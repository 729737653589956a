//! Ordered metadata in PostgreSQL: topics, partitions, spans, producer state,
//! live agents.
//!
//! A dedicated thread runs a tokio runtime with its connections: one for
//! window commits (strictly in the order they are submitted, several queued
//! windows group-committed in one transaction), one shared by every other
//! query (tokio-postgres pipelines concurrent queries on it), one for topic
//! changes, a few for transaction state changes, and two for change
//! announcements (module `notify`): one `NOTIFY`s the other agents of what this
//! one committed, one `LISTEN`s for what any agent committed.
//!
//! Callers on any runtime (glommio shards included) talk to it through
//! [`Meta`], whose methods are `Send` futures over bounded channels.

pub mod acl;
pub mod commit;
pub mod compact;
pub mod dynamic;
pub mod groups;
pub mod limits;
mod notify;
pub mod producer;
pub mod quota;
pub mod security;
pub mod share;
mod sql;
pub mod token;
pub mod txn;

pub use limits::*;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::channel::oneshot;
use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::sync::mpsc;
use tokio_postgres::types::ToSql;
use tokio_postgres::NoTls;
use uuid::Uuid;

pub use commit::{
    BatchOutcome, BatchRef, CommitResult, MarksNews, ObjectCommit, PartitionAppend, PartitionMarks,
    ProducerFields,
};

/// Session settings of every connection: no statement or lock wait is
/// unbounded (a commit blocked on another agent's dead transaction fails
/// and is retried by its client instead of stalling the agent).
pub const SESSION_OPTIONS: &str = "-c statement_timeout=60000 -c lock_timeout=30000";

#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    #[error("postgres: {}", pg_detail(.0))]
    Postgres(#[from] tokio_postgres::Error),
    #[error("metadata thread is gone")]
    Closed,
    #[error("{0}")]
    Invalid(String),
    #[error("the object was uploaded too long ago to be committed safely (the orphan collector may remove it); retry")]
    Expired,
}

/// A PostgreSQL error with the server's message (tokio-postgres' own
/// Display says only "db error").
fn pg_detail(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{e}: {} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}

impl MetaError {
    /// True when retrying later may succeed (connection trouble), as opposed
    /// to a request that can never succeed.
    pub fn is_retriable(&self) -> bool {
        !matches!(self, MetaError::Invalid(_))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicRecord {
    pub topic_id: Uuid,
    pub name: String,
    pub partitions: i32,
    pub configs: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentRecord {
    pub agent_id: i32,
    /// The first listener's advertised address.
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
    /// Every listener's advertised address, by listener name.
    pub listeners: Vec<Endpoint>,
}

/// An agent's registration as operators see it.
#[derive(Clone, Debug)]
pub struct AgentLease {
    pub agent_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
    /// Unix time of its registration.
    pub started_at_ms: i64,
    /// Until its lease runs out; negative once it has.
    pub lease_left_ms: i64,
}

/// A listener's advertised address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub name: String,
    pub host: String,
    pub port: i32,
}

impl AgentRecord {
    /// The address clients of listener `name` use to reach this agent
    /// (`None`: the agent has no such listener). An agent registered
    /// without listener names has one, under every name.
    pub fn endpoint(&self, name: &str) -> Option<(&str, i32)> {
        if self.listeners.is_empty() {
            return Some((&self.host, self.port));
        }
        self.listeners
            .iter()
            .find(|e| e.name == name)
            .map(|e| (e.host.as_str(), e.port))
    }
}

#[derive(Clone, Debug)]
pub struct SpanRecord {
    pub base_offset: i64,
    pub last_offset: i64,
    pub object_key: String,
    pub byte_start: u64,
    pub byte_len: u32,
    pub batch_count: i32,
    pub max_timestamp: i64,
    /// Size of the whole object (0 if unknown): small objects are read
    /// whole once and cached, so the partitions sharing them cost one GET.
    pub object_size: u64,
    /// Written by compaction: each batch carries its own base offset and
    /// gaps lie between them (the last batch still ends at `last_offset`).
    /// Otherwise batches follow each other from `base_offset`.
    pub sparse: bool,
    /// A transaction marker (one offset, no object: `object_key` is empty).
    pub marker: Option<crate::txn::MarkerRecord>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionOffsets {
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub max_timestamp: i64,
    /// Below the first offset of every open transaction, at most the high
    /// watermark.
    pub last_stable_offset: i64,
}

#[derive(Debug)]
pub enum CreateTopicError {
    AlreadyExists,
}

/// What a notification seen on `LISTEN` (from any agent) carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// New high watermarks and last stable offsets (window commits,
    /// transaction markers).
    Watermarks(Vec<MarksNews>),
    /// New log start offsets (retention, DeleteRecords).
    LogStarts(Vec<(Uuid, i32, i64)>),
    /// Partitions a compaction pass rewrote, with the offset it cleaned to.
    Compacted(Vec<(Uuid, i32, i64)>),
    /// A topic row changed (created, partitions added, deleted, configs):
    /// its name (announced by a trigger, migration 6).
    TopicChanged(String),
    /// A user's SCRAM credentials changed: the user name (migration 7).
    CredentialsChanged(String),
    /// ACLs were created or deleted (migration 8).
    AclsChanged,
    /// Client quotas were altered (migration 9).
    QuotasChanged,
    /// Dynamic configs were altered (migration 10).
    ConfigsChanged,
    /// Delegation tokens were created, renewed or expired (migration 11).
    TokensChanged,
}

/// Called with every notification.
pub type NoticeListener = Box<dyn Fn(Notice) + Send + Sync>;

/// Advisory lock held by the agent dropping retired spans (exclusive: one
/// at a time, so two agents never each leave an object's last span to the
/// other), and shared by topic deletions (they delete markers before spans,
/// the collector spans before markers: one waits for the other instead of
/// deadlocking).
const RETIRE_LOCK: i64 = 724_617_002;

/// What moving one partition's log start offset did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogStartOutcome {
    /// The log start offset now (the low watermark).
    Moved {
        low_watermark: i64,
    },
    /// The requested offset is past the high watermark (or below -1).
    OffsetOutOfRange,
    UnknownPartition,
}

/// Counters for `/metrics`.
#[derive(Default, Debug)]
pub struct MetaStats {
    pub commit_transactions: AtomicU64,
    pub committed_windows: AtomicU64,
    pub committed_spans: AtomicU64,
    pub commit_failures: AtomicU64,
    pub queries: AtomicU64,
    /// Partitions whose log start retention moved.
    pub log_starts_moved: AtomicU64,
    /// Spans dropped after the log start passed them.
    pub spans_dropped: AtomicU64,
    /// Change announcements sent to the other agents.
    pub notices_sent: AtomicU64,
    /// Change announcements dropped (queue full, PostgreSQL away).
    pub notices_dropped: AtomicU64,
}

/// The shared query connection, with the statements every fetch runs
/// prepared once (no Parse/Describe round trip and no planning per fetch).
struct QueryConn {
    client: tokio_postgres::Client,
    fetch_spans: tokio_postgres::Statement,
    partition_offsets: tokio_postgres::Statement,
}

impl std::ops::Deref for QueryConn {
    type Target = tokio_postgres::Client;
    fn deref(&self) -> &tokio_postgres::Client {
        &self.client
    }
}

async fn connect_query(url: &str) -> Result<QueryConn, MetaError> {
    let client = connect(url).await?;
    let (fetch_spans, partition_offsets) = futures::join!(
        client.prepare(sql::FETCH_SPANS),
        client.prepare(sql::PARTITION_OFFSETS)
    );
    Ok(QueryConn {
        fetch_spans: fetch_spans?,
        partition_offsets: partition_offsets?,
        client,
    })
}

/// The commit connection, with the commit's statements prepared on it.
struct CommitConn {
    client: tokio_postgres::Client,
    statements: commit::Statements,
}

async fn connect_commit(url: &str) -> Result<CommitConn, MetaError> {
    let client = connect(url).await?;
    let statements = commit::Statements::prepare(&client).await?;
    Ok(CommitConn { client, statements })
}

/// What a query job runs with on the metadata thread.
#[derive(Clone)]
struct Ctx {
    /// Shared by concurrent queries (tokio-postgres pipelines them).
    query: Arc<QueryConn>,
    /// Transactions for topic DDL, one at a time.
    ddl: Arc<tokio::sync::Mutex<tokio_postgres::Client>>,
    /// Connections for transaction state changes, each serving the
    /// transactional ids that hash to it, one change at a time; connected
    /// on first use.
    txn: Arc<[Arc<tokio::sync::Mutex<Option<txn::TxnConn>>>]>,
    url: Arc<str>,
    /// Announces committed changes to the other agents.
    notifier: notify::Notifier,
}

impl Ctx {
    /// The transaction connection of `id`, (re)connected if needed.
    async fn txn_conn(
        &self,
        id: &[u8],
    ) -> Result<tokio::sync::OwnedMutexGuard<Option<txn::TxnConn>>, MetaError> {
        let slot = self.txn[txn::txn_connection_index(id)].clone();
        let mut c = slot.lock_owned().await;
        if c.as_ref().is_none_or(|c| c.client.is_closed()) {
            *c = Some(txn::TxnConn::connect(&self.url).await?);
        }
        Ok(c)
    }
}

type Job = Box<dyn FnOnce(Ctx) -> BoxFuture<'static, ()> + Send>;

struct CommitJob {
    object: ObjectCommit,
    reply: oneshot::Sender<CommitAnswer>,
}

/// What a committed object became: its outcomes, and the news of its
/// PostgreSQL transaction, shared by every object committed in it.
pub type CommitAnswer = Result<(CommitResultForObject, Arc<CommitNews>), Arc<MetaError>>;

/// The news of one PostgreSQL transaction of window commits: the
/// watermarks after it, and the spans behind them (partition, span): every
/// object's of the transaction, in offset order.
///
/// Objects committed together are answered together, and their answers are
/// handled in any order: with only its own spans beside the transaction's
/// watermarks, the news of one object told readers of offsets whose spans
/// they had not heard of yet (or heard of out of order), and consumers at
/// the tail asked PostgreSQL for them (most of 510 span reads in 15 s of
/// race.sh's e2e run at the half rate). So the news is the transaction's,
/// told once ([`CommitNews::tell_once`]): by whichever answer is handled
/// first, before its producers are answered, while the others wait for it.
pub struct CommitNews {
    pub watermarks: Watermarks,
    /// Taken by the first [`CommitNews::tell_once`].
    spans: std::sync::Mutex<Option<Vec<CommittedSpan>>>,
}

impl CommitNews {
    fn new(watermarks: Watermarks, spans: Vec<CommittedSpan>) -> Self {
        Self {
            watermarks,
            spans: std::sync::Mutex::new(Some(spans)),
        }
    }

    /// Tells `tell` the watermarks and the spans if no other answer of the
    /// transaction has. Returns once the news is told, by this caller or
    /// another (the lock is held while telling), so a producer answered
    /// after it never precedes the news of its records.
    pub fn tell_once(&self, tell: impl FnOnce(&Watermarks, Vec<CommittedSpan>)) {
        let mut spans = self
            .spans
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(s) = spans.take() {
            tell(&self.watermarks, s);
        }
    }
}

/// A committed span, with its (topic, partition).
pub type CommittedSpan = ((Uuid, i32), SpanRecord);

/// Outcomes of one object's appends, in append order.
pub type CommitResultForObject = Vec<Vec<BatchOutcome>>;

/// Watermarks after a commit, per (topic, partition).
pub type Watermarks = HashMap<(Uuid, i32), PartitionMarks>;

/// Answer to [`Meta::submit_commit`].
pub type CommitReceiver = oneshot::Receiver<CommitAnswer>;

/// Handle to the metadata thread. Cheap to clone; `Send`.
#[derive(Clone)]
pub struct Meta {
    jobs: mpsc::Sender<Job>,
    commits: mpsc::Sender<CommitJob>,
    pub stats: Arc<MetaStats>,
    /// This agent's id once registered (0 before): its own window commits'
    /// notifications are not passed on (see [`notify::run_listener`]).
    own_agent: Arc<AtomicI32>,
}

/// Applies the versioned migrations under `meta/sql/` that are not applied yet.
pub async fn migrate(client: &mut tokio_postgres::Client) -> Result<(), MetaError> {
    const MIGRATIONS: &[(i32, &str)] = &[
        (1, include_str!("../sql/0001_init.sql")),
        (2, include_str!("../sql/0002_retention.sql")),
        (3, include_str!("../sql/0003_groups.sql")),
        (4, include_str!("../sql/0004_transactions.sql")),
        (5, include_str!("../sql/0005_compaction.sql")),
        (6, include_str!("../sql/0006_topic_notices.sql")),
        (7, include_str!("../sql/0007_security.sql")),
        (8, include_str!("../sql/0008_acls.sql")),
        (9, include_str!("../sql/0009_quotas.sql")),
        (10, include_str!("../sql/0010_dynamic_configs.sql")),
        (11, include_str!("../sql/0011_delegation_tokens.sql")),
        (12, include_str!("../sql/0012_share_groups.sql")),
        (13, include_str!("../sql/0013_streams_groups.sql")),
        (14, include_str!("../sql/0014_spans_unchecked.sql")),
    ];
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                 version integer PRIMARY KEY,
                 applied_at timestamptz NOT NULL DEFAULT now())",
        )
        .await?;
    // A migration altering tables the running agents use can deadlock with
    // their transactions or wait past the lock timeout (a rolling upgrade
    // under load); PostgreSQL then aborts it, and it is tried again.
    let mut attempt = 1;
    loop {
        match migrate_once(client, MIGRATIONS).await {
            Err(MetaError::Postgres(e)) if attempt < MIGRATE_ATTEMPTS && lock_conflict(&e) => {
                tracing::warn!(attempt, error = %pg_detail(&e), "migration aborted by a lock conflict; trying again");
                tokio::time::sleep(MIGRATE_RETRY_PAUSE).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// A deadlock or a lock wait past the session's lock timeout.
fn lock_conflict(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    matches!(
        e.code(),
        Some(c) if *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::LOCK_NOT_AVAILABLE
    )
}

/// Applies, in one transaction, the migrations in `migrations` not applied yet.
async fn migrate_once(
    client: &mut tokio_postgres::Client,
    migrations: &[(i32, &str)],
) -> Result<(), MetaError> {
    let tx = client.transaction().await?;
    // One migrator at a time across agents.
    tx.batch_execute("SELECT pg_advisory_xact_lock(724617001)")
        .await?;
    let applied: Vec<i32> = tx
        .query("SELECT version FROM schema_migrations", &[])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    for (version, text) in migrations {
        if applied.contains(version) {
            continue;
        }
        tracing::info!(version, "applying migration");
        tx.batch_execute(text).await?;
        tx.execute(
            "INSERT INTO schema_migrations (version) VALUES ($1)",
            &[version],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Connects one client and drives its connection on the current runtime.
pub async fn connect(url: &str) -> Result<tokio_postgres::Client, MetaError> {
    let mut config: tokio_postgres::Config = url.parse()?;
    // A dead or half-open server must fail requests, not hang them.
    config
        .connect_timeout(CONNECT_TIMEOUT)
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(10))
        .options(SESSION_OPTIONS);
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "postgres connection ended");
        }
    });
    Ok(client)
}

impl Meta {
    /// Starts the metadata thread: connects, migrates, listens. Returns once
    /// it is ready or failed.
    pub fn start(
        url: String,
        on_notice: NoticeListener,
    ) -> Result<(Meta, std::thread::JoinHandle<()>), MetaError> {
        let (job_tx, mut job_rx) = mpsc::channel::<Job>(QUERY_QUEUE_MAX);
        let (commit_tx, commit_rx) = mpsc::channel::<CommitJob>(COMMIT_QUEUE_MAX);
        let stats = Arc::new(MetaStats::default());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), MetaError>>();
        let thread_stats = stats.clone();
        let own_agent = Arc::new(AtomicI32::new(0));
        let listener_agent = own_agent.clone();
        let join = std::thread::Builder::new()
            .name("meta".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("tokio runtime");
                rt.block_on(async move {
                    let setup = async {
                        // Migrate first: the commit statements need the tables.
                        migrate(&mut connect(&url).await?).await?;
                        let commit_conn = connect_commit(&url).await?;
                        let ctx = Ctx {
                            query: Arc::new(connect_query(&url).await?),
                            ddl: Arc::new(tokio::sync::Mutex::new(connect(&url).await?)),
                            txn: (0..TXN_CONNECTIONS)
                                .map(|_| Arc::new(tokio::sync::Mutex::new(None)))
                                .collect(),
                            url: url.as_str().into(),
                            notifier: notify::Notifier::start(url.clone(), thread_stats.clone()),
                        };
                        Ok::<_, MetaError>((commit_conn, ctx))
                    };
                    let (commit_conn, ctx) = match setup.await {
                        Ok(c) => c,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    tokio::spawn(notify::run_listener(
                        url.clone(),
                        Arc::new(on_notice),
                        listener_agent,
                    ));
                    let _ = ready_tx.send(Ok(()));
                    let committer = tokio::spawn(run_committer(
                        url.clone(),
                        commit_conn,
                        commit_rx,
                        ctx.notifier.clone(),
                        thread_stats.clone(),
                    ));
                    let mut ctx = ctx;
                    while let Some(job) = job_rx.recv().await {
                        thread_stats.queries.fetch_add(1, Ordering::Relaxed);
                        reconnect_if_closed(&url, &mut ctx).await;
                        tokio::spawn(job(ctx.clone()));
                    }
                    // All handles dropped: finish queued commits, then exit.
                    let _ = committer.await;
                });
            })
            .map_err(|e| MetaError::Invalid(format!("cannot start meta thread: {e}")))?;
        ready_rx.recv().map_err(|_| MetaError::Closed)??;
        Ok((
            Meta {
                jobs: job_tx,
                commits: commit_tx,
                stats,
                own_agent,
            },
            join,
        ))
    }

    /// Runs `f` with the shared query client on the metadata thread.
    async fn run<T, F, Fut>(&self, f: F) -> Result<T, MetaError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<QueryConn>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<T, MetaError>> + Send + 'static,
    {
        self.run_ctx(move |ctx| f(ctx.query)).await
    }

    async fn run_ctx<T, F, Fut>(&self, f: F) -> Result<T, MetaError>
    where
        T: Send + 'static,
        F: FnOnce(Ctx) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<T, MetaError>> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |ctx| {
            async move {
                let _ = tx.send(f(ctx).await);
            }
            .boxed()
        });
        self.jobs.send(job).await.map_err(|_| MetaError::Closed)?;
        rx.await.map_err(|_| MetaError::Closed)?
    }

    /// Queues an object's commit and returns once it is queued, so that a
    /// caller submitting in window order gets commits in window order. The
    /// receiver yields the outcomes (in the object's append and batch order)
    /// and the new watermarks.
    pub async fn submit_commit(
        &self,
        object: ObjectCommit,
    ) -> Result<CommitReceiver, Arc<MetaError>> {
        let (tx, rx) = oneshot::channel();
        self.commits
            .send(CommitJob { object, reply: tx })
            .await
            .map_err(|_| Arc::new(MetaError::Closed))?;
        Ok(rx)
    }

    pub async fn load_topics(
        &self,
        names: Option<Vec<String>>,
    ) -> Result<Vec<TopicRecord>, MetaError> {
        self.run(move |c| async move {
            let rows = match names {
                None => c.query(sql::LOAD_TOPICS, &[]).await?,
                Some(names) => c.query(sql::LOAD_TOPICS_BY_NAME, &[&names]).await?,
            };
            Ok(rows.iter().map(topic_from_row).collect())
        })
        .await
    }

    pub async fn load_topic_by_id(&self, topic_id: Uuid) -> Result<Option<TopicRecord>, MetaError> {
        self.run(move |c| async move {
            let rows = c.query(sql::LOAD_TOPIC_BY_ID, &[&topic_id]).await?;
            Ok(rows.first().map(topic_from_row))
        })
        .await
    }

    /// Creates a topic with `partitions` partitions in one transaction.
    pub async fn create_topic(
        &self,
        name: String,
        partitions: i32,
        configs: Vec<(String, String)>,
    ) -> Result<Result<TopicRecord, CreateTopicError>, MetaError> {
        self.run_ctx(move |ctx| async move {
            let mut c = ctx.ddl.lock().await;
            let tx = c.transaction().await?;
            let topic_id = Uuid::new_v4();
            let json = configs_json(&configs);
            let n = tx
                .execute(sql::CREATE_TOPIC, &[&topic_id, &name, &partitions, &json])
                .await?;
            if n == 0 {
                return Ok(Err(CreateTopicError::AlreadyExists));
            }
            tx.execute(sql::CREATE_PARTITIONS, &[&topic_id, &0i32, &partitions])
                .await?;
            tx.commit().await?;
            Ok(Ok(TopicRecord {
                topic_id,
                name,
                partitions,
                configs,
            }))
        })
        .await
    }

    /// Deletes a topic and its partitions and spans; returns its id if it
    /// existed. Its objects are left for the orphan collector. The topic's
    /// rows are locked first in the order the other writers take them
    /// (partitions, then compaction rows, each in key order): the cascade
    /// alone took markers before a compaction swap's row, which the swap
    /// takes the other way round, and PostgreSQL aborted the deletion as a
    /// deadlock. The retired-span collector is kept out by its advisory lock.
    pub async fn delete_topic(&self, name: String) -> Result<Option<Uuid>, MetaError> {
        self.run_ctx(move |ctx| async move {
            let mut c = ctx.ddl.lock().await;
            let tx = c.transaction().await?;
            // Shared: deletions of different topics need not wait for each
            // other, only the collector (exclusive) for them.
            tx.execute("SELECT pg_advisory_xact_lock_shared($1)", &[&RETIRE_LOCK])
                .await?;
            let Some(row) = tx.query_opt(sql::LOCK_TOPIC, &[&name]).await? else {
                return Ok(None);
            };
            let topic_id: Uuid = row.get(0);
            let partitions: Vec<i32> = (0..row.get::<_, i32>(1)).collect();
            tx.query(sql::LOCK_TOPIC_PARTITIONS, &[&topic_id, &partitions])
                .await?;
            tx.query(sql::DELETE_TOPIC_LOCK_COMPACTION, &[&topic_id])
                .await?;
            let gone = tx
                .query_opt(sql::DELETE_TOPIC, &[&name])
                .await?
                .map(|r| r.get(0));
            tx.commit().await?;
            Ok(gone)
        })
        .await
    }

    /// Grows a topic to `count` partitions. `Ok(Err(current))` when `count`
    /// is not larger than the current count; `Ok(Ok(None))` when it does not exist.
    pub async fn create_partitions(
        &self,
        name: String,
        count: i32,
        validate_only: bool,
    ) -> Result<Result<Option<Uuid>, i32>, MetaError> {
        self.run_ctx(move |ctx| async move {
            let mut c = ctx.ddl.lock().await;
            let tx = c.transaction().await?;
            let Some(row) = tx.query_opt(sql::LOCK_TOPIC, &[&name]).await? else {
                return Ok(Ok(None));
            };
            let topic_id: Uuid = row.get(0);
            let current: i32 = row.get(1);
            if count <= current {
                return Ok(Err(current));
            }
            if !validate_only {
                tx.execute(sql::SET_TOPIC_PARTITIONS, &[&topic_id, &count])
                    .await?;
                tx.execute(sql::CREATE_PARTITIONS, &[&topic_id, &current, &count])
                    .await?;
                tx.commit().await?;
            }
            Ok(Ok(Some(topic_id)))
        })
        .await
    }

    /// Replaces a topic's configs with what `edit` makes of the current
    /// ones, in one transaction (the row locked, so concurrent alterations
    /// apply one after the other). `Ok(None)` when the topic does not
    /// exist; `Ok(Some(Err))` when `edit` refuses (nothing written); with
    /// `validate_only` nothing is written either way.
    pub async fn alter_topic_configs<E, F>(
        &self,
        name: String,
        validate_only: bool,
        edit: F,
    ) -> Result<Option<Result<(), E>>, MetaError>
    where
        E: Send + 'static,
        F: FnOnce(Vec<(String, String)>) -> Result<Vec<(String, String)>, E> + Send + 'static,
    {
        self.run_ctx(move |ctx| async move {
            let mut c = ctx.ddl.lock().await;
            let tx = c.transaction().await?;
            let Some(row) = tx.query_opt(sql::LOCK_TOPIC_CONFIGS, &[&name]).await? else {
                return Ok(None);
            };
            let current = configs_from_json(row.get(0));
            let next = match edit(current) {
                Ok(next) => next,
                Err(e) => return Ok(Some(Err(e))),
            };
            if !validate_only {
                tx.execute(sql::SET_TOPIC_CONFIGS, &[&name, &configs_json(&next)])
                    .await?;
                tx.commit().await?;
            }
            Ok(Some(Ok(())))
        })
        .await
    }

    /// The bytes each partition of `topic_ids` holds in object storage
    /// (its spans' lengths; partitions without spans are left out).
    pub async fn partition_bytes(
        &self,
        topic_ids: Vec<Uuid>,
    ) -> Result<Vec<(Uuid, i32, i64)>, MetaError> {
        self.run(move |c| async move {
            let rows = c.query(sql::PARTITION_BYTES, &[&topic_ids]).await?;
            Ok(rows
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect())
        })
        .await
    }

    pub async fn fetch_spans(
        &self,
        topic_id: Uuid,
        partition: i32,
        from_offset: i64,
        spans_max: i64,
    ) -> Result<(Option<PartitionOffsets>, Vec<SpanRecord>), MetaError> {
        self.run(move |c| async move {
            let spans_max = spans_max.clamp(1, FETCH_SPANS_MAX);
            let offsets_params: [&(dyn ToSql + Sync); 2] = [&topic_id, &partition];
            let spans_params: [&(dyn ToSql + Sync); 4] =
                [&topic_id, &partition, &from_offset, &spans_max];
            let (offsets, spans) = futures::join!(
                c.query_opt(&c.partition_offsets, &offsets_params),
                c.query(&c.fetch_spans, &spans_params)
            );
            let offsets = offsets?.map(|r| offsets_from_row(&r));
            Ok((offsets, spans?.iter().map(span_from_row).collect()))
        })
        .await
    }

    pub async fn partition_offsets(
        &self,
        topic_id: Uuid,
        partition: i32,
    ) -> Result<Option<PartitionOffsets>, MetaError> {
        self.run(move |c| async move {
            Ok(c.query_opt(&c.partition_offsets, &[&topic_id, &partition])
                .await?
                .map(|r| offsets_from_row(&r)))
        })
        .await
    }

    /// The first retained span ending at or after `from_offset` that holds
    /// a record with timestamp >= `timestamp`, or, with `None`, the retained
    /// span holding the partition's largest timestamp.
    pub async fn span_by_timestamp(
        &self,
        topic_id: Uuid,
        partition: i32,
        timestamp: Option<i64>,
        from_offset: i64,
    ) -> Result<Option<SpanRecord>, MetaError> {
        self.run(move |c| async move {
            let row = match timestamp {
                Some(ts) => {
                    c.query_opt(
                        sql::SPAN_BY_TIMESTAMP,
                        &[&topic_id, &partition, &ts, &from_offset],
                    )
                    .await?
                }
                None => {
                    c.query_opt(sql::SPAN_MAX_TIMESTAMP, &[&topic_id, &partition])
                        .await?
                }
            };
            Ok(row.map(|r| span_from_row(&r)))
        })
        .await
    }

    pub async fn next_producer_id(&self) -> Result<i64, MetaError> {
        self.run(|c| async move { Ok(c.query_one(sql::NEXT_PRODUCER_ID, &[]).await?.get(0)) })
            .await
    }

    /// Registers this agent with its listeners' advertised addresses (the
    /// first one is also its `host`/`port`).
    pub async fn register_agent(
        &self,
        listeners: Vec<Endpoint>,
        rack: Option<String>,
        lease: Duration,
    ) -> Result<i32, MetaError> {
        let first = listeners
            .first()
            .cloned()
            .ok_or_else(|| MetaError::Invalid("an agent needs a listener".into()))?;
        self.run(move |c| async move {
            let secs = lease.as_secs_f64();
            let names: Vec<&str> = listeners.iter().map(|e| e.name.as_str()).collect();
            let hosts: Vec<&str> = listeners.iter().map(|e| e.host.as_str()).collect();
            let ports: Vec<i32> = listeners.iter().map(|e| e.port).collect();
            let agent: i32 = c
                .query_one(
                    sql::REGISTER_AGENT,
                    &[
                        &first.host,
                        &first.port,
                        &rack,
                        &secs,
                        &names,
                        &hosts,
                        &ports,
                    ],
                )
                .await?
                .get(0);
            Ok(agent)
        })
        .await
        .inspect(|&agent| self.own_agent.store(agent, Ordering::Relaxed))
    }

    pub async fn renew_agent(&self, agent_id: i32, lease: Duration) -> Result<bool, MetaError> {
        self.run(move |c| async move {
            let secs = lease.as_secs_f64();
            Ok(c.execute(sql::RENEW_AGENT, &[&agent_id, &secs]).await? == 1)
        })
        .await
    }

    pub async fn deregister_agent(&self, agent_id: i32) -> Result<(), MetaError> {
        self.run(move |c| async move {
            c.execute(sql::DEREGISTER_AGENT, &[&agent_id]).await?;
            Ok(())
        })
        .await
    }

    pub async fn live_agents(&self) -> Result<Vec<AgentRecord>, MetaError> {
        self.run(|c| async move {
            Ok(c.query(sql::LIVE_AGENTS, &[])
                .await?
                .iter()
                .map(|r| {
                    let names: Vec<String> = r.get(4);
                    let hosts: Vec<String> = r.get(5);
                    let ports: Vec<i32> = r.get(6);
                    AgentRecord {
                        agent_id: r.get(0),
                        host: r.get(1),
                        port: r.get(2),
                        rack: r.get(3),
                        listeners: names
                            .into_iter()
                            .zip(hosts)
                            .zip(ports)
                            .map(|((name, host), port)| Endpoint { name, host, port })
                            .collect(),
                    }
                })
                .collect())
        })
        .await
    }

    /// Every registered agent and its lease (operators' status view;
    /// agents whose lease ran out are listed until they are replaced).
    pub async fn agent_leases(&self) -> Result<Vec<AgentLease>, MetaError> {
        self.run(|c| async move {
            Ok(c.query(sql::AGENT_LEASES, &[])
                .await?
                .iter()
                .map(|r| AgentLease {
                    agent_id: r.get(0),
                    host: r.get(1),
                    port: r.get(2),
                    rack: r.get(3),
                    started_at_ms: r.get::<_, f64>(4) as i64,
                    lease_left_ms: r.get::<_, f64>(5) as i64,
                })
                .collect())
        })
        .await
    }

    /// Marks objects that no span references and that are older than
    /// `grace` for deletion after `delay`.
    pub async fn mark_unreferenced_objects(
        &self,
        grace: Duration,
        delay: Duration,
    ) -> Result<u64, MetaError> {
        self.run(move |c| async move {
            let (secs, delay) = (grace.as_secs_f64(), delay.as_secs_f64());
            Ok(c.execute(sql::MARK_UNREFERENCED_OBJECTS, &[&secs, &delay])
                .await?)
        })
        .await
    }

    /// Where retention puts the log start offset of each partition of a
    /// topic: (partition, log start now, log start wanted). `older_than_ms`
    /// retires leading spans whose newest timestamp is below it;
    /// `retained_bytes` retires leading spans while at least that many
    /// bytes stay (Kafka's retention.bytes).
    pub async fn retention_starts(
        &self,
        topic_id: Uuid,
        older_than_ms: Option<i64>,
        retained_bytes: Option<i64>,
    ) -> Result<Vec<(i32, i64, i64)>, MetaError> {
        self.run(move |c| async move {
            Ok(c.query(
                sql::RETENTION_STARTS,
                &[&topic_id, &older_than_ms, &retained_bytes],
            )
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect())
        })
        .await
    }

    /// Moves log start offsets of `topic_id` forward, as DeleteRecords does:
    /// each (partition, offset) with -1 meaning the high watermark. An
    /// offset at or below the current log start changes nothing; one past
    /// the high watermark is refused. The new log starts are announced to
    /// every agent; the spans they retire are dropped later
    /// ([`Meta::drop_retired_spans`]).
    pub async fn advance_log_starts(
        &self,
        topic_id: Uuid,
        mut wanted: Vec<(i32, i64)>,
    ) -> Result<Vec<(i32, LogStartOutcome)>, MetaError> {
        self.run_ctx(move |ctx| async move {
            let mut c = ctx.ddl.lock().await;
            // -1 (the high watermark) sorts last: a repeated partition keeps
            // the furthest offset asked for.
            wanted.sort_unstable_by_key(|&(p, o)| (p, if o == -1 { i64::MAX } else { o }));
            let tx = c.transaction().await?;
            let (outcomes, notices) = advance_log_starts_tx(&tx, topic_id, wanted).await?;
            tx.commit().await?;
            ctx.notifier.announce(notify::LOG_STARTS, notices);
            Ok(outcomes)
        })
        .await
    }

    /// Deletes up to `limit` spans that end before their partition's log
    /// start (and up to `limit` markers below it), and marks the objects
    /// left without spans for deletion after `delay`. Returns (spans dropped, objects marked), or `None` when
    /// another agent is doing it right now.
    pub async fn drop_retired_spans(
        &self,
        limit: i64,
        delay: Duration,
    ) -> Result<Option<(u64, u64)>, MetaError> {
        self.run_ctx(move |ctx| async move {
            let mut c = ctx.ddl.lock().await;
            let tx = c.transaction().await?;
            let mine: bool = tx
                .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&RETIRE_LOCK])
                .await?
                .get(0);
            if !mine {
                return Ok(None);
            }
            let row = tx.query_one(sql::DROP_RETIRED_SPANS, &[&limit]).await?;
            tx.execute(sql::DROP_RETIRED_MARKERS, &[&limit]).await?;
            let dropped: i64 = row.get(0);
            let keys: Vec<String> = row.get(1);
            let marked = if keys.is_empty() {
                0
            } else {
                let delay = delay.as_secs_f64();
                tx.execute(sql::MARK_RETIRED_OBJECTS, &[&keys, &delay])
                    .await?
            };
            tx.commit().await?;
            Ok(Some((dropped as u64, marked)))
        })
        .await
    }

    /// Objects marked for deletion, oldest mark first.
    pub async fn objects_to_delete(&self, limit: i64) -> Result<Vec<String>, MetaError> {
        self.run(move |c| async move {
            Ok(c.query(sql::OBJECTS_TO_DELETE, &[&limit])
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect())
        })
        .await
    }

    /// Drops the rows of deleted objects (still unreferenced).
    pub async fn forget_objects(&self, keys: Vec<String>) -> Result<u64, MetaError> {
        self.run(move |c| async move { Ok(c.execute(sql::FORGET_OBJECTS, &[&keys]).await?) })
            .await
    }

    /// Of `keys`, claims (marks for deletion) those no commit ever recorded,
    /// and returns them; a later commit of one of them fails.
    pub async fn claim_unknown_objects(&self, keys: Vec<String>) -> Result<Vec<String>, MetaError> {
        self.run(move |c| async move {
            Ok(c.query(sql::CLAIM_UNKNOWN_OBJECTS, &[&keys])
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect())
        })
        .await
    }

    /// Checks that PostgreSQL answers (for `/health/ready`).
    pub async fn ping(&self) -> Result<(), MetaError> {
        self.run(|c| async move {
            c.simple_query("SELECT 1").await?;
            Ok(())
        })
        .await
    }
}

fn topic_from_row(r: &tokio_postgres::Row) -> TopicRecord {
    TopicRecord {
        topic_id: r.get(0),
        name: r.get(1),
        partitions: r.get(2),
        configs: configs_from_json(r.get(3)),
    }
}

/// A topic's configs as stored (a JSON object of strings).
fn configs_json(configs: &[(String, String)]) -> String {
    serde_json::Value::Object(
        configs
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect(),
    )
    .to_string()
}

fn configs_from_json(json: String) -> Vec<(String, String)> {
    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&json)
        .map(|m| {
            m.into_iter()
                .map(|(k, v)| {
                    (
                        k,
                        v.as_str()
                            .map(str::to_owned)
                            .unwrap_or_else(|| v.to_string()),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn offsets_from_row(r: &tokio_postgres::Row) -> PartitionOffsets {
    PartitionOffsets {
        high_watermark: r.get(0),
        log_start_offset: r.get(1),
        max_timestamp: r.get(2),
        last_stable_offset: r.get(3),
    }
}

fn span_from_row(r: &tokio_postgres::Row) -> SpanRecord {
    SpanRecord {
        base_offset: r.get(0),
        last_offset: r.get(1),
        object_key: r.get(2),
        byte_start: r.get::<_, i64>(3) as u64,
        byte_len: r.get::<_, i32>(4) as u32,
        batch_count: r.get(5),
        max_timestamp: r.get(6),
        object_size: r.get::<_, i64>(7).max(0) as u64,
        sparse: r.get(8),
        // Fetch queries add the marker columns; other span queries do not.
        marker: if r.len() > 9 {
            r.get::<_, Option<i64>>(9)
                .map(|producer_id| crate::txn::MarkerRecord {
                    producer_id,
                    producer_epoch: r.get(10),
                    commit: r.get(11),
                    coordinator_epoch: r.get(12),
                })
        } else {
            None
        },
    }
}

/// The statements of [`Meta::advance_log_starts`] inside its transaction,
/// `wanted` sorted. The partitions are locked first, in key order (as
/// window commits lock them), then moved; returns the outcomes and the
/// announcements to send once committed.
async fn advance_log_starts_tx(
    tx: &tokio_postgres::Transaction<'_>,
    topic_id: Uuid,
    wanted: Vec<(i32, i64)>,
) -> Result<(Vec<(i32, LogStartOutcome)>, Vec<String>), MetaError> {
    let parts: Vec<i32> = wanted.iter().map(|w| w.0).collect();
    let locked: HashMap<i32, (i64, i64)> = tx
        .query(sql::LOCK_TOPIC_PARTITIONS, &[&topic_id, &parts])
        .await?
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect();
    let mut outcomes = Vec::with_capacity(wanted.len());
    let (mut moved_parts, mut moved_to) = (Vec::new(), Vec::new());
    for (partition, offset) in wanted {
        let Some(&(hw, log_start)) = locked.get(&partition) else {
            outcomes.push((partition, LogStartOutcome::UnknownPartition));
            continue;
        };
        let target = if offset == -1 { hw } else { offset };
        if target < 0 || target > hw {
            outcomes.push((partition, LogStartOutcome::OffsetOutOfRange));
            continue;
        }
        if target > log_start {
            if moved_parts.last() == Some(&partition) {
                moved_parts.pop();
                moved_to.pop();
            }
            moved_parts.push(partition);
            moved_to.push(target);
        }
        outcomes.push((
            partition,
            LogStartOutcome::Moved {
                low_watermark: target.max(log_start),
            },
        ));
    }
    if !moved_parts.is_empty() {
        tx.execute(
            sql::ADVANCE_LOG_START,
            &[&topic_id, &moved_parts, &moved_to],
        )
        .await?;
        let notices = commit::offset_payloads(
            moved_parts
                .iter()
                .zip(&moved_to)
                .map(|(&p, &o)| (topic_id, p, o)),
        );
        return Ok((outcomes, notices));
    }
    Ok((outcomes, Vec::new()))
}

/// Replaces the shared query and DDL connections when PostgreSQL dropped
/// them (restart, failover), so the agent recovers without a restart. A job
/// that finds PostgreSQL still down fails with a retriable error.
async fn reconnect_if_closed(url: &str, ctx: &mut Ctx) {
    if ctx.query.is_closed() {
        match connect_query(url).await {
            Ok(c) => {
                tracing::info!("query connection to PostgreSQL re-established");
                ctx.query = Arc::new(c);
            }
            Err(e) => tracing::warn!(error = %e, "query connection to PostgreSQL is down"),
        }
    }
    if let Ok(mut ddl) = ctx.ddl.try_lock() {
        if ddl.is_closed() {
            if let Ok(c) = connect(url).await {
                *ddl = c;
            }
        }
    }
}

/// Pops queued commits in order and runs up to `GROUP_COMMIT_WINDOWS_MAX` of
/// them in one transaction. A failed transaction fails every object in it (their
/// uploads become orphans, collected later); the client retries.
async fn run_committer(
    url: String,
    mut conn: CommitConn,
    mut rx: mpsc::Receiver<CommitJob>,
    notifier: notify::Notifier,
    stats: Arc<MetaStats>,
) {
    let mut jobs = Vec::with_capacity(GROUP_COMMIT_WINDOWS_MAX);
    while rx.recv_many(&mut jobs, GROUP_COMMIT_WINDOWS_MAX).await > 0 {
        // An object older than its commit deadline may already be collected
        // as an orphan: never let a span point at it.
        let now = std::time::Instant::now();
        // Move the objects out (no copy of their batch lists per commit).
        let mut objects = Vec::with_capacity(jobs.len());
        let mut replies = Vec::with_capacity(jobs.len());
        for j in jobs.drain(..) {
            if j.object.commit_deadline > now {
                objects.push(j.object);
                replies.push(j.reply);
            } else {
                let _ = j.reply.send(Err(Arc::new(MetaError::Expired)));
            }
        }
        if objects.is_empty() {
            continue;
        }
        let result = commit::execute(&mut conn.client, &conn.statements, &objects).await;
        match result {
            Ok(mut r) => {
                notifier.announce(notify::WATERMARKS, std::mem::take(&mut r.notices));
                stats.commit_transactions.fetch_add(1, Ordering::Relaxed);
                stats
                    .committed_windows
                    .fetch_add(replies.len() as u64, Ordering::Relaxed);
                stats
                    .committed_spans
                    .fetch_add(r.spans.len() as u64, Ordering::Relaxed);
                let outcomes = std::mem::take(&mut r.outcomes);
                // Spans are planned in object order: each object's are the
                // next run of the list.
                let mut spans = std::mem::take(&mut r.spans).into_iter().peekable();
                let mut news = Vec::with_capacity(spans.len());
                for o in &objects {
                    while let Some(s) = spans.next_if(|s| s.object_key == o.object_key) {
                        news.push(((s.topic_id, s.partition), s.into_record(o.size_bytes)));
                    }
                }
                let news = Arc::new(CommitNews::new(std::mem::take(&mut r.watermarks), news));
                for (reply, outcome) in replies.into_iter().zip(outcomes) {
                    let _ = reply.send(Ok((outcome, news.clone())));
                }
            }
            Err(e) => {
                stats.commit_failures.fetch_add(1, Ordering::Relaxed);
                tracing::error!(error = %e, windows = replies.len(), "window commit failed");
                let e = Arc::new(e);
                for reply in replies {
                    let _ = reply.send(Err(e.clone()));
                }
                if conn.client.is_closed() {
                    // Reconnect with a bounded backoff; queued commits wait.
                    let mut backoff = Duration::from_millis(50);
                    loop {
                        match connect_commit(&url).await {
                            Ok(c) => {
                                conn = c;
                                break;
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, "reconnecting commit connection");
                                tokio::time::sleep(backoff).await;
                                backoff = (backoff * 2).min(Duration::from_secs(2));
                            }
                        }
                    }
                }
            }
        }
    }
}
