//! `rutomq-meta-load`: how many agents one PostgreSQL primary carries.
//!
//! Simulates N agents committing flush windows straight into PostgreSQL,
//! through the real commit path and nothing else: no Kafka clients, no
//! shards, no object store. Each simulated agent is a [`rutomq_meta::Meta`]
//! of its own (its meta thread, commit connection, query, DDL and notifier
//! connections and its `LISTEN`, exactly as an agent has), registered as an
//! agent. Every `--window-ms` on its own grid (the agents' grids are spread
//! over one window, as independently started agents are) it submits one
//! window: an [`ObjectCommit`] with a unique object key holding
//! `--batches-per-part` batches for each of its partitions. Commits are
//! submitted in window order and pipelined like the agent's flush pipeline
//! (up to `--in-flight` submitted and not answered), so the meta thread
//! groups queued windows into one transaction as it does in an agent.
//!
//! Falling behind is never hidden: a window is due at its grid instant and
//! is submitted late if the in-flight bound or the meta thread holds it up
//! (never skipped: later windows wait behind it, as an agent's would). The
//! driver reports how late (submit lag, which includes up to 1 ms of the
//! timer's resolution), how many windows were late by more than one
//! window, how many were more than one window overdue and still not
//! submitted when the run ended (backlog), and the achieved against the
//! offered rate. Commit latency is timed from submit to outcome, and also
//! from the grid instant (which charges the lag too). Achieved rates count
//! the commits answered while measuring, so a backlog left by the warmup
//! can lift them briefly past the offered rate; a rate that stays below it
//! with a growing backlog is the ceiling.
//!
//! RUN IT AGAINST A SCRATCH POSTGRESQL ONLY. It migrates the database to
//! rutomq's schema, registers fake agents, creates topics and commits spans
//! of objects that exist in no object store: an agent serving this
//! database would fail every fetch of these topics and its orphan
//! collector would chase the objects. Nothing is cleaned up afterwards.
//! `benches/meta-load.sh` makes a throwaway cluster, runs this and removes
//! the cluster.
//!
//!   rutomq-meta-load --postgres-url postgresql://rutomq@127.0.0.1:5432/postgres \
//!       --sweep 1,2,4,8,16,32 --duration 30 --warmup 5 --postgres-pid PID
//!
//! One JSON line per agent count on stdout, a summary per count on stderr.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, ensure, Context, Result};
use clap::Parser;
use hdrhistogram::Histogram;
use rutomq_bench::stats::{self, Broker};
use rutomq_meta::producer::{last_seq, next_seq};
use rutomq_meta::{
    BatchOutcome, BatchRef, CommitReceiver, Endpoint, Meta, MetaStats, Notice, ObjectCommit,
    PartitionAppend, ProducerFields,
};
use serde_json::{json, Value};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use uuid::Uuid;

/// Connections one simulated agent holds open: commit, shared query, DDL,
/// notifier and `LISTEN` (the transaction-state ones open on first use,
/// never here; the migration's closes once done).
const CONNECTIONS_PER_AGENT: i64 = 5;
/// Agents one count starts at most: each is a thread and
/// [`CONNECTIONS_PER_AGENT`] connections.
const AGENTS_MAX: usize = 512;
/// Partitions of all topics of one count at most.
const PARTITIONS_MAX: usize = 100_000;
/// Distinct commit error messages kept; the rest count under "other".
const ERROR_KINDS_MAX: usize = 16;
/// After the run ends, the commits in flight get this long to answer
/// (longer than the session's 60 s statement timeout).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(90);
/// The meta threads get this long to finish once their handles are gone.
const JOIN_TIMEOUT: Duration = Duration::from_secs(30);
/// Past this age the committer refuses an object (an agent uses half its
/// orphan grace period); far beyond any commit of a healthy run.
const COMMIT_AGE_MAX: Duration = Duration::from_secs(300);
/// The first windows are due this long after the agents are ready.
const START_DELAY: Duration = Duration::from_millis(200);
/// Topic names must fit Kafka's limit.
const TOPIC_NAME_BYTES_MAX: usize = 249;

