//! Command line and environment (`RUTOMQ_*`) configuration.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "rutomq",
    version,
    about = "Stateless Kafka-compatible message queue"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub logs: LogArgs,
    // `rutomq` alone serves: its flags are `rutomq serve`'s.
    #[command(
        flatten,
        next_help_heading = "Agent options (`rutomq serve`, the default command)"
    )]
    pub serve: ServeArgs,
}

/// How the process logs (every command).
#[derive(Args, Debug, Clone)]
pub struct LogArgs {
    /// Log filter: a level (info, debug...) or tracing directives such as
    /// `info,rutomq::groups=debug`. An invalid filter falls back to the
    /// command's default. Changeable at runtime through Kafka's
    /// BROKER_LOGGER resource.
    #[arg(long = "log", env = "RUTOMQ_LOG", global = true)]
    pub log: Option<String>,
    /// Log line format: `text` for people, `json` (one object per line)
    /// for log collectors.
    #[arg(long, env = "RUTOMQ_LOG_FORMAT", global = true, default_value = "text",
          value_parser = ["text", "json"])]
    pub log_format: String,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Start one agent (the default).
    Serve(Box<ServeArgs>),
    /// Apply the metadata schema to PostgreSQL and exit.
    Migrate {
        #[arg(long, env = "RUTOMQ_POSTGRES_URL")]
        postgres_url: String,
    },
    /// Manage SCRAM users offline (no agent needed): the first admin user,
    /// say. With a running cluster, `kafka-configs.sh --alter
    /// --add-config 'SCRAM-SHA-512=[password=...]' --entity-type users`
    /// does the same over the Kafka protocol.
    User(crate::security::users::UserArgs),
    /// Print the environment file the packages install as
    /// /etc/rutomq/rutomq.env: every setting of `rutomq serve`, its
    /// variable and its default.
    EnvTemplate,
    #[command(flatten)]
    Ctl(crate::ctl::CtlCommand),
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Directory for the embedded PostgreSQL and local objects.
    #[arg(long, env = "RUTOMQ_DATA_DIR", default_value = "./rutomq-data")]
    pub data_dir: PathBuf,
    /// Object store: file:///path, memory://, s3://bucket/prefix.
    /// Default: file://DATA_DIR/objects.
    #[arg(long, env = "RUTOMQ_OBJECT_STORE")]
    pub object_store: Option<String>,
    /// S3 endpoint URL for S3-compatible servers (MinIO, Ceph...);
    /// default: AWS's endpoint for the region.
    #[arg(long, env = "RUTOMQ_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
    /// S3 region (default: AWS_REGION, or us-east-1).
    #[arg(long, env = "RUTOMQ_S3_REGION")]
    pub s3_region: Option<String>,
    /// S3 access key (default: the AWS_* environment, instance or pod
    /// credentials).
    #[arg(long, env = "RUTOMQ_S3_ACCESS_KEY_ID")]
    pub s3_access_key_id: Option<String>,
    /// S3 secret key, with --s3-access-key-id.
    #[arg(long, env = "RUTOMQ_S3_SECRET_ACCESS_KEY", hide_env_values = true)]
    pub s3_secret_access_key: Option<String>,
    /// Allow plain http to the S3 endpoint (test servers).
    #[arg(long, env = "RUTOMQ_S3_ALLOW_HTTP")]
    pub s3_allow_http: bool,
    /// PostgreSQL URL. Without it, a private PostgreSQL runs under DATA_DIR/pg.
    #[arg(long, env = "RUTOMQ_POSTGRES_URL")]
    pub postgres_url: Option<String>,
    /// Kafka listener (one PLAINTEXT listener; --listeners for more).
    #[arg(long, env = "RUTOMQ_LISTEN", default_value = "127.0.0.1:9092")]
    pub listen: SocketAddr,
    /// Address given to clients in Metadata (default: the listen address).
    #[arg(long, env = "RUTOMQ_ADVERTISE")]
    pub advertise: Option<String>,
    /// Named listeners, Kafka's `listeners`:
    /// NAME://HOST:PORT[,NAME://HOST:PORT...]. Replaces --listen.
    #[arg(long, env = "RUTOMQ_LISTENERS")]
    pub listeners: Option<String>,
    /// What clients of each listener are told (Kafka's
    /// `advertised.listeners`); a listener not named here is advertised
    /// at its bind address.
    #[arg(long, env = "RUTOMQ_ADVERTISED_LISTENERS")]
    pub advertised_listeners: Option<String>,
    /// NAME:PROTOCOL[,...] (Kafka's `listener.security.protocol.map`):
    /// PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL. A listener named after a
    /// protocol has it by default.
    #[arg(long, env = "RUTOMQ_LISTENER_SECURITY_PROTOCOL_MAP")]
    pub listener_security_protocol_map: Option<String>,
    /// SASL mechanisms served on SASL listeners (Kafka's
    /// `sasl.enabled.mechanisms`): PLAIN, SCRAM-SHA-256, SCRAM-SHA-512.
    /// PLAIN is checked against the user's SCRAM credential.
    #[arg(
        long,
        env = "RUTOMQ_SASL_ENABLED_MECHANISMS",
        default_value = "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"
    )]
    pub sasl_enabled_mechanisms: String,
    /// PEM file with the TLS listeners' certificate and its chain (SSL and
    /// SASL_SSL listeners; reloaded on SIGHUP or when it changes).
    #[arg(long, env = "RUTOMQ_SSL_CERTIFICATE_LOCATION")]
    pub ssl_certificate_location: Option<std::path::PathBuf>,
    /// PEM file with that certificate's private key (unencrypted PKCS#8,
    /// PKCS#1 or SEC1).
    #[arg(long, env = "RUTOMQ_SSL_KEY_LOCATION")]
    pub ssl_key_location: Option<std::path::PathBuf>,
    /// PEM file with the CAs client certificates must chain to (for
    /// --ssl-client-auth requested or required).
    #[arg(long, env = "RUTOMQ_SSL_TRUSTSTORE_LOCATION")]
    pub ssl_truststore_location: Option<std::path::PathBuf>,
    /// Kafka's `ssl.client.auth` for SSL listeners: none, requested or
    /// required. A client certificate names the principal there; SASL_SSL
    /// listeners ask for none (SASL names the client), as Kafka does.
    #[arg(long, env = "RUTOMQ_SSL_CLIENT_AUTH", default_value = "none")]
    pub ssl_client_auth: String,
    /// Kafka's `ssl.enabled.protocols`.
    #[arg(
        long,
        env = "RUTOMQ_SSL_ENABLED_PROTOCOLS",
        default_value = "TLSv1.2,TLSv1.3"
    )]
    pub ssl_enabled_protocols: String,
    /// Kafka's `ssl.principal.mapping.rules`: how a client certificate's
    /// subject (RFC 2253) becomes a principal name:
    /// RULE:pattern/replacement/[LU],...,DEFAULT.
    #[arg(
        long,
        env = "RUTOMQ_SSL_PRINCIPAL_MAPPING_RULES",
        default_value = "DEFAULT"
    )]
    pub ssl_principal_mapping_rules: String,
    /// Kafka's `connections.max.reauth.ms`: a SASL session lasts this long
    /// (told to the client in SaslAuthenticate v1+, KIP-368); the client
    /// re-authenticates on the same connection before then, or its next
    /// request closes the connection. 0: sessions never expire.
    #[arg(long, env = "RUTOMQ_CONNECTIONS_MAX_REAUTH_MS", default_value_t = 0)]
    pub connections_max_reauth_ms: u64,
    /// Kafka's `authorizer.class.name`: `acl` enforces the ACLs stored in
    /// PostgreSQL on every request (deny by default; Kafka's
    /// `org.apache.kafka.metadata.authorizer.StandardAuthorizer` is taken
    /// as a synonym); `none` (the default) authorizes nothing and the ACL
    /// APIs answer SECURITY_DISABLED.
    #[arg(long, env = "RUTOMQ_AUTHORIZER", default_value = "none")]
    pub authorizer: String,
    /// Kafka's `super.users`: principals allowed everything, separated by
    /// ';' (`User:admin;User:ops`).
    #[arg(long, env = "RUTOMQ_SUPER_USERS", default_value = "")]
    pub super_users: String,
    /// Kafka's `allow.everyone.if.no.acl.found`: a resource no ACL names is
    /// open to everyone (instead of closed).
    #[arg(long, env = "RUTOMQ_ALLOW_EVERYONE_IF_NO_ACL_FOUND")]
    pub allow_everyone_if_no_acl_found: bool,
    /// Kafka's `delegation.token.secret.key`: turns delegation tokens on
    /// (every agent must have the same); a token's HMAC is HMAC-SHA512 of
    /// its id under it.
    #[arg(
        long,
        env = "RUTOMQ_DELEGATION_TOKEN_SECRET_KEY",
        hide_env_values = true
    )]
    pub delegation_token_secret_key: Option<String>,
    /// Kafka's `delegation.token.max.lifetime.ms`: no renewal takes a token
    /// past this after its creation.
    #[arg(
        long,
        env = "RUTOMQ_DELEGATION_TOKEN_MAX_LIFETIME_MS",
        default_value_t = 604_800_000
    )]
    pub delegation_token_max_lifetime_ms: i64,
    /// Kafka's `delegation.token.expiry.time.ms`: a token expires this long
    /// after its creation or renewal unless renewed.
    #[arg(
        long,
        env = "RUTOMQ_DELEGATION_TOKEN_EXPIRY_TIME_MS",
        default_value_t = 86_400_000
    )]
    pub delegation_token_expiry_time_ms: i64,
    /// Health and metrics HTTP listener.
    #[arg(long, env = "RUTOMQ_HTTP", default_value = "127.0.0.1:8080")]
    pub http: SocketAddr,
    /// Shards (one per core by default).
    #[arg(long, env = "RUTOMQ_SHARDS")]
    pub shards: Option<usize>,
    /// Seal a shard's batch buffer at least this often (default: 2 ms for
    /// a local directory or memory, 100 ms for S3).
    #[arg(long, env = "RUTOMQ_FLUSH_INTERVAL_MS")]
    pub flush_interval_ms: Option<u64>,
    /// Adaptive flush: while the agent's traffic would fill less than 128
    /// KiB per flush interval, windows stretch over several intervals, up
    /// to this, so that a trickle of records does not cost an object (a PUT
    /// and a PostgreSQL transaction) per interval; with more traffic they
    /// shrink back at once. Default: 4 × the flush interval for S3 (400
    /// ms), the flush interval itself (no stretching) otherwise.
    #[arg(long, env = "RUTOMQ_FLUSH_INTERVAL_MAX_MS")]
    pub flush_interval_max_ms: Option<u64>,
    /// Seal a produce request's batches at once, instead of at the end of
    /// their flush window, when none of this agent's windows is on its way
    /// (uploading or committing): a lone request then does not wait for the
    /// grid, while under load windows gather on it as before. Default: on
    /// unless windows stretch (`--flush-interval-max-ms` above the interval,
    /// as on S3, where each window is a billed PUT).
    #[arg(long, env = "RUTOMQ_FLUSH_WHEN_IDLE")]
    pub flush_when_idle: Option<bool>,
    /// Seal a shard's batch buffer when it holds this many bytes (up to 3 ×
    /// as much while windows wait for PostgreSQL: fewer, larger spans).
    #[arg(long, env = "RUTOMQ_FLUSH_BYTES", default_value_t = 4 << 20)]
    pub flush_bytes: usize,
    /// Largest request frame accepted.
    #[arg(long, env = "RUTOMQ_MAX_REQUEST_BYTES", default_value_t = 100 << 20)]
    pub max_request_bytes: usize,
    /// Create unknown topics on Metadata/Produce, as Kafka does by default.
    #[arg(long, env = "RUTOMQ_AUTO_CREATE_TOPICS", default_value_t = true, action = clap::ArgAction::Set)]
    pub auto_create_topics: bool,
    /// Partitions of auto-created topics and of CreateTopics with -1.
    #[arg(long, env = "RUTOMQ_DEFAULT_PARTITIONS", default_value_t = 1)]
    pub default_partitions: i32,
    /// Client telemetry (KIP-714) pushed to this agent is also written into
    /// this topic, which must exist: one record per push, key the client
    /// instance id, value its metrics as OTLP protobuf (decompressed; an
    /// OpenTelemetry collector's Kafka receiver reads them as
    /// `otlp_proto`), headers `client_id`, `client_software_name` and
    /// `client_software_version`. Off by default.
    #[arg(long, env = "RUTOMQ_CLIENT_TELEMETRY_TOPIC")]
    pub client_telemetry_topic: Option<String>,
    /// Request bytes admitted but not yet answered, per shard (back-pressure:
    /// past it the shard stops reading its sockets). A request larger than
    /// this is admitted alone, taking the whole budget. 100 MiB: in a
    /// 10-minute soak at half the max rate it cut the ack p99 from 225 to
    /// 74 ms and the RSS peak from 992 to 853 MiB against 256 MiB, with the
    /// max rate unchanged (benches/results/2026-12-01-shard-memory.md); 32
    /// and 16 MiB cost a quarter to a third of the max rate
    /// (benches/results/2026-12-01-spread.md).
    #[arg(long, env = "RUTOMQ_SHARD_MEMORY_BYTES", default_value_t = 100 << 20)]
    pub shard_memory_bytes: usize,
    /// Bytes of recently written objects kept for tail reads.
    #[arg(long, env = "RUTOMQ_TAIL_CACHE_BYTES", default_value_t = 256 << 20)]
    pub tail_cache_bytes: usize,
    /// Bytes of objects read back whole from the object store (objects up
    /// to 16 MiB are read whole once, then shared by every partition in them).
    #[arg(long, env = "RUTOMQ_READ_CACHE_BYTES", default_value_t = 256 << 20)]
    pub read_cache_bytes: usize,
    /// Bytes of memory faulted in at start, before serving, and kept for
    /// the agent's buffers and caches to reuse. Default: what they grow to
    /// (--tail-cache-bytes + --read-cache-bytes + shards ×
    /// --shard-memory-bytes). Faulting memory in while serving stalls the
    /// shards (each first touch clears a 2 MiB huge page): ack p99 at
    /// 20,000 records/s 44 ms against 11-25 ms with it. With a local
    /// directory the read cache's share is the store's pool of read blocks
    /// instead (--read-cache-bytes + 128 MiB of reads in flight), faulted in
    /// by the store on top of a value set here. 0: off, for both (RSS then
    /// grows with use instead of starting there).
    #[arg(long, env = "RUTOMQ_PREFAULT_BYTES")]
    pub prefault_bytes: Option<usize>,
    /// Read-ahead depth: for a consumer reading a partition from the object
    /// store, the objects of its next spans are read into the read cache as
    /// far as this many more fetches of the same size would reach (four
    /// spans per fetch at most), within half of --read-cache-bytes (which
    /// bounds it first with many partitions). Default and most: 15. Less
    /// left consumers at the tail of a max-rate produce behind: with 4 on a
    /// local directory they read 0.58-1.15 of what was produced (under 1,
    /// the lag growing, in 7 of 9 runs), with 15 0.92-1.15 (4 of 14);
    /// consuming from the beginning did not move.
    #[arg(long, env = "RUTOMQ_READ_AHEAD_FETCHES",
          value_parser = clap::value_parser!(u16).range(0..=crate::limits::READ_AHEAD_FETCHES_MAX as i64))]
    pub read_ahead_fetches: Option<u16>,
    /// Check the CRC of every batch read back from the object store before
    /// it is sent (a corrupt one is refused with KAFKA_STORAGE_ERROR).
    /// Off by default, as in Kafka, whose brokers check a batch's CRC when
    /// it is produced and leave reads to the consumers (Java's check.crcs,
    /// on by default). On, it cost a third of the agent's CPU when
    /// consuming from the beginning.
    #[arg(long, env = "RUTOMQ_READ_VERIFY_CRC", default_value_t = false)]
    pub read_verify_crc: bool,
    /// A request body being received, or a response being sent, must move
    /// within this or the connection is closed.
    #[arg(long, env = "RUTOMQ_FRAME_IO_TIMEOUT_MS", default_value_t = 60_000)]
    pub frame_io_timeout_ms: u64,
    /// How often retention is applied (Kafka's
    /// log.retention.check.interval.ms; every agent checks, each step is
    /// idempotent).
    #[arg(
        long,
        env = "RUTOMQ_RETENTION_CHECK_INTERVAL_MS",
        default_value_t = 30_000
    )]
    pub retention_check_interval_ms: u64,
    /// Objects retired by retention or DeleteRecords are deleted this long
    /// after (Kafka's file.delete.delay.ms), so reads under way finish.
    #[arg(long, env = "RUTOMQ_FILE_DELETE_DELAY_MS", default_value_t = 60_000)]
    pub file_delete_delay_ms: u64,
    /// How often each agent's compactor looks for compacted partitions to
    /// clean (Kafka's log.cleaner.backoff.ms).
    #[arg(long, env = "RUTOMQ_COMPACTION_INTERVAL_MS", default_value_t = 15_000)]
    pub compaction_interval_ms: u64,
    /// Memory of the compactor's key map (Kafka's
    /// log.cleaner.dedupe.buffer.size): 24 bytes per key, filled to 90%;
    /// a partition with more distinct dirty keys is compacted in passes.
    #[arg(
        long,
        env = "RUTOMQ_COMPACTION_KEY_MAP_BYTES",
        default_value_t = crate::limits::COMPACTION_KEY_MAP_BYTES_DEFAULT
    )]
    pub compaction_key_map_bytes: usize,
    /// How often the orphan collector scans for objects nothing refers to.
    #[arg(long, env = "RUTOMQ_GC_INTERVAL_MS", default_value_t = 60_000)]
    pub gc_interval_ms: u64,
    /// Unreferenced objects older than this are deleted; uploads not
    /// committed within half of it are refused.
    #[arg(long, env = "RUTOMQ_GC_GRACE_MS", default_value_t = 600_000)]
    pub gc_grace_ms: u64,
    /// Benchmarking only: delay every object PUT and GET by this many ms
    /// (uniformly ± --inject-object-jitter-ms), to behave like a distant
    /// store such as S3. 0 = off.
    #[arg(long, env = "RUTOMQ_INJECT_OBJECT_LATENCY_MS", default_value_t = 0)]
    pub inject_object_latency_ms: u64,
    /// Benchmarking only: the spread of --inject-object-latency-ms.
    #[arg(long, env = "RUTOMQ_INJECT_OBJECT_JITTER_MS", default_value_t = 0)]
    pub inject_object_jitter_ms: u64,
    /// Testing only: a compaction pass waits this many ms between uploading
    /// its objects and committing them (to kill an agent mid-pass). 0 = off.
    #[arg(
        long,
        env = "RUTOMQ_INJECT_COMPACTION_SWAP_DELAY_MS",
        default_value_t = 0
    )]
    pub inject_compaction_swap_delay_ms: u64,
    /// How long a group's first rebalance waits for more members to join
    /// (Kafka's group.initial.rebalance.delay.ms).
    #[arg(
        long,
        env = "RUTOMQ_GROUP_INITIAL_REBALANCE_DELAY_MS",
        default_value_t = 3000
    )]
    pub group_initial_rebalance_delay_ms: u64,
    /// Smallest session timeout a member may ask for
    /// (group.min.session.timeout.ms).
    #[arg(
        long,
        env = "RUTOMQ_GROUP_MIN_SESSION_TIMEOUT_MS",
        default_value_t = 6000
    )]
    pub group_min_session_timeout_ms: u64,
    /// Largest session timeout a member may ask for
    /// (group.max.session.timeout.ms).
    #[arg(
        long,
        env = "RUTOMQ_GROUP_MAX_SESSION_TIMEOUT_MS",
        default_value_t = 1_800_000
    )]
    pub group_max_session_timeout_ms: u64,
    /// Members of one group at most (group.max.size).
    #[arg(long, env = "RUTOMQ_GROUP_MAX_SIZE", default_value_t = 1000)]
    pub group_max_size: usize,
    /// Committed offsets of a group empty this long expire
    /// (offsets.retention.minutes).
    #[arg(
        long,
        env = "RUTOMQ_OFFSETS_RETENTION_MINUTES",
        default_value_t = 10_080
    )]
    pub offsets_retention_minutes: u64,
    /// How often each agent measures the consumer lag of the groups it
    /// coordinates for /metrics (rutomq_consumer_group_lag); one
    /// PostgreSQL query over every committed offset. 0: never.
    #[arg(long, env = "RUTOMQ_GROUP_LAG_INTERVAL_MS", default_value_t = 30_000)]
    pub group_lag_interval_ms: u64,
    /// KIP-848 consumer groups: a member that does not heartbeat for this
    /// long is removed (group.consumer.session.timeout.ms).
    #[arg(
        long,
        env = "RUTOMQ_GROUP_CONSUMER_SESSION_TIMEOUT_MS",
        default_value_t = 45_000
    )]
    pub group_consumer_session_timeout_ms: u64,
    /// KIP-848 consumer groups: how often members heartbeat
    /// (group.consumer.heartbeat.interval.ms).
    #[arg(
        long,
        env = "RUTOMQ_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS",
        default_value_t = 5_000
    )]
    pub group_consumer_heartbeat_interval_ms: u64,
    /// Streams group members' session timeout
    /// (group.streams.session.timeout.ms).
    #[arg(
        long,
        env = "RUTOMQ_GROUP_STREAMS_SESSION_TIMEOUT_MS",
        default_value_t = 45_000,
        value_parser = clap::value_parser!(u64).range(1..=3_600_000)
    )]
    pub group_streams_session_timeout_ms: u64,
    /// How often streams group members heartbeat
    /// (group.streams.heartbeat.interval.ms).
    #[arg(
        long,
        env = "RUTOMQ_GROUP_STREAMS_HEARTBEAT_INTERVAL_MS",
        default_value_t = 5_000,
        value_parser = clap::value_parser!(u64).range(1..=3_600_000)
    )]
    pub group_streams_heartbeat_interval_ms: u64,
    /// Members of one streams group at most (group.streams.max.size).
    #[arg(long, env = "RUTOMQ_GROUP_STREAMS_MAX_SIZE", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub group_streams_max_size: u64,
    /// Standby replicas of each stateful task
    /// (group.streams.num.standby.replicas).
    #[arg(long, env = "RUTOMQ_GROUP_STREAMS_NUM_STANDBY_REPLICAS", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=2))]
    pub group_streams_num_standby_replicas: u32,
    /// How long a new streams group waits for more members before its
    /// first assignment (group.streams.initial.rebalance.delay.ms).
    #[arg(
        long,
        env = "RUTOMQ_GROUP_STREAMS_INITIAL_REBALANCE_DELAY_MS",
        default_value_t = 3_000,
        value_parser = clap::value_parser!(u64).range(0..=300_000)
    )]
    pub group_streams_initial_rebalance_delay_ms: u64,
    /// Share group members' session timeout (group.share.session.timeout.ms).
    #[arg(
        long,
        env = "RUTOMQ_GROUP_SHARE_SESSION_TIMEOUT_MS",
        default_value_t = 45_000
    )]
    pub group_share_session_timeout_ms: u64,
    /// Share group members' heartbeat interval
    /// (group.share.heartbeat.interval.ms).
    #[arg(
        long,
        env = "RUTOMQ_GROUP_SHARE_HEARTBEAT_INTERVAL_MS",
        default_value_t = 5_000
    )]
    pub group_share_heartbeat_interval_ms: u64,
    /// Members of one share group at most (group.share.max.size).
    #[arg(long, env = "RUTOMQ_GROUP_SHARE_MAX_SIZE", default_value_t = 200,
          value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub group_share_max_size: u64,
    /// How long a share group member holds the records it fetched
    /// (group.share.record.lock.duration.ms; a group's
    /// share.record.lock.duration.ms replaces it).
    #[arg(long, env = "RUTOMQ_GROUP_SHARE_RECORD_LOCK_DURATION_MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(1_000..=3_600_000))]
    pub group_share_record_lock_duration_ms: u64,
    /// The shortest lock a share group's share.record.lock.duration.ms may
    /// ask for (Kafka's read-only group.share.min.record.lock.duration.ms).
    #[arg(long, env = "RUTOMQ_GROUP_SHARE_MIN_RECORD_LOCK_DURATION_MS", default_value_t = 15_000,
          value_parser = clap::value_parser!(u64).range(1_000..=30_000))]
    pub group_share_min_record_lock_duration_ms: u64,
    /// The longest lock a share group's share.record.lock.duration.ms may
    /// ask for (Kafka's read-only group.share.max.record.lock.duration.ms).
    #[arg(long, env = "RUTOMQ_GROUP_SHARE_MAX_RECORD_LOCK_DURATION_MS", default_value_t = 60_000,
          value_parser = clap::value_parser!(u64).range(30_000..=3_600_000))]
    pub group_share_max_record_lock_duration_ms: u64,
    /// Deliveries of a record to share group members before it is archived
    /// (group.share.delivery.count.limit).
    #[arg(long, env = "RUTOMQ_GROUP_SHARE_DELIVERY_COUNT_LIMIT", default_value_t = 5,
          value_parser = clap::value_parser!(u16).range(2..=10))]
    pub group_share_delivery_count_limit: u16,
    /// Records in flight per share-partition at most
    /// (group.share.partition.max.record.locks).
    #[arg(long, env = "RUTOMQ_GROUP_SHARE_PARTITION_MAX_RECORD_LOCKS", default_value_t = 2_000,
          value_parser = clap::value_parser!(u64).range(100..=10_000))]
    pub group_share_partition_max_record_locks: u64,
    /// Rack reported in Metadata.
    #[arg(long, env = "RUTOMQ_RACK")]
    pub rack: Option<String>,
    /// Longest `transaction.timeout.ms` a transactional producer may ask
    /// for (Kafka's `transaction.max.timeout.ms`). Flink's KafkaSink asks
    /// 1 h (3600000) by default: raise this, or lower the sink's
    /// `transaction.timeout.ms`.
    #[arg(
        long,
        env = "RUTOMQ_TRANSACTION_MAX_TIMEOUT_MS",
        default_value_t = crate::limits::TRANSACTION_MAX_TIMEOUT_MS_DEFAULT
    )]
    pub transaction_max_timeout_ms: i32,
    /// A transactional id with no transaction open for this long is
    /// forgotten (Kafka's `transactional.id.expiration.ms`, 7 days); its
    /// next InitProducerId starts it again at epoch 0.
    #[arg(
        long,
        env = "RUTOMQ_TRANSACTIONAL_ID_EXPIRATION_MS",
        default_value_t = 604_800_000
    )]
    pub transactional_id_expiration_ms: i64,
}

