#!/usr/bin/env bash
# Two scaling curves of rutomq on this machine, driven by rutomq-bench:
#
#   benches/scaling.sh partitions OUT_DIR [--duration S] [--rate R] [...]
#   benches/scaling.sh agents OUT_DIR [--duration S] [...]
#
# `partitions`: throughput, ack latency and PostgreSQL load against the
# number of partitions. Per shape (default: one topic of 1, 100, 1000 and
# 10000 partitions, and 1000 topics x 4 partitions), ONE fresh agent with its
# embedded PostgreSQL on a fresh data dir (so the topics of one shape do not
# weigh on the next), then:
#   fixed  produce at --rate records/s (default 20000 x 1 KiB), creating the
#          topics -> ack latency p50/p99/p99.9 at a load every shape carries
#   max    produce as fast as acknowledged, same topics -> MiB/s
# The fixed run comes first, on topics with nothing in them yet; the max run
# then writes into a log holding the fixed run's records (a few hundred MiB
# at the default rate, nothing next to what it writes itself).
# Each run keeps rutomq-bench's JSON: throughput, ack latency, the CPU of the
# agent and of its PostgreSQL (two --broker-pid: pg_ctl daemonizes the
# postmaster, so it is not the agent's descendant) and the agent's /metrics
# counters over the measured window (--metrics-url). Around each run the
# script also scrapes /metrics itself and counts the rows of PostgreSQL's
# `spans` table (psql on the embedded server's socket), for spans per
# commit transaction = new spans / rutomq_commit_transactions_total over the
# same interval (warmup and topic creation included; a ratio, so the
# interval only has to be the same for both). New spans: the agent's
# rutomq_committed_spans_total where it exports one (agents built before it
# existed do not: MetaStats::committed_spans was declared in meta/ but never
# counted nor rendered), else the rows the table gained; both are kept.
# Nothing drops spans during these runs: retention is 7 days, no compacted
# topics (rutomq_retention_spans_dropped_total is recorded to show it). Also
# from the scrapes: the commit stage's p99
# (rutomq_window_stage_seconds{stage="commit"}, an upper bucket bound).
# --kafka runs the same shapes against Apache Kafka (KRaft, one node,
# benches/kafka/start-kafka.sh, --kafka-version 4.4.0), a fresh broker per
# shape, after rutomq's; --kafka-only runs Kafka's alone.
#
# The producers, and why: rutomq-bench's connections each send ONE
# pre-built Produce request over and over, holding one record batch per
# partition the connection owns (partitions dealt round-robin over the
# connections; with fewer partitions than connections, connections share
# them). race.sh's client (32 connections x 256-record batches) would put
# 313 partitions x 256 KiB = 78 MiB into every request at 10000 partitions:
# past the agent's 100 MiB per-shard admission budget with two in flight, and
# at 20000 records/s one request per connection every 128 s. So every shape
# gets the same client depth and request size instead: --producers 32
# connections, 32 requests in flight each, and about --request-records 256
# records (256 KiB) per request, i.e. batch-records = max(1, 256 / ceil(
# partitions / 32)):
#      1 partition   32 connections share it   256-record batches
#    100              3-4 per connection         64
#   1000               31-32                      8
#   4000 (1000 x 4)    125                        2   (250 per request)
#  10000               312-313                    1   (313 per request)
# Bytes in flight stay ~32 x 32 x 256 KiB = 256 MiB in every shape (deep, as
# race.sh explains: a closed-loop client moves at most its bytes in flight
# per ack latency); what grows with the partitions is batches, spans and
# partition entries per byte, which is the per-partition cost this curve is
# about. At 10000 partitions each request carries a 1-record batch for each
# of 313 partitions, as many sparse producers would. At the fixed rate the
# same requests go out every request_records / (rate / 32) s (0.41 s at
# 20000/s with 256 records, 0.5 s with 313), the 32 connections' schedules
# spread evenly over it: ~64-78 requests/s reach the agent, every partition
# gets rate / partitions records/s.
#
# `agents`: 1, 2 and 3 agents (--agents) on this machine sharing ONE
# PostgreSQL and ONE object directory. The first agent runs its embedded
# PostgreSQL; the others get --postgres-url "host=<its socket dir>
# user=rutomq dbname=postgres" (the embedded server listens on a unix socket
# only, DATA/pg/run, trust auth; engine/src/embedded_pg.rs), all get
# --object-store file://<one dir> and --shards 1 (--shards): the same agent
# each time, and on 2 cores two one-shard agents have as many shards as
# cores. Every agent takes a max-rate produce from its own rutomq-bench, all
# at once, each bootstrapping to its own agent, into its own topic of
# --partitions 8: rutomq-bench sends every connection to --bootstrap (it does
# not follow Metadata leaders), and any agent serves any partition, so one
# topic per agent is what Kafka clients spreading 8 x N partitions over N
# leaders would send. --producers 32 connections in total, split over the
# agents (32; 16 + 16; 11 + 11 + 10), 256-record batches: the same client
# depth whatever N. Per N: aggregate MiB/s (sum over the benches), and MiB
# per CPU second of all agents + PostgreSQL (each agent's CPU from its own
# bench, PostgreSQL's as the mean of what the benches measured: the same
# process over nearly the same window).
#
# Output in OUT_DIR (made if needed; MODE.jsonl must not exist yet):
#   MODE/*.json        rutomq-bench's JSON of every run (and its log, the
#                      /metrics scrapes, the agents' logs)
#   MODE.jsonl         one summary row per run (partitions) or agent count
#                      (agents); benches/plot_scaling.py draws them
#   MODE.md            the table, the exact command, git revision, machine
# Nothing here builds: build first with
#   cargo build --release --bin rutomq --bin rutomq-bench
# Both binaries are copied into the work dir first (a rebuild during the run
# cannot swap them) and their sha256 recorded.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"

