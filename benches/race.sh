#!/usr/bin/env bash
# One benchmark race: Apache Kafka, rutomq and rutomq with injected
# object-store latency, one after the other on this machine, each on a fresh
# empty data directory, driven by the same load generator (rutomq-bench).
# Prints a table with the figures and the ratios, and saves every JSON result
# plus a summary (race-<utc>.json, race-<utc>.md) in the results folder.
#
# Run `benches/race.sh --help` for the options; the usage text is in usage()
# below. Nothing here builds: build first with
#   cargo build --release --bin rutomq --bin rutomq-bench
#
# Workload of every run: 8 partitions, 1 KiB records, acks=-1, 32 producer
# connections (four per partition) sending 256-record batches with up to 32
# requests in flight each (256 MiB in flight). Deep on purpose: a closed-loop
# client moves at most its bytes in flight per ack latency (Little's law), and
# at max rate the ack latency is mostly queueing, so a shallow client measures
# itself, not the broker: 4 x 32 x 2 x 64 KiB = 16 MiB in flight caps at
# ~350 MiB/s at 45 ms, and 16 connections (128 MiB) left rutomq-s3lat at 0.74
# of rutomq. --producers and --batch-records change it for all systems alike.
#
# Per system, in this order:
#   a. produce-max   as fast as the broker acks, DURATION s after a WARMUP s
#                    warmup, topic race-max (created by this run)
#                    -> max MiB/s and records/s, MiB per broker CPU-second
#   b. consume       topic race-max from the beginning: the records the first
#                    system's run (a) sent (its records_total, warmup
#                    included), the same count on every system so each reads
#                    the same bytes -> consume MiB/s; then the same after
#                    dropping the page cache (root only), so Kafka too reads
#                    from the disk -> consume MiB/s, page cache dropped
#   c. produce-half  at a fixed rate of 50 % of Kafka's max records/s from
#                    (a), DURATION s after the warmup, topic race-half
#                    -> ack latency p50 / p99 / p99.9
#   d. produce-own-half  the same at 50 % of this system's own max from (a),
#                    topic race-own-half (skipped where (c) already was that,
#                    i.e. for the system the half rate came from)
#   (--confirm) Kafka's own ProducerPerformance, 1,000,000 x 1 KiB on a new
#                    8-partition topic (kafka and rutomq only), as a check of
#                    the headline produce ratio with a second client stack.
#   e. librdkafka    (unless --no-rdkafka) rdkafka_performance (librdkafka's
#                    example program, 2.12.1 source linked with librdkafka
#                    2.15.0; benches/rdkafka-perf.sh): first a
#                    1 s warm-up run, not in the table (race-rdk-warmup; a
#                    fresh Kafka answers the first idempotent producer's
#                    InitProducerId with COORDINATOR_LOAD_IN_PROGRESS for
#                    over a second), then one produce run per --rdkafka-rates
#                    rate (default 2000,5000,20000,100000 msg/s), each
#                    1 + RDKAFKA_DURATION seconds' worth of 1 KiB messages
#                    on a new 8-partition topic race-rdk-2k, -5k, ... (acks=all,
#                    idempotent, linger.ms=5), the first second left out
#                    -> achieved msg/s, ack p50 / p99 / p99.9 (produce() to
#                    delivery report); then a consume of race-max from the
#                    beginning, the records (b) read -> consume MiB/s, msgs/s.
#                    The program spins one core while it paces (see
#                    rdkafka-perf.sh), on this 2-core machine too.
#   f. e2e           (unless --no-e2e) on a fresh broker (the data of a-e
#                    deleted first), end-to-end latency, producer send to
#                    consumer receipt: rutomq-bench e2e at the half rate of
#                    (c), 8 producer connections of 64-record batches, 2
#                    consumer connections long-polling (fetch max wait 100
#                    ms) at the tail, topic race-e2e -> e2e p50 / p99 / p99.9;
#                    then fan-out: per --fanout N (default 1,8,32), N
#                    readers of every partition (plain fetchers, no group:
#                    what N consumer groups fetch) at 50,000 records/s in 16-record
#                    batches, topic race-fan-N -> consumed records/s and
#                    e2e p50 / p99 (a known weakness of object-store brokers:
#                    every group at the tail asks for the same new data);
#                    last, the tail at max produce: (a)'s producer shape at
#                    full speed and the 2 consumers at the tail, topic
#                    race-tail-max (retention.bytes 1 GiB) -> produced and
#                    consumed MiB/s, consumed / produced (under 1: the lag
#                    grows), e2e p50 / p99.
#
# The systems:
#   kafka         Apache Kafka --kafka-version (default 4.4.0), one KRaft node
#                 (benches/kafka/start-kafka.sh)
#   kafka-V       Apache Kafka V (e.g. kafka-4.1.1), a second Kafka column, run
#                 right after kafka
#   rutomq        rutomq serve with embedded defaults: file object store under
#                 DATA_DIR/objects, a private PostgreSQL under DATA_DIR/pg
#   rutomq-s3lat  the same, plus --inject-object-latency-ms 30
#                 --inject-object-jitter-ms 10 (every object PUT/GET waits a
#                 uniform 20-40 ms, like S3)
# For rutomq the broker CPU is rutomq plus its PostgreSQL (the postmaster is
# not rutomq's descendant: pg_ctl daemonizes it, so both pids are passed to
# rutomq-bench); the table also shows the rutomq process alone.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"

usage() {
    cat <<EOF
Usage: benches/race.sh [OPTIONS]

Runs kafka, then rutomq, then rutomq-s3lat (or the subset given), each on a
fresh broker, and prints a table of their figures and ratios.

Options:
  --systems LIST       comma-separated subset of kafka,rutomq,rutomq-s3lat,
                       plus kafka-VERSION for another Apache Kafka version
                       (e.g. kafka,kafka-4.1.1,rutomq); default: the three.
                       They always run in the order kafka, kafka-VERSIONs (as
                       given), rutomq, rutomq-s3lat
  --kafka-version V    Apache Kafka version of the kafka system (default
                       4.4.0); jars from Maven Central, one cached folder per
                       version (tests/.cache/kafka/libs-V)
  --duration SECS      measured seconds of each produce run (default 30,
                       or the DURATION environment variable)
  --warmup SECS        unmeasured seconds before each produce run (default 5)
  --producers N        producer connections of every produce run (default 32;
                       more than the 8 partitions share them)
  --batch-records N    records per pre-built batch (default 256, i.e. 256 KiB)
  --settle SECS        pause after deleting a system's data before the next
                       one starts (default 150): after deleting tens of GiB,
                       some filesystems (ext4 without a journal and with online
                       discard, as on the development VM) slow file creation
                       down for a while
                       and stall synced writes for about a second even 35-60 s
                       later; after 150 s they did not
  --half-rate N        records/s of the fixed-rate run (c); default 50 % of
                       Kafka's max from run (a), or, without kafka, 50 % of
                       the first rutomq system's max. Given, it wins.
  --confirm            also run Kafka's ProducerPerformance
                       (benches/perf-tools.sh produce, 1,000,000 x 1 KiB,
                       8 partitions) against kafka and rutomq, print both
                       MB/s and their ratio
  --work-dir DIR       broker data and logs (default: a new
                       \$(mktemp -d /tmp/rq-race.XXXX)); each system gets
                       DIR/SYSTEM, which must not exist yet. Keep the path
                       short: PostgreSQL's unix socket path has a 107-byte limit
  --keep               keep the work dir (with all broker data); by default
                       each broker's data is deleted once it is stopped, and
                       the work dir too when the race succeeded
  --results-dir DIR    where the JSONs and the summary go
                       (default: benches/results)
  --rutomq BIN         rutomq binary (default: target/release/rutomq)
  --bench BIN          rutomq-bench binary (default: target/release/rutomq-bench)
                       Both are copied into the work dir first, so a rebuild
                       during the race cannot swap them; their sha256 is recorded.
  --bench-arg ARG      extra argument for every rutomq-bench run; repeat for
                       several (e.g. --bench-arg --producers --bench-arg 8)
  --s3-latency-ms MS   rutomq-s3lat --inject-object-latency-ms (default 30)
  --s3-jitter-ms MS    rutomq-s3lat --inject-object-jitter-ms (default 10)
  --run-timeout SECS   kill a client run after this long (default
                       10 x duration + 300)
  --no-rdkafka         skip the librdkafka runs (e)
  --rdkafka-rates LIST msg/s of the librdkafka produce runs, comma-separated
                       (default 2000,5000,20000,100000)
  --rdkafka-duration SECS  measured seconds of each librdkafka produce run
                       (default: --duration)
  --no-e2e             skip the end-to-end and fan-out runs (f)
  --fanout LIST        readers per partition (as consumer groups) of the
                       fan-out runs, comma-separated
                       (default 1,8,32)
  -h, --help           this text

Environment: DURATION (as --duration); the start-kafka.sh and perf-tools.sh
variables (KAFKA_HEAP, KAFKA_LIBS, PERF_LIBS, ...) pass through, except
KAFKA_VERSION, which is --kafka-version's for the brokers (perf-tools.sh
still reads it for its kafka-tools version).