impl ServeArgs {
    /// The listeners and SASL settings these flags describe.
    pub fn security_config(&self) -> anyhow::Result<crate::security::SecurityConfig> {
        use crate::security::{resolve_listeners, SaslMechanism, SecurityProtocol};
        let listeners = match &self.listeners {
            Some(l) => {
                anyhow::ensure!(
                    self.advertise.is_none(),
                    "--advertise goes with --listen; with --listeners use --advertised-listeners"
                );
                resolve_listeners(
                    l,
                    self.advertised_listeners.as_deref(),
                    self.listener_security_protocol_map.as_deref(),
                )
                .map_err(|e| anyhow::anyhow!("--listeners: {e}"))?
            }
            None => {
                anyhow::ensure!(
                    self.advertised_listeners.is_none()
                        && self.listener_security_protocol_map.is_none(),
                    "--advertised-listeners and --listener-security-protocol-map need --listeners"
                );
                let advertise = self
                    .advertise
                    .clone()
                    .unwrap_or_else(|| self.listen.to_string());
                let (host, port) = advertise
                    .rsplit_once(':')
                    .and_then(|(h, p)| Some((h.to_owned(), p.parse::<i32>().ok()?)))
                    .ok_or_else(|| {
                        anyhow::anyhow!("--advertise must be HOST:PORT, got {advertise:?}")
                    })?;
                vec![crate::security::Listener {
                    name: "PLAINTEXT".into(),
                    protocol: SecurityProtocol::Plaintext,
                    bind: self.listen,
                    advertised_host: host,
                    advertised_port: port,
                }]
            }
        };
        let tls = match (&self.ssl_certificate_location, &self.ssl_key_location) {
            (Some(certificate), Some(key)) => Some(crate::security::tls::TlsSettings {
                certificate: certificate.clone(),
                key: key.clone(),
                truststore: self.ssl_truststore_location.clone(),
                client_auth: crate::security::tls::ClientAuth::parse(&self.ssl_client_auth)
                    .ok_or_else(|| {
                        anyhow::anyhow!(
                            "--ssl-client-auth must be none, requested or required, got {:?}",
                            self.ssl_client_auth
                        )
                    })?,
                protocols: crate::security::tls::TlsSettings::parse_protocols(
                    &self.ssl_enabled_protocols,
                )
                .map_err(|e| anyhow::anyhow!("--ssl-enabled-protocols: {e}"))?,
            }),
            (None, None) => None,
            _ => anyhow::bail!("--ssl-certificate-location and --ssl-key-location go together"),
        };
        if let Some(l) = listeners.iter().find(|l| l.protocol.tls()) {
            anyhow::ensure!(
                tls.is_some(),
                "listener {} is {}: give its certificate with --ssl-certificate-location and \
                 --ssl-key-location",
                l.name,
                l.protocol.name()
            );
        }
        let mut sasl_mechanisms = Vec::new();
        for m in self
            .sasl_enabled_mechanisms
            .split(',')
            .map(str::trim)
            .filter(|m| !m.is_empty())
        {
            let m = SaslMechanism::from_name(&m.to_ascii_uppercase()).ok_or_else(|| {
                anyhow::anyhow!(
                    "--sasl-enabled-mechanisms: {m:?} is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
                )
            })?;
            if !sasl_mechanisms.contains(&m) {
                sasl_mechanisms.push(m);
            }
        }
        anyhow::ensure!(
            !sasl_mechanisms.is_empty() || !listeners.iter().any(|l| l.protocol.sasl()),
            "a SASL listener needs --sasl-enabled-mechanisms"
        );
        let authorizer = match self.authorizer.as_str() {
            "none" | "" => {
                anyhow::ensure!(
                    self.super_users.trim().is_empty() && !self.allow_everyone_if_no_acl_found,
                    "--super-users and --allow-everyone-if-no-acl-found need --authorizer acl"
                );
                None
            }
            "acl" | "org.apache.kafka.metadata.authorizer.StandardAuthorizer" => {
                Some(crate::security::acl::AuthorizerConfig {
                    super_users: crate::security::acl::AuthorizerConfig::parse_super_users(
                        &self.super_users,
                    )
                    .map_err(|e| anyhow::anyhow!("--super-users: {e}"))?,
                    allow_if_no_acl: self.allow_everyone_if_no_acl_found,
                })
            }
            other => anyhow::bail!("--authorizer must be acl or none, got {other:?}"),
        };
        Ok(crate::security::SecurityConfig {
            authorizer,
            listeners,
            sasl_mechanisms,
            tls,
            principal_mapping_rules: self.ssl_principal_mapping_rules.clone(),
            reauth: (self.connections_max_reauth_ms > 0)
                .then(|| std::time::Duration::from_millis(self.connections_max_reauth_ms)),
            tokens: match &self.delegation_token_secret_key {
                Some(key) if key.is_empty() => {
                    anyhow::bail!("--delegation-token-secret-key must not be empty")
                }
                Some(key) => Some(crate::security::tokens::TokenConfig {
                    secret: key.as_bytes().to_vec(),
                    max_lifetime_ms: self.delegation_token_max_lifetime_ms.max(1),
                    expiry_time_ms: self.delegation_token_expiry_time_ms.max(1),
                }),
                None => None,
            },
        })
    }

