#!/usr/bin/env bash
# Compaction benchmark: how fast one agent's compactor works off a dirty
# backlog (MiB/s of dirty data per core of compactor CPU, and per second of
# wall time), and what it costs produce latency on the same machine.
#
# Usage: benches/compaction.sh [BACKLOG_SECONDS] [RATE_RECORDS_PER_S] [PROBE_SECONDS] [BACKLOG_RATE]
#   defaults: 20 s of backlog at 102400 records/s (100 MiB/s of 1 KiB
#   records: 2 GiB), probes at 20480 records/s (20 MiB/s) for 20 s
# Needs: cargo build --release --bin rutomq --bin rutomq-bench
#
# 1. An agent (embedded defaults, compactor idle: --compaction-interval-ms
#    3600000) takes BACKLOG_SECONDS of keyed 1 KiB records at BACKLOG_RATE into
#    a compacted topic (8 partitions; rutomq-bench --keyed: every batch
#    overwrites the same 64 keys, so nearly all of it is garbage).
# 2. Probe A, compactor idle: produce at RATE to a delete-policy topic for
#    PROBE_SECONDS; its latency is the baseline.
# 3. The agent restarts with the compactor on (every 1 s). Probe B runs the
#    same produce while the compactor works off the backlog.
# 4. Once rutomq_compaction_dirty_ratio is below 0.05 on every partition:
#    bytes the passes read (rutomq_compaction_read_bytes_total), the
#    compactor thread's CPU seconds (/proc/PID/task/*/stat, thread
#    "rutomq-compacto"), wall time from the restart.
# Output: a table on stdout, the raw rutomq-bench JSON files in the work
# directory (printed, then deleted with it).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
backlog_s="${1:-20}"
rate="${2:-20480}"
probe_s="${3:-20}"
backlog_rate="${4:-102400}"
bin="$repo/target/release"
work="$(mktemp -d "${COMPACTION_BENCH_DIR:-/tmp}/rq-cmp.XXXX")"
chmod 755 "$work"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
hport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
metrics="http://127.0.0.1:$hport/metrics"

pid=""
stop_agent() {
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        for _ in $(seq 90); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    fi
    pid=""
}
trap 'stop_agent; rm -rf "$work"' EXIT

start_agent() {
    "$bin/rutomq" serve --data-dir "$work/data" --listen "127.0.0.1:$port" --http "127.0.0.1:$hport" \
        "$@" >>"$work/rutomq.log" 2>&1 &
    pid=$!
    for _ in $(seq 120); do
        curl -sf "http://127.0.0.1:$hport/health/ready" >/dev/null && return 0
        sleep 0.5
    done
    cat "$work/rutomq.log"
    exit 1
}

metric() { # sum of a metric's samples
    curl -sf "$metrics" | awk -v m="$1" '$1 == m || index($1, m "{") == 1 { s += $2 } END { printf "%.0f\n", s }'
}

max_dirty() {
    curl -sf "$metrics" | awk '/^rutomq_compaction_dirty_ratio\{/ { if ($2 > m) m = $2; n++ } END { printf "%s %.3f\n", n + 0, m }'
}