Output: the JSONs as RESULTS_DIR/race-<utc>-<system>-<run>.json, the
summary as RESULTS_DIR/race-<utc>.json and RESULTS_DIR/race-<utc>.md
(table, exact command, git revision, nproc, uname -r, binaries, load seen).
Client and broker logs stay in the work dir (printed at the end).
EOF
}

# shellcheck source=benches/lib.sh
source "$here/lib.sh"   # quote_cmd, alive, postmaster_pid, wait_gone, E2E_AT_TAIL
log() { printf '[race %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# The exact command as typed, with DURATION when it came from the environment.
orig_cmd="$(quote_cmd "$0" "$@")"
[[ -z "${DURATION:-}" ]] || orig_cmd="DURATION=$DURATION $orig_cmd"

# ---------------------------------------------------------------- options --
systems_arg="kafka,rutomq,rutomq-s3lat"
KAFKA_BROKER_VERSION=4.4.0
RDKAFKA=1
RDK_RATES_ARG="2000,5000,20000,100000"
RDK_DURATION=""
E2E=1
FANOUT_ARG="1,8,32"
DURATION="${DURATION:-30}"
WARMUP=5
PRODUCERS=32
BATCH_RECORDS=256
SETTLE=150
HALF_RATE=""
CONFIRM=0
WORK=""
KEEP=0
RESULTS_DIR="$repo/benches/results"
RUTOMQ_SRC="$repo/target/release/rutomq"
BENCH_SRC="$repo/target/release/rutomq-bench"
BENCH_ARGS=()
S3_LATENCY_MS=30
S3_JITTER_MS=10
RUN_TIMEOUT=""

need_arg() { [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value (see --help)"; }
while [[ $# -gt 0 ]]; do
    case "$1" in
        --systems) need_arg "$@"; systems_arg="$2"; shift 2 ;;
        --duration) need_arg "$@"; DURATION="$2"; shift 2 ;;
        --warmup) need_arg "$@"; WARMUP="$2"; shift 2 ;;
        --producers) need_arg "$@"; PRODUCERS="$2"; shift 2 ;;
        --batch-records) need_arg "$@"; BATCH_RECORDS="$2"; shift 2 ;;
        --settle) need_arg "$@"; SETTLE="$2"; shift 2 ;;
        --half-rate) need_arg "$@"; HALF_RATE="$2"; shift 2 ;;
        --confirm) CONFIRM=1; shift ;;
        --work-dir) need_arg "$@"; WORK="$2"; shift 2 ;;
        --keep) KEEP=1; shift ;;
        --results-dir) need_arg "$@"; RESULTS_DIR="$2"; shift 2 ;;
        --rutomq) need_arg "$@"; RUTOMQ_SRC="$2"; shift 2 ;;
        --bench) need_arg "$@"; BENCH_SRC="$2"; shift 2 ;;
        --bench-arg) [[ $# -ge 2 ]] || die "--bench-arg needs a value"; BENCH_ARGS+=("$2"); shift 2 ;;
        --s3-latency-ms) need_arg "$@"; S3_LATENCY_MS="$2"; shift 2 ;;
        --s3-jitter-ms) need_arg "$@"; S3_JITTER_MS="$2"; shift 2 ;;
        --run-timeout) need_arg "$@"; RUN_TIMEOUT="$2"; shift 2 ;;
        --kafka-version) need_arg "$@"; KAFKA_BROKER_VERSION="$2"; shift 2 ;;
        --no-rdkafka) RDKAFKA=0; shift ;;
        --rdkafka-rates) need_arg "$@"; RDK_RATES_ARG="$2"; shift 2 ;;
        --rdkafka-duration) need_arg "$@"; RDK_DURATION="$2"; shift 2 ;;
        --no-e2e) E2E=0; shift ;;
        --fanout) need_arg "$@"; FANOUT_ARG="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }
{ is_uint "$DURATION" && ((DURATION > 0)); } || die "--duration must be a positive integer, got $DURATION"
is_uint "$WARMUP" || die "--warmup must be an integer, got $WARMUP"
{ is_uint "$PRODUCERS" && ((PRODUCERS > 0)); } || die "--producers must be a positive integer, got $PRODUCERS"
{ is_uint "$BATCH_RECORDS" && ((BATCH_RECORDS > 0)); } || die "--batch-records must be a positive integer, got $BATCH_RECORDS"
is_uint "$SETTLE" || die "--settle must be an integer, got $SETTLE"
[[ -z "$HALF_RATE" ]] || { is_uint "$HALF_RATE" && ((HALF_RATE > 0)); } || die "--half-rate must be a positive integer, got $HALF_RATE"
is_uint "$S3_LATENCY_MS" || die "--s3-latency-ms must be an integer"
is_uint "$S3_JITTER_MS" || die "--s3-jitter-ms must be an integer"
RUN_TIMEOUT="${RUN_TIMEOUT:-$((10 * DURATION + 300))}"
is_uint "$RUN_TIMEOUT" || die "--run-timeout must be an integer"
RDK_DURATION="${RDK_DURATION:-$DURATION}"
{ is_uint "$RDK_DURATION" && ((RDK_DURATION > 0)); } || die "--rdkafka-duration must be a positive integer, got $RDK_DURATION"
[[ "$KAFKA_BROKER_VERSION" =~ ^[0-9][0-9A-Za-z.-]*$ ]] || die "--kafka-version: not a version: $KAFKA_BROKER_VERSION"
RDK_RATES=()
IFS=',' read -r -a rdk_wanted <<<"$RDK_RATES_ARG"
for r in "${rdk_wanted[@]}"; do
    { is_uint "$r" && ((r > 0)); } || die "--rdkafka-rates: not a positive integer: '$r'"
    RDK_RATES+=("$r")
done
((${#RDK_RATES[@]} > 0)) || die "--rdkafka-rates is empty"
FANOUTS=()
IFS=',' read -r -a fan_wanted <<<"$FANOUT_ARG"
for n in "${fan_wanted[@]}"; do
    { is_uint "$n" && ((n > 0)); } || die "--fanout: not a positive integer: '$n'"
    [[ " ${FANOUTS[*]} " == *" $n "* ]] || FANOUTS+=("$n")
done

# Selected systems, always in the canonical order (Kafka's max rate is
# needed before the half-rate runs of the others): kafka, the kafka-VERSION
# columns as given, rutomq, rutomq-s3lat.
SYSTEMS=()
IFS=',' read -r -a wanted <<<"$systems_arg"
for w in "${wanted[@]}"; do
    case "$w" in
        kafka|rutomq|rutomq-s3lat) ;;
        kafka-[0-9]*) [[ "$w" =~ ^kafka-[0-9][0-9A-Za-z.-]*$ ]] || die "not a Kafka version: $w"
                      [[ "${w#kafka-}" != "$KAFKA_BROKER_VERSION" || ! ",$systems_arg," == *,kafka,* ]] \
                          || die "$w is the kafka system's version already (--kafka-version $KAFKA_BROKER_VERSION)" ;;
        *) die "unknown system '$w' (kafka, kafka-VERSION, rutomq, rutomq-s3lat)" ;;
    esac
