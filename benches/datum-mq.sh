#!/usr/bin/env bash
# datum-mq client throughput against one rutomq agent (embedded defaults,
# 8-partition topics): the native producer with 1, 2 and 5 Produce requests
# in flight per connection, keyless (sticky batches) and keyed (a distinct key
# per record), the rdkafka producer, and both consumer backends
# (KafkaSource, native and rdkafka) reading a topic back. Each configuration runs ROUNDS times,
# interleaved, on a fresh topic. Prints one JSON line per run and a table.
#
# Usage: benches/datum-mq.sh [RECORDS] [ROUNDS]     (defaults 500000, 2)
# CONFIGS="native 1,native 2" picks the "backend in-flight" pairs (default:
# native 1, 2, 5 and rdkafka 1, 5); consumers run for the in-flight-1 ones.
# Needs: cargo build --release --bin rutomq --bin datum-mq-bench
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
records="${1:-500000}"
rounds="${2:-2}"
bin="$repo/target/release"
work="$(mktemp -d /tmp/rq-datum.XXXX)"
chmod 755 "$work"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
hport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin/rutomq" serve --data-dir "$work/data" --listen "127.0.0.1:$port" --http "127.0.0.1:$hport" \
    --default-partitions 8 >"$work/rutomq.log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 120); do curl -sf "http://127.0.0.1:$hport/health/ready" >/dev/null && break; sleep 0.5; done
out="$work/runs.jsonl"
n=0
for round in $(seq "$rounds"); do
    IFS=, read -r -a cfgs <<<"${CONFIGS:-native 1,native 2,native 5,rdkafka 1,rdkafka 5}"
    for cfg in "${cfgs[@]}"; do
        set -- $cfg
        n=$((n + 1))
        topic="b$n"
        "$bin/datum-mq-bench" produce --bootstrap "127.0.0.1:$port" --topic "$topic" \
            --backend "$1" --in-flight "$2" --records "$records" | tee -a "$out"
        "$bin/datum-mq-bench" produce --bootstrap "127.0.0.1:$port" --topic "$topic-k" \
            --backend "$1" --in-flight "$2" --records "$records" --keyed | tee -a "$out"
        if [[ "$2" == "1" ]]; then
            "$bin/datum-mq-bench" consume --bootstrap "127.0.0.1:$port" --topic "$topic" \
                --backend "$1" --records "$records" | tee -a "$out"
        fi
    done
done
python3 - "$out" <<'PY'
import json, sys, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    key = (r["mode"], r["backend"], r.get("in_flight", "-"))
    rows[key].append(r)
print("\n| mode | backend | in flight | MiB/s (each run) | delivery p50 / p99 ms, or s to the first record (first run) |")
print("|---|---|--:|---|---|")
for (mode, backend, inflight), rs in rows.items():
    mib = " / ".join(f"{r['mib_per_sec']:.1f}" for r in rs)
    lat = (f"{rs[0]['delivery_ms_p50']:.1f} / {rs[0]['delivery_ms_p99']:.1f}"
           if "delivery_ms_p50" in rs[0] else f"{rs[0].get('first_record_s', 0):.2f} s")
    print(f"| {mode} | {backend} | {inflight} | {mib} | {lat} |")
PY