usage() {
    cat <<EOF
Usage: benches/scaling.sh partitions OUT_DIR [OPTIONS]
       benches/scaling.sh agents OUT_DIR [OPTIONS]

Common options:
  --duration SECS      measured seconds of every produce run (default 20)
  --warmup SECS        unmeasured seconds before each run (default 5)
  --producers N        producer connections of every run (default 32; in
                       agents mode the total over all agents)
  --settle SECS        pause after deleting a max run's data before the next
                       broker starts (default 150; as race.sh explains,
                       deleting tens of GiB on the VM's disk stalls synced
                       writes for a while)
  --work-dir DIR       broker data and logs (default: a new
                       \$(mktemp -d /tmp/rq-scale.XXXX)); keep it short, the
                       PostgreSQL socket path has a 107-byte limit
  --keep               keep the brokers' data (default: deleted once stopped)
  --rutomq BIN         rutomq binary (default: target/release/rutomq)
  --bench BIN          rutomq-bench binary (default: target/release/rutomq-bench)
  --run-timeout SECS   kill a client run after this long (default
                       10 x duration + 300)
  -h, --help           this text

partitions:
  --rate R             records/s of the fixed-rate runs (default 20000)
  --shapes LIST        comma-separated TOPICSxPARTITIONS (N alone = 1xN);
                       default 1,100,1000,10000,1000x4
  --request-records N  records per Produce request a connection aims at
                       (default 256): batch-records = max(1, N / partitions
                       per connection)
  --kafka              also run every shape against Apache Kafka
  --kafka-version V    (default 4.4.0)

agents:
  --agents LIST        agent counts, comma-separated (default 1,2,3)
  --partitions N       partitions of each agent's topic (default 8)
  --batch-records N    (default 256)
  --shards N|auto      every agent's --shards (default 1; auto: rutomq's
                       default, one per core)

Environment: PSQL (default psql) counts PostgreSQL's span rows; without it
the spans columns stay empty. KAFKA_HEAP and the other start-kafka.sh
variables pass through.
EOF
}

# shellcheck source=benches/lib.sh
source "$here/lib.sh"   # free_ports, wait_ready, quote_cmd, alive, postmaster_pid, stop_rutomq_agent
log() { printf '[scaling %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

orig_cmd="$(quote_cmd "$0" "$@")"
[[ $# -ge 1 && ( "$1" == -h || "$1" == --help ) ]] && { usage; exit 0; }
[[ $# -ge 2 ]] || { usage >&2; exit 2; }
MODE="$1" OUT="$2"
shift 2
[[ "$MODE" == partitions || "$MODE" == agents ]] || { usage >&2; die "unknown mode $MODE"; }

# ---------------------------------------------------------------- options --
DURATION=20
WARMUP=5
PRODUCERS=32
SETTLE=150
WORK=""
KEEP=0
RUTOMQ_SRC="$repo/target/release/rutomq"
BENCH_SRC="$repo/target/release/rutomq-bench"
RUN_TIMEOUT=""
RATE=20000
SHAPES_ARG="1,100,1000,10000,1000x4"
REQUEST_RECORDS=256
KAFKA=0
KAFKA_BROKER_VERSION=4.4.0
AGENTS_ARG="1,2,3"
AGENT_PARTITIONS=8
BATCH_RECORDS=256
SHARDS=1
PSQL="${PSQL:-psql}"
# Free disk a max run may need: rutomq's max produce wrote up to ~2 GiB/s
# on the development VM (race.sh), and a run's data is deleted only after it.
WRITE_GIB_S_MAX=2

need_arg() { [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value (see --help)"; }
while [[ $# -gt 0 ]]; do
    case "$1" in
        --duration) need_arg "$@"; DURATION="$2"; shift 2 ;;
        --warmup) need_arg "$@"; WARMUP="$2"; shift 2 ;;
        --producers) need_arg "$@"; PRODUCERS="$2"; shift 2 ;;
        --settle) need_arg "$@"; SETTLE="$2"; shift 2 ;;
        --work-dir) need_arg "$@"; WORK="$2"; shift 2 ;;
        --keep) KEEP=1; shift ;;
        --rutomq) need_arg "$@"; RUTOMQ_SRC="$2"; shift 2 ;;
        --bench) need_arg "$@"; BENCH_SRC="$2"; shift 2 ;;
        --run-timeout) need_arg "$@"; RUN_TIMEOUT="$2"; shift 2 ;;
        --rate) need_arg "$@"; RATE="$2"; shift 2 ;;
        --shapes) need_arg "$@"; SHAPES_ARG="$2"; shift 2 ;;
        --request-records) need_arg "$@"; REQUEST_RECORDS="$2"; shift 2 ;;
        --kafka) KAFKA=1; shift ;;
        --kafka-only) KAFKA=2; shift ;;
        --kafka-version) need_arg "$@"; KAFKA_BROKER_VERSION="$2"; shift 2 ;;
        --agents) need_arg "$@"; AGENTS_ARG="$2"; shift 2 ;;
        --partitions) need_arg "$@"; AGENT_PARTITIONS="$2"; shift 2 ;;
        --batch-records) need_arg "$@"; BATCH_RECORDS="$2"; shift 2 ;;
        --shards) need_arg "$@"; SHARDS="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }
