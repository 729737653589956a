//! Every bound of the engine, in one place: queues, caches, in-flight sets
//! and request sizes. Counts end in `_MAX` (or `_MIN`) after the noun they
//! count, sizes carry `_BYTES`, times in milliseconds `_MS`; a
//! `std::time::Duration` carries its unit in its type. Relations between
//! them are checked at compile time at the bottom. (Intervals that pace a
//! loop rather than bound it, such as the group coordinator's sweeps, stay
//! beside their loop.)

use std::time::Duration;

// ---- agent ---------------------------------------------------------------

/// Agent lease in PostgreSQL, renewed every third of it.
pub const AGENT_LEASE: Duration = Duration::from_secs(10);
/// Watermark messages queued per shard; past it a change is dropped and the
/// affected long polls end at their `max_wait_ms` instead.
pub const HUB_MESSAGES_QUEUED_MAX: usize = 4096;

// ---- shards (runtime) --------------------------------------------------------

/// The smallest admission budget per shard (`--shard-memory-bytes`).
pub const SHARD_MEMORY_BYTES_MIN: usize = 1 << 20;
/// Requests admitted but not yet answered, per connection.
pub const INFLIGHT_REQUESTS_PER_CONNECTION_MAX: usize = 32;
/// Connections per shard; past it new connections are closed at once.
pub const CONNECTIONS_PER_SHARD_MAX: usize = 10_000;
/// Memory glommio registers for io_uring buffers, per shard.
pub const SHARD_IO_MEMORY_BYTES: usize = 1 << 20;

// ---- flush window ----------------------------------------------------------

/// Uploads in flight at once; past it the pipeline stops taking sealed
/// buffers, the sealed queue fills and shards stop reading sockets.
pub const UPLOADS_INFLIGHT_MAX: usize = 64;
/// Sealed buffers queued towards the pipeline (all shards).
pub const SEALED_QUEUE_MAX: usize = 256;
/// Grid windows whose membership is tracked at once (a ring; windows
/// further apart than this never overlap in the pipeline's gather).
pub const WINDOW_SLOTS: usize = 64;
/// Adaptive flush: windows stretch (up to `--flush-interval-max-ms`) while
/// the agent's traffic would leave one grid interval's object smaller than
/// this. 128 KiB: at S3 Standard's list prices a PUT ($0.005 per 1,000)
/// costs about what keeping 128 KiB for a month does ($0.023 per GB).
pub const STRETCH_WINDOW_BYTES: u64 = 128 << 10;
/// Commit pressure: shard buffers are sealed at up to this many ×
/// `flush_bytes` while windows wait for PostgreSQL (see flush/stretch.rs).
/// 3: 12 MiB at the default 4 MiB, so a grown buffer (which travels as its
/// own object) is still read back whole (storage's 16 MiB limit).
pub const FLUSH_BYTES_SCALE_MAX: u64 = 3;
/// Windows waiting for their commit at which buffers grow ...
pub const COMMITS_WAITING_GROW: u64 = 16;
/// ... and at or below which they shrink back.
pub const COMMITS_WAITING_SHRINK: u64 = 4;
/// Partitions in a gathered window from which buffers may grow (below half
/// of it they shrink): where a window's commit cost is its spans. At 1,000
/// partitions and max rate a window held ~60, at 1,000 topics × 4 ~210, at
/// 10,000 partitions ~490.
pub const SPANS_PER_WINDOW_GROW: usize = 128;

// ---- shard caches ------------------------------------------------------------

