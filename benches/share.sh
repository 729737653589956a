#!/usr/bin/env bash
# What a share group (KIP-932) consumes at, beside a classic consumer group
# on the same agent and records: N records (100 bytes) on a topic of P
# partitions, produced by Kafka's ProducerPerformance; then read once by
# Kafka's ConsumerPerformance (one classic consumer), and by share groups
# of 1, 2 and 4 KafkaShareConsumers (kafka-clients 4.2.0,
# tests/share/ShareConsume.java: explicit acknowledgement, commitSync per
# poll, max.poll.records 500), each group reading all N from the start
# (share.auto.offset.reset=earliest). Per run: records/s (first record to
# last), and the agent's CPU seconds and PostgreSQL statements over it.
#
#   benches/share.sh [RECORDS] [PARTITIONS]     (defaults 100000, 4)
#
# Needs target/release/rutomq, Java 17 and the kafka-tools jars
# (tests/clients/build.sh tools). Results to $WORK (default a temporary
# folder): runs.jsonl and summary.md.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
RECORDS="${1:-100000}" PARTITIONS="${2:-4}"
BIN="${BIN:-$repo/target/release/rutomq}"
LIB="$repo/tests/.cache/kafka-tools-4.2.0"
[[ -x "$BIN" ]] || { echo "share.sh: no executable $BIN (cargo build --release)" >&2; exit 2; }
[[ -d "$LIB" ]] || { echo "share.sh: $LIB missing (tests/clients/build.sh tools)" >&2; exit 2; }
WORK="${WORK:-$(mktemp -d /tmp/rutomq-share.XXXXXX)}"
# shellcheck source=benches/lib.sh
source "$here/lib.sh"
mkdir -p "$WORK/classes"
chmod o+x "$WORK"  # the embedded PostgreSQL runs as `postgres` when root
javac -d "$WORK/classes" -cp "$LIB/*" "$repo/tests/share/ShareConsume.java"
tool() { java -XX:+UseSerialGC -cp "$LIB/*" "$@"; }
agent=""
trap '[[ -n "$agent" ]] && kill "$agent" 2>/dev/null; wait 2>/dev/null || true' EXIT

read -r port hport <<<"$(free_ports 2)"
boot="127.0.0.1:$port"
"$BIN" serve --data-dir "$WORK/data" --http "127.0.0.1:$hport" --listen "$boot" >"$WORK/agent.log" 2>&1 </dev/null &
agent=$!
wait_ready "$hport" "$agent" "$WORK/agent.log"

cpu_s() { awk '{print ($14 + $15) / 100}' "/proc/$agent/stat"; }
statements() { curl -s "http://127.0.0.1:$hport/metrics" | awk '/^rutomq_meta_queries_total /{print $2}'; }

tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$boot" --create --topic share-bench \
    --partitions "$PARTITIONS" >/dev/null
tool org.apache.kafka.tools.ProducerPerformance --topic share-bench --num-records "$RECORDS" \
    --record-size 100 --throughput -1 --command-property "bootstrap.servers=$boot" linger.ms=5 \
    >"$WORK/produce.log"
tail -1 "$WORK/produce.log"

: >"$WORK/runs.jsonl"
# record LABEL CONSUMERS RECORDS/S CPU0 Q0: one JSON line.
record() {
    local cpu q
    cpu="$(python3 -c "print(round($(cpu_s) - $4, 2))")"
    q="$(( $(statements) - $5 ))"
    echo "{\"label\": \"$1\", \"consumers\": $2, \"records_per_s\": $3, \"agent_cpu_s\": $cpu, \"pg_statements\": $q}" \
        | tee -a "$WORK/runs.jsonl"
}

# A classic consumer group, one consumer (ConsumerPerformance).
cpu0="$(cpu_s)" q0="$(statements)"
tool org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$boot" --topic share-bench \
    --num-records "$RECORDS" --group classic-bench --timeout 60000 >"$WORK/classic.log"
# fetch.nMsg.sec: first fetch to last, the group's join left out (as the
# share groups' rates below leave out theirs).
rate="$(awk -F', *' '/^[0-9][0-9][0-9][0-9]-/ {print $10}' "$WORK/classic.log")"
record classic 1 "$rate" "$cpu0" "$q0"

for n in 1 2 4; do
    group="share-bench-$n"
    tool kafka.admin.ConfigCommand --bootstrap-server "$boot" --alter --entity-type groups \
        --entity-name "$group" --add-config share.auto.offset.reset=earliest >/dev/null
    cpu0="$(cpu_s)" q0="$(statements)"
    pids=()
    for i in $(seq "$n"); do
        java -XX:+UseSerialGC -cp "$WORK/classes:$LIB/*" ShareConsume "$boot" "$group" share-bench accept \
            3000 300000 500 quiet >"$WORK/share-$n-$i.log" 2>"$WORK/share-$n-$i.err" &
        pids+=($!)
    done
    wait "${pids[@]}"
    rate="$(cat "$WORK"/share-"$n"-*.log | python3 -c '
import sys
rows = [l.split() for l in sys.stdin if l.startswith("COUNT ")]
total = sum(int(r[1]) for r in rows)
first = min(int(r[2]) for r in rows if int(r[1]) > 0)
last = max(int(r[3]) for r in rows)
print(round(total / max((last - first) / 1000, 0.001)), total, file=sys.stdout)' )"
    got="${rate#* }" rate="${rate% *}"
    [[ "$got" == "$RECORDS" ]] || echo "share.sh: $n consumers got $got records of $RECORDS" >&2
    record "share" "$n" "$rate" "$cpu0" "$q0"
done

python3 - "$WORK/runs.jsonl" "$RECORDS" "$PARTITIONS" <<'EOF' | tee "$WORK/summary.md"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
n, p = sys.argv[2:4]
base = rows[0]["records_per_s"]
print(f"`benches/share.sh {n} {p}`: {n} records of 100 bytes, {p} partitions, one agent\n")
print("| reader | consumers | records/s | / classic | agent CPU s | PostgreSQL statements |")
print("|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['label']} | {r['consumers']} | {r['records_per_s']:.0f} | {r['records_per_s'] / base:.2f} "
          f"| {r['agent_cpu_s']} | {r['pg_statements']} |")
EOF
