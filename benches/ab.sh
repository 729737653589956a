#!/usr/bin/env bash
# Two rutomq builds, interleaved in one sitting (A B A B ...): per round and
# build, a fresh agent with embedded defaults, a max-rate produce, then a
# consume of everything from the beginning. For checking that a change did
# not move the hot paths; the machine is noisy, so read the ratio of the
# medians, not one figure.
#
#   benches/ab.sh BIN_A BIN_B [ROUNDS] [DURATION_S]
#
# The load generator is target/release/rutomq-bench (BENCH=path to change
# it); workload as benches/race.sh: 8 partitions, 1 KiB records, acks=all,
# 32 producer connections x 256-record batches. Prints one line per run and
# the medians; JSONs go to $WORK (default a temporary folder, kept).
#
# Environment (all optional):
#   FLAGS_A, FLAGS_B  extra `rutomq serve` flags of A and B (word-split); with
#                     BIN_A = BIN_B this compares two settings of one build, e.g.
#                     FLAGS_B="--inject-object-latency-ms 30 --inject-object-jitter-ms 10"
#   COLD=1            consume a second time after dropping the page cache (root)
#   PERF=1            perf record -g of the agent during each consume
#                     (WORK/LABEL-ROUND/perf-{warm,cold}.data)
# Per consume it also prints the agent's CPU seconds, MiB per agent
# CPU-second and RSS (rutomq-bench's broker fields), and what the read path
# did: GETs (of spans), GB read, read-ahead reads started and refused, read
# cache hits, reads joined while in flight (a fetch waited), whole-object use,
# Fetch requests and the partitions they answered without waiting for reads.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
[[ $# -ge 2 ]] || { sed -n '2,24p' "$0" >&2; exit 2; }
A="$1" B="$2" ROUNDS="${3:-2}" DURATION="${4:-10}"
BENCH="${BENCH:-$repo/target/release/rutomq-bench}"
for bin in "$A" "$B" "$BENCH"; do [[ -x "$bin" ]] || { echo "ab.sh: no executable $bin" >&2; exit 2; }; done
WORK="${WORK:-$(mktemp -d /tmp/rutomq-ab.XXXXXX)}"
mkdir -p "$WORK"
chmod o+x "$WORK"  # the embedded PostgreSQL runs as `postgres` when root
agent=""
trap '[[ -n "$agent" ]] && kill "$agent" 2>/dev/null; wait 2>/dev/null || true' EXIT

# shellcheck source=benches/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The read path's counters, for the deltas printed per consume.
read_metrics() {
    curl -s "http://127.0.0.1:$1/metrics" \
        | grep -E "^rutomq_(object_gets_total|object_get_bytes_total|object_span_gets_total|read_prefetches_total|read_prefetches_refused_total|read_joins_total|read_cache_hits_total|read_cache_whole_use_percent|fetch_reads_unwaited_total|request_seconds_count\\{api=\"Fetch\"\\}) " \
        || true
}

# run LABEL BIN ROUND [SERVE FLAGS...]: prints "LABEL produce_mib_s
# consume_mib_s [cold_mib_s]", then one "#" line per consume
run() {
    local label="$1" bin="$2" round="$3" dir
    shift 3
    dir="$WORK/$label-$round"
    start_fresh_agent "$bin" "$dir" "$@"
    local port="$AGENT_PORT" hport="$AGENT_HTTP_PORT"
    agent="$AGENT_PID"
    local common=(--bootstrap "127.0.0.1:$port" --partitions 8 --broker-pid "$agent")
    "$BENCH" produce "${common[@]}" --create --topic ab --producers 32 --batch-records 256 \
        --warmup 5 --duration "$DURATION" --out "$dir/produce.json" >"$dir/produce.log" 2>&1
    local total r perf
    total="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["records_total"])' "$dir/produce.json")"
    local runs=(warm)
    [[ "${COLD:-}" == 1 ]] && runs+=(cold)
    for r in "${runs[@]}"; do
        if [[ "$r" == cold ]]; then sync; echo 3 >/proc/sys/vm/drop_caches; fi
        read_metrics "$hport" >"$dir/m0-$r"
        perf=""
        if [[ "${PERF:-}" == 1 ]]; then
            perf record -g -p "$agent" -o "$dir/perf-$r.data" >/dev/null 2>&1 &
            perf=$!
            sleep 0.5
        fi
        "$BENCH" consume "${common[@]}" --topic ab --from beginning \
            --records "$total" --out "$dir/consume-$r.json" >"$dir/consume-$r.log" 2>&1
        if [[ -n "$perf" ]]; then kill -INT "$perf"; wait "$perf" || true; fi
        read_metrics "$hport" >"$dir/m1-$r"
    done
    kill "$agent"; wait "$agent" || true; agent=""
    python3 - "$label" "$dir" "${runs[@]}" <<'PY'
import json, sys
label, d, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
def load(name):
    return json.load(open(f"{d}/{name}.json"))
def metrics(path):
    return {k: float(v) for k, v in (l.split() for l in open(path) if l.strip())}
print(label, round(load("produce")["mib_per_sec"], 1),
      *(round(load(f"consume-{r}")["mib_per_sec"], 1) for r in runs))
for r in runs:
    c = load(f"consume-{r}")
    b = c.get("broker") or {}
    m0, m1 = metrics(f"{d}/m0-{r}"), metrics(f"{d}/m1-{r}")
    def delta(k):
        return m1.get(k, 0) - m0.get(k, 0)
    fetches = delta('rutomq_request_seconds_count{api="Fetch"}')
    print(f"#   {r}: agent cpu {b.get('cpu_seconds', 0):.2f} s, "
          f"{b.get('mib_per_cpu_second', 0):.0f} MiB/cpu-s, rss max {b.get('rss_max_kib', 0) // 1024} MiB; "
          f"gets {delta('rutomq_object_gets_total'):.0f} (span {delta('rutomq_object_span_gets_total'):.0f}), "
          f"{delta('rutomq_object_get_bytes_total') / 1e9:.2f} GB read, "
          f"read-ahead {delta('rutomq_read_prefetches_total'):.0f} (refused {delta('rutomq_read_prefetches_refused_total'):.0f}), "
          f"hits {delta('rutomq_read_cache_hits_total'):.0f}, joins {delta('rutomq_read_joins_total'):.0f}, "
          f"whole use {m1.get('rutomq_read_cache_whole_use_percent', float('nan')):.0f} %, "
          f"fetches {fetches:.0f} "
          f"(partitions unwaited {delta('rutomq_fetch_reads_unwaited_total'):.0f}), "
          f"errors {c.get('errors')}")
PY
    rm -rf "$dir/data"
}

results=()
for round in $(seq "$ROUNDS"); do
    for side in A B; do
        if [[ "$side" == A ]]; then bin="$A" flags="${FLAGS_A:-}"; else bin="$B" flags="${FLAGS_B:-}"; fi
        # shellcheck disable=SC2086  # FLAGS_A/FLAGS_B are word lists
        out="$(run "$side" "$bin" "$round" $flags)"
        echo "round $round: $out"
        results+=("$(head -1 <<<"$out")")
        sleep 20  # let the disk settle between runs
    done
done
printf '%s\n' "${results[@]}" | python3 -c '
import sys, statistics as st
rows = [l.split() for l in sys.stdin if l.strip()]
cols = ["produce", "consume", "consume cold"][: len(rows[0]) - 1]
med = {k: [st.median(float(r[i + 1]) for r in rows if r[0] == k) for i in range(len(cols))]
       for k in ("A", "B")}
for k in ("A", "B"):
    print(f"{k}: median " + ", ".join(f"{c} {v:.1f} MiB/s" for c, v in zip(cols, med[k])))
a, b = med["A"], med["B"]
print("B/A: " + ", ".join(f"{c} {y / x:.3f}" for c, x, y in zip(cols, a, b)))
'
echo "runs in $WORK"
