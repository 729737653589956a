#!/usr/bin/env bash
# The transactions race: Apache Kafka and rutomq, one after the other on this
# machine, each on a fresh data directory, driven by the same load generator
# (rutomq-bench txn and consume). Prints a table with ratios and saves the
# JSON results and a summary under benches/results/txn-race-<utc>/.
#
# Usage: benches/txn-race.sh [--duration S] [--warmup S] [--producers N]
#                            [--batches K] [--batch-records R] [--rounds N]
#                            [--commit-rates "100 200"] [--systems "kafka rutomq"]
# Build first: cargo build --release --bin rutomq --bin rutomq-bench
#
# Per system:
#   a. txn       N transactional ids (default 8), each committing transactions
#                of K Produce requests (default 4) of one 64 x 1 KiB batch per
#                partition it owns (8 partitions dealt out), back to back, for
#                DURATION s after WARMUP s -> committed MiB/s, commits/s and the
#                commit latency (last Produce sent to EndTxn answered) p50/p99
#   b. consume   the topic from the beginning, read_committed, exactly the
#                records run (a) committed -> MiB/s
#   c. consume   the same, read_uncommitted -> MiB/s (b/c is the cost of
#                read_committed)
#   b and c run ROUNDS times (default 3) in alternating order (c b, b c, c b,
#   ...): whichever reads first pays for cold caches, so one read of each is
#   no comparison. The table has the median of each; all rounds are kept.
#   d. txn       for each of COMMIT_RATES (commits/s over all ids, default
#                "100 200"; "" for none), run (a) again on a new topic at that
#                fixed rate, each id beginning a transaction on its schedule:
#                the commit latency of a system that is not saturated (at
#                saturation, (a), a closed loop's latency is its queueing).
#                A rate a system cannot hold shows as achieved commits/s
#                below it and as start lag (transactions begun late).
# Systems: kafka (Apache Kafka $KAFKA_VERSION, default 4.2.0, one KRaft node via
# benches/kafka/start-kafka.sh) and rutomq (embedded defaults: private
# PostgreSQL, file object store, default flush window).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
BENCH="${RUTOMQ_BENCH:-$repo/target/release/rutomq-bench}"
RUTOMQ_BIN="${RUTOMQ_BIN:-$repo/target/release/rutomq}"
export KAFKA_VERSION="${KAFKA_VERSION:-4.2.0}"
DURATION=30 WARMUP=5 PRODUCERS=8 BATCHES=4 BATCH_RECORDS=64 ROUNDS=3 SYSTEMS="kafka rutomq"
COMMIT_RATES="100 200"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --duration) DURATION="$2"; shift 2 ;;
        --warmup) WARMUP="$2"; shift 2 ;;
        --producers) PRODUCERS="$2"; shift 2 ;;
        --batches) BATCHES="$2"; shift 2 ;;
        --batch-records) BATCH_RECORDS="$2"; shift 2 ;;
        --rounds) ROUNDS="$2"; shift 2 ;;
        --systems) SYSTEMS="$2"; shift 2 ;;
        --commit-rates) COMMIT_RATES="$2"; shift 2 ;;
        -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
        *) echo "txn-race: unknown option $1" >&2; exit 2 ;;
    esac
done
[[ -x "$BENCH" && -x "$RUTOMQ_BIN" ]] || { echo "txn-race: build rutomq and rutomq-bench first" >&2; exit 1; }

UTC="$(date -u +%Y%m%dT%H%M%SZ)"
OUT="$repo/benches/results/txn-race-$UTC"
WORK="$(mktemp -d /tmp/txn-race.XXXXXX)"
chmod 755 "$WORK"
mkdir -p "$OUT"
log() { echo "==> [$(date +%H:%M:%S)] $*" >&2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); v=d
for k in sys.argv[2].split("."): v=v[k]
print(v)' "$1" "$2"; }

PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    [[ -d "$WORK/kafka" ]] && "$here/kafka/start-kafka.sh" --stop "$WORK/kafka" >/dev/null 2>&1 || true
    # Both systems' data (10+ GiB a run): runs left behind filled the disk.
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

