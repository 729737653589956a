#!/usr/bin/env bash
# benches/s3-cost.sh: rutomq on a real S3-compatible server (s3s-fs, from
# crates.io, which checks SigV4 signatures and keeps objects as files) with
# S3's default flush window: latency at a steady rate, requests per GiB
# (what S3 bills), and objects per hour at a trickle.
#
#   benches/s3-cost.sh OUT.json [--rate R] [--producers N] [--duration S] [--trickle-seconds S] [-- AGENT FLAGS...]
#
# Runs, each on the same agent (objects under s3://bench/objects):
#   steady    e2e at --rate records/s (1 KiB, 8 partitions): produce ack and
#             end-to-end p50/p99, PUTs per GiB written
#   trickle   e2e at 10 records/s, one record per request: objects per hour
#   read      the agent restarted (caches empty), everything consumed from
#             the beginning: GETs per GiB read
# AGENT FLAGS go to `rutomq serve` (e.g. --flush-interval-max-ms 100 to
# turn the adaptive flush off, --inject-object-latency-ms 30 for S3's
# distance). One JSON object per run, and a summary, are written to OUT.json.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
# shellcheck source=lib.sh
source "$here/lib.sh"

die() { echo "s3-cost: $*" >&2; exit 1; }
log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }

OUT="${1:-}"
[[ -n "$OUT" && "$OUT" != -* ]] || die "usage: s3-cost.sh OUT.json [--rate R] [--producers N] [--duration S] [--trickle-seconds S] [-- AGENT FLAGS...]"
shift
RATE=5000
# Enough in flight for S3's ack time: each connection holds 32 requests of
# 16 records per partition of its own; at 50,000 records/s use 16.
PRODUCERS=4
DURATION=30
TRICKLE_SECONDS=60
while (($#)); do
    case "$1" in
        --rate) RATE="$2"; shift 2 ;;
        --producers) PRODUCERS="$2"; shift 2 ;;
        --duration) DURATION="$2"; shift 2 ;;
        --trickle-seconds) TRICKLE_SECONDS="$2"; shift 2 ;;
        --) shift; break ;;
        *) die "unknown option $1" ;;
    esac
done
AGENT_FLAGS=("$@")

RUTOMQ_BIN="${RUTOMQ_BIN:-$repo/target/release/rutomq}"
BENCH="${BENCH:-$repo/target/release/rutomq-bench}"
S3S="${S3S:-$repo/tests/.cache/cargo-tools/bin/s3s-fs}"
for b in "$RUTOMQ_BIN" "$BENCH" "$S3S"; do
    [[ -x "$b" ]] || die "$b is missing (cargo build --release; s3s-fs: scripts/test.sh builds it)"
done

WORK="$(mktemp -d /tmp/rutomq-s3cost.XXXXXX)"
chmod 755 "$WORK" # the embedded PostgreSQL runs as `postgres` when we are root
S3_PID="" AGENT_PID=""
cleanup() {
    [[ -z "$AGENT_PID" ]] || stop_rutomq_agent "$AGENT_PID" "$WORK/data"
    [[ -z "$S3_PID" ]] || { kill "$S3_PID" 2>/dev/null || true; wait "$S3_PID" 2>/dev/null || true; }
    rm -rf "$WORK"
}
trap cleanup EXIT

read -r S3_PORT KPORT HPORT <<<"$(free_ports 3)"
mkdir -p "$WORK/s3/bench"
"$S3S" --host 127.0.0.1 --port "$S3_PORT" --access-key bench --secret-key bench-secret "$WORK/s3" \
    >"$WORK/s3s.log" 2>&1 &
S3_PID=$!

