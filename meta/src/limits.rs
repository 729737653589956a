//! Every bound of the metadata crate: queues towards the metadata thread,
//! what one query may return, what one commit may hold. Re-exported at the
//! crate root.

use std::time::Duration;

/// Commits queued but not yet started; submitters wait when it is full.
pub const COMMIT_QUEUE_MAX: usize = 1024;
/// Windows merged into one transaction at most.
pub const GROUP_COMMIT_WINDOWS_MAX: usize = 64;
/// Other queries queued at most.
pub const QUERY_QUEUE_MAX: usize = 4096;
/// Connecting to PostgreSQL gives up after this.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Tries of the schema migrations when PostgreSQL aborts them for a lock
/// conflict with running agents, and the pause between two.
pub const MIGRATE_ATTEMPTS: u32 = 5;
pub const MIGRATE_RETRY_PAUSE: Duration = Duration::from_secs(1);
/// Spans returned by one fetch lookup at most.
pub const FETCH_SPANS_MAX: i64 = 256;
/// Notifications received but not yet handed to the listener callback;
/// past it they are dropped (they are hints: cached watermarks expire).
pub const NOTICES_QUEUED_MAX: usize = 4096;
/// Change announcements queued towards the notifier connection; past it
/// they are dropped (hints, as above).
pub const NOTIFY_QUEUE_MAX: usize = 4096;
/// Announcements sent in one notifier transaction at most.
pub const NOTIFY_BATCH_MAX: usize = 256;
/// Largest span the planner builds; keeps `byte_len` in an `int` column.
pub const SPAN_BYTES_MAX: u64 = 1 << 30;
/// Groups returned by one orphan lookup at most.
pub const ORPHANED_GROUPS_MAX: i64 = 10_000;
/// How many batches per producer and partition are remembered for dedup
/// (Kafka's `max.in.flight.requests.per.connection` bound for idempotence).
pub const HISTORY_BATCHES_MAX: usize = 5;
/// Connections for transaction state changes per agent (transactional ids
/// are spread over them; one id's changes run in order on one).
pub const TXN_CONNECTIONS: usize = 8;
/// A transaction change retried at most this often when its partition set
/// changes under it (another agent adding partitions for the same id).
pub const TXN_APPLY_ATTEMPTS_MAX: usize = 3;
/// SCRAM credentials an agent loads for logins at most (users × 2
/// mechanisms); past it the rest are not loaded and a warning is logged.
pub const SCRAM_CREDENTIALS_MAX: i64 = 200_000;
/// ACLs an agent loads (and CreateAcls allows in all): each agent holds
/// them all for its decisions.
pub const ACLS_MAX: i64 = 100_000;
/// Client quota values an agent loads (and AlterClientQuotas allows in
/// all): each agent holds them all for its throttling.
pub const QUOTAS_MAX: i64 = 100_000;
/// Dynamic configs (broker, group and client-metrics values) an agent
/// loads, and IncrementalAlterConfigs and AlterConfigs allow in all: each
/// agent holds them all.
pub const DYNAMIC_CONFIGS_MAX: i64 = 100_000;
/// Delegation tokens in force an agent loads, and CreateDelegationToken
/// allows in all: each agent holds them all for logins.
pub const TOKENS_MAX: i64 = 50_000;