run_system() {
    local sys="$1" bootstrap port hport
    port="$(free_port)"
    case "$sys" in
        kafka)
            "$here/kafka/start-kafka.sh" "$port" "$WORK/kafka" >"$WORK/kafka.start.log" 2>&1 \
                || { cat "$WORK/kafka.start.log" >&2; exit 1; }
            bootstrap="127.0.0.1:$port" ;;
        rutomq)
            hport="$(free_port)"
            mkdir -p "$WORK/rutomq"
            "$RUTOMQ_BIN" serve --data-dir "$WORK/rutomq" --listen "127.0.0.1:$port" \
                --http "127.0.0.1:$hport" >"$WORK/rutomq.log" 2>&1 </dev/null &
            PIDS+=($!)
            for _ in $(seq 1 600); do
                curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$hport/health/ready" 2>/dev/null \
                    | grep -q 200 && break
                sleep 0.2
            done
            bootstrap="127.0.0.1:$port" ;;
        *) echo "txn-race: unknown system $sys" >&2; exit 2 ;;
    esac
    log "$sys: txn produce on $bootstrap"
    "$BENCH" txn --bootstrap "$bootstrap" --topic txn-race --create --partitions 8 \
        --producers "$PRODUCERS" --txn-batches "$BATCHES" --batch-records "$BATCH_RECORDS" \
        --duration "$DURATION" --warmup "$WARMUP" --label "$sys" --out "$OUT/$sys-txn.json" \
        >"$OUT/$sys-txn.log" 2>&1
    local total
    total="$(field "$OUT/$sys-txn.json" records_total)"
    local round order
    for round in $(seq 1 "$ROUNDS"); do
        order="uncommitted committed"
        (( round % 2 == 0 )) && order="committed uncommitted"
        for iso in $order; do
            local flag=()
            [[ "$iso" == committed ]] && flag=(--read-committed)
            log "$sys: consume $total records read_$iso (round $round)"
            "$BENCH" consume --bootstrap "$bootstrap" --topic txn-race --partitions 8 --records "$total" \
                "${flag[@]}" --label "$sys" --out "$OUT/$sys-consume-$iso-$round.json" \
                >"$OUT/$sys-consume-$iso-$round.log" 2>&1
        done
    done
    # Records per commit over all ids: every id commits BATCHES batches of
    # BATCH_RECORDS records in each of its partitions (8 dealt out).
    local per_commit=$(( BATCHES * BATCH_RECORDS * 8 / PRODUCERS )) c
    for c in $COMMIT_RATES; do
        log "$sys: txn produce at $c commits/s"
        "$BENCH" txn --bootstrap "$bootstrap" --topic "txn-rate-$c" --create --partitions 8 \
            --producers "$PRODUCERS" --txn-batches "$BATCHES" --batch-records "$BATCH_RECORDS" \
            --rate "$(( c * per_commit ))" --duration "$DURATION" --warmup "$WARMUP" \
            --label "$sys" --out "$OUT/$sys-txn-rate-$c.json" >"$OUT/$sys-txn-rate-$c.log" 2>&1
    done
    case "$sys" in
        kafka) "$here/kafka/start-kafka.sh" --stop "$WORK/kafka" >/dev/null 2>&1 || true ;;
        rutomq) kill "${PIDS[-1]}"; wait "${PIDS[-1]}" 2>/dev/null || true ;;
    esac
}

for s in $SYSTEMS; do run_system "$s"; done

python3 - "$OUT" "$ROUNDS" "$COMMIT_RATES" $SYSTEMS <<'EOF' | tee "$OUT/summary.md"
import json, statistics, sys
out, rounds, rates, systems = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]
def load(name):
    return json.load(open(f"{out}/{name}.json"))
def commits(t):
    # Every transaction holds the same records: commits/s from records/s.
    return t["records_per_sec"] * t["requests"] / max(t["records_total"], 1)
def reads(s, iso):
    return [load(f"{s}-consume-{iso}-{r}")["mib_per_sec"] for r in range(1, rounds + 1)]
rows, rounds_seen = {}, {}
for s in systems:
    t = load(f"{s}-txn")
    rc, ru = reads(s, "committed"), reads(s, "uncommitted")
    rounds_seen[s] = (rc, ru)
    lat = t["latency_ms"]
    rows[s] = {
        "txn MiB/s": t["mib_per_sec"],
        "commits/s": commits(t),
        "commit p50 ms": lat["p50"],
        "commit p99 ms": lat["p99"],
        "read_committed MiB/s": statistics.median(rc),
        "read_uncommitted MiB/s": statistics.median(ru),
    }
    rows[s]["committed / uncommitted"] = rows[s]["read_committed MiB/s"] / rows[s]["read_uncommitted MiB/s"]
    for c in rates:
        f = load(f"{s}-txn-rate-{c}")
        rows[s][f"at {c}/s: commits/s"] = commits(f)
        rows[s][f"at {c}/s: commit p50 ms"] = f["latency_ms"]["p50"]
        rows[s][f"at {c}/s: commit p99 ms"] = f["latency_ms"]["p99"]
        rows[s][f"at {c}/s: start lag p99 ms"] = f["send_lag_ms"]["p99"]
keys = list(next(iter(rows.values())).keys())
print("| | " + " | ".join(systems) + (" | rutomq / kafka |" if len(systems) == 2 else " |"))
print("|---" * (len(systems) + 1 + (len(systems) == 2)) + "|")
for k in keys:
    vals = [rows[s][k] for s in systems]
    line = f"| {k} | " + " | ".join(f"{v:.2f}" for v in vals)
    if len(systems) == 2 and vals[0]:
        line += f" | {vals[1] / vals[0]:.2f}"
    print(line + " |")
print()
print(f"Reads, MiB/s per round (median above; odd rounds read_uncommitted first):")
for s in systems:
    rc, ru = rounds_seen[s]
    print(f"- {s}: read_committed {', '.join(f'{v:.0f}' for v in rc)}; "
          f"read_uncommitted {', '.join(f'{v:.0f}' for v in ru)}")
EOF
log "results in $OUT"