done
add_system() {
    local s
    for s in "${SYSTEMS[@]}"; do [[ "$s" == "$1" ]] && return 0; done
    SYSTEMS+=("$1")
}
for w in "${wanted[@]}"; do [[ "$w" == kafka ]] && add_system kafka; done
for w in "${wanted[@]}"; do [[ "$w" == kafka-* ]] && add_system "$w"; done
for w in "${wanted[@]}"; do [[ "$w" == rutomq ]] && add_system rutomq; done
for w in "${wanted[@]}"; do [[ "$w" == rutomq-s3lat ]] && add_system rutomq-s3lat; done
((${#SYSTEMS[@]} > 0)) || die "--systems selects nothing"
has_system() { local s; for s in "${SYSTEMS[@]}"; do [[ "$s" == "$1" ]] && return 0; done; return 1; }
# The Apache Kafka version a kafka system runs.
kafka_version_of() { if [[ "$1" == kafka ]]; then echo "$KAFKA_BROKER_VERSION"; else echo "${1#kafka-}"; fi; }
KAFKA_SYSTEMS=()
for s in "${SYSTEMS[@]}"; do [[ "$s" == kafka* ]] && KAFKA_SYSTEMS+=("$s"); done
if ((${#KAFKA_SYSTEMS[@]} > 1)) && [[ -n "${KAFKA_LIBS:-}" ]]; then
    die "KAFKA_LIBS is one jar folder; unset it to race ${KAFKA_SYSTEMS[*]} (each version gets its own folder)"
fi

# ----------------------------------------------------------- pre-flight ----
for tool in python3 curl timeout tail sha256sum; do
    command -v "$tool" >/dev/null || die "$tool not found"
done
[[ -x "$BENCH_SRC" ]] || die "no load generator at $BENCH_SRC (cargo build --release --bin rutomq-bench, or --bench BIN)"
if has_system rutomq || has_system rutomq-s3lat || ((RDKAFKA)); then
    # (the librdkafka runs create their topics with `rutomq topic create`)
    [[ -x "$RUTOMQ_SRC" ]] || die "no rutomq at $RUTOMQ_SRC (cargo build --release --bin rutomq, or --rutomq BIN)"
fi
if has_system rutomq-s3lat; then
    "$RUTOMQ_SRC" serve --help 2>/dev/null | grep -q -- '--inject-object-latency-ms' \
        || die "$RUTOMQ_SRC has no --inject-object-latency-ms (rebuild it, or leave rutomq-s3lat out of --systems)"
fi
if ((${#KAFKA_SYSTEMS[@]} > 0 || CONFIRM)); then
    command -v java >/dev/null || die "java not found (Kafka 4.x needs Java 17+)"
fi

UTC="$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$RESULTS_DIR"
RESULTS_DIR="$(cd "$RESULTS_DIR" && pwd)"
WORK_CREATED=0      # 1: the whole work dir is ours to delete
if [[ -z "$WORK" ]]; then
    WORK_CREATED=1
    WORK="$(mktemp -d /tmp/rq-race.XXXX)"
    # mktemp makes it 0700; the embedded PostgreSQL runs as `postgres` when
    # we are root and must reach DATA/pg below it.
    chmod 755 "$WORK"
else
    [[ -e "$WORK" ]] || WORK_CREATED=1
    mkdir -p "$WORK"
fi
WORK="$(cd "$WORK" && pwd)"
for s in "${SYSTEMS[@]}"; do
    [[ ! -e "$WORK/$s" ]] || die "$WORK/$s exists; each system needs a fresh folder (use another --work-dir)"
done

# ------------------------------------------------------------- clean-up ----
# Everything that runs in the background is recorded here so the EXIT trap
# can stop it, whatever failed (or on Ctrl-C / SIGTERM).
BENCH_PID=""        # the current client run (timeout wrapper around it)
TAIL_PID=""         # the tail -f showing its output
KAFKA_DIR=""        # data dir of a Kafka broker that may be running
RUTOMQ_PID=""       # a rutomq agent that may be running (our child)
RUTOMQ_DATA=""      # its --data-dir (to find its postmaster)
SUCCESS=0
DATA_DIRS=()        # broker data dirs to delete once stopped (unless --keep)

# alive, postmaster_pid and wait_gone come from lib.sh.
stop_postmaster() {
    local data="$1" pid
    pid="$(postmaster_pid "$data")" || return 0
    log "stopping leftover PostgreSQL postmaster $pid (fast shutdown)"
    kill -INT "$pid" 2>/dev/null || true
    wait_gone "$pid" 30 && return 0
    log "postmaster $pid still there after 30 s; SIGQUIT"
    kill -QUIT "$pid" 2>/dev/null || true
    wait_gone "$pid" 10 || kill -KILL "$pid" 2>/dev/null || true
}

# SIGTERM rutomq and wait: it answers in-flight produces, stops its
# PostgreSQL and exits 0. Falls back to KILL, then stops the postmaster.
stop_rutomq() {
    [[ -n "$RUTOMQ_PID" ]] || return 0
    local pid="$RUTOMQ_PID" rc=0
    if alive "$pid"; then
        log "stopping rutomq pid $pid (SIGTERM)"
        kill -TERM "$pid" 2>/dev/null || true
        if ! wait_gone "$pid" 90; then
            log "rutomq pid $pid did not stop in 90 s; SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    wait "$pid" 2>/dev/null || rc=$?
    if ((rc != 0)); then log "rutomq exited with status $rc"; else log "rutomq exited 0"; fi
    RUTOMQ_PID=""
    [[ -z "$RUTOMQ_DATA" ]] || stop_postmaster "$RUTOMQ_DATA"
    RUTOMQ_DATA=""
    return 0
}

stop_kafka() {
    [[ -n "$KAFKA_DIR" ]] || return 0
    "$here/kafka/start-kafka.sh" --stop "$KAFKA_DIR" >&2 || true
    KAFKA_DIR=""
}

stop_client() {
    if [[ -n "$BENCH_PID" ]]; then
        kill -TERM "$BENCH_PID" 2>/dev/null || true
        wait_gone "$BENCH_PID" 15 || kill -KILL "$BENCH_PID" 2>/dev/null || true
        wait "$BENCH_PID" 2>/dev/null || true
        BENCH_PID=""
    fi
    if [[ -n "$TAIL_PID" ]]; then
        kill "$TAIL_PID" 2>/dev/null || true
        wait "$TAIL_PID" 2>/dev/null || true
        TAIL_PID=""
    fi
}

delete_data() {
    local d
    ((KEEP)) && return 0
    for d in "${DATA_DIRS[@]}"; do rm -rf "$d"; done
    DATA_DIRS=()
}

on_exit() {
    local rc=$?
    set +e
    trap - INT TERM
    stop_client
    stop_rutomq
    stop_kafka
    delete_data
    # A failed race still summarizes the runs that finished (e.g. kafka and
    # rutomq when rutomq-s3lat failed), marked as partial.
    if ((!SUCCESS)) && [[ -n "${MANIFEST:-}" && -s "${MANIFEST:-}" ]] && grep -q $'\tproduce-max\t' "$MANIFEST"; then
        log "writing a partial summary of the runs that finished"
        py summarize "$MANIFEST" "$RESULTS_DIR/race-$UTC.json" "$RESULTS_DIR/race-$UTC.md" partial \
            || log "partial summary failed"
    fi
    if ((KEEP)); then
        log "work dir kept: $WORK"
    elif ((SUCCESS)); then
        if ((WORK_CREATED)); then
            rm -rf "$WORK"
        else    # a folder given with --work-dir that existed: only our files
            rm -rf "${WORK:?}/bin" "$WORK/race.py" "$WORK/manifest.tsv"
            for s in "${SYSTEMS[@]}"; do rm -rf "${WORK:?}/$s"; done
        fi
    else
        rm -rf "${WORK:?}/bin"
        log "race failed (status $rc); logs kept in $WORK (broker data deleted)"
    fi
    exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --------------------------------------------------------- python helper ----
# JSON reading (benchjson.py), the summary table (stdlib only).
PY="$WORK/race.py"
cat >"$PY" <<'PYEOF'
import json, os, re, sys
sys.path.insert(0, os.environ["BENCHES_DIR"])
from benchjson import load, dig

def records_total(path):
    d = load(path)
    n = d.get("records_total")
    if n is None:
        n = d.get("records")
        print(f"race: {path} has no records_total; using records={n}", file=sys.stderr)
    print(int(n))

def half(path):
    print(max(1, int(float(load(path)["records_per_sec"]) * 0.5)))

PP = re.compile(r"records sent, ([0-9.]+) records/sec \(([0-9.]+) MB/sec\), ([0-9.]+) ms avg latency, ([0-9.]+) ms max latency(?:, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th)?")

def perf_line(path):
    """The final ProducerPerformance line (the one with percentiles)."""
    last = None
    with open(path, errors="replace") as f:
        for line in f:
            m = PP.search(line)
            if m and m.group(5) is not None:
                last = m
    return last

def confirm_mbs(path):
    m = perf_line(path)
    if not m:
        sys.exit(f"race: no ProducerPerformance summary line in {path}")
    print(m.group(2))

# --- summary ---------------------------------------------------------------

DEFAULT_SYSTEMS = ["kafka", "rutomq", "rutomq-s3lat"]

def ratio_defs(systems):
    """rutomq/kafka, rutomq/kafka-V for each other Kafka column, rutomq-s3lat/rutomq."""
    r = [("rutomq/kafka", "rutomq", "kafka")]
    r += [(f"rutomq/{s}", "rutomq", s) for s in systems if s.startswith("kafka-")]
    r.append(("rutomq-s3lat/rutomq", "rutomq-s3lat", "rutomq"))
    return r

def read_manifest(path):
    g, per = {}, {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            sysname, key, val = line.split("\t", 2)
            target = g if sysname == "-" else per.setdefault(sysname, {})
            if key in ("load", "cmd", "rdk_failed"):
                target.setdefault(key, []).append(val)
            else:
                target[key] = val
    return g, per

def figures(m):
    """The table's figures for one system from its manifest entries."""
    f = {}
    pmax = load(m["produce-max"]) if "produce-max" in m else None
    cons = load(m["consume"]) if "consume" in m else None
    cold = load(m["consume-cold"]) if "consume-cold" in m else None
    phalf = load(m["produce-half"]) if "produce-half" in m else None
    pown = load(m["produce-own-half"]) if "produce-own-half" in m else None
    e2e = load(m["e2e-half"]) if "e2e-half" in m else None
    tailm = load(m["tail-max"]) if "tail-max" in m else None
    fans = {k[len("fanout-"):]: load(m[k]) for k in m if k.startswith("fanout-")}
    errors = 0
    for d in (pmax, cons, cold, phalf, pown, e2e, tailm, *fans.values()):
        if d:
            errors += int(d.get("errors") or 0) + int(d.get("produce_errors") or 0)
    f["errors"] = errors
    if e2e:
        f["e2e_records_s"] = e2e.get("records_per_sec")
        for q in ("p50", "p99", "p999"):
            f[f"e2e_{q}_ms"] = dig(e2e, "latency_ms", q)
    if tailm and tailm.get("seconds"):
        # records are 1 KiB: consumed MiB/s is the tool's, produced from its
        # producers' acknowledged records over the same measured seconds
        size = dig(tailm, "workload", "record_size") or 1024
        produced = tailm.get("produced_records") or 0
        f["tail_produced_mib_s"] = produced * size / tailm["seconds"] / 1048576.0
        f["tail_consumed_mib_s"] = tailm.get("mib_per_sec")
        f["tail_consumed_share"] = (tailm.get("records") or 0) / produced if produced else None
        for q in ("p50", "p99"):
            f[f"tail_{q}_ms"] = dig(tailm, "latency_ms", q)
    for n, d in fans.items():
        f[f"fan_{n}_records_s"] = d.get("records_per_sec")
        for q in ("p50", "p99", "p999"):
            f[f"fan_{n}_{q}_ms"] = dig(d, "latency_ms", q)
    if pmax:
        f["produce_mib_s"] = pmax.get("mib_per_sec")
        f["produce_records_s"] = pmax.get("records_per_sec")
        f["produce_records_total"] = pmax.get("records_total")
        b = pmax.get("broker") or {}
        cpu = b.get("cpu_seconds")
        f["produce_cpu_s"] = cpu
        f["produce_mib_per_cpu_s"] = b.get("mib_per_cpu_second")
        # The broker process alone (rutomq without its PostgreSQL; for Kafka
        # the one JVM, so the same figure). Same window as the tool's figure.
        mib = pmax.get("bytes", 0) / 1048576.0
        first = None
        pid = m.get("broker_pid")
        by_pid = b.get("cpu_seconds_by_pid") or {}
        if pid is not None and by_pid.get(str(pid)) is not None:
            first = float(by_pid[str(pid)])
        elif b.get("mib_per_cpu_second_first_pid") is not None:
            f["produce_mib_per_cpu_s_broker_only"] = b["mib_per_cpu_second_first_pid"]
        if first is not None:
            f["produce_cpu_s_broker_only"] = first
            f["produce_mib_per_cpu_s_broker_only"] = mib / first if first > 0 else None
        f["produce_rss_max_mib"] = b["rss_max_kib"] / 1024.0 if b.get("rss_max_kib") is not None else None
        f.update(window_figures(pmax, "max"))
    if cons:
        f["consume_mib_s"] = cons.get("mib_per_sec")
        f["consume_records"] = cons.get("records_total", cons.get("records"))
    if cold:
        f["consume_cold_mib_s"] = cold.get("mib_per_sec")
    def fixed_rate(d, prefix, ack_prefix, rate_note):
        f[prefix + "target_records_s"] = dig(d, "workload", "rate") or (float(m[rate_note]) if rate_note in m else None)
        f[prefix + "records_s"] = d.get("records_per_sec")
        for q in ("p50", "p99", "p999", "max"):
            f[ack_prefix + q + "_ms"] = dig(d, "latency_ms", q)
    if phalf:
        fixed_rate(phalf, "half_", "ack_", "half_rate")
        f.update(window_figures(phalf, "half"))
    if pown:
        fixed_rate(pown, "own_", "own_ack_", "own_half_rate")
    if "confirm_mbs" in m:
        f["confirm_mb_s"] = float(m["confirm_mbs"])
    # (e) librdkafka rdkafka_performance runs (benches/rdkafka-perf.sh JSONs)
    rdk_err = len(m.get("rdk_failed", []))
    rdk_any = bool(rdk_err)
    for k in m:
        if not (k.startswith("rdk-produce-") or k in ("rdk-consume", "rdk-warmup")):
            continue
        d = load(m[k])
        rdk_any = True
        rdk_err += int(d.get("errors") or 0)
        if k.startswith("rdk-produce-"):
            r = k[len("rdk-produce-"):]
            f[f"rdk_{r}_achieved"] = d.get("achieved_msgs_per_sec")
            f[f"rdk_{r}_sent"] = d.get("messages_sent")
            f[f"rdk_{r}_delivered"] = d.get("messages_delivered")
            for q in ("p50", "p99", "p999", "max"):
                f[f"rdk_{r}_{q}_ms"] = dig(d, "latency_ms", q)
        elif k == "rdk-consume":
            f["rdk_consume_mib_s"] = d.get("mib_per_sec")
            f["rdk_consume_msgs_s"] = d.get("msgs_per_sec")
            f["rdk_consume_messages"] = d.get("messages")
    if rdk_any:
        f["rdk_errors"] = rdk_err
    return f

def window_figures(d, tag):
    mt = d.get("metrics")
    if not isinstance(mt, dict):
        return {}
    w = mt.get("committed_windows") or 0
    def per(key, precomputed):
        if mt.get(precomputed) is not None and w:
            return mt[precomputed]
        return mt[key] / w if w and mt.get(key) is not None else None
    return {
        f"{tag}_puts_per_window": per("object_puts", "puts_per_window"),
        f"{tag}_txns_per_window": per("commit_transactions", "transactions_per_window"),
        f"{tag}_windows": w,
    }

# (label, key, format, ratio shown?)
ROWS = [
    ("max produce MiB/s", "produce_mib_s", "{:.1f}", True),
    ("max produce records/s", "produce_records_s", "{:,.0f}", True),
    ("produce MiB per broker CPU-s (rutomq: + its PostgreSQL)", "produce_mib_per_cpu_s", "{:.1f}", True),
    ("produce MiB per CPU-s, broker process alone", "produce_mib_per_cpu_s_broker_only", "{:.1f}", True),
    ("broker RSS max MiB (max produce)", "produce_rss_max_mib", "{:,.0f}", True),
    ("half rate: target records/s", "half_target_records_s", "{:,.0f}", False),
    ("half rate: achieved records/s", "half_records_s", "{:,.0f}", True),
    ("half rate: ack p50 ms", "ack_p50_ms", "{:.2f}", True),
    ("half rate: ack p99 ms", "ack_p99_ms", "{:.2f}", True),
    ("half rate: ack p99.9 ms", "ack_p999_ms", "{:.2f}", True),
    ("own half rate (50 % of its own max): target records/s", "own_target_records_s", "{:,.0f}", False),
    ("own half rate: achieved records/s", "own_records_s", "{:,.0f}", False),
    ("own half rate: ack p50 ms", "own_ack_p50_ms", "{:.2f}", False),
    ("own half rate: ack p99 ms", "own_ack_p99_ms", "{:.2f}", False),
    ("own half rate: ack p99.9 ms", "own_ack_p999_ms", "{:.2f}", False),
    ("consume MiB/s (same records on every system)", "consume_mib_s", "{:.1f}", True),
    ("consume MiB/s, page cache dropped first", "consume_cold_mib_s", "{:.1f}", True),
    ("PUTs/window (max produce)", "max_puts_per_window", "{:.2f}", True),
    ("txns/window (max produce)", "max_txns_per_window", "{:.2f}", True),
    ("PUTs/window (half rate)", "half_puts_per_window", "{:.2f}", True),
    ("txns/window (half rate)", "half_txns_per_window", "{:.2f}", True),
    ("client errors (all runs)", "errors", "{:d}", False),
]

def e2e_rows(fanouts):
    """The end-to-end rows: at the half rate, then per fan-out."""
    rows = [("e2e at the half rate: consumed records/s", "e2e_records_s", "{:,.0f}", True),
            # (no ratio: the latency is in whole ms, and a p50 under 1 ms
            # makes one meaningless)
            ("e2e p50 ms at the half rate", "e2e_p50_ms", "{:.0f}", False),
            ("e2e p99 ms at the half rate", "e2e_p99_ms", "{:.0f}", True),
            ("e2e p99.9 ms at the half rate", "e2e_p999_ms", "{:.0f}", True)]
    for n in fanouts:
        rows += [(f"fan-out {n} group(s) at 50,000/s: consumed records/s", f"fan_{n}_records_s", "{:,.0f}", True),
                 (f"fan-out {n}: e2e p50 ms", f"fan_{n}_p50_ms", "{:.0f}", False),
                 (f"fan-out {n}: e2e p99 ms", f"fan_{n}_p99_ms", "{:.0f}", True)]
    rows += [("tail at max produce: produced MiB/s", "tail_produced_mib_s", "{:.1f}", True),
             ("tail at max produce: consumed MiB/s", "tail_consumed_mib_s", "{:.1f}", True),
             ("tail at max produce: consumed / produced (< 1: lag grows)", "tail_consumed_share", "{:.3f}", True),
             ("tail at max produce: e2e p50 ms", "tail_p50_ms", "{:.0f}", True),
             ("tail at max produce: e2e p99 ms", "tail_p99_ms", "{:.0f}", True)]
    return rows

def rdk_rows(rates):
    """The librdkafka rows, per produce rate, then the consume."""
    rows = []
    for r in rates:
        n = f"{int(r):,}"
        rows += [(f"librdkafka {n} msg/s: achieved msg/s", f"rdk_{r}_achieved", "{:,.0f}", False),
                 (f"librdkafka ack p50 ms at {n} msg/s", f"rdk_{r}_p50_ms", "{:.2f}", True),
                 (f"librdkafka ack p99 ms at {n} msg/s", f"rdk_{r}_p99_ms", "{:.2f}", True),
                 (f"librdkafka ack p99.9 ms at {n} msg/s", f"rdk_{r}_p999_ms", "{:.2f}", True)]
    rows += [("librdkafka consume MiB/s", "rdk_consume_mib_s", "{:.1f}", True),
             ("librdkafka consume msgs/s", "rdk_consume_msgs_s", "{:,.0f}", True),
             ("librdkafka errors (all its runs)", "rdk_errors", "{:d}", False)]
    return rows

def fmt(v, f):
    if v is None:
        return "—"
    try:
        return f.format(int(v) if f == "{:d}" else float(v))
    except (TypeError, ValueError):
        return str(v)

def ratio(a, b):
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return None
    return a / b if b else None

def table(figs, systems, heads, rows_def):
    RATIOS = ratio_defs(systems)
    head = ["", *(heads.get(s, s) for s in systems), *(r[0] for r in RATIOS)]
    rows = []
    ratios = {}
    for label, key, f, show in rows_def:
        row = [label]
        for s in systems:
            row.append(fmt(figs[s].get(key), f) if s in figs else "—")
        for rname, num, den in RATIOS:
            r = None
            if show and num in figs and den in figs:
                r = ratio(figs[num].get(key), figs[den].get(key))
            ratios.setdefault(rname, {})[key] = r
            row.append("—" if r is None else f"{r:.2f}")
        rows.append(row)
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    def line(cells):
        out = []
        for i, c in enumerate(cells):
            out.append(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]))
        return "| " + " | ".join(out) + " |"
    sep = "|" + "|".join(("-" * (w + 1) + ("-" if i == 0 else ":")) for i, w in enumerate(widths)) + "|"
    return "\n".join([line(head), sep, *(line(r) for r in rows)]), ratios

def summarize(manifest, out_json, out_md, status="complete"):
    g, per = read_manifest(manifest)
    systems = g["systems"].split() if g.get("systems") else DEFAULT_SYSTEMS
    figs = {s: figures(per[s]) for s in systems if s in per}
    # Kafka columns say their version; rutomq's are this tree's build.
    heads = {s: f"kafka {per[s]['kafka_version']}" if s in per and per[s].get("kafka_version")
             else s for s in systems}
    rdk_rates = g.get("rdk_rates", "").split() if g.get("rdkafka") == "1" else []
    rows_def = ROWS + rdk_rows(rdk_rates) if rdk_rates else ROWS
    if g.get("e2e") == "1":
        rows_def = rows_def + e2e_rows(g.get("fanouts", "").split())
    tab, ratios = table(figs, systems, heads, rows_def)
    confirm = None
    if any("confirm_mbs" in per.get(s, {}) for s in ("kafka", "rutomq")):
        k = figs.get("kafka", {}).get("confirm_mb_s")
        r = figs.get("rutomq", {}).get("confirm_mb_s")
        confirm = {"kafka_mb_s": k, "rutomq_mb_s": r, "ratio": ratio(r, k),
                   "race_ratio": ratios.get("rutomq/kafka", {}).get("produce_mib_s"),
                   "logs": {s: per[s].get("confirm_log") for s in ("kafka", "rutomq") if s in per}}
    summary = {
        "utc": g.get("utc"), "command": g.get("command"), "git_rev": g.get("git_rev"),
        "git_dirty": g.get("git_dirty") == "yes", "nproc": g.get("nproc"), "uname_r": g.get("uname_r"),
        "cpu": g.get("cpu"), "duration_s": int(g["duration"]), "warmup_s": int(g["warmup"]),
        "half_rate": int(g["half_rate"]) if g.get("half_rate") else None,
        "half_rate_source": g.get("half_rate_source"),
        "s3lat": {"latency_ms": int(g["s3_latency_ms"]), "jitter_ms": int(g["s3_jitter_ms"])},
        "bench_args": g.get("bench_args", ""),
        "producers": g.get("producers", "?"),
        "batch_records": g.get("batch_records", "?"),
        "systems_order": [s for s in systems if s in figs],
        "kafka_version": g.get("kafka_version"),
        "kafka_versions": {s: per[s]["kafka_version"] for s in systems if s in per and per[s].get("kafka_version")},
        "rdkafka": ({"rates_msgs_s": [int(r) for r in rdk_rates],
                     "duration_s": int(g["rdk_duration"]) if g.get("rdk_duration") else None,
                     "program": g.get("rdk_program"),
                     "workload": "rdkafka_performance -P -s 1024 -a -1 -X enable.idempotence=true -X linger.ms=5 "
                                 "-r RATE -c RATE*(1+DURATION) -l, no key, new 8-partition topic race-rdk-<rate>; "
                                 "latency = produce() call to delivery report, first second left out; consume: "
                                 "-C -o beginning -p 0..7 -c <records of (b)> on race-max, timed from the first message"}
                    if rdk_rates else None),
        "binaries": {k[len("sha256."):]: v for k, v in g.items() if k.startswith("sha256.")},
        "load_seen": g.get("load", []),
        "systems": {s: {"figures": figs[s],
                        "files": {k: os.path.basename(per[s][k]) for k in per[s]
                                  if k in ("produce-max", "consume", "consume-cold", "produce-half", "produce-own-half", "rdk-warmup", "rdk-consume")
                                  or k.startswith(("rdk-produce-", "fanout-")) or k == "e2e-half"},
                        "rdk_failed_runs": per[s].get("rdk_failed", []),
                        "broker_pids": per[s].get("pids"),
                        "commands": per[s].get("cmd", [])} for s in figs},
        "ratios": ratios,
        "confirm": confirm,
        "status": status,
    }
    with open(out_json, "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")

    conf_txt = ""
    if confirm:
        conf_txt = ("Kafka ProducerPerformance, 1,000,000 x 1 KiB, 8 partitions, acks=all "
                    "(benches/perf-tools.sh produce), on each broker after its race runs:\n\n"
                    "| | kafka | rutomq | rutomq/kafka | race ratio (max produce MiB/s) |\n|---|--:|--:|--:|--:|\n"
                    f"| produce MB/s | {fmt(confirm['kafka_mb_s'], '{:.1f}')} | {fmt(confirm['rutomq_mb_s'], '{:.1f}')} "
                    f"| {fmt(confirm['ratio'], '{:.2f}')} | {fmt(confirm['race_ratio'], '{:.2f}')} |\n")
    print()
    if status != "complete":
        print("PARTIAL race: it failed before it finished; only the runs that completed are shown")
    print(tab)
    print()
    print(f"half rate: {summary['half_rate']} records/s ({summary['half_rate_source']})")
    if conf_txt:
        print()
        print(conf_txt)
    print(f"summary: {out_json}\n         {out_md}")

    lines = [f"# Race {g.get('utc')}: {', '.join(heads[s] for s in figs)}", ""]
    if status != "complete":
        lines += ["**PARTIAL: the race failed before it finished; only the runs below completed.**", ""]
    lines += [
             f"{summary['duration_s']} s measured per produce run after a {summary['warmup_s']} s warmup; "
             f"8 partitions, 1 KiB records, acks=-1, {summary['producers']} producer connections "
             f"sending {summary['batch_records']}-record batches; client rutomq-bench on the same machine. "
             "Each system on a fresh, empty data directory, one after the other.", "",
             tab, "",
             f"Half rate: {summary['half_rate']} records/s ({summary['half_rate_source']}). "
             "Ratios are column/column: above 1 is better for throughput and MiB per CPU-s, "
             "below 1 is better for latency, RSS and PUTs/txns per window. "
             "MiB per CPU-s: MiB produced in the measured window / broker CPU seconds in it "
             "(utime+stime of the process tree); for rutomq the broker is rutomq plus its PostgreSQL, "
             "the next row rutomq alone. PUTs and txns per committed flush window come from rutomq's /metrics.", ""]
    if rdk_rates:
        lines += [f"librdkafka rows: librdkafka's example program rdkafka_performance (2.12.1 source, linked with librdkafka 2.15.0; benches/rdkafka-perf.sh), "
                  f"on each broker after its other runs, one process per run: 1 KiB messages, acks=all, "
                  f"enable.idempotence=true, linger.ms=5, no key, paced with -r at each rate for "
                  f"1 + {summary['rdkafka']['duration_s']} s worth of messages on a new 8-partition topic; "
                  "ack latency = from just before rd_kafka_produce() to the delivery report in the application, "
                  "the messages of the first second left out; achieved msg/s = delivered after the first second "
                  "/ time to the last delivery (the pacing sleeps after each produce(), so it runs a little "
                  "under the rate, and the program spins one of the 2 cores while pacing). Consume: the records "
                  "of race-max from the beginning, all 8 partitions, no group, timed by the program from the "
                  "first message received; MiB/s of payload bytes. "
                  f"Program: {g.get('rdk_program', '?')}.", ""]
    if g.get("e2e") == "1":
        lines += ["e2e rows: rutomq-bench e2e on a fresh broker of each system after its other runs (their data deleted), a new 8-partition topic each: "
                  "8 producer connections (acks=-1) and 2 consumer connections reading every partition at the tail "
                  "(fetch max wait 100 ms); latency = the record's timestamp (stamped in ms as its request is sent) to its "
                  "receipt by a consumer, over the measured seconds. At the half rate: 64-record batches. Fan-out N: "
                  "50,000 records/s in 16-record batches, each partition read by N independent readers (plain fetchers "
                  "without a group, 2 connections each: what N consumer groups fetch); consumed records/s counts every reader's copy. "
                  "Tail at max produce (last, on the same broker): the producer connections and batches of the max produce run, "
                  "no rate limit, topic retention.bytes 1 GiB per partition; produced MiB/s = the producers' acknowledged "
                  "records over the measured seconds; consumed / produced over the same seconds (the consumers start at the "
                  "tail before the warm-up; under 1 means the lag grew, over 1 that they caught up with a lag from the warm-up).", ""]
    if conf_txt:
        lines += ["## Confirm (Kafka's own client)", "", conf_txt]
    lines += ["## Setup", "",
              f"- command: `{g.get('command')}`",
              f"- git rev: `{g.get('git_rev')}`" + (" (tree has uncommitted changes)" if summary["git_dirty"] else ""),
              f"- nproc: {g.get('nproc')}; uname -r: {g.get('uname_r')}; cpu: {g.get('cpu')}",
              f"- rutomq-s3lat: --inject-object-latency-ms {g['s3_latency_ms']} --inject-object-jitter-ms {g['s3_jitter_ms']}",
              "- Apache Kafka: " + (", ".join(f"{s} {v}" for s, v in summary["kafka_versions"].items()) or "(not raced)"),
              f"- extra rutomq-bench args: `{summary['bench_args'] or '(none)'}`"]
    for name, sha in summary["binaries"].items():
        lines.append(f"- {name} sha256 `{sha}`")
    lines.append("- other load seen (cargo/rustc, load average) at each system's start and end:")
    for l in summary["load_seen"]:
        lines.append(f"  - {l}")
    lines += ["", "## Runs", ""]
    for s in figs:
        lines.append(f"- {heads[s]} (broker pids {per[s].get('pids')}):")
        for r in per[s].get("rdk_failed", []):
            lines.append(f"  - **librdkafka run {r} wrote no JSON** (see its log in the work dir)")
        for c in per[s].get("cmd", []):
            lines.append(f"  - `{c}`")
        for k, v in summary["systems"][s]["files"].items():
            lines.append(f"  - {k}: `{v}`")
    with open(out_md, "w") as f:
        f.write("\n".join(lines) + "\n")

if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"records-total": records_total, "half": half,
     "confirm-mbs": confirm_mbs, "summarize": summarize}[cmd](*args)
PYEOF
py() { BENCHES_DIR="$here" python3 "$PY" "$@"; }

# Manifest: one "SYSTEM<TAB>KEY<TAB>VALUE" line per fact ("-" = the race);
# the summary is built from it.
MANIFEST="$WORK/manifest.tsv"
: >"$MANIFEST"
note() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$MANIFEST"; }

# Other load on the machine distorts a 2-core race: record what is seen.
note_load() {
    local what="$1" busy
    busy="$(pgrep -x -d, 'cargo|rustc' 2>/dev/null || true)"
    note - load "$what: loadavg $(cut -d' ' -f1-3 /proc/loadavg)${busy:+; cargo/rustc running (pids $busy)}"
    [[ -z "$busy" ]] || log "WARNING: cargo/rustc running ($busy) at $what; figures will be disturbed"
}

# --------------------------------------------------------- running steps ---
# Run a command in the background with its output in LOGFILE, shown live;
# waiting in `wait` keeps the EXIT trap responsive to Ctrl-C and SIGTERM.
run_logged() {
    local logfile="$1"; shift
    : >"$logfile"   # exists before tail opens it
    timeout -k 15 "$RUN_TIMEOUT" "$@" >"$logfile" 2>&1 </dev/null &
    BENCH_PID=$!
    tail -n +1 -f --pid="$BENCH_PID" "$logfile" &
    TAIL_PID=$!
    local rc=0
    wait "$BENCH_PID" || rc=$?
    BENCH_PID=""
    wait "$TAIL_PID" 2>/dev/null || true
    TAIL_PID=""
    return "$rc"
}

# bench SYSTEM RUN MODE ARGS...: one rutomq-bench run, JSON to the results
# dir, recorded in the manifest under RUN.
LAST_OUT=""
bench() {
    local sys="$1" run="$2"; shift 2
    local out="$RESULTS_DIR/race-$UTC-$sys-$run.json"
    local logfile="$WORK/$sys/$run.log"
    local cmd=("$BENCH_BIN" "$@" --label "$sys" --out "$out" "${BENCH_ARGS[@]}")
    log "$sys $run: $(quote_cmd "${cmd[@]}")"
    note "$sys" cmd "$(quote_cmd "${cmd[@]}")"
    local rc=0
    run_logged "$logfile" "${cmd[@]}" || rc=$?
    if ((rc == 124)); then
        die "$sys $run: rutomq-bench still running after --run-timeout $RUN_TIMEOUT s, killed; log $logfile"
    fi
    ((rc == 0)) || die "$sys $run: rutomq-bench exited $rc; log $logfile"
    [[ -s "$out" ]] || die "$sys $run: no JSON written at $out"
    # the per-second lines beside the JSON: when in a run a stall happened
    grep '^\[' "$logfile" >"${out%.json}.seconds.txt" || rm -f "${out%.json}.seconds.txt"
    note "$sys" "$run" "$out"
    LAST_OUT="$out"
}

BOOTSTRAP=""
BROKER_PIDS=()
METRICS_ARGS=()
# Suffix of a system's broker data dir and log: "" for runs a-e, "-e2e" for
# the fresh broker of run f.
BROKER_SUB=""

# start_kafka SYSDIR VERSION
start_kafka() {
    local sysdir="$1" kv="$2" port cport
    local sys
    sys="$(basename "$sysdir")"
    read -r port cport <<<"$(free_ports 2)"
    KAFKA_DIR="$sysdir/broker$BROKER_SUB"
    DATA_DIRS+=("$KAFKA_DIR/data")
    log "$sys: starting Apache Kafka $kv on 127.0.0.1:$port (controller $cport), data $KAFKA_DIR"
    KAFKA_VERSION="$kv" KAFKA_CONTROLLER_PORT="$cport" "$here/kafka/start-kafka.sh" "$port" "$KAFKA_DIR" >&2
    note "$sys" cmd "KAFKA_VERSION=$kv KAFKA_CONTROLLER_PORT=$cport benches/kafka/start-kafka.sh $port $KAFKA_DIR"
    note "$sys" kafka_version "$kv"
    local pid
    pid="$(cat "$KAFKA_DIR/kafka.pid")"
    BOOTSTRAP="127.0.0.1:$port"
    BROKER_PIDS=("$pid")
    METRICS_ARGS=()
}

# start_rutomq SYSDIR [EXTRA SERVE FLAGS...]
start_rutomq() {
    local sysdir="$1"; shift
    local port hport
    read -r port hport <<<"$(free_ports 2)"
    RUTOMQ_DATA="$sysdir/data$BROKER_SUB"
    mkdir -p "$RUTOMQ_DATA"
    DATA_DIRS+=("$RUTOMQ_DATA")
    # As root, the embedded PostgreSQL runs as `postgres`, which must reach
    # DATA/pg through every parent folder (mktemp -d makes a 0700 folder).
    if [[ "$(id -u)" == 0 ]] && id postgres >/dev/null 2>&1 && command -v runuser >/dev/null; then
        runuser -u postgres -- test -x "$RUTOMQ_DATA" \
            || die "the postgres user cannot reach $RUTOMQ_DATA; make its parent folders world-searchable (chmod o+x) or use another --work-dir"
    fi
    local cmd=("$RUTOMQ_BIN" serve --data-dir "$RUTOMQ_DATA" --listen "127.0.0.1:$port" --http "127.0.0.1:$hport" "$@")
    log "$(basename "$sysdir"): $(quote_cmd "${cmd[@]}")"
    note "$(basename "$sysdir")" cmd "$(quote_cmd "${cmd[@]}")"
    "${cmd[@]}" >"$sysdir/rutomq$BROKER_SUB.log" 2>&1 </dev/null &
    RUTOMQ_PID=$!
    local deadline=$((SECONDS + 120)) code
    while true; do
        alive "$RUTOMQ_PID" || { tail -n 40 "$sysdir/rutomq$BROKER_SUB.log" >&2; die "rutomq exited during start-up (log $sysdir/rutomq$BROKER_SUB.log)"; }
        code="$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$hport/health/ready" || true)"
        [[ "$code" == 200 ]] && break
        ((SECONDS < deadline)) || { tail -n 40 "$sysdir/rutomq$BROKER_SUB.log" >&2; die "rutomq not ready after 120 s"; }
        sleep 0.2
    done
    local pg
    pg="$(postmaster_pid "$RUTOMQ_DATA")" || die "rutomq is ready but no live postmaster in $RUTOMQ_DATA/pg/data/postmaster.pid"
    log "$(basename "$sysdir"): ready, rutomq pid $RUTOMQ_PID, postmaster pid $pg"
    BOOTSTRAP="127.0.0.1:$port"
    BROKER_PIDS=("$RUTOMQ_PID" "$pg")
    METRICS_ARGS=(--metrics-url "http://127.0.0.1:$hport/metrics")
}

# --confirm: Kafka's ProducerPerformance on a new 8-partition topic.
confirm_run() {
    local sys="$1" logfile="$WORK/$1/confirm-produce.log"
    log "$sys confirm: perf-tools.sh create-topic + produce 1000000 on $BOOTSTRAP"
    "$here/perf-tools.sh" create-topic "$BOOTSTRAP" race-confirm 8 >"$WORK/$sys/confirm-create.log" 2>&1 \
        || { cat "$WORK/$sys/confirm-create.log" >&2; die "$sys confirm: create-topic failed"; }
    note "$sys" cmd "benches/perf-tools.sh produce $BOOTSTRAP race-confirm 1000000"
    local rc=0
    run_logged "$logfile" "$here/perf-tools.sh" produce "$BOOTSTRAP" race-confirm 1000000 || rc=$?
    ((rc == 0)) || die "$sys confirm: perf-tools.sh produce exited $rc; log $logfile"
    local mbs
    mbs="$(py confirm-mbs "$logfile")"
    cp "$logfile" "$RESULTS_DIR/race-$UTC-$sys-confirm-produce.log"
    note "$sys" confirm_mbs "$mbs"
    note "$sys" confirm_log "race-$UTC-$sys-confirm-produce.log"
    log "$sys confirm: $mbs MB/s"
}

# rdk SYSTEM RUN RDKAFKA-PERF-ARGS...: one benches/rdkafka-perf.sh run, its
# JSON, raw output and latency samples to the results dir, recorded in the
# manifest under RUN. A failed librdkafka run is recorded (its JSON says
# what failed, the table counts its errors) and the race goes on.
rdk() {
    local sys="$1" run="$2"; shift 2
    local name="race-$UTC-$sys-$run"
    local logfile="$WORK/$sys/$run.log"
    # The program's own limit, and run_logged's a little later (bash's
    # dynamic scope: this local RUN_TIMEOUT is the one run_logged sees), so
    # rdkafka-perf.sh still writes its JSON after a kill.
    local limit=$((RUN_TIMEOUT > 10 * (1 + RDK_DURATION) + 60 ? RUN_TIMEOUT : 10 * (1 + RDK_DURATION) + 60))
    local RUN_TIMEOUT=$((limit + 30))
    local cmd=("$here/rdkafka-perf.sh" --out-dir "$RESULTS_DIR" --name "$name" --rutomq "$RUTOMQ_BIN"
               --timeout "$limit" "$@")
    log "$sys $run: $(quote_cmd "${cmd[@]}")"
    note "$sys" cmd "$(quote_cmd "${cmd[@]}")"
    local rc=0
    run_logged "$logfile" "${cmd[@]}" || rc=$?
    if [[ -s "$RESULTS_DIR/$name.json" ]]; then
        note "$sys" "$run" "$RESULTS_DIR/$name.json"
    else
        note "$sys" rdk_failed "$run"   # no JSON: counted as one error
    fi
    ((rc == 0)) || log "WARNING: $sys $run: rdkafka-perf.sh exited $rc (3: it ran, but not every message was delivered or read); log $logfile"
    return 0
}

# msg/s as a topic suffix: 2000 -> 2k, 2500 -> 2500
rate_tag() { if (($1 % 1000 == 0)); then echo "$(($1 / 1000))k"; else echo "$1"; fi; }

# (e) the librdkafka runs on the running broker.
rdk_runs() {
    local sys="$1" total="$2" r tag
    log "$sys: librdkafka rdkafka_performance runs (rates ${RDK_RATES[*]} msg/s, ${RDK_DURATION} s each)"
    rdk "$sys" rdk-warmup --create produce "$BOOTSTRAP" race-rdk-warmup 1000 1
    for r in "${RDK_RATES[@]}"; do
        tag="$(rate_tag "$r")"
        sleep 3
        rdk "$sys" "rdk-produce-$r" --create produce "$BOOTSTRAP" "race-rdk-$tag" "$r" "$RDK_DURATION"
    done
    sleep 3
    rdk "$sys" rdk-consume consume "$BOOTSTRAP" race-max "$total"
}

HALF_SOURCE=""
HALF_FROM=""   # the system whose max the half rate is 50 % of
CONSUME_RECORDS=""   # records every consume run reads (set by the first system)

# Writes dirty pages back and drops the clean page cache (root only).
drop_page_cache() {
    sync
    [[ -w /proc/sys/vm/drop_caches ]] || return 1
    echo 3 >/proc/sys/vm/drop_caches
}
if [[ -n "$HALF_RATE" ]]; then
    HALF_SOURCE="given with --half-rate"
    note - half_rate "$HALF_RATE"
    note - half_rate_source "$HALF_SOURCE"
fi

start_system() {
    case "$1" in
        kafka*) start_kafka "$2" "$(kafka_version_of "$1")" ;;
        rutomq) start_rutomq "$2" ;;
        rutomq-s3lat) start_rutomq "$2" --inject-object-latency-ms "$S3_LATENCY_MS" \
                          --inject-object-jitter-ms "$S3_JITTER_MS" ;;
    esac
}

stop_system() {
    case "$1" in
        kafka*) stop_kafka ;;
        *) stop_rutomq ;;
    esac
}

run_system() {
    local sys="$1" sysdir="$WORK/$1"
    [[ ! -e "$sysdir" ]] || die "$sysdir exists; each system needs a fresh work folder"
    mkdir -p "$sysdir"
    chmod 755 "$sysdir"
    log "===== $sys ====="
    note_load "$sys start"
    sync   # write out the previous system's dirty pages before this one starts
    start_system "$sys" "$sysdir"
    note "$sys" broker_pid "${BROKER_PIDS[0]}"
    note "$sys" pids "${BROKER_PIDS[*]}"
    local common=(--bootstrap "$BOOTSTRAP" --partitions 8 --record-size 1024 --acks -1
                  --producers "$PRODUCERS" --batch-records "$BATCH_RECORDS")
    local pid
    for pid in "${BROKER_PIDS[@]}"; do common+=(--broker-pid "$pid"); done
    common+=("${METRICS_ARGS[@]}")

    # a. max-rate produce
    bench "$sys" produce-max produce "${common[@]}" --topic race-max --create \
        --rate 0 --duration "$DURATION" --warmup "$WARMUP"
    local max_json="$LAST_OUT"
    if [[ -z "$HALF_RATE" ]]; then
        HALF_RATE="$(py half "$max_json")"
        HALF_SOURCE="50 % of $sys's max produce records/s"
        HALF_FROM="$sys"
        log "half rate: $HALF_RATE records/s ($HALF_SOURCE)"
        note - half_rate "$HALF_RATE"
        note - half_rate_source "$HALF_SOURCE"
    fi
    sleep 3

    # b. consume from the beginning of race-max: the same number of records
    # on every system (the first system's max-run total, or what this one
    # wrote if fewer), so each reads the same bytes; then again after
    # dropping the page cache, so both read from the disk.
    local total
    total="$(py records-total "$max_json")"
    if [[ -z "$CONSUME_RECORDS" ]]; then
        CONSUME_RECORDS="$total"
        note - consume_records "$CONSUME_RECORDS"
    fi
    ((total > CONSUME_RECORDS)) && total="$CONSUME_RECORDS"
    bench "$sys" consume consume "${common[@]}" --topic race-max --from beginning --records "$total"
    sleep 3
    if drop_page_cache; then
        bench "$sys" consume-cold consume "${common[@]}" --topic race-max --from beginning --records "$total"
        sleep 3
    else
        log "cannot drop the page cache (not root?): no cold consume row"
    fi

    # c. fixed-rate produce on a new topic
    note "$sys" half_rate "$HALF_RATE"
    bench "$sys" produce-half produce "${common[@]}" --topic race-half --create \
        --rate "$HALF_RATE" --duration "$DURATION" --warmup "$WARMUP"

    # d. fixed-rate produce at half of this system's own max
    if [[ "$HALF_FROM" != "$sys" ]]; then
        local own_half
        own_half="$(py half "$max_json")"
        note "$sys" own_half_rate "$own_half"
        sleep 3
        bench "$sys" produce-own-half produce "${common[@]}" --topic race-own-half --create \
            --rate "$own_half" --duration "$DURATION" --warmup "$WARMUP"
    fi

    if ((CONFIRM)) && [[ "$sys" == kafka || "$sys" == rutomq ]]; then
        sleep 3
        confirm_run "$sys"
    fi
    if ((RDKAFKA)); then
        sleep 3
        rdk_runs "$sys" "$total"
    fi

    # f. end to end at the half rate, then fan-out at the tail, on a fresh
    # broker: runs a-e wrote ~55 GB at rutomq's rates, and the development
    # VM's disk does not hold much more (race8's first try ran out of space)
    if ((E2E)); then
        stop_system "$sys"
        delete_data
        sync
        BROKER_SUB=-e2e
        start_system "$sys" "$sysdir"
        BROKER_SUB=""
        note "$sys" e2e_pids "${BROKER_PIDS[*]}"
        local at_tail=(--bootstrap "$BOOTSTRAP" "${E2E_AT_TAIL[@]}")
        for pid in "${BROKER_PIDS[@]}"; do at_tail+=(--broker-pid "$pid"); done
        at_tail+=("${METRICS_ARGS[@]}")
        local e2e=("${at_tail[@]}" --producers 8)
        sleep 3
        bench "$sys" e2e-half e2e "${e2e[@]}" --topic race-e2e --batch-records 64 \
            --rate "$HALF_RATE" --duration "$DURATION" --warmup "$WARMUP"
        local n
        for n in "${FANOUTS[@]}"; do
            sleep 3
            bench "$sys" "fanout-$n" e2e "${e2e[@]}" --topic "race-fan-$n" --batch-records 16 \
                --rate 50000 --fanout "$n" --duration "$DURATION" --warmup "$WARMUP"
        done
        # last, the tail at max produce: (a)'s producers, the same 2
        # consumers; 1 GiB kept per partition, as the run writes tens of GB
        sleep 3
        bench "$sys" tail-max e2e "${at_tail[@]}" --producers "$PRODUCERS" --topic race-tail-max \
            --topic-config retention.bytes=1073741824 --batch-records "$BATCH_RECORDS" --rate 0 \
            --duration "$DURATION" --warmup "$WARMUP"
    fi
    note_load "$sys end"
    stop_system "$sys"
    delete_data
    if [[ "$sys" != "${SYSTEMS[-1]}" ]] && ((!KEEP && SETTLE > 0)); then
        log "data deleted; settling ${SETTLE} s before the next system (--settle)"
        sleep "$SETTLE"
    fi
}

# ------------------------------------------------------------------- main ---
mkdir -p "$WORK/bin"
BENCH_BIN="$WORK/bin/rutomq-bench"
cp "$BENCH_SRC" "$BENCH_BIN"
note - sha256.rutomq-bench "$(sha256sum "$BENCH_BIN" | cut -d' ' -f1)"
RUTOMQ_BIN=""
if has_system rutomq || has_system rutomq-s3lat || ((RDKAFKA)); then
    RUTOMQ_BIN="$WORK/bin/rutomq"
    cp "$RUTOMQ_SRC" "$RUTOMQ_BIN"
    note - sha256.rutomq "$(sha256sum "$RUTOMQ_BIN" | cut -d' ' -f1)"
fi
# Fetch jars and build rdkafka_performance now, not in the middle of the
# race (no-ops when cached).
for s in "${KAFKA_SYSTEMS[@]}"; do
    KAFKA_VERSION="$(kafka_version_of "$s")" "$here/kafka/start-kafka.sh" --fetch >&2
done
if ((CONFIRM)); then "$here/perf-tools.sh" fetch >&2; fi
if ((RDKAFKA)); then
    rdk_dir="$("$here/rdkafka-perf.sh" build)" || die "building rdkafka_performance failed (benches/rdkafka-perf.sh build)"
    note - rdk_program "$(tr '\n' ' ' <"$rdk_dir/SOURCE")"
    note - sha256.rdkafka_performance "$(sha256sum "$rdk_dir/rdkafka_performance" | cut -d' ' -f1)"
fi

git_rev="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
git_dirty=no
[[ -z "$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null)" ]] || git_dirty=yes
note - utc "$UTC"
note - command "$orig_cmd"
note - git_rev "$git_rev"
note - git_dirty "$git_dirty"
note - nproc "$(nproc)"
note - uname_r "$(uname -r)"
note - cpu "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
note - duration "$DURATION"
note - warmup "$WARMUP"
note - s3_latency_ms "$S3_LATENCY_MS"
note - s3_jitter_ms "$S3_JITTER_MS"
note - bench_args "${BENCH_ARGS[*]}"
note - producers "$PRODUCERS"
note - batch_records "$BATCH_RECORDS"
note - systems "${SYSTEMS[*]}"
note - kafka_version "$KAFKA_BROKER_VERSION"
note - rdkafka "$RDKAFKA"
note - rdk_rates "${RDK_RATES[*]}"
note - rdk_duration "$RDK_DURATION"
note - e2e "$E2E"
note - fanouts "${FANOUTS[*]}"

log "race $UTC: systems ${SYSTEMS[*]}, ${DURATION} s per produce run, work dir $WORK, results $RESULTS_DIR"
for sys in "${SYSTEMS[@]}"; do
    run_system "$sys"
done

py summarize "$MANIFEST" "$RESULTS_DIR/race-$UTC.json" "$RESULTS_DIR/race-$UTC.md" complete
SUCCESS=1