for v in duration:DURATION producers:PRODUCERS rate:RATE request-records:REQUEST_RECORDS \
         partitions:AGENT_PARTITIONS batch-records:BATCH_RECORDS; do
    val="${v#*:}"
    { is_uint "${!val}" && ((${!val} > 0)); } || die "--${v%%:*} must be a positive integer, got ${!val}"
done
is_uint "$WARMUP" || die "--warmup must be an integer, got $WARMUP"
is_uint "$SETTLE" || die "--settle must be an integer, got $SETTLE"
[[ "$SHARDS" == auto ]] || { is_uint "$SHARDS" && ((SHARDS > 0)); } || die "--shards must be auto or a positive integer"
RUN_TIMEOUT="${RUN_TIMEOUT:-$((10 * DURATION + 300))}"
is_uint "$RUN_TIMEOUT" || die "--run-timeout must be an integer"

# Shapes as TOPICSxPARTITIONS words.
SHAPES=()
IFS=',' read -r -a shape_words <<<"$SHAPES_ARG"
for s in "${shape_words[@]}"; do
    if [[ "$s" =~ ^([0-9]+)x([0-9]+)$ ]]; then
        SHAPES+=("${BASH_REMATCH[1]}x${BASH_REMATCH[2]}")
    elif is_uint "$s"; then
        SHAPES+=("1x$s")
    else
        die "--shapes: $s is not TOPICSxPARTITIONS or N"
    fi
done
IFS=',' read -r -a AGENT_COUNTS <<<"$AGENTS_ARG"
for n in "${AGENT_COUNTS[@]}"; do { is_uint "$n" && ((n > 0)); } || die "--agents: $n is not a positive integer"; done

for b in "$RUTOMQ_SRC" "$BENCH_SRC"; do
    [[ -x "$b" ]] || die "no executable $b (cargo build --release --bin rutomq --bin rutomq-bench)"
done
HAVE_PSQL=1
command -v "$PSQL" >/dev/null || { HAVE_PSQL=0; log "WARNING: no $PSQL: span counts (spans per transaction) stay empty"; }

mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
[[ ! -e "$OUT/$MODE.jsonl" ]] || die "$OUT/$MODE.jsonl exists; give another OUT_DIR"
RUNS="$OUT/$MODE"
mkdir -p "$RUNS"

if [[ -z "$WORK" ]]; then
    WORK="$(mktemp -d /tmp/rq-scale.XXXX)"
else
    [[ ! -e "$WORK" ]] || die "$WORK exists; the work dir must be new"
    mkdir -p "$WORK"
fi
WORK="$(cd "$WORK" && pwd)"
# The embedded PostgreSQL runs as `postgres` when we are root and must reach
# DATA/pg below the work dir (mktemp -d makes it 0700).
chmod 755 "$WORK"

# ------------------------------------------------------------- clean-up ----
# Every agent is recorded here (pid, and its data dir when it runs an
# embedded PostgreSQL) so the EXIT trap stops them, newest first: agents
# on another agent's PostgreSQL go before the agent that runs it.
AGENT_PIDS=()
AGENT_DATA=()
BENCH_PIDS=()
KAFKA_DIR=""
SUCCESS=0