#[derive(Parser, Debug, Clone)]
#[command(name = "rutomq-meta-load", version, about)]
struct Args {
    /// PostgreSQL to load. A scratch database only: see the binary's doc.
    #[arg(long)]
    postgres_url: String,
    /// Simulated agents (without --sweep).
    #[arg(long, default_value_t = 1)]
    agents: usize,
    /// Agent counts to run one after the other (e.g. 1,2,4,8,16,32), each
    /// on fresh topics, one JSON line each.
    #[arg(long, value_delimiter = ',')]
    sweep: Vec<usize>,
    /// Flush window of every agent: 2 is the agent's default for a local
    /// directory, 100 for S3.
    #[arg(long, default_value_t = 2)]
    window_ms: u64,
    /// Topics created per agent count.
    #[arg(long, default_value_t = 4)]
    topics: usize,
    /// Partitions per topic.
    #[arg(long, default_value_t = 32)]
    partitions: i32,
    /// Partition appends (spans) in each window of each agent. Default:
    /// every partition dealt out to the agents round-robin, so each writes
    /// its own (one each, shared, when agents outnumber partitions). Given:
    /// agent i appends to the COUNT partitions from i*COUNT on (wrapping),
    /// shared between agents when COUNT x agents exceeds the partitions.
    #[arg(long)]
    partitions_per_window: Option<usize>,
    /// Batches per partition append.
    #[arg(long, default_value_t = 1)]
    batches_per_part: usize,
    /// Bytes of each batch (in the object that does not exist).
    #[arg(long, default_value_t = 65536)]
    batch_bytes: u32,
    /// Records (offsets) of each batch.
    #[arg(long, default_value_t = 64)]
    batch_records: u32,
    /// Batches carry idempotent producer fields (one producer id per agent,
    /// sequences per partition), so each commit also reads and upserts
    /// producer state.
    #[arg(long)]
    idempotent: bool,
    /// Windows submitted and not yet answered per agent at most (the
    /// agent's uploads in flight bound).
    #[arg(long, default_value_t = 64)]
    in_flight: usize,
    /// Seconds measured, after the warmup.
    #[arg(long, default_value_t = 30.0)]
    duration: f64,
    /// Seconds of load before the measurement starts.
    #[arg(long, default_value_t = 5.0)]
    warmup: f64,
    /// The postmaster's pid: the CPU seconds of it and its descendants
    /// (the backends) over the measured seconds are reported.
    #[arg(long)]
    postgres_pid: Option<u32>,
    /// Topics are named PREFIX-<start time>-a<agents>-<i>.
    #[arg(long, default_value = "meta-load")]
    topic_prefix: String,
    /// Worker threads of the driver's own runtime (each agent's meta thread
    /// comes on top).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Seconds of rest between the counts of a sweep, after a CHECKPOINT.
    #[arg(long, default_value_t = 2.0)]
    pause: f64,
}

impl Args {
    fn counts(&self) -> Vec<usize> {
        if self.sweep.is_empty() {
            vec![self.agents]
        } else {
            self.sweep.clone()
        }
    }

    fn check(&self) -> Result<()> {
        for n in self.counts() {
            ensure!(
                (1..=AGENTS_MAX).contains(&n),
                "agent counts must be 1..={AGENTS_MAX}"
            );
        }
        ensure!(self.window_ms >= 1, "--window-ms must be at least 1");
        ensure!(
            self.topics >= 1 && self.partitions >= 1,
            "--topics and --partitions must be positive"
        );
        ensure!(
            self.topics * self.partitions as usize <= PARTITIONS_MAX,
            "at most {PARTITIONS_MAX} partitions in all"
        );
        ensure!(
            self.partitions_per_window != Some(0),
            "--partitions-per-window must be positive"
        );
        ensure!(
            self.batches_per_part >= 1 && self.batch_bytes >= 1 && self.batch_records >= 1,
            "--batches-per-part, --batch-bytes and --batch-records must be positive"
        );
        ensure!(self.in_flight >= 1, "--in-flight must be positive");
        ensure!(self.duration > 0.0, "--duration must be positive");
        ensure!(
            self.warmup >= 0.0 && self.pause >= 0.0,
            "--warmup and --pause must not be negative"
        );
        ensure!(
            self.topic_prefix.len() + 40 <= TOPIC_NAME_BYTES_MAX,
            "--topic-prefix is too long"
        );
        Ok(())
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    args.check()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()?;
    rt.block_on(sweep(Arc::new(args)))
}

async fn sweep(args: Arc<Args>) -> Result<()> {
    let control = rutomq_meta::connect(&args.postgres_url)
        .await
        .context("cannot reach PostgreSQL")?;
    let server = server_info(&control).await?;
    let started_ms = unix_ms();
    for (i, agents) in args.counts().into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_secs_f64(args.pause)).await;
        }
        check_connections(&control, agents).await?;
        // Each count starts without the previous one's dirty buffers.
        if let Err(e) = control.batch_execute("CHECKPOINT").await {
            eprintln!("meta-load: CHECKPOINT failed ({e}); going on without");
        }
        let mut row = run_count(args.clone(), agents, started_ms).await?;
        row["postgres_server"] = server.clone();
        eprintln!("{}", summary(&row));
        println!("{}", serde_json::to_string(&row)?);
    }
    Ok(())
}

