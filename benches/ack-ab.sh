#!/usr/bin/env bash
# librdkafka's produce ack latency against rutomq builds (or settings),
# interleaved in one sitting: per round and build, a fresh agent with
# embedded defaults and `benches/rdkafka-perf.sh produce` at a fixed rate
# (rdkafka_performance: 1 KiB records, 8 partitions, acks=all, idempotent,
# linger.ms=5, the first second left out), as race.sh's librdkafka ack rows.
#
#   benches/ack-ab.sh ROUNDS RATE SECONDS NAME=BIN [NAME=BIN...]
#
# FLAGS_NAME (e.g. FLAGS_B="--flush-when-idle false") adds `rutomq serve`
# flags to NAME's agent; CLIENT_NICE=19 lowers the CPU priority of the
# client's main thread (the one spinning while it paces) from second 3 on.
# Per run it prints the client's latency quantiles, and, from second 3 to
# one second before the end: the agent's mean Produce request time and
# flush-window stage times (/metrics), its idle seals, the histogram bucket
# bounds (ms) the p99 of its Produce requests and of its upload and commit
# stages lie under, the share of the time some task of the VM waited for
# I/O (/proc/pressure/io "some"; the agent's and PostgreSQL's own syncs
# count: ~90 % when every window syncs), the CPU of each thread of the
# agent, the client and PostgreSQL (% of one core; the 2-core VM is shared
# by all of them) and the time the most delayed of them waited runnable for
# a CPU (% of the run, schedstat). Then the medians per NAME.
# Runs go to $WORK (default a temporary folder, kept; data removed).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ $# -ge 4 ]] || { sed -n '2,23p' "$0" >&2; exit 2; }
ROUNDS="$1" RATE="$2" SECS="$3"
shift 3
((SECS >= 6)) || { echo "ack-ab.sh: SECONDS must be at least 6" >&2; exit 2; }
WORK="${WORK:-$(mktemp -d /tmp/rutomq-ack-ab.XXXXXX)}"
mkdir -p "$WORK"
chmod o+x "$WORK"  # the embedded PostgreSQL runs as `postgres` when root
agent=""
trap '[[ -n "$agent" ]] && kill "$agent" 2>/dev/null; wait 2>/dev/null || true' EXIT

# shellcheck source=benches/lib.sh
source "$here/lib.sh"

