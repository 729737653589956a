#!/usr/bin/env bash
# What TLS and SASL_SSL cost, rutomq beside Apache Kafka on the same machine
# in one sitting: each broker with a PLAINTEXT, an SSL and a SASL_SSL
# listener (one test CA and server certificate made here with openssl, the
# same for both; SASL/PLAIN with one user), a fresh broker per run, the same
# max-rate produce and full consume over one listener. Runs interleaved
# (the order rotates each round) so drift hits all alike. Per run: MiB/s,
# produce p50/p99, and MiB per CPU second of the broker process (its own
# CPU: for rutomq without PostgreSQL's, for Kafka the JVM's).
#
#   benches/tls.sh [ROUNDS] [DURATION_S] [SYSTEMS]
#
# SYSTEMS: "rutomq kafka" (default) or one of them. Kafka is
# benches/kafka/start-kafka.sh's (4.1.1 unless KAFKA_VERSION), its keystore
# the same PEM certificate and key.
#
# rutomq-bench does the client side (rustls with the ring provider, TLS 1.3;
# SASL/PLAIN on each connection) on the same 2 cores: the MiB/s ratios
# include the client's encryption; MiB per broker CPU second does not.
# Workload as benches/ab.sh: 8 partitions, 1 KiB records, acks=all, 32
# producer connections x 256-record batches. JSONs go to $WORK (default a
# temporary folder, kept); the summary is printed and written to
# $WORK/summary.md.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
ROUNDS="${1:-3}" DURATION="${2:-8}" SYSTEMS="${3:-rutomq kafka}"
BIN="${BIN:-$repo/target/release/rutomq}"
BENCH="${BENCH:-$repo/target/release/rutomq-bench}"
for bin in "$BIN" "$BENCH"; do [[ -x "$bin" ]] || { echo "tls.sh: no executable $bin (cargo build --release)" >&2; exit 2; }; done
WORK="${WORK:-$(mktemp -d /tmp/rutomq-tls.XXXXXX)}"
mkdir -p "$WORK/certs"
# shellcheck source=benches/lib.sh
source "$here/lib.sh"
chmod o+x "$WORK"  # the embedded PostgreSQL runs as `postgres` when root
USER_NAME=bench PASSWORD=bench-password
broker="" kafka_dir="" addrs=()
stop_broker() {
    if [[ -n "$kafka_dir" ]]; then
        "$here/kafka/start-kafka.sh" --stop "$kafka_dir" >/dev/null 2>&1 || true
        rm -rf "$kafka_dir"; kafka_dir=""
    elif [[ -n "$broker" ]]; then
        kill "$broker" 2>/dev/null || true; wait "$broker" 2>/dev/null || true
    fi
    broker=""
}
trap stop_broker EXIT

# ---- certificates: a CA and a server certificate for 127.0.0.1 ----------------
(
    cd "$WORK/certs"
    key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
    openssl req -x509 "${key[@]}" -keyout ca.key -out ca.pem -days 2 -subj "/CN=rutomq bench CA" 2>/dev/null
    openssl req "${key[@]}" -keyout server.key -out server.csr -subj "/CN=localhost" 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem \
        -days 2 -extfile server.ext 2>/dev/null
    # Kafka's PEM keystore: the (unencrypted PKCS#8) key, then the chain.
    cat server.key server.pem >kafka-keystore.pem
)

# start_rutomq OUT: an agent with the three listeners and the bench user;
# sets broker and addrs (PLAINTEXT, SSL, SASL_SSL).
start_rutomq() {
    local out="$1" port sport aport hport
    read -r port sport aport hport <<<"$(free_ports 4)"
    "$BIN" serve --data-dir "$out-data" --http "127.0.0.1:$hport" \
        --listeners "PLAINTEXT://127.0.0.1:$port,SSL://127.0.0.1:$sport,SASL_SSL://127.0.0.1:$aport" \
        --ssl-certificate-location "$WORK/certs/server.pem" --ssl-key-location "$WORK/certs/server.key" \
        --sasl-enabled-mechanisms PLAIN >"$out-agent.log" 2>&1 </dev/null &
    broker=$!
    wait_ready "$hport" "$broker" "$out-agent.log"
    "$BIN" user add "$USER_NAME" --password "$PASSWORD" --data-dir "$out-data" >>"$out-agent.log" 2>&1
    sleep 1  # the agent reloads its credentials on PostgreSQL's notice
    addrs=("127.0.0.1:$port" "127.0.0.1:$sport" "127.0.0.1:$aport")
}

# start_kafka OUT: the same three listeners on Apache Kafka (sets broker,
# kafka_dir and addrs).
start_kafka() {
    local out="$1" port cport sport aport
    read -r port cport sport aport <<<"$(free_ports 4)"
    kafka_dir="$out-kafka"
    KAFKA_CONTROLLER_PORT="$cport" KAFKA_EXTRA_PROPS="
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport,SSL://127.0.0.1:$sport,SASL_SSL://127.0.0.1:$aport
advertised.listeners=PLAINTEXT://127.0.0.1:$port,SSL://127.0.0.1:$sport,SASL_SSL://127.0.0.1:$aport
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL
ssl.keystore.type=PEM
ssl.keystore.location=$WORK/certs/kafka-keystore.pem
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$USER_NAME=\"$PASSWORD\";
num.partitions=8" \
        "$here/kafka/start-kafka.sh" "$port" "$kafka_dir" >"$out-kafka-start.log" 2>&1 \
        || { cat "$out-kafka-start.log" >&2; exit 1; }
    broker="$(cat "$kafka_dir/kafka.pid")"
    addrs=("127.0.0.1:$port" "127.0.0.1:$sport" "127.0.0.1:$aport")
}