    pub fn groups_config(&self) -> crate::groups::GroupsConfig {
        use std::time::Duration;
        crate::groups::GroupsConfig {
            initial_rebalance_delay: Duration::from_millis(self.group_initial_rebalance_delay_ms),
            session_timeout_min: Duration::from_millis(self.group_min_session_timeout_ms),
            session_timeout_max: Duration::from_millis(self.group_max_session_timeout_ms),
            group_size_max: self.group_max_size.max(1),
            offsets_retention: Duration::from_secs(self.offsets_retention_minutes.max(1) * 60),
            lag_interval: (self.group_lag_interval_ms > 0)
                .then(|| Duration::from_millis(self.group_lag_interval_ms)),
            offset_metadata_bytes_max: 4096,
            consumer_session_timeout: Duration::from_millis(self.group_consumer_session_timeout_ms),
            consumer_heartbeat_interval: Duration::from_millis(
                self.group_consumer_heartbeat_interval_ms,
            ),
            topic_access: crate::groups::TopicAccess::default(),
            share: crate::groups::share::ShareConfig {
                session_timeout: Duration::from_millis(self.group_share_session_timeout_ms),
                heartbeat_interval: Duration::from_millis(self.group_share_heartbeat_interval_ms),
                size_max: self.group_share_max_size as usize,
                rules: crate::share::partition::Rules {
                    delivery_limit: self.group_share_delivery_count_limit,
                    lock_ms: self.group_share_record_lock_duration_ms as i64,
                    max_locks: self.group_share_partition_max_record_locks as usize,
                },
            },
            streams: crate::groups::streams::StreamsConfig {
                session_timeout: Duration::from_millis(self.group_streams_session_timeout_ms),
                heartbeat_interval: Duration::from_millis(self.group_streams_heartbeat_interval_ms),
                size_max: self.group_streams_max_size as usize,
                standby_replicas: self.group_streams_num_standby_replicas,
                initial_rebalance_delay: Duration::from_millis(
                    self.group_streams_initial_rebalance_delay_ms,
                ),
            },
        }
    }