/// Topic metadata cached per shard; refreshed after this long, or at once
/// when `rutomq_topics` says the row changed (the TTL bounds staleness when
/// that notification is lost: a LISTEN reconnect, a full hub queue).
pub const TOPIC_CACHE_TTL: Duration = Duration::from_secs(5);
/// Topics cached per shard at most.
pub const TOPIC_CACHE_ENTRIES_MAX: usize = 100_000;
/// Topic names one refresh of a shard's topic cache asks PostgreSQL for at
/// most (the expired entries, loaded together).
pub const TOPIC_REFRESH_BATCH_MAX: usize = 1_000;
/// A high watermark learned from PostgreSQL or a notification is trusted
/// this long without asking PostgreSQL again.
pub const HW_CACHE_TTL: Duration = Duration::from_secs(5);
/// Partitions one DescribeTopicPartitions response describes at most
/// (Kafka's `max.request.partition.size.limit` default); the rest follow
/// through its cursor.
pub const DESCRIBE_TOPIC_PARTITIONS_MAX: i32 = 2000;
/// Partitions a request at a retired version (Produce v0–2) may name; the
/// answer is an error per partition, so this bounds its size.
pub const RETIRED_PARTITIONS_MAX: usize = 100_000;
/// Long-poll waiter list length at which finished waiters are pruned.
pub const WAITERS_PRUNE_AT: usize = 1024;
/// Partitions whose spans a shard caches.
pub const SPAN_CACHE_PARTITIONS_MAX: usize = 1024;
/// Spans kept per partition (the oldest half goes when it is full).
pub const SPANS_CACHED_PER_PARTITION_MAX: usize = 256;
/// A cached log start offset is trusted this long: notifications of new
/// log starts can be dropped (full queue, LISTEN reconnecting), and a
/// retired object is deleted only `file.delete.delay.ms` (60 s) later.
pub const LOG_START_CACHE_TTL: Duration = Duration::from_secs(10);
/// Partitions whose read_committed state (last stable offset, aborted
/// transactions) a shard keeps.
pub const STABLE_CACHE_PARTITIONS_MAX: usize = 1024;
/// Aborted transactions kept per partition (the oldest markers go first;
/// fetches from before them ask PostgreSQL).
pub const ABORTED_TXNS_CACHED_MAX: usize = 1024;
/// Aborted transactions one PostgreSQL read returns; a longer list is cut
/// and reads stop where it was cut.
pub const ABORTED_TXNS_LOADED_MAX: i64 = 512;
/// A partition's read_committed state is trusted this long without a
/// notification confirming it.
pub const STABLE_CACHE_TTL: Duration = Duration::from_secs(5);

// ---- transactions ------------------------------------------------------------

/// Kafka's `transaction.max.timeout.ms` default: longer transaction
/// timeouts are refused (INVALID_TRANSACTION_TIMEOUT).
pub const TRANSACTION_MAX_TIMEOUT_MS_DEFAULT: i32 = 900_000;
/// How often each agent looks for open transactions past their timeout
/// (Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms`).
pub const TXN_TIMEOUT_SCAN_INTERVAL: Duration = Duration::from_secs(1);
/// How often idle transactional ids are looked for.
pub const TXN_EXPIRE_INTERVAL: Duration = Duration::from_secs(60);
/// Idle transactional ids forgotten per round at most.
pub const TXN_EXPIRE_MAX: i64 = 10_000;
/// Timed-out transactions one scan looks at.
pub const TXN_TIMEOUT_SCAN_MAX: i64 = 1000;
/// Partitions one transaction may hold.
pub const TXN_PARTITIONS_MAX: usize = 10_000;
/// Longest transactional id accepted (bytes).
pub const TRANSACTIONAL_ID_BYTES_MAX: usize = 65_536;
/// Transactions one ListTransactions answer lists at most.
pub const TXN_LIST_MAX: i64 = 100_000;
/// Producers one DescribeProducers partition lists at most.
pub const PRODUCERS_DESCRIBED_MAX: i64 = 10_000;

// ---- fetch -------------------------------------------------------------------

