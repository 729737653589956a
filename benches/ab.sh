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
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
[[ $# -ge 2 ]] || { sed -n '2,13p' "$0" >&2; exit 2; }
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

# run LABEL BIN ROUND: prints "LABEL produce_mib_s consume_mib_s"
run() {
    local label="$1" bin="$2" round="$3" port hport dir
    read -r port hport <<<"$(free_ports 2)"
    dir="$WORK/$label-$round"
    mkdir -p "$dir"
    "$bin" serve --data-dir "$dir/data" --listen "127.0.0.1:$port" --http "127.0.0.1:$hport" \
        >"$dir/agent.log" 2>&1 </dev/null &
    agent=$!
    wait_ready "$hport" "$agent" "$dir/agent.log"
    "$BENCH" produce --bootstrap "127.0.0.1:$port" --create --topic ab --partitions 8 \
        --producers 32 --batch-records 256 --warmup 5 --duration "$DURATION" \
        --out "$dir/produce.json" >"$dir/produce.log" 2>&1
    local total
    total="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["records_total"])' "$dir/produce.json")"
    "$BENCH" consume --bootstrap "127.0.0.1:$port" --topic ab --partitions 8 --from beginning \
        --records "$total" --out "$dir/consume.json" >"$dir/consume.log" 2>&1
    kill "$agent"; wait "$agent" || true; agent=""
    python3 - "$label" "$dir/produce.json" "$dir/consume.json" <<'EOF'
import json, sys
def mib(path):
    return json.load(open(path))["mib_per_sec"]
print(sys.argv[1], round(mib(sys.argv[2]), 1), round(mib(sys.argv[3]), 1))
EOF
    rm -rf "$dir/data"
}

results=()
for round in $(seq "$ROUNDS"); do
    for pair in "A $A" "B $B"; do
        set -- $pair
        line="$(run "$1" "$2" "$round")"
        echo "round $round: $line"
        results+=("$line")
        sleep 20  # let the disk settle between runs
    done
done
printf '%s\n' "${results[@]}" | python3 -c '
import sys, statistics as st
rows = [l.split() for l in sys.stdin if l.strip()]
med = {k: [st.median(float(r[i]) for r in rows if r[0] == k) for i in (1, 2)] for k in ("A", "B")}
for k in ("A", "B"):
    print(f"{k}: median produce {med[k][0]:.1f} MiB/s, consume {med[k][1]:.1f} MiB/s")
a, b = med["A"], med["B"]
print(f"B/A: produce {b[0] / a[0]:.3f}, consume {b[1] / a[1]:.3f}")
'
echo "runs in $WORK"