    /// Whether a request is sealed at once while the pipeline is idle
    /// (`--flush-when-idle`): by default where windows do not stretch.
    pub fn flush_when_idle(&self, object_store: &str) -> bool {
        self.flush_when_idle.unwrap_or(
            self.flush_interval_max_ms(object_store) <= self.flush_interval_ms(object_store),
        )
    }

    /// The flush interval: a few ms for a local directory or memory, longer
    /// for S3 where every PUT costs money and tens of ms.
    pub fn flush_interval_ms(&self, object_store: &str) -> u64 {
        self.flush_interval_ms
            .unwrap_or(if object_store.starts_with("s3://") {
                100
            } else {
                2
            })
    }

    /// Memory faulted in at start (`--prefault-bytes`) for `shards` shards;
    /// with a `file_store`, the read cache's share is its pool of read
    /// blocks instead ([`Self::read_blocks_bytes`], faulted in by the store:
    /// whole-object reads did not reuse memory faulted in here,
    /// benches/results/2026-12-06-read-blocks.md). The store is opened
    /// first: blocks made after the prefault took its freed memory
    /// (benches/results/2026-12-07-prefault-order/).
    pub fn prefault_bytes(&self, shards: usize, file_store: bool) -> usize {
        self.prefault_bytes.unwrap_or_else(|| {
            let read_cache = if file_store { 0 } else { self.read_cache_bytes };
            self.tail_cache_bytes
                .saturating_add(read_cache)
                .saturating_add(self.shard_memory_bytes.saturating_mul(shards))
        })
    }