# run SYSTEM PROTOCOL ROUND: a fresh broker, produce then consume over
# that listener (its data removed afterwards); appends a JSON line to
# runs.jsonl and prints it.
run() {
    local system="$1" protocol="$2" round="$3" addr client=()
    local out="$WORK/$system-$protocol-$round"
    if [[ "$system" == kafka ]]; then start_kafka "$out"; else start_rutomq "$out"; fi
    case "$protocol" in
        plaintext) addr="${addrs[0]}" ;;
        ssl) addr="${addrs[1]}"; client=(--tls-ca "$WORK/certs/ca.pem") ;;
        sasl_ssl) addr="${addrs[2]}"; client=(--tls-ca "$WORK/certs/ca.pem" --sasl-plain "$USER_NAME:$PASSWORD") ;;
    esac
    produce_consume "$out" "$addr" "$broker" tls-bench "${client[@]}"
    stop_broker
    rm -rf "$out-data"
    run_json "$out" "system=$system" "protocol=$protocol" | tee -a "$WORK/runs.jsonl"
}

free_gib="$(df -BG --output=avail "$WORK" | tail -1 | tr -dc 0-9)"
need=$(( DURATION * 3 + 10 ))  # up to ~2.5 GiB/s produced on the local object directory
if (( free_gib < need )); then
    echo "tls.sh: $WORK has ${free_gib} GiB free; a ${DURATION} s run may write ~${need} GiB" >&2
    exit 2
fi
[[ "$SYSTEMS" == *kafka* ]] && "$here/kafka/start-kafka.sh" --fetch >/dev/null

combos=()
for system in $SYSTEMS; do for protocol in plaintext ssl sasl_ssl; do combos+=("$system $protocol"); done; done
: >"$WORK/runs.jsonl"
for round in $(seq "$ROUNDS"); do
    n=${#combos[@]}
    for i in $(seq 0 $(( n - 1 ))); do
        # Rotate the order each round.
        read -r system protocol <<<"${combos[$(( (i + round - 1) % n ))]}"
        echo -n "round $round: "
        run "$system" "$protocol" "$round"
        sleep 10  # let the disk settle between runs
    done
done
python3 - "$WORK/runs.jsonl" "$ROUNDS" "$DURATION" "$SYSTEMS" <<'EOF' | tee "$WORK/summary.md"
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rounds, duration, systems = sys.argv[2], sys.argv[3], sys.argv[4].split()
keys = ["produce_mib_s", "p50", "p99", "produce_mib_per_cpu_s", "consume_mib_s", "consume_mib_per_cpu_s"]
names = {"produce_mib_s": "produce MiB/s", "p50": "produce p50 ms", "p99": "produce p99 ms",
         "produce_mib_per_cpu_s": "produce MiB per broker CPU s", "consume_mib_s": "consume MiB/s",
         "consume_mib_per_cpu_s": "consume MiB per broker CPU s"}
protocols = ["plaintext", "ssl", "sasl_ssl"]
med = {(s, p): {k: st.median(r[k] for r in rows if r["system"] == s and r["protocol"] == p) for k in keys}
       for s in systems for p in protocols}
print(f"`benches/tls.sh {rounds} {duration} \"{' '.join(systems)}\"`: medians of {rounds} interleaved runs each\n")
head = [f"{s} {p}" for s in systems for p in protocols]
print("| | " + " | ".join(head) + " |")
print("|---|" + "---|" * len(head))
for k in keys:
    print(f"| {names[k]} | " + " | ".join(f"{med[(s, p)][k]:.1f}" for s in systems for p in protocols) + " |")
print("\nEach protocol against the same broker's PLAINTEXT:\n")
head = [f"{s} {p} / plaintext" for s in systems for p in protocols[1:]]
print("| | " + " | ".join(head) + " |")
print("|---|" + "---|" * len(head))
for k in keys:
    cells = []
    for s in systems:
        for p in protocols[1:]:
            a, b = med[(s, "plaintext")][k], med[(s, p)][k]
            cells.append(f"{b / a if a else 0:.3f}")
    print(f"| {names[k]} | " + " | ".join(cells) + " |")
if len(systems) == 2:
    print(f"\nrutomq / kafka, protocol by protocol:\n")
    print("| | " + " | ".join(protocols) + " |")
    print("|---|---|---|---|")
    for k in keys:
        cells = []
        for p in protocols:
            a, b = med[("kafka", p)][k], med[("rutomq", p)][k]
            cells.append(f"{b / a if a else 0:.3f}")
        print(f"| {names[k]} | " + " | ".join(cells) + " |")
print(f"\nerrors: {sum(r['errors'] for r in rows)}")
EOF
echo "runs in $WORK"
