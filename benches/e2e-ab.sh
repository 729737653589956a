#!/usr/bin/env bash
# End-to-end latency of rutomq builds (or settings), interleaved in one
# sitting: per round and build, a fresh agent with embedded defaults and
# `rutomq-bench e2e` as race.sh's half-rate e2e row (8 producer connections,
# acks=all, 2 consumer connections at the tail, fetch max wait 100 ms, 5 s
# warm-up, 10 s measured, a new 8-partition topic). A fresh agent is the
# point: the first seconds of an agent are where memory it faults in while
# serving shows (benches/results/2026-12-07-prefault-order/).
#
#   benches/e2e-ab.sh ROUNDS NAME=BIN [NAME=BIN...]
#
# Environment (all optional): RATE records/s (125000), BATCH records per
# request (64), FANOUT readers per partition (1), FLAGS_NAME extra
# `rutomq serve` flags of NAME's agent (word-split), BENCH the load
# generator (target/release/rutomq-bench), WORK the runs' folder (default a
# temporary one, kept; data removed). Per run it prints e2e p50 / p99 / max,
# the producers' ack p99 / max, the agent's start-up prefault time and its
# RSS over the first seconds; then the medians per NAME.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
[[ $# -ge 2 ]] || { sed -n '2,18p' "$0" >&2; exit 2; }
ROUNDS="$1"
shift
RATE="${RATE:-125000}" BATCH="${BATCH:-64}" FANOUT="${FANOUT:-1}"
BENCH="${BENCH:-$repo/target/release/rutomq-bench}"
WORK="${WORK:-$(mktemp -d /tmp/rutomq-e2e-ab.XXXXXX)}"
mkdir -p "$WORK"
chmod o+x "$WORK"  # the embedded PostgreSQL runs as `postgres` when root
names=() bins=()
for spec in "$@"; do
    names+=("${spec%%=*}") bins+=("${spec#*=}")
    [[ -x "${spec#*=}" ]] || { echo "e2e-ab.sh: no executable ${spec#*=}" >&2; exit 2; }
done
[[ -x "$BENCH" ]] || { echo "e2e-ab.sh: no executable $BENCH" >&2; exit 2; }
agent=""
trap '[[ -n "$agent" ]] && kill "$agent" 2>/dev/null; wait 2>/dev/null || true' EXIT

# shellcheck source=benches/lib.sh
source "$here/lib.sh"   # start_fresh_agent, E2E_AT_TAIL

lines=()
for round in $(seq "$ROUNDS"); do
    for i in "${!names[@]}"; do
        name="${names[$i]}" dir="$WORK/${names[$i]}-$round"
        flags_var="FLAGS_$name"
        # shellcheck disable=SC2086  # FLAGS_NAME is a word list
        start_fresh_agent "${bins[$i]}" "$dir" ${!flags_var:-}
        agent="$AGENT_PID"
        "$BENCH" e2e --bootstrap "127.0.0.1:$AGENT_PORT" "${E2E_AT_TAIL[@]}" --broker-pid "$agent" \
            --producers 8 --topic e2e --batch-records "$BATCH" --rate "$RATE" --fanout "$FANOUT" \
            --duration 10 --warmup 5 --out "$dir/e2e.json" >"$dir/e2e.log" 2>&1
        kill "$agent"; wait "$agent" || true; agent=""
        line="$(python3 - "$name" "$round" "$dir" <<'PY'
import json, re, sys
name, rnd, d = sys.argv[1:]
j = json.load(open(f"{d}/e2e.json"))
e, a = j["latency_ms"], j["produce_ack_latency_ms"]
m = re.search(r"prefault_ms=(\d+)", open(f"{d}/agent.log", errors="replace").read())
rss = [k // 1024 for k in j["broker"]["rss_series_kib"][:6]]
print(f"{name} {rnd} e2e_p50 {e['p50']:.1f} e2e_p99 {e['p99']:.1f} e2e_max {e['max']:.1f} "
      f"ack_p99 {a['p99']:.1f} ack_max {a['max']:.1f} prefault_ms {m.group(1) if m else '-'} "
      f"rss_mib_first_s {','.join(map(str, rss))}")
PY
)"
        echo "$line"
        lines+=("$line")
        rm -rf "$dir/data"
        sleep 10  # let the disk settle between runs
    done
done
printf '%s\n' "${lines[@]}" | python3 -c '
import sys, statistics as st
rows = [l.split() for l in sys.stdin if l.strip()]
for name in dict.fromkeys(r[0] for r in rows):
    mine = [dict(zip(r[2::2], r[3::2])) for r in rows if r[0] == name]
    p50, p99, ack = (st.median(float(m[k]) for m in mine) for k in ("e2e_p50", "e2e_p99", "ack_p99"))
    print(f"{name}: median of {len(mine)}: e2e p50 {p50:.1f} p99 {p99:.1f} ms, ack p99 {ack:.1f} ms")
'
echo "runs in $WORK"