/// Record bytes all fetches of one shard may hold while assembling
/// responses; past it fetches answer with less (or no) data.
pub const FETCH_BYTES_INFLIGHT_MAX: usize = 256 << 20;
/// Largest response assembled, whatever the client asks.
pub const FETCH_RESPONSE_BYTES_MAX: usize = 64 << 20;
/// Batches of at least this many bytes go into a Fetch response as they
/// are (pieces of the frame, written to the socket from the buffers they
/// were read into); smaller ones are copied into the frame. Until its
/// response is written, a batch sent in place keeps the read buffer it lies
/// in alive (a `READ_BLOCK_BYTES` block of the file store, or one ranged
/// read), for at most `rutomq_shards::response::PIECES_WAIT_MAX` of waiting
/// for the client to read: then the rest of the response is copied.
pub const FETCH_BATCH_IN_PLACE_BYTES_MIN: usize = 8 << 10;
/// Longest long poll honoured.
pub const FETCH_WAIT_MS_MAX: i32 = 60_000;
/// Spans asked of PostgreSQL per partition read; what is not needed now is
/// cached by the shard for the consumer's next fetches.
pub const FETCH_SPANS_READ_MAX: i64 = 64;
/// Reads of partitions' next spans from PostgreSQL ahead of their
/// consumers that one shard has in flight at once (when read-ahead could
/// reach the end of the spans the shard knows while more are committed;
/// see `Reader::read_spans_ahead`). Past it a consumer's fetch reads them
/// itself when it gets there, as without read-ahead.
pub const SPAN_READS_AHEAD_MAX: usize = 64;
/// Read-ahead depth (`--read-ahead-fetches`): the objects of the spans past
/// a fetch are read ahead into the read cache as far as this many more
/// fetches of the same size would reach, and at most
/// [`READ_AHEAD_SPANS_PER_FETCH`] spans per such fetch.
pub const READ_AHEAD_FETCHES_MAX: usize = 15;
pub const READ_AHEAD_SPANS_PER_FETCH: usize = 4;

// ---- topics and records ------------------------------------------------

/// Kafka's limit on topic name length.
pub const TOPIC_NAME_BYTES_MAX: usize = 249;
/// Partitions per topic at most.
pub const PARTITIONS_MAX: i32 = 10_000;
/// Decompressed records of one batch may not exceed this (bomb guard).
pub const DECOMPRESSED_BATCH_BYTES_MAX: u64 = 64 << 20;

// ---- object collection (gc) ----------------------------------------------

/// Objects handled per step at most (each kind); a step that hits it runs
/// again in the same round.
pub const GC_OBJECTS_PER_ROUND_MAX: usize = 10_000;
/// Spans dropped per PostgreSQL transaction at most.
pub const RETIRED_SPANS_PER_TX_MAX: i64 = 20_000;
/// Objects deleted together; chunks are paced so that one round's
/// deletions spread over `GC_DELETE_SPREAD_FRACTION` of the round interval.
pub const GC_DELETE_CHUNK_OBJECTS: usize = 32;
pub const GC_DELETE_SPREAD_FRACTION: f64 = 0.8;
/// The longest pause between chunks (at least 320 objects/s).
pub const GC_DELETE_CHUNK_PACE_MAX: Duration = Duration::from_millis(100);
/// Repeats of a step in one round at most (so a huge backlog cannot keep a
/// round from ever ending; the next round goes on with it).
pub const GC_STEP_REPEATS_MAX: usize = 100;

// ---- compaction ----------------------------------------------------------------

/// Largest span a compaction pass writes (a fetch reads about this much
/// for one span).
pub const COMPACTED_SPAN_BYTES_MAX: usize = 1 << 20;
/// A pass starts a new object past this many bytes (what it holds in
/// memory before an upload).
pub const COMPACTED_OBJECT_BYTES_MAX: usize = 16 << 20;
/// Dirty bytes one pass indexes at most (bounds its time; the rest waits
/// for the next pass).
pub const COMPACTION_PASS_DIRTY_BYTES_MAX: u64 = 256 << 20;
/// Dirty spans one pass indexes at most (bounds its swap transaction).
pub const COMPACTION_PASS_DIRTY_SPANS_MAX: usize = 65_536;
/// Spans and markers read from PostgreSQL per query.
pub const COMPACTION_ITEMS_PER_QUERY: i64 = 1024;
/// Aborted transactions one pass follows at most (a pass stops below the
/// first one past it).
pub const COMPACTION_ABORTS_MAX: i64 = 100_000;
/// Producers with transaction data a pass follows at most; past it the
/// pass removes no marker.
pub const COMPACTION_TXN_PRODUCERS_MAX: usize = 100_000;
/// How long one pass may hold a partition.
pub const COMPACTION_LEASE: Duration = Duration::from_secs(600);
/// An abort marker stays at least this long after its data went: a shard
/// may serve spans read before for LOG_START_CACHE_TTL, and only the
/// marker's listing keeps read_committed consumers from returning that
/// data.
pub const ABORT_MARKER_GRACE: Duration = Duration::from_secs(30);
/// Objects a pass retired are deleted no sooner than this (shards may
/// still serve their cached spans).
pub const COMPACTED_OBJECT_DELETE_DELAY_MIN: Duration = Duration::from_secs(30);
/// Partitions with a dirty-ratio and lag gauge on /metrics at most.
pub const COMPACTION_GAUGED_PARTITIONS_MAX: usize = 1000;
/// Key map memory by default (`--compaction-key-map-bytes`): about 1.2 M
/// keys per pass.
pub const COMPACTION_KEY_MAP_BYTES_DEFAULT: usize = 32 << 20;

