#!/usr/bin/env bash
# librdkafka's produce ack latency at equal durability: Apache Kafka as it
# ships (an acknowledged record is in the page cache, flushed whenever the
# OS writes it back: on one broker, a power loss can take acknowledged
# records), Apache Kafka fsyncing every append (`log.flush.interval.messages
# =1`: its segment and indexes flushed before the answer, what a Kafka user
# sets for acknowledgements that survive a power loss on one broker), and
# rutomq (object file and PostgreSQL commit both durable before the
# answer). Interleaved in one sitting, a fresh broker per system and round,
# each rate a new 8-partition topic, as race.sh's librdkafka rows
# (rdkafka_performance: 1 KiB, acks=all, idempotent, linger.ms=5, the first
# second left out).
#
#   benches/durable-ack.sh ROUNDS SECONDS RATE[,RATE...] [OUT_DIR]
#
# Env: RUTOMQ (default target/release/rutomq), KAFKA_VERSION (default 4.4.0).
# Prints one line per run and the medians per system and rate; the
# rdkafka-perf JSONs go to OUT_DIR (default a new temporary folder).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ $# -ge 3 ]] || { sed -n '2,17p' "$0" >&2; exit 2; }
ROUNDS="$1" SECS="$2" RATES="${3//,/ }"
OUT="${4:-$(mktemp -d /tmp/rutomq-durable-ack.XXXXXX)}"
RUTOMQ="${RUTOMQ:-$here/../target/release/rutomq}"
export KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
WORK="$(mktemp -d /tmp/rutomq-durable-ack-work.XXXXXX)"
chmod o+x "$WORK"  # the embedded PostgreSQL runs as `postgres` when root
mkdir -p "$OUT"
agent="" kafka_dir=""
stop() {
    [[ -n "$agent" ]] && { kill "$agent" 2>/dev/null; wait "$agent" 2>/dev/null || true; }
    [[ -n "$kafka_dir" ]] && "$here/kafka/start-kafka.sh" --stop "$kafka_dir" >/dev/null 2>&1
    agent="" kafka_dir=""
}
trap 'stop; rm -rf "$WORK"' EXIT

# shellcheck source=benches/lib.sh
source "$here/lib.sh"

# start SYSTEM DIR: a fresh broker; sets BOOT
start() {
    local sys="$1" dir="$2" port
    case "$sys" in
        rutomq)
            start_fresh_agent "$RUTOMQ" "$dir"
            agent="$AGENT_PID" BOOT="127.0.0.1:$AGENT_PORT" ;;
        kafka | kafka-fsync)
            port="$(free_ports 1)"
            kafka_dir="$dir"
            if [[ "$sys" == kafka-fsync ]]; then
                KAFKA_EXTRA_PROPS="log.flush.interval.messages=1" \
                    "$here/kafka/start-kafka.sh" "$port" "$dir" >/dev/null
            else
                "$here/kafka/start-kafka.sh" "$port" "$dir" >/dev/null
            fi
            BOOT="127.0.0.1:$port"
            # A fresh Kafka answers the first idempotent producer's
            # InitProducerId with COORDINATOR_LOAD_IN_PROGRESS for a while:
            # a short run first, not kept (as race.sh's rdk-warmup).
            "$here/rdkafka-perf.sh" --create produce "$BOOT" warmup 1000 1 >/dev/null 2>&1 || true ;;
    esac
}

lines=()
for round in $(seq "$ROUNDS"); do
    for sys in kafka kafka-fsync rutomq; do
        dir="$WORK/$sys-$round"
        mkdir -p "$dir"
        start "$sys" "$dir"
        for rate in $RATES; do
            name="$sys-$rate-r$round"
            "$here/rdkafka-perf.sh" --out-dir "$OUT" --name "$name" --create \
                produce "$BOOT" "ack-$rate" "$rate" "$SECS" >/dev/null 2>"$OUT/$name.stderr" \
                || echo "$name: rdkafka-perf.sh failed (see $OUT/$name.stderr)" >&2
            line="$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
l = d["latency_ms"]
print("%s %s round %s p50 %.2f p99 %.2f p999 %.2f errors %s" % (sys.argv[2], sys.argv[3], sys.argv[4],
      l["p50"], l["p99"], l["p999"], d.get("errors", "?")))' "$OUT/$name.json" "$sys" "$rate" "$round")"
            echo "$line"
            lines+=("$line")
        done
        stop
        rm -rf "$dir"
    done
done
printf '%s\n' "${lines[@]}" | python3 -c '
import statistics as st, sys
rows = [l.split() for l in sys.stdin if l.strip()]
print("medians of %s rounds (ms):" % max(int(r[3]) for r in rows))
for sysname in dict.fromkeys(r[0] for r in rows):
    for rate in dict.fromkeys(r[1] for r in rows):
        mine = [r for r in rows if r[0] == sysname and r[1] == rate]
        med = lambda k: st.median(float(r[r.index(k) + 1]) for r in mine)
        print("  %-12s %7s msg/s  p50 %6.2f  p99 %6.2f  p99.9 %6.2f" % (sysname, rate, med("p50"), med("p99"), med("p999")))
'
echo "results in $OUT"