compactor_cpu_s() {
    local ticks=0 t
    for t in /proc/"$pid"/task/*; do
        if [[ "$(cat "$t/comm" 2>/dev/null)" == rutomq-compact* ]]; then
            ticks=$(awk '{ print $14 + $15 }' "$t/stat")
        fi
    done
    python3 -c "import os; print($ticks / os.sysconf('SC_CLK_TCK'))"
}

proc_cpu_s() { # the agent's user + system CPU seconds, all threads
    python3 -c "import os; f=open('/proc/$pid/stat').read().rsplit(')', 1)[1].split(); print((int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK'))"
}

bench() { # label, then rutomq-bench arguments
    local label=$1
    shift
    "$bin/rutomq-bench" produce --bootstrap "127.0.0.1:$port" --out "$work/$label.json" "$@" >"$work/$label.out" 2>&1 ||
        { tail -20 "$work/$label.out"; exit 1; }
}

p() { # figure from a bench JSON: file, python expression on r
    python3 -c "import json,sys; r=json.load(open('$1')); print($2)"
}

echo "compaction bench: backlog ${backlog_s} s at ${backlog_rate} records/s, probes ${rate} records/s for ${probe_s} s; work dir $work"
start_agent --compaction-interval-ms 3600000
bench backlog --create --topic cmp --keyed --duration "$backlog_s" --rate "$backlog_rate" \
    --topic-config cleanup.policy=compact --topic-config min.cleanable.dirty.ratio=0.01
backlog_mib=$(p "$work/backlog.json" "round(r['records'] * 1024 / 1048576)")
echo "backlog: $backlog_mib MiB of keyed records in 'cmp' ($(p "$work/backlog.json" "round(r['mib_per_sec'])") MiB/s)"
bench idle --create --topic plain --duration "$probe_s" --rate "$rate"
stop_agent

start_agent --compaction-interval-ms 1000
t0=$(date +%s.%N)
cpu0=$(proc_cpu_s)
# Until every gauged partition is clean (or 10 minutes), beside probe B.
(
    for _ in $(seq 1200); do
        set -- $(max_dirty)
        if [[ "$1" -gt 0 ]] && python3 -c "import sys; sys.exit(0 if $2 < 0.05 else 1)"; then
            echo "$(date +%s.%N) $(proc_cpu_s) $(compactor_cpu_s)" >"$work/clean"
            exit 0
        fi
        sleep 0.5
    done
) &
watcher=$!
bench busy --topic plain --duration "$probe_s" --rate "$rate"
read_during=$(metric rutomq_compaction_read_bytes_total)
wait "$watcher"
[[ -s "$work/clean" ]] || { echo "the partitions were not clean after 10 minutes"; exit 1; }
read -r t1 cpu1 cpu < "$work/clean"
read_bytes=$(metric rutomq_compaction_read_bytes_total)
removed=$(metric rutomq_compaction_removed_bytes_total)
passes=$(metric rutomq_compaction_passes_total)
wall=$(python3 -c "print(round($t1 - $t0, 1))")
read_mib=$(python3 -c "print(round($read_bytes / 1048576))")

echo
echo "| figure | value |"
echo "|---|---|"
echo "| dirty backlog produced | $backlog_mib MiB (8 partitions) |"
echo "| compaction passes | $passes |"
echo "| bytes the passes read | $read_mib MiB ($(python3 -c "print(round($read_during / 1048576))") MiB of it during probe B) |"
echo "| bytes removed from the logs | $(python3 -c "print(round($removed / 1048576))") MiB |"
echo "| compactor thread CPU (decompress, hash, rebuild, compress) | $cpu s |"
echo "| compaction per core of compactor CPU | $(python3 -c "print(round($read_bytes / 1048576 / max($cpu, 0.01)))") MiB/s |"
echo "| compaction per second of wall time (restart to clean) | $(python3 -c "print(round($read_bytes / 1048576 / $wall))") MiB/s over $wall s |"
echo "| agent CPU from restart to clean (compactor, its object reads and uploads, PostgreSQL client, and probe B's produce) | $(python3 -c "print(round($cpu1 - $cpu0, 2))") s |"
for l in idle busy; do
    echo "| produce $rate records/s, compactor $( [[ $l == idle ]] && echo idle || echo working ): p50 / p99 / p99.9 | $(p "$work/$l.json" "'%.2f / %.2f / %.2f ms' % (r['latency_ms']['p50'], r['latency_ms']['p99'], r['latency_ms']['p999'])") |"
done
echo
echo "command: benches/compaction.sh $backlog_s $rate $probe_s $backlog_rate (git $(git -C "$repo" rev-parse --short HEAD), $(nproc) cores)"