stop_agents() {
    local i
    for ((i = ${#AGENT_PIDS[@]} - 1; i >= 0; i--)); do
        stop_rutomq_agent "${AGENT_PIDS[i]}" "${AGENT_DATA[i]}"
    done
    AGENT_PIDS=()
    AGENT_DATA=()
}

stop_kafka() {
    [[ -n "$KAFKA_DIR" ]] || return 0
    "$here/kafka/start-kafka.sh" --stop "$KAFKA_DIR" >&2 || true
    KAFKA_DIR=""
}

on_exit() {
    local rc=$? p
    set +e
    trap - INT TERM
    for p in "${BENCH_PIDS[@]}"; do
        kill -TERM "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    stop_agents
    stop_kafka
    if ((KEEP)); then
        log "work dir kept: $WORK"
    elif ((SUCCESS)); then
        rm -rf "$WORK"
    else
        # Broker data is big; the logs stay for a look at what failed.
        rm -rf "${WORK:?}"/bin "${WORK:?}"/*/data/ "${WORK:?}"/*/broker/data/ "${WORK:?}"/*/objects/ \
            "${WORK:?}"/agents-*/a[0-9]*/
        ((SUCCESS)) || log "failed (status $rc); logs kept in $WORK"
    fi
    exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --------------------------------------------------------- python helper ----
# Summary rows and tables from the JSONs and the scrapes (stdlib only).
PY="$WORK/scaling.py"
cat >"$PY" <<'PYEOF'
import json, math, os, re, sys
sys.path.insert(0, os.environ["BENCHES_DIR"])
from benchjson import load, dig

def kv_args(args):
    row = {}
    for a in args:
        k, v = a.split("=", 1)
        try:
            row[k] = int(v)
        except ValueError:
            try:
                row[k] = float(v)
            except ValueError:
                row[k] = v
    return row

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)')

def scrape(path):
    """Prometheus text -> {(name, labels): value}."""
    out = {}
    if path in ("", "-") or not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if not m or line.startswith("#"):
                continue
            try:
                out[(m.group(1), m.group(2) or "")] = float(m.group(3))
            except ValueError:
                pass
    return out

def delta(a, b, name, labels=""):
    if (name, labels) not in b:
        return None
    return b[(name, labels)] - a.get((name, labels), 0.0)

def stage_p99_ms(a, b, stage):
    """Upper bound of the bucket holding the p99 of a window stage between two scrapes."""
    name = "rutomq_window_stage_seconds_bucket"
    buckets = []
    for (n, labels), v in b.items():
        if n != name or f'stage="{stage}"' not in labels:
            continue
        le = re.search(r'le="([^"]+)"', labels).group(1)
        buckets.append((math.inf if le == "+Inf" else float(le), v - a.get((n, labels), 0.0)))
    buckets.sort()
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    for le, cum in buckets:
        if cum >= 0.99 * total:
            return None if le == math.inf else le * 1000.0
    return None

def ratio(x, y):
    return x / y if x is not None and y else None

def spans(s):
    return None if s in ("", "-") else int(s)

def bench_figures(j):
    """The figures of one rutomq-bench JSON every row carries."""
    b = j.get("broker") or {}
    by_pid = b.get("cpu_seconds_by_pid") or {}
    pids = [str(p) for p in b.get("pids") or []]
    cpu = [by_pid.get(p) for p in pids]
    m = j.get("metrics") or {}
    secs = j["seconds"]
    txns = m.get("commit_transactions")
    pg_cpu = cpu[1] if len(cpu) > 1 else None
    return {
        "mib_s": j["mib_per_sec"], "records_s": j["records_per_sec"], "seconds": secs,
        "mib": j["bytes"] / 1048576.0, "records": j["records"],
        "p50_ms": dig(j, "latency_ms", "p50"), "p99_ms": dig(j, "latency_ms", "p99"),
        "p999_ms": dig(j, "latency_ms", "p999"), "max_ms": dig(j, "latency_ms", "max"),
        "send_lag_p99_ms": dig(j, "send_lag_ms", "p99"),
        "errors": j["errors"], "requests": j["requests"],
        "broker_cpu_s": b.get("cpu_seconds"), "agent_cpu_s": cpu[0] if cpu else None,
        "pg_cpu_s": pg_cpu, "cores_busy": b.get("cores_busy"),
        "mib_per_cpu_s": b.get("mib_per_cpu_second"),
        "rss_max_mib": (b.get("rss_max_kib") or 0) / 1024.0 or None,
        # The agent's counters over the measured window (rutomq-bench --metrics-url).
        "commit_transactions": txns, "committed_windows": m.get("committed_windows"),
        "object_puts": m.get("object_puts"), "meta_queries": m.get("meta_queries"),
        "produce_batches": m.get("produce_batches"),
        # None from an agent without rutomq_committed_spans_total.
        "committed_spans": m.get("committed_spans"),
        "spans_per_txn_measured": ratio(m.get("committed_spans"), txns),
        "txn_per_s": ratio(txns, secs), "windows_per_txn": ratio(m.get("committed_windows"), txns),
        "meta_queries_per_s": ratio(m.get("meta_queries"), secs),
        "pg_cpu_ms_per_txn": ratio(pg_cpu * 1000.0 if pg_cpu is not None else None, txns),
        "window_commit_ms_mean": m.get("window_commit_ms_mean"),
    }

def scrape_figures(m0, m1, s0, s1):
    """The run's own bracket: /metrics before and after, span rows before and after."""
    a, b = scrape(m0), scrape(m1)
    txns = delta(a, b, "rutomq_commit_transactions_total")
    wins = delta(a, b, "rutomq_committed_windows_total")
    s0, s1 = spans(s0), spans(s1)
    rows = s1 - s0 if s0 is not None and s1 is not None else None
    # The agent's own counter where it has one, else the table's growth.
    counted = delta(a, b, "rutomq_committed_spans_total")
    new_spans = counted if counted is not None else rows
    return {
        "run_commit_transactions": txns, "run_committed_windows": wins,
        "run_meta_queries": delta(a, b, "rutomq_meta_queries_total"),
        "run_spans_dropped": delta(a, b, "rutomq_retention_spans_dropped_total"),
        "spans_committed": new_spans, "spans_from": None if new_spans is None else
        ("rutomq_committed_spans_total" if counted is not None else "spans table rows"),
        "span_rows_added": rows, "spans_counter": counted,
        "spans_per_txn": ratio(new_spans, txns), "spans_per_window": ratio(new_spans, wins),
        "commit_stage_p99_ms_le": stage_p99_ms(a, b, "commit"),
    }

def prow(out, bench_json, m0, m1, s0, s1, *kvs):
    row = kv_args(kvs)
    j = load(bench_json)
    row.update(bench_figures(j))
    if row.get("system") == "rutomq":
        row.update(scrape_figures(m0, m1, s0, s1))
    row["json"] = os.path.relpath(bench_json, os.path.dirname(out))
    with open(out, "a") as f:
        f.write(json.dumps(row) + "\n")
    fmt = lambda v, p=1: "-" if v is None else f"{v:.{p}f}"
    print(f"{row['system']} {row['shape']} {row['run']}: {fmt(row['mib_s'])} MiB/s, "
          f"p50 {fmt(row['p50_ms'], 2)} p99 {fmt(row['p99_ms'], 2)} ms, "
          f"CPU broker {fmt(row['agent_cpu_s'])} s + PostgreSQL {fmt(row['pg_cpu_s'])} s, "
          f"{fmt(row.get('txn_per_s'))} txn/s, {fmt(row.get('spans_per_txn'))} spans/txn, "
          f"errors {row['errors']}")

def arow(out, n, s0, s1, *rest):
    """One row per agent count: kvs, then '--', then per agent BENCH_JSON M0 M1 triples."""
    i = rest.index("--")
    row = kv_args(rest[:i])
    triples = rest[i + 1:]
    per = []
    txns = 0.0
    wins = 0.0
    for k in range(0, len(triples), 3):
        j, m0, m1 = triples[k:k + 3]
        f = bench_figures(load(j))
        f.update(scrape_figures(m0, m1, "-", "-"))
        f["json"] = os.path.relpath(j, os.path.dirname(out))
        per.append(f)
        txns += f["run_commit_transactions"] or 0.0
        wins += f["run_committed_windows"] or 0.0
    mib = sum(f["mib"] for f in per)
    agent_cpu = sum(f["agent_cpu_s"] or 0.0 for f in per)
    pg = [f["pg_cpu_s"] for f in per if f["pg_cpu_s"] is not None]
    pg_cpu = sum(pg) / len(pg) if pg else 0.0
    secs = max(f["seconds"] for f in per)
    s0, s1 = spans(s0), spans(s1)
    rows_added = s1 - s0 if s0 is not None and s1 is not None else None
    counted = [f["spans_counter"] for f in per]
    new_spans = sum(counted) if all(c is not None for c in counted) else rows_added
    win_txns = sum(f["commit_transactions"] or 0.0 for f in per)
    row.update({
        "agents": int(n),
        "mib_s": sum(f["mib_s"] for f in per),
        "records_s": sum(f["records_s"] for f in per),
        "mib_s_by_agent": [f["mib_s"] for f in per],
        "p50_ms_by_agent": [f["p50_ms"] for f in per],
        "p99_ms_by_agent": [f["p99_ms"] for f in per],
        "p99_ms_max": max((f["p99_ms"] or 0.0) for f in per),
        "agent_cpu_s": agent_cpu, "agent_cpu_s_by_agent": [f["agent_cpu_s"] for f in per],
        "pg_cpu_s": pg_cpu, "cpu_s": agent_cpu + pg_cpu,
        "cores_busy": (agent_cpu + pg_cpu) / secs if secs else None,
        "mib_per_cpu_s": ratio(mib, agent_cpu + pg_cpu),
        "commit_transactions": win_txns, "txn_per_s": ratio(win_txns, secs),
        "pg_cpu_ms_per_txn": ratio(pg_cpu * 1000.0, win_txns),
        "run_commit_transactions": txns, "spans_committed": new_spans, "span_rows_added": rows_added,
        "spans_per_txn": ratio(new_spans, txns), "windows_per_txn": ratio(wins, txns),
        "errors": sum(f["errors"] for f in per),
        "runs": per,
    })
    with open(out, "a") as f:
        f.write(json.dumps(row) + "\n")
    fmt = lambda v, p=1: "-" if v is None else f"{v:.{p}f}"
    print(f"{n} agent(s): {fmt(row['mib_s'])} MiB/s in all ("
          + " + ".join(fmt(x) for x in row["mib_s_by_agent"]) + "), "
          f"CPU agents {fmt(agent_cpu)} s + PostgreSQL {fmt(pg_cpu)} s, "
          f"{fmt(row['mib_per_cpu_s'])} MiB/CPU-s, p99 max {fmt(row['p99_ms_max'], 2)} ms, "
          f"{fmt(row['txn_per_s'])} txn/s, {fmt(row['spans_per_txn'])} spans/txn, errors {row['errors']}")

def table(jsonl, md, header_json):
    rows = [json.loads(l) for l in open(jsonl) if l.strip()]
    h = load(header_json)
    fmt = lambda v, p=1: "-" if v is None else (f"{v:.{p}f}" if isinstance(v, float) else str(v))
    lines = [f"# rutomq scaling: {h['mode']}", ""]
    for k in ("command", "utc", "git_rev", "git_dirty", "nproc", "uname_r", "cpu",
              "sha256_rutomq", "sha256_rutomq_bench", "load_seen"):
        if h.get(k) not in (None, "", []):
            v = h[k] if not isinstance(h[k], list) else "; ".join(h[k])
            lines.append(f"- {k}: `{v}`" if k == "command" else f"- {k}: {v}")
    lines.append("")
    if h["mode"] == "partitions":
        cols = [("system", "system", 0), ("shape", "shape", 0), ("partitions_total", "partitions", 0),
                ("run", "run", 0), ("batch_records", "batch", 0), ("mib_s", "MiB/s", 1),
                ("records_s", "rec/s", 0), ("p50_ms", "p50 ms", 2), ("p99_ms", "p99 ms", 2),
                ("p999_ms", "p99.9 ms", 2), ("agent_cpu_s", "broker CPU s", 1),
                ("pg_cpu_s", "PG CPU s", 1), ("mib_per_cpu_s", "MiB/CPU-s", 1),
                ("txn_per_s", "txn/s", 1), ("windows_per_txn", "windows/txn", 2),
                ("spans_per_txn", "spans/txn", 1), ("pg_cpu_ms_per_txn", "PG CPU ms/txn", 2),
                ("commit_stage_p99_ms_le", "commit p99 ms <=", 1),
                ("meta_queries_per_s", "meta q/s", 1), ("errors", "errors", 0)]
    else:
        cols = [("agents", "agents", 0), ("mib_s", "MiB/s", 1), ("mib_s_by_agent", "per agent", 1),
                ("p99_ms_max", "p99 ms (max)", 2), ("agent_cpu_s", "agents CPU s", 1),
                ("pg_cpu_s", "PG CPU s", 1), ("mib_per_cpu_s", "MiB/CPU-s", 1),
                ("txn_per_s", "txn/s", 1), ("windows_per_txn", "windows/txn", 2),
                ("spans_per_txn", "spans/txn", 1), ("pg_cpu_ms_per_txn", "PG CPU ms/txn", 2),
                ("errors", "errors", 0)]
    lines.append("| " + " | ".join(c[1] for c in cols) + " |")
    lines.append("|" + "---|" * len(cols))
    for r in rows:
        cells = []
        for key, _, p in cols:
            v = r.get(key)
            if isinstance(v, list):
                cells.append(" + ".join(fmt(x, p) for x in v))
            elif isinstance(v, float) and p == 0:
                cells.append(f"{v:.0f}")
            else:
                cells.append(fmt(v, p))
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Rows: `{os.path.basename(jsonl)}`; runs (rutomq-bench JSONs, logs, scrapes): `{h['mode']}/`."]
    text = "\n".join(lines) + "\n"
    with open(md, "w") as f:
        f.write(text)
    print(text)

def batch(partitions_total, producers, request_records):
    """batch-records for a shape (see the script's header)."""
    per_conn = -(-int(partitions_total) // int(producers))
    print(max(1, int(request_records) // per_conn))

def header(out, *kvs):
    h = kv_args(kvs)
    for k in ("load_seen",):
        h[k] = [l for l in h.get(k, "").split("\x1f") if l]
    with open(out, "w") as f:
        json.dump(h, f, indent=1)

if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"prow": prow, "arow": arow, "table": table, "batch": batch, "header": header}[cmd](*args)
PYEOF
py() { BENCHES_DIR="$here" python3 "$PY" "$@"; }

# ------------------------------------------------------------ the runs ----
mkdir -p "$WORK/bin"
BENCH="$WORK/bin/rutomq-bench"
RUTOMQ="$WORK/bin/rutomq"
cp "$BENCH_SRC" "$BENCH"
cp "$RUTOMQ_SRC" "$RUTOMQ"

LOAD_SEEN=()
note_load() {
    local busy
    busy="$(pgrep -x -d, 'cargo|rustc' 2>/dev/null || true)"
    LOAD_SEEN+=("$1: loadavg $(cut -d' ' -f1-3 /proc/loadavg)${busy:+, cargo/rustc running (pids $busy)}")
    [[ -z "$busy" ]] || log "WARNING: cargo/rustc running ($busy) at $1; figures will be disturbed"
}

# need_disk: dies unless the work dir's filesystem has room for a max run.
need_disk() {
    local free_gib need_gib=$((WRITE_GIB_S_MAX * (WARMUP + DURATION)))
    free_gib=$(($(df -Pk "$WORK" | awk 'NR == 2 {print $4}') / 1048576))
    ((free_gib >= need_gib)) \
        || die "$free_gib GiB free under $WORK, a max run may write $need_gib (${WRITE_GIB_S_MAX} GiB/s x $((WARMUP + DURATION)) s): lower --duration or use another --work-dir"
}

# start_agent DIR NAME [SERVE ARGS...]: starts an agent with its data in
# DIR/NAME, log DIR/NAME.log; appends to AGENT_PIDS/AGENT_DATA (the data dir
# only when the agent runs its own PostgreSQL) and sets ADDR, HTTP.
start_agent() {
    local dir="$1" name="$2" port hport own_pg=1
    shift 2
    [[ " $* " != *" --postgres-url "* ]] || own_pg=0
    read -r port hport <<<"$(free_ports 2)"
    local cmd=("$RUTOMQ" serve --data-dir "$dir/$name" --listen "127.0.0.1:$port" --http "127.0.0.1:$hport" "$@")
    log "$name: $(quote_cmd "${cmd[@]}")"
    quote_cmd "${cmd[@]}" >>"$RUNS/commands.txt"
    "${cmd[@]}" >"$dir/$name.log" 2>&1 </dev/null &
    AGENT_PIDS+=("$!")
    if ((own_pg)); then AGENT_DATA+=("$dir/$name"); else AGENT_DATA+=(""); fi
    wait_ready "$hport" "$!" "$dir/$name.log"
    ADDR="127.0.0.1:$port"
    HTTP="127.0.0.1:$hport"
}

# span_rows DATA_DIR: rows of the spans table in the embedded PostgreSQL
# of the agent on DATA_DIR ("-" without psql).
span_rows() {
    ((HAVE_PSQL)) || { echo -; return 0; }
    "$PSQL" -X -q -At "host=$1/pg/run user=rutomq dbname=postgres" -c "SELECT count(*) FROM spans" \
        || { log "WARNING: counting spans failed"; echo -; }
}

# scrape HTTP FILE
scrape() { curl -sf -m 10 "http://$1/metrics" >"$2" || { log "WARNING: scraping $1 failed"; : >"$2"; }; }

# bench LOG ARGS...: one rutomq-bench run, output in LOG, killed after
# --run-timeout; prints its summary (the log without the per-second lines).
# In the background and waited for, so the EXIT trap answers Ctrl-C and
# SIGTERM at once and stops it.
bench() {
    local logfile="$1"
    shift
    quote_cmd "$BENCH" "$@" >>"$RUNS/commands.txt"
    log "bench: $(quote_cmd "$BENCH" "$@")"
    timeout -k 15 "$RUN_TIMEOUT" "$BENCH" "$@" >"$logfile" 2>&1 </dev/null &
    BENCH_PIDS=("$!")
    local rc=0
    wait "${BENCH_PIDS[0]}" || rc=$?
    BENCH_PIDS=()
    grep -v '^\[ *[0-9]*s\]' "$logfile" >&2 || true
    ((rc != 124)) || die "rutomq-bench still running after --run-timeout $RUN_TIMEOUT s, killed; log $logfile"
    ((rc == 0)) || die "rutomq-bench failed (status $rc); log $logfile"
}

# --------------------------------------------------------- partitions ----
# run_shape SYSTEM TOPICSxPARTITIONS: a fresh broker, the fixed and the max run.
run_shape() {
    local sys="$1" shape="$2" topics parts total batch
    topics="${shape%x*}" parts="${shape#*x}"
    total=$((topics * parts))
    batch="$(py batch "$total" "$PRODUCERS" "$REQUEST_RECORDS")"
    local tag="$sys-$shape" dir="$WORK/$sys-$shape"
    mkdir -p "$dir"
    chmod 755 "$dir"
    log "===== $sys, $topics topic(s) x $parts partitions: $PRODUCERS connections, $batch-record batches ====="
    note_load "$tag start"
    local pids=() metrics=() data=""
    if [[ "$sys" == rutomq ]]; then
        start_agent "$dir" data
        data="$dir/data"
        local pg
        pg="$(postmaster_pid "$data")" || die "no live postmaster under $data"
        pids=("${AGENT_PIDS[-1]}" "$pg")
        metrics=(--metrics-url "http://$HTTP/metrics")
    else
        local port cport
        read -r port cport <<<"$(free_ports 2)"
        KAFKA_DIR="$dir/broker"
        log "$tag: Apache Kafka $KAFKA_BROKER_VERSION on 127.0.0.1:$port"
        KAFKA_VERSION="$KAFKA_BROKER_VERSION" KAFKA_CONTROLLER_PORT="$cport" \
            "$here/kafka/start-kafka.sh" "$port" "$KAFKA_DIR" >&2
        pids=("$(cat "$KAFKA_DIR/kafka.pid")")
        ADDR="127.0.0.1:$port"
    fi
    local common=(--bootstrap "$ADDR" --topic scale --topics "$topics" --partitions "$parts"
                  --record-size 1024 --acks -1 --producers "$PRODUCERS" --batch-records "$batch"
                  --warmup "$WARMUP" --duration "$DURATION" "${metrics[@]}")
    local p
    for p in "${pids[@]}"; do common+=(--broker-pid "$p"); done
    local kvs=("system=$sys" "shape=$shape" "topics=$topics" "partitions=$parts" "partitions_total=$total"
               "producers=$PRODUCERS" "batch_records=$batch" "request_records_asked=$REQUEST_RECORDS"
               "duration=$DURATION" "warmup=$WARMUP")
    local run create=(--create)
    for run in fixed max; do
        local rate=0 out="$RUNS/$tag-$run"
        [[ "$run" == fixed ]] && rate="$RATE"
        [[ "$run" == max ]] && need_disk
        local m0=- m1=- s0=- s1=- t0
        if [[ "$sys" == rutomq ]]; then
            m0="$out-metrics-before.txt" m1="$out-metrics-after.txt"
            scrape "$HTTP" "$m0"
            s0="$(span_rows "$data")"
        fi
        t0=$SECONDS
        bench "$out.log" produce "${common[@]}" "${create[@]}" --rate "$rate" \
            --label "$sys-$shape-$run" --out "$out.json"
        local wall=$((SECONDS - t0))
        if [[ "$sys" == rutomq ]]; then
            scrape "$HTTP" "$m1"
            s1="$(span_rows "$data")"
        fi
        # setup_s: the bench's wall time less the warmup and the measured
        # seconds: creating the topics and waiting for their leaders (first
        # run), connecting, stopping (whole seconds).
        py prow "$OUT/partitions.jsonl" "$out.json" "$m0" "$m1" "$s0" "$s1" "${kvs[@]}" \
            "run=$run" "rate_asked=$rate" "wall_s=$wall" "setup_s=$((wall - WARMUP - DURATION))"
        create=()
        sleep 3
    done
    note_load "$tag end"
    if [[ "$sys" == rutomq ]]; then
        cp "$dir/data.log" "$RUNS/$tag-agent.log"
        stop_agents
    else
        cp "$KAFKA_DIR/server.log" "$RUNS/$tag-kafka-server.log" 2>/dev/null || true
        stop_kafka
    fi
    ((KEEP)) || rm -rf "$dir/data" "$dir/broker"
}

# ------------------------------------------------------------- agents ----
# run_agents N: N agents on one PostgreSQL and one object dir, N benches at once.
run_agents() {
    local n="$1" i
    local dir="$WORK/agents-$n"
    mkdir -p "$dir/objects"
    chmod 755 "$dir"
    log "===== $n agent(s) ====="
    note_load "$n agents start"
    local serve=(--object-store "file://$dir/objects")
    [[ "$SHARDS" == auto ]] || serve+=(--shards "$SHARDS")
    local addrs=() https=() pg_url="host=$dir/a0/pg/run user=rutomq dbname=postgres"
    for ((i = 0; i < n; i++)); do
        if ((i == 0)); then
            start_agent "$dir" a0 "${serve[@]}"
        else
            start_agent "$dir" "a$i" "${serve[@]}" --postgres-url "$pg_url"
        fi
        addrs+=("$ADDR")
        https+=("$HTTP")
    done
    local pg
    pg="$(postmaster_pid "$dir/a0")" || die "no live postmaster under $dir/a0"
    need_disk
    local s0 s1 triples=()
    for ((i = 0; i < n; i++)); do scrape "${https[i]}" "$RUNS/n$n-a$i-metrics-before.txt"; done
    s0="$(span_rows "$dir/a0")"
    # The benches run at once, in the background; wait for each.
    BENCH_PIDS=()
    for ((i = 0; i < n; i++)); do
        local conns=$((PRODUCERS / n + (i < PRODUCERS % n ? 1 : 0)))
        local out="$RUNS/n$n-a$i"
        local cmd=("$BENCH" produce --bootstrap "${addrs[i]}" --create --topic "scale-a$i"
                   --partitions "$AGENT_PARTITIONS" --record-size 1024 --acks -1 --producers "$conns"
                   --batch-records "$BATCH_RECORDS" --warmup "$WARMUP" --duration "$DURATION" --rate 0
                   --broker-pid "${AGENT_PIDS[i]}" --broker-pid "$pg" --metrics-url "http://${https[i]}/metrics"
                   --label "rutomq-agents$n-a$i" --out "$out.json")
        log "bench a$i: $(quote_cmd "${cmd[@]}")"
        quote_cmd "${cmd[@]}" >>"$RUNS/commands.txt"
        timeout -k 15 "$RUN_TIMEOUT" "${cmd[@]}" >"$out.log" 2>&1 </dev/null &
        BENCH_PIDS+=("$!")
        triples+=("$out.json" "$RUNS/n$n-a$i-metrics-before.txt" "$RUNS/n$n-a$i-metrics-after.txt")
    done
    local rc failed=()
    for ((i = 0; i < n; i++)); do
        rc=0
        wait "${BENCH_PIDS[i]}" || rc=$?
        ((rc == 0)) || failed+=("a$i (status $rc, log $RUNS/n$n-a$i.log)")
    done
    BENCH_PIDS=()
    ((${#failed[@]} == 0)) || die "rutomq-bench failed: ${failed[*]}"
    for ((i = 0; i < n; i++)); do scrape "${https[i]}" "$RUNS/n$n-a$i-metrics-after.txt"; done
    s1="$(span_rows "$dir/a0")"
    py arow "$OUT/agents.jsonl" "$n" "$s0" "$s1" "shards=$SHARDS" "producers_total=$PRODUCERS" \
        "partitions_per_agent=$AGENT_PARTITIONS" "batch_records=$BATCH_RECORDS" \
        "duration=$DURATION" "warmup=$WARMUP" -- "${triples[@]}"
    note_load "$n agents end"
    for ((i = 0; i < n; i++)); do cp "$dir/a$i.log" "$RUNS/n$n-a$i-agent.log"; done
    stop_agents
    ((KEEP)) || rm -rf "$dir/objects" "$dir"/a[0-9]*/
}

# ------------------------------------------------------------------- main ---
UTC="$(date -u +%Y%m%dT%H%M%SZ)"
git_rev="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
git_dirty=no
[[ -z "$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null)" ]] || git_dirty=yes
log "$MODE: work dir $WORK, results $OUT ($DURATION s per run after a $WARMUP s warmup)"
# settle: after a max run's data is deleted, before the next broker starts.
settle() {
    if ((!KEEP && SETTLE > 0)); then
        log "data deleted; settling $SETTLE s (--settle)"
        sleep "$SETTLE"
    fi
}
if [[ "$MODE" == partitions ]]; then
    SYSTEMS=(rutomq)
    ((KAFKA == 2)) && SYSTEMS=()
    if ((KAFKA)); then
        KAFKA_VERSION="$KAFKA_BROKER_VERSION" "$here/kafka/start-kafka.sh" --fetch >&2
        SYSTEMS+=(kafka)
    fi
    first=1
    for sys in "${SYSTEMS[@]}"; do
        for shape in "${SHAPES[@]}"; do
            ((first)) || settle
            first=0
            run_shape "$sys" "$shape"
        done
    done
else
    first=1
    for n in "${AGENT_COUNTS[@]}"; do
        ((first)) || settle
        first=0
        run_agents "$n"
    done
fi

load_joined="$(printf '%s\x1f' "${LOAD_SEEN[@]}")"
py header "$WORK/header.json" "mode=$MODE" "command=$orig_cmd" "utc=$UTC" "git_rev=$git_rev" \
    "git_dirty=$git_dirty" "nproc=$(nproc)" "uname_r=$(uname -r)" \
    "cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)" \
    "sha256_rutomq=$(sha256sum "$RUTOMQ" | cut -d' ' -f1)" \
    "sha256_rutomq_bench=$(sha256sum "$BENCH" | cut -d' ' -f1)" "load_seen=$load_joined"
cp "$WORK/header.json" "$RUNS/header.json"
py table "$OUT/$MODE.jsonl" "$OUT/$MODE.md" "$WORK/header.json"
log "done: $OUT/$MODE.md, $OUT/$MODE.jsonl (plot: benches/plot_scaling.py $OUT)"
SUCCESS=1