    /// The file store's pool of read blocks: the read cache and the reads in
    /// flight at their bounds.
    pub fn read_blocks_bytes(&self) -> usize {
        self.read_cache_bytes
            .saturating_add(rutomq_storage::READS_INFLIGHT_BYTES_MAX)
    }

    /// Whether a GET of `object_store` takes tens of milliseconds: S3, or
    /// any store with injected latency. Such a store reads deeper ahead and
    /// reads large spans by themselves
    /// ([`Storage::distant`](rutomq_storage::Storage::distant)).
    pub fn distant_store(&self, object_store: &str) -> bool {
        object_store.starts_with("s3://")
            || self.inject_object_latency_ms > 0
            || self.inject_object_jitter_ms > 0
    }

    /// The read-ahead depth in fetches (`--read-ahead-fetches`).
    pub fn read_ahead_fetches(&self) -> usize {
        self.read_ahead_fetches
            .map_or(crate::limits::READ_AHEAD_FETCHES_MAX, usize::from)
    }

    /// The longest a window stretches to at low traffic: never shorter
    /// than the flush interval.
    pub fn flush_interval_max_ms(&self, object_store: &str) -> u64 {
        let interval = self.flush_interval_ms(object_store);
        let default = if object_store.starts_with("s3://") {
            interval * 4
        } else {
            interval
        };
        self.flush_interval_max_ms.unwrap_or(default).max(interval)
    }
}