# Per-thread CPU ticks and run-queue wait (ns, /proc/.../schedstat) of the
# agent (pid $1), its PostgreSQL (postmaster pid $2 and its children) and
# the client: "comm pid ticks wait_ns".
threads() {
    local p t
    for p in "$1" "$2" $(pgrep -P "$2" || true) $(pgrep -f rdkafka_performance || true); do
        for t in /proc/"$p"/task/*; do
            printf '%s %s %s %s\n' "$(tr ' ' _ <"$t/comm" 2>/dev/null)" "$p" \
                "$(awk '{print $14 + $15}' "$t/stat" 2>/dev/null || echo 0)" \
                "$(awk '{print $2}' "$t/schedstat" 2>/dev/null || echo 0)"
        done
    done
}

# run NAME BIN ROUND [SERVE FLAGS...]: one line of results
run() {
    local name="$1" bin="$2" round="$3" dir client
    shift 3
    dir="$WORK/$name-$round"
    mkdir -p "$dir/out"
    start_fresh_agent "$bin" "$dir" "$@"
    local port="$AGENT_PORT" hport="$AGENT_HTTP_PORT" pg
    agent="$AGENT_PID"
    pg="$(postmaster_pid "$dir/data")"
    "$here/rdkafka-perf.sh" --out-dir "$dir/out" --name ack --create \
        produce "127.0.0.1:$port" "ack-$RATE" "$RATE" "$SECS" >"$dir/out/ack.json" 2>"$dir/out/stderr.txt" &
    client=$!
    sleep 3
    if [[ -n "${CLIENT_NICE:-}" ]]; then
        # shellcheck disable=SC2046  # one pid per word
        renice -n "$CLIENT_NICE" -p $(pgrep -f rdkafka_performance) >/dev/null
    fi
    threads "$agent" "$pg" >"$dir/cpu0"; curl -s "http://127.0.0.1:$hport/metrics" >"$dir/m0"
    cat /proc/pressure/io >"$dir/io0" 2>/dev/null || true
    sleep $((SECS - 4))
    threads "$agent" "$pg" >"$dir/cpu1"; curl -s "http://127.0.0.1:$hport/metrics" >"$dir/m1"
    cat /proc/pressure/io >"$dir/io1" 2>/dev/null || true
    wait "$client"
    kill "$agent"; wait "$agent" || true; agent=""
    rm -rf "$dir/data"
    python3 - "$name" "$dir" $((SECS - 4)) "$(getconf CLK_TCK)" <<'PY'
import collections, json, re, sys
name, d, secs, hz = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
lat = json.load(open(f"{d}/out/ack.json"))["latency_ms"]
def scrape(path):
    out = {}
    for line in open(path):
        m = re.match(r"(\S+?)(_sum|_count)?(\{[^}]*\})? (\S+)$", line.strip())
        if m and not line.startswith("#"):
            out[(m.group(1), m.group(3) or "", m.group(2) or "")] = float(m.group(4))
    return out
m0, m1 = scrape(f"{d}/m0"), scrape(f"{d}/m1")
def mean_ms(metric, labels):
    s = m1.get((metric, labels, "_sum"), 0) - m0.get((metric, labels, "_sum"), 0)
    n = m1.get((metric, labels, "_count"), 0) - m0.get((metric, labels, "_count"), 0)
    return 1000 * s / n if n else float("nan")
def stage(st):
    return mean_ms("rutomq_window_stage_seconds", '{stage="%s"}' % st)
stages = " ".join("%s %.2f" % (st, stage(st)) for st in ("upload", "commit", "queued", "gather"))
produce = mean_ms("rutomq_request_seconds", '{api="Produce"}')
def p99_ms(metric, label):
    """The bucket bound (ms) the run's 99th percentile lies under."""
    counts = {}
    for (name, labels, _), v in m1.items():
        le = re.search(r'le="([^"]+)"', labels)
        if name == metric + "_bucket" and label in labels and le:
            counts[float(le.group(1))] = v - m0.get((name, labels, ""), 0)
    total = counts.get(float("inf"), 0)
    bound = next((le for le, n in sorted(counts.items()) if total and n >= 0.99 * total), None)
    return "-" if bound is None else ("inf" if bound == float("inf") else "%g" % (1000 * bound))
tails = "p99<= Produce %s upload %s commit %s" % (
    p99_ms("rutomq_request_seconds", 'api="Produce"'),
    p99_ms("rutomq_window_stage_seconds", 'stage="upload"'),
    p99_ms("rutomq_window_stage_seconds", 'stage="commit"'))
def io_stalled_percent():
    """Share of the run some task of the VM waited for I/O (/proc/pressure/io)."""
    try:
        t0, t1 = (int(re.search(r"^some .*total=(\d+)", open(f"{d}/io{i}").read(), re.M).group(1))
                  for i in (0, 1))
    except (OSError, AttributeError):
        return "-"
    return "%.0f" % (100 * (t1 - t0) / 1e6 / secs)
seals = (m1.get(("rutomq_flush_idle_seals_total", "", ""), 0)
         - m0.get(("rutomq_flush_idle_seals_total", "", ""), 0))
def ticks(path, col):
    t = collections.Counter()
    for line in open(path):
        p = line.split()
        if len(p) == 4 and p[col].isdigit():
            t[(p[0], p[1])] += int(p[col])
    return t
def per_comm(col):
    c0, c1 = ticks(f"{d}/cpu0", col), ticks(f"{d}/cpu1", col)
    out = collections.Counter()
    for k, v in c1.items():
        out[k[0]] += max(0, v - c0.get(k, 0))
    return out
top = " ".join(f"{k}={100 * v / hz / secs:.0f}" for k, v in per_comm(2).most_common(8))
# Time spent runnable but waiting for a CPU (% of the run, a comm's
# threads summed): each hand-off of a window waits here on a busy box.
waits = " ".join(f"{k}={100 * v / 1e9 / secs:.0f}" for k, v in per_comm(3).most_common(6))
print(f"{name} p50 {lat['p50']:.2f} p90 {lat['p90']:.2f} p99 {lat['p99']:.2f} p999 {lat['p999']:.2f} "
      f"| agent Produce {produce:.2f} {stages} "
      f"idle_seals {seals:.0f} {tails} io_stalled% {io_stalled_percent()} | cpu% {top} "
      f"| runqueue-wait% {waits}")
PY
}

results=()
for round in $(seq "$ROUNDS"); do
    for spec in "$@"; do
        name="${spec%%=*}" bin="${spec#*=}"
        [[ -x "$bin" ]] || { echo "ack-ab.sh: no executable $bin" >&2; exit 2; }
        flags_var="FLAGS_$name"
        # shellcheck disable=SC2086  # FLAGS_NAME is a word list
        line="$(run "$name" "$bin" "$round" ${!flags_var:-})"
        echo "round $round: $line"
        results+=("$line")
    done
done
printf '%s\n' "${results[@]}" | python3 -c '
import statistics as st, sys
rows = [l.split() for l in sys.stdin if l.strip()]
for name in dict.fromkeys(r[0] for r in rows):
    mine = [r for r in rows if r[0] == name]
    def med(key):
        return st.median(float(r[r.index(key) + 1]) for r in mine)
    print("%s: median of %d: p50 %.2f p90 %.2f p99 %.2f ms, agent Produce mean %.2f ms"
          % (name, len(mine), med("p50"), med("p90"), med("p99"), med("Produce")))
'
echo "runs in $WORK"