// ---- coordinators ------------------------------------------------------------

/// Results of spawned work waiting for the loop at most; the tasks that
/// finish beyond wait for room (they hold their results meanwhile).
pub const RESULTS_QUEUED_MAX: usize = 1024;
/// Stale timers (of keys unloaded or re-armed earlier) tolerated per loaded
/// key before the heap is pruned...
pub const TIMERS_STALE_PER_KEY_MAX: usize = 4;
/// ...plus this many.
pub const TIMERS_STALE_SLACK_MAX: usize = 1024;

// ---- streams groups (KIP-1071) --------------------------------------------------

/// A streams group member id's length at most (the client makes a UUID).
pub const STREAMS_MEMBER_ID_BYTES_MAX: usize = 255;
/// Topics one streams topology names at most (sources, repartition and
/// changelog topics).
pub const STREAMS_TOPOLOGY_TOPICS_MAX: usize = 10_000;
/// Subtopologies of one streams topology at most (configuring it costs
/// subtopologies x topics).
pub const STREAMS_SUBTOPOLOGIES_MAX: usize = 1_000;

// ---- share groups (KIP-932) ----------------------------------------------------

/// Kafka's longest share group member id (a UUID's text).
pub const SHARE_MEMBER_ID_BYTES_MAX: usize = 36;
/// Offsets a share-partition's in-flight window holds at most, whatever
/// group.share.partition.max.record.locks says (the window is stored whole
/// on every change).
pub const SHARE_WINDOW_MAX: usize = 10_000;
/// Compare-and-set attempts on a share-partition's state per request
/// before its partition is answered without records (its consumers race).
pub const SHARE_CAS_ATTEMPTS_MAX: usize = 8;
/// A share fetch that acquired nothing looks again this often while it
/// waits (records given back, or whose lock ran out, need no new record).
pub const SHARE_FETCH_RECHECK_MS: u64 = 250;
/// Share sessions one connection holds at most (a consumer opens one
/// per group it is a member of).
pub const SHARE_SESSIONS_PER_CONNECTION_MAX: usize = 64;
/// Partitions one share session holds at most.
pub const SHARE_SESSION_PARTITIONS_MAX: usize = 10_000;
/// Acknowledgement batches one request carries per partition at most.
pub const SHARE_ACK_BATCHES_MAX: usize = 10_000;

// ---- group coordinator ---------------------------------------------------------

/// Calls queued to the coordinator thread at most; senders wait beyond.
pub const GROUP_CALLS_QUEUE_MAX: usize = 4096;
/// Groups held in memory at most; idle empty ones are dropped first.
pub const GROUPS_LOADED_MAX: usize = 100_000;
/// Calls waiting for one group to load at most.
pub const LOAD_WAITERS_MAX: usize = 1024;
/// Writes queued per group at most (offset commits beyond get
/// COORDINATOR_LOAD_IN_PROGRESS, which clients retry).
pub const GROUP_WRITES_QUEUED_MAX: usize = 256;

// ---- group coordinator: KIP-848 subscriptions ------------------------------

/// Longest regular expression accepted in a subscription.
pub const SUBSCRIPTION_REGEX_BYTES_MAX: usize = 4096;
/// Memory one compiled subscription regex may take.
pub const SUBSCRIPTION_REGEX_COMPILED_BYTES_MAX: usize = 1 << 20;

// ---- security ----------------------------------------------------------------

