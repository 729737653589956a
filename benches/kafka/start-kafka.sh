#!/usr/bin/env bash
# Start (or stop) a real Apache Kafka broker: one node in KRaft combined mode
# (broker + controller) on 127.0.0.1, with jars fetched from Maven Central.
# Used to validate the test clients against the reference implementation and
# by the benchmarks to race rutomq against Kafka on the same machine.
#
# Usage:
#   benches/kafka/start-kafka.sh PORT DATA_DIR     start in the background; prints
#                                                   "READY bootstrap=127.0.0.1:PORT pid=PID"
#                                                   once the broker serves, exit 0
#   benches/kafka/start-kafka.sh --stop DATA_DIR   stop the broker started on DATA_DIR
#   benches/kafka/start-kafka.sh --fetch           only fetch the jars
#
# Environment (all optional):
#   KAFKA_VERSION          org.apache.kafka:kafka_2.13 version (default 4.1.1)
#   KAFKA_LIBS             jar folder (default <repo>/tests/.cache/kafka/libs-VERSION,
#                          one per version, so switching versions fetches once each)
#   KAFKA_CONTROLLER_PORT  KRaft controller listener port (default PORT+1)
#   KAFKA_HEAP             JVM heap, e.g. 1g (default 1g)
#   KAFKA_EXTRA_PROPS      extra server.properties lines, appended last (they win)
#   KAFKA_READY_TIMEOUT_S  seconds to wait for readiness (default 120)
#
# DATA_DIR holds server.properties, log4j2.properties, the logs (server.log,
# kafka.out), the partition data (DATA_DIR/data) and kafka.pid. A DATA_DIR that
# was formatted before is reused as is (restart keeps the data); remove it for
# a fresh broker.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
KAFKA_LIBS="${KAFKA_LIBS:-$repo/tests/.cache/kafka/libs-$KAFKA_VERSION}"
KAFKA_HEAP="${KAFKA_HEAP:-1g}"
KAFKA_READY_TIMEOUT_S="${KAFKA_READY_TIMEOUT_S:-120}"

die() { echo "start-kafka: $*" >&2; exit 1; }

fetch() {
    # Re-fetch only when the folder holds another version (or nothing).
    mkdir -p "$(dirname "$KAFKA_LIBS")"
    exec 9>"$(dirname "$KAFKA_LIBS")/.fetch.lock"
    flock 9
    if [[ -f "$KAFKA_LIBS/.version" && "$(cat "$KAFKA_LIBS/.version")" == "$KAFKA_VERSION" ]]; then
        exec 9>&-
        return 0
    fi
    echo "start-kafka: fetching kafka_2.13 $KAFKA_VERSION into $KAFKA_LIBS" >&2
    rm -rf "$KAFKA_LIBS"
    local log="$(dirname "$KAFKA_LIBS")/fetch-$KAFKA_VERSION.log"
    mvn -B -q -Dstyle.color=never -f "$here/pom.xml" dependency:copy-dependencies \
        -Dkafka.version="$KAFKA_VERSION" -DoutputDirectory="$KAFKA_LIBS" >"$log" 2>&1 \
        || { cat "$log" >&2; die "mvn dependency:copy-dependencies failed"; }
    ls "$KAFKA_LIBS"/kafka_2.13-"$KAFKA_VERSION".jar >/dev/null || die "kafka_2.13 jar missing after fetch"
    echo "$KAFKA_VERSION" >"$KAFKA_LIBS/.version"
    exec 9>&-
}

# Is PID alive and the broker started on DATA_DIR (so we never signal a stranger)?
is_our_broker() {
    local pid="$1" data="$2"
    [[ -r "/proc/$pid/cmdline" ]] || return 1
    local cmd
    cmd="$(tr '\0' ' ' <"/proc/$pid/cmdline")"
    [[ "$cmd" == *kafka.Kafka* && "$cmd" == *"$data/server.properties"* ]]
}