/// The settings a package turns on in /etc/rutomq/rutomq.env: the data
/// directory the systemd unit makes writable (its StateDirectory).
const ENV_TEMPLATE_SET: &[(&str, &str)] = &[("RUTOMQ_DATA_DIR", "/var/lib/rutomq")];

/// Examples shown first, commented out: what a cluster sets before its
/// first start (without them the agent runs its own PostgreSQL and keeps
/// objects under the data directory, a single-node setup).
const ENV_TEMPLATE_EXAMPLES: &[(&str, &str)] = &[
    (
        "RUTOMQ_POSTGRES_URL",
        "postgresql://rutomq:PASSWORD@db.example:5432/rutomq",
    ),
    ("RUTOMQ_OBJECT_STORE", "s3://bucket/rutomq"),
    ("RUTOMQ_S3_REGION", "eu-west-1"),
    ("RUTOMQ_S3_ACCESS_KEY_ID", "AKIA..."),
    ("RUTOMQ_S3_SECRET_ACCESS_KEY", "..."),
    ("RUTOMQ_LISTEN", "0.0.0.0:9092"),
    ("RUTOMQ_ADVERTISE", "host1.example:9092"),
    ("RUTOMQ_HTTP", "0.0.0.0:8080"),
];

/// Help text width in the environment file (after "#   ").
const ENV_TEMPLATE_WIDTH: usize = 72;