start_agent() {
    local cmd=("$RUTOMQ_BIN" serve --data-dir "$WORK/data" --listen "127.0.0.1:$KPORT"
        --http "127.0.0.1:$HPORT" --object-store s3://bench/objects "${AGENT_FLAGS[@]}")
    RUTOMQ_S3_ENDPOINT="http://127.0.0.1:$S3_PORT" RUTOMQ_S3_ALLOW_HTTP=true RUTOMQ_S3_REGION=us-east-1 \
        RUTOMQ_S3_ACCESS_KEY_ID=bench RUTOMQ_S3_SECRET_ACCESS_KEY=bench-secret \
        "${cmd[@]}" >>"$WORK/agent.log" 2>&1 </dev/null &
    AGENT_PID=$!
    wait_ready "$HPORT" "$AGENT_PID" "$WORK/agent.log"
    AGENT_CMD="$(quote_cmd "${cmd[@]}")"
    PG_PID="$(postmaster_pid "$WORK/data")" || die "no embedded PostgreSQL under $WORK/data"
    log "agent ready: $AGENT_CMD"
}

# bench RUN MODE ARGS...: one rutomq-bench run into $WORK/RUN.json.
bench() {
    local run="$1" mode="$2"
    shift 2
    log "$run: rutomq-bench $mode $*"
    "$BENCH" "$mode" --bootstrap "127.0.0.1:$KPORT" --broker-pid "$AGENT_PID" --broker-pid "$PG_PID" \
        --metrics-url "http://127.0.0.1:$HPORT/metrics" --label "rutomq-s3-$run" --out "$WORK/$run.json" "$@" \
        >"$WORK/$run.log" 2>&1 || { tail -20 "$WORK/$run.log" >&2; die "$run failed"; }
}

start_agent
bench steady e2e --topic steady --create --partitions 8 --producers "$PRODUCERS" --batch-records 16 \
    --rate "$RATE" --warmup 5 --duration "$DURATION" --consumers 2 --fetch-max-wait-ms 500
bench trickle e2e --topic trickle --create --partitions 1 --producers 1 --batch-records 1 \
    --in-flight 16 --rate 10 --warmup 5 --duration "$TRICKLE_SECONDS" --consumers 1 --fetch-max-wait-ms 500
stop_rutomq_agent "$AGENT_PID"
AGENT_PID=""
start_agent
total="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["records_total"])' "$WORK/steady.json")"
bench read consume --topic steady --partitions 8 --from beginning --records "$total" --consumers 2

python3 - "$OUT" "$WORK" "$AGENT_CMD" "$(quote_cmd "$0" "$OUT" --rate "$RATE" --producers "$PRODUCERS" --duration "$DURATION" \
    --trickle-seconds "$TRICKLE_SECONDS" -- "${AGENT_FLAGS[@]}")" <<'PY'
import json, sys
out, work, agent_cmd, command = sys.argv[1:5]
runs = {r: json.load(open(f"{work}/{r}.json")) for r in ("steady", "trickle", "read")}
GIB = float(1 << 30)
def m(run, key):
    return (runs[run].get("metrics") or {}).get(key, 0.0)
steady, trickle, read = runs["steady"], runs["trickle"], runs["read"]
written = m("steady", "object_put_bytes")
summary = {
    "command": command,
    "agent": agent_cmd,
    "steady_rate": steady["records_per_sec"],
    "steady_ack_ms": {k: steady["produce_ack_latency_ms"][k] for k in ("p50", "p99", "p999", "max")},
    "steady_e2e_ms": {k: steady["latency_ms"][k] for k in ("p50", "p99", "p999", "max")},
    "steady_puts_per_gib_written": m("steady", "object_puts") / (written / GIB) if written else None,
    "steady_puts_per_s": m("steady", "object_puts") / steady["seconds"],
    "steady_mean_object_kib": written / max(m("steady", "object_puts"), 1) / 1024,
    "steady_spans_per_transaction": m("steady", "spans_per_transaction"),
    "trickle_records_per_s": trickle["records_per_sec"],
    "trickle_objects_per_hour": m("trickle", "object_puts") / trickle["seconds"] * 3600,
    "trickle_transactions_per_hour": m("trickle", "commit_transactions") / trickle["seconds"] * 3600,
    "trickle_ack_ms": {k: trickle["produce_ack_latency_ms"][k] for k in ("p50", "p99", "max")},
    "trickle_e2e_ms": {k: trickle["latency_ms"][k] for k in ("p50", "p99", "max")},
    "read_mib_s": read["mib_per_sec"],
    "read_gets_per_gib_read": m("read", "object_gets") / (read["bytes"] / GIB) if read["bytes"] else None,
    "read_get_bytes_per_byte_read": m("read", "object_get_bytes") / read["bytes"] if read["bytes"] else None,
}
json.dump({"summary": summary, "runs": runs}, open(out, "w"), indent=1)
print(json.dumps(summary, indent=1))
PY
