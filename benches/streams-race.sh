#!/usr/bin/env bash
# Kafka Streams word count on rutomq against Apache Kafka, on the same
# machine, one after the other: the same program (tests/streams,
# StreamsWordCount, kafka-streams 4.2.0) produces LINES lines of 10 words
# into a fresh topic, then counts the words (a repartition topic, a compacted
# changelog, an output topic) and reports lines per second from
# KafkaStreams.start() until its committed offsets reach the input's end.
# Each system runs at_least_once and exactly_once_v2, ROUNDS times, in
# alternating order.
#
# Usage: benches/streams-race.sh [LINES] [ROUNDS]     (defaults 200000, 2)
# Env:   SYSTEMS="kafka rutomq", RUTOMQ_BIN (default target/release/rutomq),
#        KAFKA_VERSION (benches/kafka/start-kafka.sh, default 4.1.1)
# Needs: cargo build --release --bin rutomq; Maven (the Streams jar and
#        Kafka's jars come from Maven Central).
# Output: a table on stdout; every run's line in benches/results/raw/.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
LINES="${1:-200000}"
ROUNDS="${2:-2}"
SYSTEMS="${SYSTEMS:-kafka rutomq}"
RUTOMQ_BIN="${RUTOMQ_BIN:-$repo/target/release/rutomq}"
WORK="$(mktemp -d /tmp/rq-streams-race.XXXX)"
chmod 755 "$WORK"
OUT="$repo/benches/results/raw/$(date -u +%Y%m%dT%H%M%SZ)-streams-race"
mkdir -p "$OUT"
JAR="$repo/tests/.cache/bin/streams-eos-4.2.0.jar"

log() { echo "==> [$(date +%H:%M:%S)] $*" >&2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    [[ -d "$WORK/kafka" ]] && "$here/kafka/start-kafka.sh" --stop "$WORK/kafka" >/dev/null 2>&1 || true
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

bash "$repo/tests/streams/build.sh" 4.2.0 >&2

start() { # system -> sets BOOTSTRAP (not in a subshell: PIDS must keep the agent)
    local sys="$1" port hport
    port="$(free_port)"
    case "$sys" in
        kafka)
            rm -rf "$WORK/kafka"
            "$here/kafka/start-kafka.sh" "$port" "$WORK/kafka" >"$WORK/kafka.start.log" 2>&1 \
                || { cat "$WORK/kafka.start.log" >&2; exit 1; } ;;
        rutomq)
            hport="$(free_port)"
            rm -rf "$WORK/rutomq"
            mkdir -p "$WORK/rutomq"
            "$RUTOMQ_BIN" serve --data-dir "$WORK/rutomq" --listen "127.0.0.1:$port" \
                --http "127.0.0.1:$hport" >"$WORK/rutomq.log" 2>&1 </dev/null &
            PIDS+=($!)
            for _ in $(seq 1 600); do
                curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$hport/health/ready" 2>/dev/null \
                    | grep -q 200 && break
                sleep 0.2
            done ;;
    esac
    BOOTSTRAP="127.0.0.1:$port"
}

stop() {
    case "$1" in
        kafka) "$here/kafka/start-kafka.sh" --stop "$WORK/kafka" >/dev/null 2>&1 || true ;;
        rutomq) kill "${PIDS[-1]}"; wait "${PIDS[-1]}" 2>/dev/null || true ;;
    esac
}

for round in $(seq 1 "$ROUNDS"); do
    order="$SYSTEMS"
    (( round % 2 == 0 )) && order="$(echo "$SYSTEMS" | tr ' ' '\n' | tac | tr '\n' ' ')"
    for sys in $order; do
        start "$sys"
        bootstrap="$BOOTSTRAP"
        for g in at_least_once exactly_once_v2; do
            log "$sys round $round: word count of $LINES lines, $g"
            rm -rf "$WORK/state"
            java -XX:+UseSerialGC -Xmx768m -jar "$JAR" wordcount --bootstrap "$bootstrap" \
                --state-dir "$WORK/state" --lines "$LINES" --guarantee "$g" \
                >"$OUT/$sys-$g-$round.log" 2>&1 || { tail -20 "$OUT/$sys-$g-$round.log" >&2; exit 1; }
            grep '^RESULT' "$OUT/$sys-$g-$round.log" | tail -1 | sed "s/^/$sys round=$round /" | tee -a "$OUT/results.txt" >&2
        done
        stop "$sys"
    done
done

python3 - "$OUT/results.txt" "$LINES" <<'EOF' | tee "$OUT/summary.md"
import collections, statistics, sys
runs = collections.defaultdict(list)
for ln in open(sys.argv[1]):
    f = dict(kv.split("=", 1) for kv in ln.split() if "=" in kv)
    runs[(ln.split()[0], f["guarantee"])].append(float(f["lines_per_s"]))
print(f"| Kafka Streams word count, {sys.argv[2]} lines | " + " | ".join(
    f"{s} lines/s (median)" for s in ("kafka", "rutomq")) + " | rutomq / Kafka |")
print("|---|---|---|---|")
for g in ("at_least_once", "exactly_once_v2"):
    k = statistics.median(runs[("kafka", g)]) if runs[("kafka", g)] else float("nan")
    r = statistics.median(runs[("rutomq", g)]) if runs[("rutomq", g)] else float("nan")
    print(f"| {g} | {k:.0f} | {r:.0f} | {r / k:.2f}x |")
EOF
echo "command: benches/streams-race.sh $LINES $ROUNDS (git $(git -C "$repo" rev-parse --short HEAD), $(nproc) cores)"