/// Largest frame a connection may send before it has authenticated
/// (Kafka's `sasl.server.max.receive.size`): a SASL token, or ApiVersions.
pub const SASL_RECEIVE_BYTES_MAX: usize = 512 << 10;
/// Largest SASL/PLAIN token taken apart.
pub const SASL_PLAIN_BYTES_MAX: usize = 4096;
/// A failed authentication is answered this late, then the connection
/// closes (Kafka's `connection.failed.authentication.delay.ms`): a client
/// guessing passwords gets at most one try per connection per this.
pub const AUTH_FAILURE_DELAY: Duration = Duration::from_millis(100);
/// A principal's failed logins are logged at most once per this (with the
/// count), per shard.
pub const AUTH_FAILURE_LOG_INTERVAL: Duration = Duration::from_secs(60);
/// Principals whose failures a shard remembers for that at most.
pub const AUTH_FAILURE_LOG_PRINCIPALS_MAX: usize = 1024;
/// The agent's copy of the SCRAM credentials is reloaded this often even
/// without a `rutomq_credentials` notice (one lost while LISTEN
/// reconnects), and at once on one.
pub const CREDENTIALS_REFRESH: Duration = Duration::from_secs(30);

/// The agent's copy of the ACLs is reloaded this often even without a
/// `rutomq_acls` notice (one lost while LISTEN reconnects), and at once on
/// one: no agent applies ACLs older than this.
pub const ACLS_REFRESH: Duration = Duration::from_secs(30);

/// The agent's copy of the client quotas is reloaded this often even
/// without a `rutomq_quotas` notice, and at once on one: no agent enforces
/// quotas older than this.
pub const QUOTAS_REFRESH: Duration = Duration::from_secs(30);
/// The agent's copy of the dynamic configs (broker, group, client-metrics)
/// is reloaded this often even without a `rutomq_configs` notice, and at
/// once on one.
pub const CONFIGS_REFRESH: Duration = Duration::from_secs(30);
/// The agent's copy of the delegation tokens is reloaded this often even
/// without a `rutomq_tokens` notice (expired ones drop out), and at once on
/// one.
pub const TOKENS_REFRESH: Duration = Duration::from_secs(30);
/// Client instances an agent keeps telemetry state of (KIP-714); past it
/// the one silent longest is forgotten.
pub const TELEMETRY_CLIENTS_MAX: usize = 10_000;
/// Series of pushed client metrics an agent exports on `/metrics`; points
/// of new series past it are dropped (and counted).
pub const TELEMETRY_SERIES_MAX: usize = 50_000;
/// Points one push may add (the rest of it is dropped).
pub const TELEMETRY_POINTS_MAX: usize = 5_000;
/// Bytes of metric names and attributes one push may add.
pub const TELEMETRY_PUSH_POINT_BYTES_MAX: usize = 1 << 20;
/// Bytes of metric names and attributes all exported series hold.
pub const TELEMETRY_SERIES_BYTES_MAX: usize = 32 << 20;
/// The longest client id a telemetry client keeps (longer: cut).
pub const TELEMETRY_CLIENT_ID_BYTES_MAX: usize = 256;
/// A push's compressed metrics at most (told to clients as
/// `telemetry_max_bytes`; Kafka's `telemetry.max.bytes` default).
pub const TELEMETRY_MAX_BYTES: i32 = 1 << 20;
/// A push's metrics decompressed at most.
pub const TELEMETRY_DECOMPRESSED_MAX: u64 = 8 << 20;
/// Patterns one client-metrics `match` may hold.
pub const CLIENT_MATCH_PATTERNS_MAX: usize = 32;
/// The longest dynamic config name and value stored (every agent holds
/// every dynamic config).
pub const DYNAMIC_CONFIG_NAME_BYTES_MAX: usize = 255;
pub const DYNAMIC_CONFIG_VALUE_BYTES_MAX: usize = 16 << 10;
/// Loggers given a level at runtime (BROKER_LOGGER) at most.
pub const LOGGERS_MAX: usize = 1_000;
/// Renewers one delegation token may name, and the longest principal
/// name among them (every agent holds every token).
pub const TOKEN_RENEWERS_MAX: usize = 100;
pub const PRINCIPAL_NAME_BYTES_MAX: usize = 1024;
/// Compiled size a client-metrics `match` pattern may take (regex crate's
/// size limit): every agent holds every subscription's patterns.
pub const CLIENT_MATCH_REGEX_BYTES: usize = 64 << 10;
/// A quota's rate is measured over this many samples (Kafka's
/// `quota.window.num`) ...
pub const QUOTA_WINDOW_SAMPLES: usize = 11;
/// ... of this long each (Kafka's `quota.window.size.seconds`).
pub const QUOTA_SAMPLE_WINDOW_MS: u64 = 1_000;
/// Quota sensors (quota entity × kind) an agent keeps at most; each is a
/// few hundred bytes.
pub const QUOTA_SENSORS_MAX: usize = 65_536;
/// Client IPs whose connection creation rate an agent tracks at most
/// (with a `connection_creation_rate` quota in force).
pub const QUOTA_IP_TRACKED_MAX: usize = 65_536;
/// A byte-rate throttle time is at most this: Kafka bounds it only by
/// the response field (a client far over its quota waits until its rate
/// over the window is back within it).
pub const QUOTA_THROTTLE_MS_MAX: u64 = i32::MAX as u64;
/// A request-rate or connection-rate throttle time is at most this
/// (Kafka's: one sample window).
pub const QUOTA_TIME_THROTTLE_MS_MAX: u64 = QUOTA_SAMPLE_WINDOW_MS;
/// At most this much of a refused resource's name is logged (and kept as
/// the key of its rate-limited log line).
pub const DENIED_NAME_LOGGED_BYTES: usize = 256;
/// A TLS handshake must finish within this, or the connection closes.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The TLS certificate, key and truststore files are checked for changes
/// this often (and reloaded at once on SIGHUP).
pub const TLS_RELOAD_POLL: Duration = Duration::from_secs(5);

