#!/usr/bin/env bash
# What a control-plane feature costs the data path: the same max-rate
# produce and full consume on a fresh agent without it ("off") and with it
# ("on"), interleaved (off, on, on, off, ...) so drift hits both alike. Per
# run: MiB/s, produce p50/p99 and MiB per agent CPU second.
#
#   benches/control-plane.sh FEATURE [ROUNDS] [DURATION_S]
#
# FEATURE:
#   authorizer  `--authorizer acl` holding 3000 ACLs (1000 literal topics of
#               other users, 1000 prefixed topics of three prefix lengths,
#               1000 groups) besides the prefixed ALL that lets the
#               benchmark's principal (User:ANONYMOUS, on the PLAINTEXT
#               listener) at its topic, and CREATE and IDEMPOTENT_WRITE on
#               the cluster: every Produce and Fetch is decided through the
#               index.
#   quotas      10 000 client-id quota entities of other clients, and the
#               benchmark's own user (ANONYMOUS) with producer_byte_rate,
#               consumer_byte_rate and request_percentage far above what it
#               reaches: every request is measured by the agent-wide
#               sensors of its user (three of them, shared by the 32
#               connections on both shards), never throttled.
#
# Workload as benches/tls.sh: 8 partitions, 1 KiB records, acks=all, 32
# producer connections x 256-record batches. JSONs go to $WORK (default a
# temporary folder, kept); the summary is printed and written to
# $WORK/summary.md.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
FEATURE="${1:?usage: control-plane.sh authorizer|quotas [ROUNDS] [DURATION_S]}"
ROUNDS="${2:-3}" DURATION="${3:-8}"
BIN="${BIN:-$repo/target/release/rutomq}"
BENCH="${BENCH:-$repo/target/release/rutomq-bench}"
PSQL="${PSQL:-psql}"
for bin in "$BIN" "$BENCH"; do [[ -x "$bin" ]] || { echo "control-plane.sh: no executable $bin (cargo build --release)" >&2; exit 2; }; done
command -v "$PSQL" >/dev/null || { echo "control-plane.sh: needs psql (PSQL=...)" >&2; exit 2; }
WORK="${WORK:-$(mktemp -d "/tmp/rutomq-$FEATURE.XXXXXX")}"
# shellcheck source=benches/lib.sh
source "$here/lib.sh"
mkdir -p "$WORK"
chmod o+x "$WORK"  # the embedded PostgreSQL runs as `postgres` when root
agent=""
trap '[[ -n "$agent" ]] && kill "$agent" 2>/dev/null; wait 2>/dev/null || true' EXIT

case "$FEATURE" in
authorizer)
    ON_ARGS=(--authorizer acl)
    TOPIC=authz-bench  # the prefixed ALL below lets the bench at it
    DESCRIBED="--authorizer acl, 3003 ACLs"
    COUNTED=rutomq_authorization_denials_total
    IN_FORCE=rutomq_acls
    ON_SQL="
INSERT INTO acls (resource_type, resource_name, pattern_type, principal, host, operation, permission)
SELECT 2, 'other-' || i, 3, 'User:u' || i, '*', 3, 3 FROM generate_series(1, 1000) i
UNION ALL SELECT 2, repeat('t', 1 + i % 3) || '-' || i || '-', 4, 'User:u' || i, '*', 4, 3
          FROM generate_series(1, 1000) i
UNION ALL SELECT 3, 'group-' || i, 3, 'User:u' || i, '*', 3, 3 FROM generate_series(1, 1000) i
UNION ALL SELECT 2, 'authz-', 4, 'User:ANONYMOUS', '*', 2, 3
UNION ALL SELECT 4, 'kafka-cluster', 3, 'User:ANONYMOUS', '*', 5, 3
UNION ALL SELECT 4, 'kafka-cluster', 3, 'User:ANONYMOUS', '*', 12, 3;"
    ;;
quotas)
    ON_ARGS=()
    TOPIC=quota-bench
    DESCRIBED="10 003 quotas, 3 enforced on the bench's user"
    COUNTED='rutomq_quota_[a-z]*_throttles_total'
    # The sensors the bench's user was measured by (0 without quotas).
    IN_FORCE=rutomq_quota_sensors
    ON_SQL="