/// The environment file packages install (`rutomq env-template`): built
/// from the flags themselves, so no setting is missing from it and no
/// default in it is stale. packaging/rutomq.env is this text (a unit test
/// holds the two together).
pub fn env_template() -> String {
    use clap::CommandFactory;
    use std::fmt::Write;
    let mut out = String::from(
        "# /etc/rutomq/rutomq.env: the settings of the rutomq agent that\n\
         # rutomq.service runs. Upgrades keep this file. Generated by\n\
         # `rutomq env-template` from the agent's own flags: every setting is\n\
         # listed below, commented out, with its default.\n\
         #\n\
         # Configure it before enabling the service:\n\
         #   systemctl enable --now rutomq\n\
         # As shipped, the agent runs a private PostgreSQL and keeps objects\n\
         # under the data directory (one node); a cluster points every agent at\n\
         # one PostgreSQL and one object store, for example:\n",
    );
    for (k, v) in ENV_TEMPLATE_EXAMPLES {
        let _ = writeln!(out, "#{k}={v}");
    }
    out.push('\n');
    for (k, v) in ENV_TEMPLATE_SET {
        let _ = writeln!(out, "{k}={v}");
    }
    let cli = Cli::command();
    let serve = ServeArgs::augment_args(clap::Command::new("serve"));
    let logs = LogArgs::augment_args(clap::Command::new("logs"));
    debug_assert!(cli.get_arguments().any(|a| a.get_id() == "log_format"));
    for arg in logs.get_arguments().chain(serve.get_arguments()) {
        let Some(var) = arg.get_env().and_then(|v| v.to_str()) else {
            continue;
        };
        out.push('\n');
        let long = arg.get_long().unwrap_or_default();
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        let _ = writeln!(out, "# --{long}");
        for paragraph in help.lines() {
            if paragraph.trim().is_empty() {
                out.push_str("#\n");
                continue;
            }
            // Clap joins a doc comment's lines; wrap them again.
            let mut line = String::new();
            for word in paragraph.split_whitespace() {
                if !line.is_empty() && line.len() + 1 + word.len() > ENV_TEMPLATE_WIDTH {
                    let _ = writeln!(out, "#   {line}");
                    line.clear();
                }
                if !line.is_empty() {
                    line.push(' ');
                }
                line.push_str(word);
            }
            let _ = writeln!(out, "#   {line}");
        }
        let default: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        let default = match (default.is_empty(), arg.get_action().takes_values()) {
            (false, _) => default.join(","),
            (true, false) => "false".to_owned(),
            (true, true) => String::new(),
        };
        if default.is_empty() {
            let _ = writeln!(out, "#   (no default)");
        }
        let _ = writeln!(out, "#{var}={default}");
    }
    out
}

