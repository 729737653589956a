#!/usr/bin/env bash
# What TLS costs rutomq: an agent with a PLAINTEXT and an SSL listener (a
# test CA made here with openssl; a fresh agent per run), the same max-rate
# produce and full consume over each, interleaved in one sitting (plain,
# tls, tls, plain, ...)
# so drift hits both alike. Per run: MiB/s, produce p50/p99, and MiB per CPU
# second of the agent process (its own CPU, without PostgreSQL's): the
# throughput-per-core figure TLS must not spoil.
#
#   benches/tls.sh [ROUNDS] [DURATION_S]
#
# rutomq-bench does the client side of TLS too (rustls, the same
# ring provider), on the same 2 cores: the produce ratio includes the
# client's encryption; MiB per agent CPU second does not.
# Workload as benches/ab.sh: 8 partitions, 1 KiB records, acks=all, 32
# producer connections x 256-record batches. JSONs go to $WORK (default a
# temporary folder, kept); the summary is printed and written to
# $WORK/summary.md.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
ROUNDS="${1:-3}" DURATION="${2:-8}"
BIN="${BIN:-$repo/target/release/rutomq}"
BENCH="${BENCH:-$repo/target/release/rutomq-bench}"
for bin in "$BIN" "$BENCH"; do [[ -x "$bin" ]] || { echo "tls.sh: no executable $bin (cargo build --release)" >&2; exit 2; }; done
WORK="${WORK:-$(mktemp -d /tmp/rutomq-tls.XXXXXX)}"
mkdir -p "$WORK/certs"
chmod o+x "$WORK"  # the embedded PostgreSQL runs as `postgres` when root
agent=""
trap '[[ -n "$agent" ]] && kill "$agent" 2>/dev/null; wait 2>/dev/null || true' EXIT

# ---- certificates: a CA and a server certificate for 127.0.0.1 ----------------
(
    cd "$WORK/certs"
    key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
    openssl req -x509 "${key[@]}" -keyout ca.key -out ca.pem -days 2 -subj "/CN=rutomq bench CA" 2>/dev/null
    openssl req "${key[@]}" -keyout server.key -out server.csr -subj "/CN=localhost" 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem \
        -days 2 -extfile server.ext 2>/dev/null
)

# run LABEL ROUND: a fresh agent, produce then consume over that listener
# (its data removed afterwards: at these rates a run writes tens of GiB);
# prints a JSON line.
run() {
    local label="$1" round="$2" port tport hport addr tls=()
    read -r port tport hport <<<"$(python3 -c 'import socket
s=[socket.socket() for _ in range(3)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')"
    local out="$WORK/$label-$round"
    "$BIN" serve --data-dir "$out-data" --http "127.0.0.1:$hport" \
        --listeners "PLAINTEXT://127.0.0.1:$port,SSL://127.0.0.1:$tport" \
        --ssl-certificate-location "$WORK/certs/server.pem" --ssl-key-location "$WORK/certs/server.key" \
        >"$out-agent.log" 2>&1 </dev/null &
    agent=$!
    for _ in $(seq 600); do
        [[ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$hport/health/ready" || true)" == 200 ]] && break
        kill -0 "$agent" 2>/dev/null || { tail -20 "$out-agent.log" >&2; exit 1; }
        sleep 0.2
    done
    if [[ "$label" == tls ]]; then addr="127.0.0.1:$tport"; tls=(--tls-ca "$WORK/certs/ca.pem")
    else addr="127.0.0.1:$port"; fi
    local topic="tls-bench"
    "$BENCH" produce "${tls[@]}" --bootstrap "$addr" --create --topic "$topic" --partitions 8 \
        --producers 32 --batch-records 256 --warmup 3 --duration "$DURATION" --broker-pid "$agent" \
        --out "$out-produce.json" >"$out-produce.log" 2>&1
    local total
    total="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["records_total"])' "$out-produce.json")"
    "$BENCH" consume "${tls[@]}" --bootstrap "$addr" --topic "$topic" --partitions 8 --from beginning \
        --records "$total" --broker-pid "$agent" --out "$out-consume.json" >"$out-consume.log" 2>&1
    kill "$agent"; wait "$agent" || true; agent=""
    rm -rf "$out-data"
    python3 - "$label" "$out-produce.json" "$out-consume.json" <<'EOF2'
import json, sys
p, c = (json.load(open(f)) for f in sys.argv[2:4])
print(json.dumps({"label": sys.argv[1], "produce_mib_s": p["mib_per_sec"],
                  "p50": p["latency_ms"]["p50"], "p99": p["latency_ms"]["p99"],
                  "produce_mib_per_cpu_s": p["broker"]["mib_per_cpu_second_first_pid"],
                  "consume_mib_s": c["mib_per_sec"],
                  "consume_mib_per_cpu_s": c["broker"]["mib_per_cpu_second_first_pid"],
                  "errors": p["errors"] + c["errors"]}))
EOF2
}

free_gib="$(df -BG --output=avail "$WORK" | tail -1 | tr -dc 0-9)"
need=$(( DURATION * 3 + 10 ))  # up to ~2.5 GiB/s produced on the local object directory
if (( free_gib < need )); then
    echo "tls.sh: $WORK has ${free_gib} GiB free; a ${DURATION} s run may write ~${need} GiB" >&2
    exit 2
fi

: >"$WORK/runs.jsonl"
for round in $(seq "$ROUNDS"); do
    order=(plain tls)
    (( round % 2 == 0 )) && order=(tls plain)
    for label in "${order[@]}"; do
        line="$(run "$label" "$round")"
        echo "round $round: $line"
        echo "$line" >>"$WORK/runs.jsonl"
        sleep 10  # let the disk settle between runs
    done
done
python3 - "$WORK/runs.jsonl" "$ROUNDS" "$DURATION" <<'EOF' | tee "$WORK/summary.md"
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
keys = ["produce_mib_s", "p50", "p99", "produce_mib_per_cpu_s", "consume_mib_s", "consume_mib_per_cpu_s"]
med = {lab: {k: st.median(r[k] for r in rows if r["label"] == lab) for k in keys} for lab in ("plain", "tls")}
print(f"`benches/tls.sh {sys.argv[2]} {sys.argv[3]}`: medians of {sys.argv[2]} interleaved runs each\n")
print("| | PLAINTEXT | SSL (TLS 1.3) | SSL / PLAINTEXT |")
print("|---|---|---|---|")
names = {"produce_mib_s": "produce MiB/s", "p50": "produce p50 ms", "p99": "produce p99 ms",
         "produce_mib_per_cpu_s": "produce MiB per agent CPU s", "consume_mib_s": "consume MiB/s",
         "consume_mib_per_cpu_s": "consume MiB per agent CPU s"}
for k in keys:
    a, b = med["plain"][k], med["tls"][k]
    print(f"| {names[k]} | {a:.2f} | {b:.2f} | {b / a if a else 0:.3f} |")
print(f"\nerrors: {sum(r['errors'] for r in rows)}")
EOF
echo "runs in $WORK"