/// What a result names of the server under load.
async fn server_info(c: &tokio_postgres::Client) -> Result<Value> {
    let r = c
        .query_one(
            "SELECT current_setting('server_version'), current_setting('fsync'),
                    current_setting('synchronous_commit'), current_setting('shared_buffers'),
                    current_setting('max_connections')",
            &[],
        )
        .await?;
    Ok(json!({
        "version": r.get::<_, String>(0),
        "fsync": r.get::<_, String>(1),
        "synchronous_commit": r.get::<_, String>(2),
        "shared_buffers": r.get::<_, String>(3),
        "max_connections": r.get::<_, String>(4),
    }))
}

/// Refuses a count the server has no connections for, before starting it.
async fn check_connections(c: &tokio_postgres::Client, agents: usize) -> Result<()> {
    let r = c
        .query_one(
            "SELECT current_setting('max_connections')::int,
                    current_setting('superuser_reserved_connections')::int,
                    (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')",
            &[],
        )
        .await?;
    let (max, reserved, used): (i32, i32, i64) = (r.get(0), r.get(1), r.get(2));
    let needed = CONNECTIONS_PER_AGENT * agents as i64;
    let free = i64::from(max - reserved) - used;
    if needed > free {
        bail!(
            "{agents} agents need {needed} connections ({CONNECTIONS_PER_AGENT} each); \
             the server has {free} free (max_connections {max}): raise max_connections"
        );
    }
    Ok(())
}

fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// One simulated agent.
struct Agent {
    meta: Meta,
    agent_id: i32,
    /// The partitions of each of its windows, in append order.
    parts: Vec<(Uuid, i32)>,
    producer_id: Option<i64>,
    /// Its window `w` is due at `epoch + w * window`.
    epoch: Instant,
}

/// When the run measures: submits and answers from `measure_from` until
/// `end` count; nothing is submitted from `end` on.
#[derive(Clone, Copy)]
struct Clock {
    window: Duration,
    measure_from: Instant,
    end: Instant,
}

impl Clock {
    fn measures(&self, at: Instant) -> bool {
        at >= self.measure_from && at < self.end
    }
}

/// Windows of a grid from `epoch` due by `at` (window 1 is due one window
/// after the epoch).
fn windows_due(epoch: Instant, window: Duration, at: Instant) -> u64 {
    (at.saturating_duration_since(epoch).as_nanos() / window.as_nanos().max(1)) as u64
}

/// Windows of a grid from `epoch` more than one window overdue at `at`
/// if `submitted` are submitted: late already, not just held up by the
/// timer's resolution.
fn windows_overdue(epoch: Instant, window: Duration, at: Instant, submitted: u64) -> u64 {
    windows_due(epoch, window, at)
        .saturating_sub(1)
        .saturating_sub(submitted)
}

/// Counters the progress line reads while the run goes on.
struct Live {
    committed: AtomicU64,
    errors: AtomicU64,
    /// Windows submitted, per agent.
    submitted: Vec<AtomicU64>,
    /// Watermark notices the agents' `LISTEN`s passed on (the other
    /// agents' commits), all agents together.
    notices: Arc<AtomicU64>,
}

/// A window submitted, waiting for its outcome.
struct Sent {
    receiver: CommitReceiver,
    /// Its place in the in-flight bound, given back with the outcome.
    permit: OwnedSemaphorePermit,
    due: Instant,
    submitted: Instant,
    appends: usize,
}

/// What one agent's submitter saw.
struct SubmitTally {
    /// Due on the grid → submitted, of windows submitted while measuring.
    lag: Histogram<u64>,
    /// Of those, the ones submitted more than one window after they were due.
    late: u64,
    submitted_measured: u64,
    /// More than one window overdue at the end, not submitted.
    backlog: u64,
}

/// What one agent's outcome awaiter saw.
struct CommitTally {
    /// Submitted → answered, of commits answered while measuring.
    latency: Histogram<u64>,
    /// Due on the grid → answered, the same commits.
    from_due: Histogram<u64>,
    committed: u64,
    spans: u64,
    /// Batches answered with anything but `Appended` while measuring.
    refused_batches: u64,
    /// Failed commits over the whole run (warmup and drain included).
    errors: u64,
    error_kinds: BTreeMap<String, u64>,
}

impl CommitTally {
    fn error(&mut self, live: &Live, message: String) {
        self.errors += 1;
        live.errors.fetch_add(1, Ordering::Relaxed);
        let known = self.error_kinds.contains_key(&message);
        let kind = if known || self.error_kinds.len() < ERROR_KINDS_MAX {
            message
        } else {
            "other".to_owned()
        };
        let n = self.error_kinds.entry(kind.clone()).or_default();
        *n += 1;
        if *n == 1 {
            eprintln!("meta-load: commit failed: {kind}");
        }
    }
}

/// Which partitions each of `agents` agents appends to in every window
/// (see `--partitions-per-window`).
fn assign<T: Clone>(all: &[T], agents: usize, per_window: Option<usize>) -> Vec<Vec<T>> {
    assert!(!all.is_empty());
    assert!(agents > 0);
    match per_window {
        None if agents <= all.len() => (0..agents)
            .map(|i| all.iter().skip(i).step_by(agents).cloned().collect())
            .collect(),
        None => (0..agents)
            .map(|i| vec![all[i % all.len()].clone()])
            .collect(),
        Some(k) => {
            let k = k.min(all.len());
            (0..agents)
                .map(|i| {
                    (0..k)
                        .map(|j| all[(i * k + j) % all.len()].clone())
                        .collect()
                })
                .collect()
        }
    }
}

/// The object of one window of `agent`; `sequences` (idempotent runs) holds
/// the next base sequence of each of its partitions and is advanced.
fn window_object(args: &Args, agent: &Agent, sequences: &mut [i32]) -> ObjectCommit {
    let now_ms = unix_ms();
    let mut byte_start = 0u64;
    let appends = agent
        .parts
        .iter()
        .zip(sequences.iter_mut())
        .map(|(&(topic_id, partition), sequence)| PartitionAppend {
            topic_id,
            partition,
            batches: (0..args.batches_per_part)
                .map(|_| {
                    let producer = agent.producer_id.map(|producer_id| {
                        let base_sequence = *sequence;
                        *sequence = next_seq(last_seq(base_sequence, args.batch_records as i32));
                        ProducerFields {
                            producer_id,
                            producer_epoch: 0,
                            base_sequence,
                            transactional: false,
                        }
                    });
                    let batch = BatchRef {
                        byte_start,
                        byte_len: args.batch_bytes,
                        offset_count: args.batch_records,
                        max_timestamp: now_ms,
                        producer,
                    };
                    byte_start += u64::from(args.batch_bytes);
                    batch
                })
                .collect(),
        })
        .collect();
    ObjectCommit {
        // The shape of the storage crate's keys (prefix, agent, time,
        // random), so the key indexes grow as they do under an agent.
        object_key: format!(
            "meta-load/objects/{}/{now_ms:013}-{}.rtq",
            agent.agent_id,
            Uuid::new_v4().simple()
        ),
        size_bytes: byte_start,
        agent_id: agent.agent_id,
        appends,
        commit_deadline: Instant::now() + COMMIT_AGE_MAX,
    }
}

/// Submits `agent`'s windows in order on its grid until the end, at most
/// `--in-flight` unanswered, handing each receiver to the awaiter.
async fn submit_windows(
    args: Arc<Args>,
    agent: Arc<Agent>,
    slot: usize,
    clock: Clock,
    live: Arc<Live>,
    sent: mpsc::Sender<Sent>,
) -> Result<SubmitTally> {
    let inflight = Arc::new(Semaphore::new(args.in_flight));
    let window_ns = clock.window.as_nanos() as u64;
    let mut sequences = vec![0i32; agent.parts.len()];
    let mut tally = SubmitTally {
        lag: stats::new_histogram(),
        late: 0,
        submitted_measured: 0,
        backlog: 0,
    };
    let mut submitted = 0u64;
    for w in 1u64.. {
        let due = agent.epoch + Duration::from_nanos(window_ns.saturating_mul(w));
        if due >= clock.end {
            break;
        }
        tokio::time::sleep_until(due.into()).await;
        let permit = tokio::time::timeout_at(clock.end.into(), inflight.clone().acquire_owned());
        let Ok(permit) = permit.await else {
            break; // the end came while every slot was taken
        };
        let permit = permit.expect("the semaphore is never closed");
        let at = Instant::now();
        if at >= clock.end {
            break;
        }
        if clock.measures(at) {
            let lag = at - due;
            stats::record_us(&mut tally.lag, lag.as_micros() as u64);
            tally.submitted_measured += 1;
            tally.late += u64::from(lag > clock.window);
        }
        let object = window_object(&args, &agent, &mut sequences);
        let appends = object.appends.len();
        let receiver = agent
            .meta
            .submit_commit(object)
            .await
            .map_err(|e| anyhow::anyhow!("agent {}: {e}", agent.agent_id))?;
        submitted += 1;
        live.submitted[slot].fetch_add(1, Ordering::Relaxed);
        let window = Sent {
            receiver,
            permit,
            due,
            submitted: at,
            appends,
        };
        if sent.send(window).await.is_err() {
            bail!("agent {}: the outcome awaiter is gone", agent.agent_id);
        }
    }
    tally.backlog = windows_overdue(agent.epoch, clock.window, clock.end, submitted);
    Ok(tally)
}

/// Awaits the outcomes of one agent's windows in submit order (the order
/// its meta thread answers them in) and times them.
async fn await_outcomes(
    mut sent: mpsc::Receiver<Sent>,
    clock: Clock,
    live: Arc<Live>,
) -> CommitTally {
    let mut tally = CommitTally {
        latency: stats::new_histogram(),
        from_due: stats::new_histogram(),
        committed: 0,
        spans: 0,
        refused_batches: 0,
        errors: 0,
        error_kinds: BTreeMap::new(),
    };
    while let Some(window) = sent.recv().await {
        let answer = window.receiver.await;
        let at = Instant::now();
        drop(window.permit);
        match answer {
            Ok(Ok((outcomes, _))) => {
                // One outcome list per append.
                assert_eq!(outcomes.len(), window.appends);
                live.committed.fetch_add(1, Ordering::Relaxed);
                if !clock.measures(at) {
                    continue;
                }
                tally.committed += 1;
                tally.spans += window.appends as u64;
                tally.refused_batches += outcomes
                    .iter()
                    .flatten()
                    .filter(|o| !matches!(o, BatchOutcome::Appended { .. }))
                    .count() as u64;
                let latency = at - window.submitted;
                stats::record_us(&mut tally.latency, latency.as_micros() as u64);
                stats::record_us(&mut tally.from_due, (at - window.due).as_micros() as u64);
            }
            Ok(Err(e)) => tally.error(&live, e.to_string()),
            Err(_) => tally.error(&live, "the meta thread dropped the commit".into()),
        }
    }
    tally
}

/// Counters read at the start and the end of the measured seconds.
struct Sample {
    at: Instant,
    postgres_cpu_s: Option<f64>,
    driver_cpu_s: f64,
    transactions: u64,
    windows: u64,
    notices: u64,
    notices_dropped: u64,
}

impl Sample {
    fn take(
        postgres: Option<&Broker>,
        driver: &Broker,
        agents: &[Arc<Agent>],
        live: &Live,
    ) -> Result<Sample> {
        let sum = |f: fn(&MetaStats) -> &AtomicU64| -> u64 {
            agents
                .iter()
                .map(|a| f(&a.meta.stats).load(Ordering::Relaxed))
                .sum()
        };
        Ok(Sample {
            at: Instant::now(),
            postgres_cpu_s: postgres
                .map(|b| b.sample().map(|s| s.cpu[0]))
                .transpose()
                .context("PostgreSQL's CPU time")?,
            driver_cpu_s: driver.sample()?.cpu[0],
            transactions: sum(|s| &s.commit_transactions),
            windows: sum(|s| &s.committed_windows),
            notices: live.notices.load(Ordering::Relaxed),
            notices_dropped: sum(|s| &s.notices_dropped),
        })
    }
}

/// The agents of one count, running: their meta threads, their ids, and
/// the partitions of the count's topics.
struct Started {
    registered: Vec<(Meta, i32)>,
    threads: Vec<std::thread::JoinHandle<()>>,
    partitions: Vec<(Uuid, i32)>,
}

/// Starts `count` agents (each its meta thread; blocking until connected),
/// registers them and creates the count's topics.
async fn start_agents(
    args: &Args,
    count: usize,
    started_ms: i64,
    notices: &Arc<AtomicU64>,
) -> Result<Started> {
    let url = args.postgres_url.clone();
    let counter = notices.clone();
    let metas = tokio::task::spawn_blocking(move || {
        (0..count)
            .map(|i| {
                let counter = counter.clone();
                let on_notice = move |n: Notice| {
                    if matches!(n, Notice::Watermarks(_)) {
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                };
                Meta::start(url.clone(), Box::new(on_notice))
                    .with_context(|| format!("cannot start simulated agent {i}"))
            })
            .collect::<Result<Vec<_>>>()
    })
    .await??;
    let (metas, threads): (Vec<Meta>, Vec<_>) = metas.into_iter().unzip();
    let lease = Duration::from_secs_f64(args.warmup + args.duration + 60.0) + DRAIN_TIMEOUT;
    let mut registered = Vec::with_capacity(count);
    for (i, meta) in metas.into_iter().enumerate() {
        let listener = Endpoint {
            name: "PLAINTEXT".into(),
            host: "meta-load.invalid".into(),
            port: 9092 + i as i32,
        };
        let id = meta.register_agent(vec![listener], None, lease).await?;
        registered.push((meta, id));
    }
    let mut partitions = Vec::with_capacity(args.topics * args.partitions as usize);
    for t in 0..args.topics {
        let name = format!("{}-{started_ms}-a{count}-{t}", args.topic_prefix);
        let topic = registered[0]
            .0
            .create_topic(name.clone(), args.partitions, Vec::new())
            .await?
            .map_err(|_| anyhow::anyhow!("topic {name} exists already"))?;
        partitions.extend((0..topic.partitions).map(|p| (topic.topic_id, p)));
    }
    Ok(Started {
        registered,
        threads,
        partitions,
    })
}

/// Runs one agent count: starts the agents, loads PostgreSQL through the
/// warmup and the measured seconds, drains, stops the agents.
async fn run_count(args: Arc<Args>, count: usize, started_ms: i64) -> Result<Value> {
    let notices = Arc::new(AtomicU64::new(0));
    let started = start_agents(&args, count, started_ms, &notices).await?;
    let dealt = assign(&started.partitions, count, args.partitions_per_window);
    let appends_total: usize = dealt.iter().map(Vec::len).sum();
    let shared = appends_total > dealt.iter().flatten().collect::<HashSet<_>>().len();
    let window = Duration::from_millis(args.window_ms);
    let t0 = Instant::now() + START_DELAY;
    let mut agents = Vec::with_capacity(count);
    for (i, ((meta, agent_id), parts)) in started.registered.into_iter().zip(dealt).enumerate() {
        let producer_id = match args.idempotent {
            true => Some(meta.next_producer_id().await?),
            false => None,
        };
        agents.push(Arc::new(Agent {
            meta,
            agent_id,
            parts,
            producer_id,
            // Agents start at unrelated instants: their grids are spread
            // over one window.
            epoch: t0 + window.mul_f64(i as f64 / count as f64),
        }));
    }
    let measure_from = t0 + Duration::from_secs_f64(args.warmup);
    let clock = Clock {
        window,
        measure_from,
        end: measure_from + Duration::from_secs_f64(args.duration),
    };
    let live = Arc::new(Live {
        committed: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        submitted: (0..count).map(|_| AtomicU64::new(0)).collect(),
        notices,
    });
    let mut submitters = Vec::with_capacity(count);
    let mut awaiters = Vec::with_capacity(count);
    for (slot, agent) in agents.iter().enumerate() {
        let (tx, rx) = mpsc::channel(args.in_flight);
        awaiters.push(tokio::spawn(await_outcomes(rx, clock, live.clone())));
        submitters.push(tokio::spawn(submit_windows(
            args.clone(),
            agent.clone(),
            slot,
            clock,
            live.clone(),
            tx,
        )));
    }
    let postgres = args.postgres_pid.map(|pid| Broker::new(vec![pid]));
    let driver = Broker::new(vec![std::process::id()]);
    let samples = watch(&agents, clock, t0, &live, postgres.as_ref(), &driver).await?;
    let mut submits = Vec::with_capacity(count);
    for s in submitters {
        submits.push(s.await??);
    }
    let mut commits = Vec::with_capacity(count);
    for a in awaiters {
        let drained = tokio::time::timeout(DRAIN_TIMEOUT, a).await;
        commits.push(drained.context("the commits in flight did not drain")??);
    }
    let row = report(&args, &agents, (&submits, &commits), samples, shared);
    stop_agents(agents, started.threads).await;
    Ok(row)
}

/// Prints a progress line every second, and takes the samples at the
/// start and the end of the measured seconds.
async fn watch(
    agents: &[Arc<Agent>],
    clock: Clock,
    t0: Instant,
    live: &Live,
    postgres: Option<&Broker>,
    driver: &Broker,
) -> Result<(Sample, Sample)> {
    let second = Duration::from_secs(1);
    let mut tick = tokio::time::interval_at((t0 + second).into(), second);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut before: Option<Sample> = None;
    let mut last_committed = 0;
    loop {
        let next = if before.is_none() {
            clock.measure_from
        } else {
            clock.end
        };
        tokio::select! {
            _ = tokio::time::sleep_until(next.into()) => {
                let sample = Sample::take(postgres, driver, agents, live)?;
                match before.take() {
                    None => before = Some(sample),
                    Some(b) => return Ok((b, sample)),
                }
            }
            _ = tick.tick() => {
                let now = Instant::now();
                let committed = live.committed.load(Ordering::Relaxed);
                let behind: u64 = agents
                    .iter()
                    .zip(&live.submitted)
                    .map(|(a, s)| {
                        let submitted = s.load(Ordering::Relaxed);
                        windows_overdue(a.epoch, clock.window, now.min(clock.end), submitted)
                    })
                    .sum();
                eprintln!(
                    "[{} agents {:>4.0}s] {:>7} windows committed/s  behind {:>6} windows  errors {}{}",
                    agents.len(),
                    (now - t0).as_secs_f64(),
                    committed - last_committed,
                    behind,
                    live.errors.load(Ordering::Relaxed),
                    if before.is_none() { "  (warmup)" } else { "" },
                );
                last_committed = committed;
            }
        }
    }
}

/// Deregisters the agents and lets their meta threads finish (they exit
/// once the last handle is gone).
async fn stop_agents(agents: Vec<Arc<Agent>>, threads: Vec<std::thread::JoinHandle<()>>) {
    for a in &agents {
        if let Err(e) = a.meta.deregister_agent(a.agent_id).await {
            eprintln!("meta-load: cannot deregister agent {}: {e}", a.agent_id);
        }
    }
    drop(agents);
    let joined = tokio::task::spawn_blocking(move || {
        for t in threads {
            let _ = t.join();
        }
    });
    if tokio::time::timeout(JOIN_TIMEOUT, joined).await.is_err() {
        eprintln!("meta-load: the meta threads did not exit within {JOIN_TIMEOUT:?}; going on");
    }
}

/// One count's JSON line.
fn report(
    args: &Args,
    agents: &[Arc<Agent>],
    (submits, commits): (&[SubmitTally], &[CommitTally]),
    (before, after): (Sample, Sample),
    partitions_shared: bool,
) -> Value {
    let count = agents.len();
    let seconds = (after.at - before.at).as_secs_f64();
    let windows_per_s = 1000.0 / args.window_ms as f64;
    let appends: Vec<usize> = agents.iter().map(|a| a.parts.len()).collect();
    let appends_total: usize = appends.iter().sum();
    let merged = |pick: fn(&CommitTally) -> &Histogram<u64>| {
        let mut h = stats::new_histogram();
        for c in commits {
            h.add(pick(c)).expect("histograms of the same bounds");
        }
        h
    };
    let (latency, from_due) = (merged(|c| &c.latency), merged(|c| &c.from_due));
    let mut lag = stats::new_histogram();
    for s in submits {
        lag.add(&s.lag).expect("histograms of the same bounds");
    }
    let committed: u64 = commits.iter().map(|c| c.committed).sum();
    let spans: u64 = commits.iter().map(|c| c.spans).sum();
    let mut error_kinds: BTreeMap<&str, u64> = BTreeMap::new();
    for (kind, n) in commits.iter().flat_map(|c| &c.error_kinds) {
        *error_kinds.entry(kind).or_default() += n;
    }
    let transactions = after.transactions - before.transactions;
    let postgres = match (before.postgres_cpu_s, after.postgres_cpu_s) {
        (Some(a), Some(b)) => {
            let cpu_s = b - a;
            let per = |n: u64| if n > 0 { cpu_s * 1e6 / n as f64 } else { 0.0 };
            json!({
                "pid": args.postgres_pid,
                "cpu_seconds": cpu_s,
                "cores_busy": cpu_s / seconds,
                "cpu_us_per_window": per(committed),
                "cpu_us_per_span": per(spans),
                "cpu_us_per_transaction": per(transactions),
            })
        }
        _ => Value::Null,
    };
    let per_agent: Vec<Value> = agents
        .iter()
        .zip(submits.iter().zip(commits))
        .map(|(a, (s, c))| {
            json!({
                "agent_id": a.agent_id,
                "partitions": a.parts.len(),
                "windows_committed": c.committed,
                "late_windows": s.late,
                "backlog_at_end": s.backlog,
                "submit_lag_ms_p99": s.lag.value_at_quantile(0.99) as f64 / 1000.0,
                "submit_lag_ms_max": s.lag.max() as f64 / 1000.0,
                "errors": c.errors,
            })
        })
        .collect();
    let offered_windows = count as f64 * windows_per_s;
    let achieved_windows = committed as f64 / seconds;
    json!({
        "tool": "rutomq-meta-load",
        "time_utc": stats::utc_stamp(),
        "agents": count,
        "window_ms": args.window_ms,
        "topics": args.topics,
        "partitions": args.partitions,
        "partitions_per_window": appends_total as f64 / count as f64,
        "partitions_per_window_max": appends.iter().max(),
        "partitions_shared": partitions_shared,
        "batches_per_part": args.batches_per_part,
        "batch_bytes": args.batch_bytes,
        "batch_records": args.batch_records,
        "idempotent": args.idempotent,
        "in_flight": args.in_flight,
        "warmup_s": args.warmup,
        "duration_s": seconds,
        "offered_windows_per_s": offered_windows,
        "achieved_windows_per_s": achieved_windows,
        "achieved_ratio": achieved_windows / offered_windows,
        "offered_spans_per_s": appends_total as f64 * windows_per_s,
        "achieved_spans_per_s": spans as f64 / seconds,
        "commit_latency_ms": stats::histogram_json(&latency),
        "due_to_commit_ms": stats::histogram_json(&from_due),
        "submit_lag_ms": stats::histogram_json(&lag),
        "windows_submitted": submits.iter().map(|s| s.submitted_measured).sum::<u64>(),
        "windows_committed": committed,
        "late_windows": submits.iter().map(|s| s.late).sum::<u64>(),
        "backlog_at_end": submits.iter().map(|s| s.backlog).sum::<u64>(),
        "errors": commits.iter().map(|c| c.errors).sum::<u64>(),
        "error_kinds": error_kinds,
        "refused_batches": commits.iter().map(|c| c.refused_batches).sum::<u64>(),
        "transactions": transactions,
        "windows_per_transaction": if transactions > 0 {
            (after.windows - before.windows) as f64 / transactions as f64
        } else {
            0.0
        },
        "notices_received_per_s": (after.notices - before.notices) as f64 / seconds,
        "notices_dropped": after.notices_dropped - before.notices_dropped,
        "postgres": postgres,
        "driver_cpu_seconds": after.driver_cpu_s - before.driver_cpu_s,
        "per_agent": per_agent,
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "git": stats::git_rev(),
        "machine": stats::machine(),
    })
}

/// A count's result for people.
fn summary(r: &Value) -> String {
    let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
    let ms = |k: &str, q: &str| r[k][q].as_f64().unwrap_or(0.0);
    let mut s = format!(
        "meta-load: {} agents, {} ms windows, {:.1} partitions per window ({} x {} in all{}), \
         {} batch(es) each{}\n",
        r["agents"],
        r["window_ms"],
        f("partitions_per_window"),
        r["topics"],
        r["partitions"],
        if r["partitions_shared"] == true {
            ", shared"
        } else {
            ""
        },
        r["batches_per_part"],
        if r["idempotent"] == true {
            ", idempotent"
        } else {
            ""
        },
    );
    s += &format!(
        "  offered  {:>9.0} windows/s {:>10.0} spans/s\n",
        f("offered_windows_per_s"),
        f("offered_spans_per_s")
    );
    s += &format!(
        "  achieved {:>9.0} windows/s {:>10.0} spans/s ({:.1} %), {:.2} windows per transaction\n",
        f("achieved_windows_per_s"),
        f("achieved_spans_per_s"),
        100.0 * f("achieved_ratio"),
        f("windows_per_transaction")
    );
    s += &format!(
        "  commit (submit → outcome) p50 {:.2}  p99 {:.2}  p99.9 {:.2}  max {:.2} ms\n",
        ms("commit_latency_ms", "p50"),
        ms("commit_latency_ms", "p99"),
        ms("commit_latency_ms", "p999"),
        ms("commit_latency_ms", "max")
    );
    s += &format!(
        "  due → outcome p99 {:.2} ms; submit lag p99 {:.2}  max {:.2} ms; \
         late windows {}, backlog at end {}\n",
        ms("due_to_commit_ms", "p99"),
        ms("submit_lag_ms", "p99"),
        ms("submit_lag_ms", "max"),
        r["late_windows"],
        r["backlog_at_end"]
    );
    s += &format!(
        "  errors {}, refused batches {}, watermark notices received {:.0}/s\n",
        r["errors"],
        r["refused_batches"],
        f("notices_received_per_s")
    );
    let p = &r["postgres"];
    if p.is_object() {
        s += &format!(
            "  PostgreSQL {:.2} CPU s over {:.1} s ({:.2} cores): {:.0} µs per window, {:.1} µs per span\n",
            p["cpu_seconds"].as_f64().unwrap_or(0.0),
            f("duration_s"),
            p["cores_busy"].as_f64().unwrap_or(0.0),
            p["cpu_us_per_window"].as_f64().unwrap_or(0.0),
            p["cpu_us_per_span"].as_f64().unwrap_or(0.0)
        );
    }
    s += &format!("  driver {:.2} CPU s", f("driver_cpu_seconds"));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_dealt_out_or_taken_in_runs() {
        let all: Vec<i32> = (0..8).collect();
        assert_eq!(
            assign(&all, 3, None),
            vec![vec![0, 3, 6], vec![1, 4, 7], vec![2, 5]]
        );
        // More agents than partitions: one each, shared.
        assert_eq!(assign(&all[..2], 3, None), vec![vec![0], vec![1], vec![0]]);
        // A given count: runs from i * count on, wrapping (shared here).
        assert_eq!(
            assign(&all, 3, Some(3)),
            vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 0]]
        );
        assert_eq!(assign(&all, 2, Some(20)), vec![all.clone(), all.clone()]);
    }

    #[test]
    fn windows_are_due_on_the_grid() {
        let epoch = Instant::now();
        let w = Duration::from_millis(2);
        assert_eq!(windows_due(epoch, w, epoch), 0);
        assert_eq!(
            windows_due(epoch, w, epoch + Duration::from_micros(1999)),
            0
        );
        assert_eq!(windows_due(epoch, w, epoch + Duration::from_millis(2)), 1);
        assert_eq!(windows_due(epoch, w, epoch + Duration::from_millis(7)), 3);
        // Before the epoch nothing is due.
        assert_eq!(windows_due(epoch + w, w, epoch), 0);
        // Overdue: due more than one window ago and not submitted.
        let at = epoch + Duration::from_millis(7);
        assert_eq!(windows_overdue(epoch, w, at, 0), 2);
        assert_eq!(windows_overdue(epoch, w, at, 2), 0);
        assert_eq!(windows_overdue(epoch, w, at, 3), 0);
    }
}