stop() {
    local data
    data="$(cd "$1" 2>/dev/null && pwd)" || { echo "start-kafka: no such data dir $1" >&2; return 0; }
    local pidfile="$data/kafka.pid"
    [[ -f "$pidfile" ]] || { echo "start-kafka: not running (no $pidfile)"; return 0; }
    local pid
    pid="$(cat "$pidfile")"
    if ! is_our_broker "$pid" "$data"; then
        echo "start-kafka: pid $pid is not running a broker on $data"
        rm -f "$pidfile"
        return 0
    fi
    kill -TERM "$pid"
    for _ in $(seq 1 300); do
        is_our_broker "$pid" "$data" || { rm -f "$pidfile"; echo "STOPPED pid=$pid"; return 0; }
        sleep 0.1
    done
    echo "start-kafka: pid $pid did not stop in 30 s; sending KILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.5
    rm -f "$pidfile"
    echo "STOPPED pid=$pid (killed)"
}

port_open() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start() {
    local port="$1" data
    [[ "$port" =~ ^[0-9]+$ ]] || die "PORT must be a number, got $port"
    mkdir -p "$2"
    data="$(cd "$2" && pwd)"
    local cport="${KAFKA_CONTROLLER_PORT:-$((port + 1))}"
    command -v java >/dev/null || die "java not found (Kafka 4.x needs Java 17+)"

    if [[ -f "$data/kafka.pid" ]] && is_our_broker "$(cat "$data/kafka.pid")" "$data"; then
        die "a broker already runs on $data (pid $(cat "$data/kafka.pid")); stop it first"
    fi
    port_open "$port" && die "port $port is already in use"
    port_open "$cport" && die "controller port $cport is already in use"

    fetch

    cat >"$data/server.properties" <<EOF
# Written by benches/kafka/start-kafka.sh: one KRaft node, broker + controller.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$data/data
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
${KAFKA_EXTRA_PROPS:-}
EOF

    cat >"$data/log4j2.properties" <<EOF
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $data/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = WARN
EOF

    local jvm=(-Xms"$KAFKA_HEAP" -Xmx"$KAFKA_HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20
               -Djava.awt.headless=true -Dlog4j2.configurationFile="$data/log4j2.properties")

    if [[ ! -f "$data/data/meta.properties" ]]; then
        local cluster_id
        cluster_id="$(java -cp "$KAFKA_LIBS/*" -Dlog4j2.configurationFile="$data/log4j2.properties" \
            kafka.tools.StorageTool random-uuid)"
        echo "$cluster_id" >"$data/cluster.id"
        java -cp "$KAFKA_LIBS/*" -Dlog4j2.configurationFile="$data/log4j2.properties" \
            kafka.tools.StorageTool format -t "$cluster_id" -c "$data/server.properties" --standalone \
            >"$data/format.out" 2>&1 || { cat "$data/format.out" >&2; die "storage format failed"; }
    fi

    # setsid: the broker survives the caller's shell and its job control.
    setsid nohup java "${jvm[@]}" -cp "$KAFKA_LIBS/*" kafka.Kafka "$data/server.properties" \
        >"$data/kafka.out" 2>&1 </dev/null &
    local pid=$!
    echo "$pid" >"$data/kafka.pid"

    local deadline=$((SECONDS + KAFKA_READY_TIMEOUT_S))
    while true; do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 40 "$data/kafka.out" "$data/server.log" >&2 2>/dev/null || true
            rm -f "$data/kafka.pid"
            die "broker exited during start-up (logs in $data)"
        fi
        if grep -q "Kafka Server started" "$data/server.log" 2>/dev/null && port_open "$port"; then
            break
        fi
        if ((SECONDS > deadline)); then
            tail -n 40 "$data/server.log" >&2 2>/dev/null || true
            die "broker not ready after $KAFKA_READY_TIMEOUT_S s (pid $pid still running; stop with --stop $data)"
        fi
        sleep 0.2
    done
    echo "READY bootstrap=127.0.0.1:$port pid=$pid version=$KAFKA_VERSION data=$data"
}

case "${1:-}" in
    --stop) [[ $# -eq 2 ]] || die "usage: $0 --stop DATA_DIR"; stop "$2" ;;
    --fetch) fetch; echo "FETCHED $KAFKA_VERSION $KAFKA_LIBS" ;;
    -h|--help|"") sed -n '2,25p' "$0"; [[ $# -gt 0 ]] ;;
    *) [[ $# -eq 2 ]] || die "usage: $0 PORT DATA_DIR | --stop DATA_DIR | --fetch"; start "$1" "$2" ;;
esac