#[cfg(test)]
mod tests {
    /// The packaged environment file is what the flags say today; after
    /// changing a flag, `target/release/rutomq env-template >
    /// packaging/rutomq.env`.
    #[test]
    fn packaged_env_file_is_the_generated_template() {
        let packaged = include_str!("../../packaging/rutomq.env");
        let generated = super::env_template();
        assert!(
            packaged == generated,
            "packaging/rutomq.env is stale: run `rutomq env-template > packaging/rutomq.env`"
        );
        // Every serve flag is in it.
        for var in [
            "RUTOMQ_POSTGRES_URL",
            "RUTOMQ_GC_GRACE_MS",
            "RUTOMQ_LOG_FORMAT",
        ] {
            assert!(generated.contains(&format!("#{var}=")), "{var}");
        }
    }

    /// The serve flags of `rutomq EXTRA...`.
    fn serve_args(extra: &[&str]) -> super::ServeArgs {
        use clap::Parser;
        let argv = std::iter::once("rutomq").chain(extra.iter().copied());
        super::Cli::try_parse_from(argv).expect("valid flags").serve
    }

    #[test]
    fn read_ahead_is_as_deep_as_allowed_unless_set() {
        use clap::Parser;
        assert_eq!(serve_args(&[]).read_ahead_fetches(), 15);
        let set = serve_args(&["--read-ahead-fetches", "4"]);
        assert_eq!(set.read_ahead_fetches(), 4);
        assert!(super::Cli::try_parse_from(["rutomq", "--read-ahead-fetches", "16"]).is_err());
    }

    #[test]
    fn a_store_is_distant_on_s3_or_with_injected_latency() {
        let slow = serve_args(&["--inject-object-latency-ms", "30"]);
        assert!(slow.distant_store("file:///d") && serve_args(&[]).distant_store("s3://b"));
        assert!(!serve_args(&[]).distant_store("file:///d"));
    }

    #[test]
    fn prefault_covers_the_caches_and_shard_budgets_unless_set() {
        let a = serve_args(&[
            "--tail-cache-bytes",
            "1000",
            "--read-cache-bytes",
            "200",
            "--shard-memory-bytes",
            "30",
        ]);
        assert_eq!(a.prefault_bytes(4, false), 1000 + 200 + 4 * 30);
        assert_eq!(
            a.prefault_bytes(4, true),
            1000 + 4 * 30,
            "reads have their blocks"
        );
        assert_eq!(
            serve_args(&["--prefault-bytes", "0"]).prefault_bytes(4, true),
            0
        );
        assert_eq!(
            serve_args(&["--prefault-bytes", "77"]).prefault_bytes(2, false),
            77
        );
    }
}
