#!/usr/bin/env bash
# Soak run: one rutomq agent with embedded defaults, produce and consume at
# once (rutomq-bench e2e) at a fixed rate for a long time, and report whether
# the agent's resident memory stays flat.
#
# Usage: benches/soak.sh [RATE_RECORDS_PER_S] [SECONDS] [RESULT_JSON]
#   defaults: 61440 records/s (60 MiB/s of 1 KiB records), 600 s,
#             benches/results/raw/<utc>-soak-<mode>.json
# Environment:
#   SOAK_MODE=e2e|produce   e2e (default) produces and consumes at once;
#                           produce only produces
#   SOAK_BENCH_ARGS="..."   more rutomq-bench arguments, e.g.
#                           "--producers 32 --batch-records 256
#                            --topic-config retention.bytes=1073741824"
#   SOAK_SERVE_ARGS="..."   more agent arguments, e.g.
#                           "--retention-check-interval-ms 5000"
#   SOAK_DIR=/path          where the agent's data goes (default /tmp)
# Needs: cargo build --release --bin rutomq --bin rutomq-bench
# Disk: the run writes RATE x SECONDS KiB of objects (60 MiB/s for 600 s is
# about 35 GiB); the data directory is deleted at the end.
#
# Verdict: RSS after the first minute (caches filled) against RSS at the end
# and the maximum after the first minute; flat means within 10 %.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
rate="${1:-61440}"
seconds="${2:-600}"
mode="${SOAK_MODE:-e2e}"
out="${3:-$repo/benches/results/raw/$(date -u +%Y%m%dT%H%M%SZ)-soak-$mode.json}"
bin="$repo/target/release"
work="$(mktemp -d "${SOAK_DIR:-/tmp}/rq-soak.XXXX")"
chmod 755 "$work"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
hport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

pid=""
cleanup() {
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        for _ in $(seq 90); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# shellcheck disable=SC2086 # word splitting of the extra arguments is wanted
"$bin/rutomq" serve --data-dir "$work/data" --listen "127.0.0.1:$port" --http "127.0.0.1:$hport" \
    ${SOAK_SERVE_ARGS:-} >"$work/rutomq.log" 2>&1 &
pid=$!
for _ in $(seq 120); do
    curl -sf "http://127.0.0.1:$hport/health/ready" >/dev/null && break
    sleep 0.5
done
curl -sf "http://127.0.0.1:$hport/health/ready" >/dev/null || { cat "$work/rutomq.log"; exit 1; }
pg_pid=$(head -1 "$work/data/pg/data/postmaster.pid")

# Disk held by the objects, sampled every 10 s (retention must bound it).
(while kill -0 "$pid" 2>/dev/null; do
    echo "$(date +%s) $(du -sk "$work/data/objects" 2>/dev/null | cut -f1)"
    sleep 10
done >"$work/disk.txt") &
# shellcheck disable=SC2086
"$bin/rutomq-bench" "$mode" --bootstrap "127.0.0.1:$port" --create --topic soak \
    --rate "$rate" --duration "$seconds" --warmup 5 \
    --broker-pid "$pid" --broker-pid "$pg_pid" ${SOAK_BENCH_ARGS:-} \
    --metrics-url "http://127.0.0.1:$hport/metrics" --label "rutomq-soak-$mode" --out "$out"
awk 'NR == 1 {t0 = $1} {if ($2 > max) max = $2; last = $2}
     END {printf "objects on disk MiB: max %.0f, end %.0f (sampled every 10 s from %d s)\n",
          max / 1024, last / 1024, t0}' "$work/disk.txt"

python3 - "$out" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
s = r["broker"]["rss_series_kib"]
settled = s[60] if len(s) > 60 else s[0]
after = s[60:] or s
end, peak = s[-1], max(after)
print(f"RSS MiB: at 60 s {settled/1024:.0f}, end {end/1024:.0f}, max after 60 s {peak/1024:.0f}, "
      f"end/60s {end/settled:.3f}, max/60s {peak/settled:.3f}")
print("flat (within 10 %)" if peak <= settled * 1.10 and end >= settled * 0.90 else "NOT flat")
# Per-minute medians: the steady state, without the transient peaks of
# requests held while an object write stalls.
med = [sorted(s[i:i + 60])[len(s[i:i + 60]) // 2] for i in range(0, len(s) - 30, 60)]
print("RSS MiB, median per minute: " + " ".join(f"{m/1024:.0f}" for m in med))
if len(med) > 2:
    print(f"medians from minute 2 on: {min(med[1:])/med[1]:.3f}-{max(med[1:])/med[1]:.3f} of minute 2's")
EOF