INSERT INTO client_quotas (user_kind, user_name, client_kind, client_name, ip_kind, ip_name, key, value)
SELECT 0, '', 2, 'other-' || i, 0, '', 'producer_byte_rate', 1048576 FROM generate_series(1, 10000) i
UNION ALL SELECT 2, 'ANONYMOUS', 0, '', 0, '', 'producer_byte_rate', 1e12
UNION ALL SELECT 2, 'ANONYMOUS', 0, '', 0, '', 'consumer_byte_rate', 1e12
UNION ALL SELECT 2, 'ANONYMOUS', 0, '', 0, '', 'request_percentage', 1e6;"
    ;;
*) echo "control-plane.sh: FEATURE is authorizer or quotas" >&2; exit 2 ;;
esac

# run LABEL ROUND: a fresh agent, produce then consume (its data removed
# afterwards); prints a JSON line.
run() {
    local label="$1" round="$2" port hport extra=()
    read -r port hport <<<"$(free_ports 2)"
    local out="$WORK/$label-$round"
    [[ "$label" == on ]] && extra=("${ON_ARGS[@]}")
    "$BIN" serve --data-dir "$out-data" --http "127.0.0.1:$hport" --listen "127.0.0.1:$port" \
        "${extra[@]}" >"$out-agent.log" 2>&1 </dev/null &
    agent=$!
    wait_ready "$hport" "$agent" "$out-agent.log"
    if [[ "$label" == on ]]; then
        "$PSQL" -q "host=$out-data/pg/run user=rutomq dbname=postgres" -c "$ON_SQL" >/dev/null
        sleep 1  # the agent reloads on the trigger's notice
    fi
    produce_consume "$out" "127.0.0.1:$port" "$agent" "$TOPIC"
    local counted in_force metrics
    metrics="$(curl -s "http://127.0.0.1:$hport/metrics")"
    counted="$(awk -v m="^$COUNTED" '$0 ~ m {s+=$2} END {print s+0}' <<<"$metrics")"
    in_force="$(awk -v m="^$IN_FORCE " '$0 ~ m {s+=$2} END {print s+0}' <<<"$metrics")"
    kill "$agent"; wait "$agent" || true; agent=""
    rm -rf "$out-data"
    run_json "$out" "label=$label" "counted=$counted" "in_force=$in_force"
}

free_gib="$(df -BG --output=avail "$WORK" | tail -1 | tr -dc 0-9)"
need=$(( DURATION * 3 + 10 ))
if (( free_gib < need )); then
    echo "control-plane.sh: $WORK has ${free_gib} GiB free; a ${DURATION} s run may write ~${need} GiB" >&2
    exit 2
fi

: >"$WORK/runs.jsonl"
for round in $(seq "$ROUNDS"); do
    order=(off on)
    (( round % 2 == 0 )) && order=(on off)
    for label in "${order[@]}"; do
        line="$(run "$label" "$round")"
        echo "round $round: $line"
        echo "$line" >>"$WORK/runs.jsonl"
        sleep 10
    done
done
python3 - "$WORK/runs.jsonl" "$FEATURE" "$ROUNDS" "$DURATION" "$DESCRIBED" "$COUNTED" "$IN_FORCE" <<'EOF' | tee "$WORK/summary.md"
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
keys = ["produce_mib_s", "p50", "p99", "produce_mib_per_cpu_s", "consume_mib_s", "consume_mib_per_cpu_s"]
feature, rounds, duration, described, counted = sys.argv[2:7]
med = {lab: {k: st.median(r[k] for r in rows if r["label"] == lab) for k in keys} for lab in ("off", "on")}
print(f"`benches/control-plane.sh {feature} {rounds} {duration}`: medians of {rounds} interleaved runs each\n")
print(f"| | without | {described} | with / without |")
print("|---|---|---|---|")
names = {"produce_mib_s": "produce MiB/s", "p50": "produce p50 ms", "p99": "produce p99 ms",
         "produce_mib_per_cpu_s": "produce MiB per agent CPU s", "consume_mib_s": "consume MiB/s",
         "consume_mib_per_cpu_s": "consume MiB per agent CPU s"}
for k in keys:
    a, b = med["off"][k], med["on"][k]
    print(f"| {names[k]} | {a:.2f} | {b:.2f} | {b / a if a else 0:.3f} |")
print(f"\nerrors: {sum(r['errors'] for r in rows)}, {counted}: {sum(r['counted'] for r in rows):.0f}")
in_force = ", ".join("%s %.0f" % (r["label"], r["in_force"]) for r in rows)
print(f"in force ({sys.argv[7]}): {in_force}")
EOF
echo "runs in $WORK"
