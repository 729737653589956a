# Shell helpers the benchmark scripts share (ab.sh, ack-ab.sh, e2e-ab.sh,
# tls.sh, control-plane.sh, race.sh, rdkafka-perf.sh, scaling.sh); sourced,
# not run.
# Each script sets BENCH (the rutomq-bench binary) and DURATION before
# calling `produce_consume`.

# `rutomq-bench e2e` arguments of race.sh's end-to-end runs (and
# e2e-ab.sh's): 8 partitions of 1 KiB records, acks=all, 2 consumer
# connections long-polling at the tail, the topic created by the run.
E2E_AT_TAIL=(--partitions 8 --record-size 1024 --acks -1 --consumers 2
             --fetch-max-wait-ms 100 --create)

# free_ports N: N free TCP ports on 127.0.0.1, space-separated.
free_ports() {
    python3 -c 'import socket,sys
s=[socket.socket() for _ in range(int(sys.argv[1]))]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])' "$1"
}

# wait_ready HTTP_PORT PID LOG: waits (2 min at most) until the agent PID
# answers /health/ready; if it exits first, prints its log's tail and
# exits the script.
wait_ready() {
    local hport="$1" pid="$2" log="$3"
    for _ in $(seq 600); do
        [[ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$hport/health/ready" || true)" == 200 ]] \
            && return 0
        kill -0 "$pid" 2>/dev/null || { tail -20 "$log" >&2; exit 1; }
        sleep 0.2
    done
    echo "agent $pid not ready within 2 min" >&2
    exit 1
}

# start_fresh_agent BIN DIR [SERVE FLAGS...]: a fresh agent with embedded
# defaults, its data in DIR/data and its log in DIR/agent.log, on free ports;
# returns once it is ready, with AGENT_PID, AGENT_PORT (Kafka) and
# AGENT_HTTP_PORT set.
start_fresh_agent() {
    local bin="$1" dir="$2"
    shift 2
    read -r AGENT_PORT AGENT_HTTP_PORT <<<"$(free_ports 2)"
    mkdir -p "$dir"
    "$bin" serve --data-dir "$dir/data" --listen "127.0.0.1:$AGENT_PORT" \
        --http "127.0.0.1:$AGENT_HTTP_PORT" "$@" >"$dir/agent.log" 2>&1 </dev/null &
    AGENT_PID=$!
    wait_ready "$AGENT_HTTP_PORT" "$AGENT_PID" "$dir/agent.log"
}

# alive PID: is PID a live process (not a zombie)?
alive() {
    local st
    st="$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" || return 1
    [[ -n "$st" && "$st" != Z ]]
}

# wait_gone PID SECONDS: waits until PID is gone; 1 if it is still there.
wait_gone() {
    local i
    for ((i = 0; i < $2 * 10; i++)); do
        alive "$1" || return 0
        sleep 0.1
    done
    return 1
}

# postmaster_pid DATA_DIR: the pid of the embedded PostgreSQL of the agent
# with --data-dir DATA_DIR (first line of DATA_DIR/pg/data/postmaster.pid),
# checked against the live process's command line so a stale file never
# names a stranger. pg_ctl daemonizes it: it is not the agent's descendant,
# so CPU figures need both pids (rutomq-bench --broker-pid twice).
postmaster_pid() {
    local data="$1/pg/data" pid
    [[ -r "$data/postmaster.pid" ]] || return 1
    pid="$(head -n 1 "$data/postmaster.pid")"
    [[ "$pid" =~ ^[0-9]+$ ]] && alive "$pid" || return 1
    [[ "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" == *"$data"* ]] || return 1
    echo "$pid"
}

# stop_rutomq_agent PID [DATA_DIR]: SIGTERM the agent PID (it answers the
# produces in flight, stops its embedded PostgreSQL and exits), SIGKILL
# after 90 s; then stops a postmaster still running under DATA_DIR (fast
# shutdown, SIGQUIT after 30 s, SIGKILL after 10 more). Agents sharing
# another agent's PostgreSQL (--postgres-url) have none: give no DATA_DIR,
# and stop them before the agent that runs it.
stop_rutomq_agent() {
    local pid="$1" data="${2:-}" pg
    if alive "$pid"; then
        kill -TERM "$pid" 2>/dev/null || true
        wait_gone "$pid" 90 || kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
    [[ -n "$data" ]] || return 0
    pg="$(postmaster_pid "$data")" || return 0
    kill -INT "$pg" 2>/dev/null || true
    wait_gone "$pg" 30 && return 0
    kill -QUIT "$pg" 2>/dev/null || true
    wait_gone "$pg" 10 || kill -KILL "$pg" 2>/dev/null || true
}

# produce_consume OUT ADDR PID TOPIC [CLIENT ARGS...]: the A/B workload
# against the broker at ADDR (process PID, for its CPU): a max-rate
# produce (8 partitions, 1 KiB records, acks=all, 32 connections x
# 256-record batches, 3 s warmup, DURATION s measured) into OUT-produce.json,
# then a consume of all of it from the beginning into OUT-consume.json.
produce_consume() {
    local out="$1" addr="$2" pid="$3" topic="$4"
    shift 4
    "$BENCH" produce "$@" --bootstrap "$addr" --create --topic "$topic" --partitions 8 \
        --producers 32 --batch-records 256 --warmup 3 --duration "$DURATION" --broker-pid "$pid" \
        --out "$out-produce.json" >"$out-produce.log" 2>&1 || { tail -20 "$out-produce.log" >&2; exit 1; }
    local total
    total="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["records_total"])' "$out-produce.json")"
    "$BENCH" consume "$@" --bootstrap "$addr" --topic "$topic" --partitions 8 --from beginning \
        --records "$total" --broker-pid "$pid" --out "$out-consume.json" >"$out-consume.log" 2>&1 \
        || { tail -20 "$out-consume.log" >&2; exit 1; }
}

# run_json OUT KEY=VALUE...: one JSON line of OUT-produce.json's and
# OUT-consume.json's figures (MiB/s, produce p50/p99, MiB per broker CPU
# second, errors) with the given keys first (numbers stay numbers).
run_json() {
    local out="$1"
    shift
    python3 - "$out-produce.json" "$out-consume.json" "$@" <<'PY'
import json, sys
p, c = (json.load(open(f)) for f in sys.argv[1:3])
row = {}
for kv in sys.argv[3:]:
    k, v = kv.split("=", 1)
    try:
        row[k] = float(v)
    except ValueError:
        row[k] = v
row.update({"produce_mib_s": p["mib_per_sec"], "p50": p["latency_ms"]["p50"], "p99": p["latency_ms"]["p99"],
            "produce_mib_per_cpu_s": p["broker"]["mib_per_cpu_second_first_pid"],
            "consume_mib_s": c["mib_per_sec"],
            "consume_mib_per_cpu_s": c["broker"]["mib_per_cpu_second_first_pid"],
            "errors": p["errors"] + c["errors"]})
print(json.dumps(row))
PY
}

# A command line as text, quoting only the words that need it.
quote_cmd() {
    local w words=()
    for w in "$@"; do
        if [[ "$w" =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then words+=("$w"); else words+=("$(printf '%q' "$w")"); fi
    done
    echo "${words[*]}"
}