// ---- http --------------------------------------------------------------------

/// Largest HTTP request head read on the health/metrics endpoint.
pub const HTTP_REQUEST_BYTES_MAX: usize = 8 << 10;

// ---- relations -----------------------------------------------------------------

// One PostgreSQL read of a partition's spans fits its cache entry whole.
const _: () = assert!(FETCH_SPANS_READ_MAX as usize <= SPANS_CACHED_PER_PARTITION_MAX);
// Read-ahead reaches past what a fetch reads, within what one read returns.
const _: () =
    assert!(READ_AHEAD_FETCHES_MAX * READ_AHEAD_SPANS_PER_FETCH < FETCH_SPANS_READ_MAX as usize);
// One largest response fits the shard's fetch budget.
const _: () = assert!(FETCH_RESPONSE_BYTES_MAX <= FETCH_BYTES_INFLIGHT_MAX);
// A round deletes its objects in whole chunks.
const _: () = assert!(GC_DELETE_CHUNK_OBJECTS <= GC_OBJECTS_PER_ROUND_MAX);
// Deletions spread over part of a round, never past its end.
const _: () = assert!(GC_DELETE_SPREAD_FRACTION > 0.0);
const _: () = assert!(GC_DELETE_SPREAD_FRACTION <= 1.0);
// A loaded aborted list fits the per-partition cache.
const _: () = assert!(ABORTED_TXNS_LOADED_MAX as usize <= ABORTED_TXNS_CACHED_MAX);
// A partition read asks PostgreSQL for no more spans than it returns.
const _: () = assert!(FETCH_SPANS_READ_MAX <= rutomq_meta::FETCH_SPANS_MAX);
// Cached spans holding data a pass removed expire before its abort
// markers and its retired objects go.
const _: () = assert!(ABORT_MARKER_GRACE.as_secs() > LOG_START_CACHE_TTL.as_secs());
const _: () = assert!(COMPACTED_OBJECT_DELETE_DELAY_MIN.as_secs() > LOG_START_CACHE_TTL.as_secs());
// A written span fits an object, and one batch a span.
const _: () = assert!(COMPACTED_SPAN_BYTES_MAX <= COMPACTED_OBJECT_BYTES_MAX);

/// Consumer lag rows (group x topic) of the groups an agent coordinates
/// that one measurement keeps for /metrics: bounds the series it exports.
pub const GROUP_LAG_ROWS_MAX: usize = 10_000;
