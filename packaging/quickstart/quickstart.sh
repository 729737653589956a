#!/usr/bin/env bash
# The quick start without containers: a PostgreSQL server, an S3-compatible
# server (s3s-fs, Apache-2.0, built from crates.io; it keeps objects as files,
# so a restart loses nothing) and one rutomq agent pointed at both with s3://,
# all on loopback, all under one directory.
#
#   packaging/quickstart/quickstart.sh start   start the three (idempotent)
#   packaging/quickstart/quickstart.sh demo    create a topic, produce, consume
#   packaging/quickstart/quickstart.sh stop    stop them (the directory stays)
#   packaging/quickstart/quickstart.sh tools   only build the S3 server
#
# Environment (defaults in brackets):
#   QS_DIR [./rutomq-quickstart]   where everything lives (data, objects, logs)
#   QS_KAFKA_PORT [9092]  QS_HTTP_PORT [8080]  QS_S3_PORT [9000]  QS_PG_PORT [5433]
#   RUTOMQ_BIN [target/release/rutomq, else rutomq on PATH]
#   QS_TOOLS [$QS_DIR/tools]   where `cargo install` puts s3s-fs
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
QS_DIR=$(realpath -m "${QS_DIR:-./rutomq-quickstart}")
KAFKA_PORT=${QS_KAFKA_PORT:-9092}
HTTP_PORT=${QS_HTTP_PORT:-8080}
S3_PORT=${QS_S3_PORT:-9000}
PG_PORT=${QS_PG_PORT:-5433}
QS_TOOLS=$(realpath -m "${QS_TOOLS:-$QS_DIR/tools}")
S3S_FS_VERSION=0.14.1
BUCKET=rutomq
# s3s-fs checks SigV4 signatures with these.
S3_KEY=quickstart
S3_SECRET=quickstart-secret
if [ -n "${RUTOMQ_BIN:-}" ]; then
    BIN=$RUTOMQ_BIN
elif [ -x "$REPO/target/release/rutomq" ]; then
    BIN=$REPO/target/release/rutomq
else
    BIN=$(command -v rutomq || true)
fi

say() { echo "==> $*"; }
die() { echo "error: $*" >&2; exit 1; }

pg_bindir() {
    local d
    for d in "$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/initdb)")" \
        "$(pg_config --bindir 2>/dev/null || true)" $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && { echo "$d"; return; }
    done
    die "no PostgreSQL server binaries (initdb, pg_ctl): apt-get install postgresql (or dnf install postgresql-server)"
}

# PostgreSQL refuses to run as root: as root, the cluster belongs to `postgres`.
as_pg() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

wait_for() { # what, seconds, command...
    local what=$1 secs=$2; shift 2
    for _ in $(seq $((secs * 5))); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    die "$what did not come up in ${secs}s (logs in $QS_DIR/logs)"
}

start_postgres() {
    local bin; bin=$(pg_bindir)
    local data=$QS_DIR/pg
    if [ ! -f "$data/PG_VERSION" ]; then
        say "PostgreSQL: initdb $data"
        rm -rf "$data" # an initdb that stopped half way
        mkdir -p "$data"
        if [ "$(id -u)" = 0 ]; then
            getent passwd postgres >/dev/null || die "running as root needs a 'postgres' user for the PostgreSQL server"
            chown postgres "$data"
            chmod 0700 "$data"
            runuser -u postgres -- test -x "$data" ||
                die "the postgres user cannot reach $data: as root, put QS_DIR where every user may enter (QS_DIR=/var/tmp/rutomq-quickstart)"
        fi
        as_pg "$bin/initdb" -D "$data" -U rutomq --auth=trust -E UTF8 >"$QS_DIR/logs/initdb.log" 2>&1
    fi
    if ! as_pg "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
        say "PostgreSQL: starting on 127.0.0.1:$PG_PORT"
        as_pg "$bin/pg_ctl" -D "$data" -l "$data/postgres.log" -w \
            -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $data" start >/dev/null
    fi
}

install_s3s() {
    if [ "$(cat "$QS_TOOLS/.s3s-fs.version" 2>/dev/null || true)" != "$S3S_FS_VERSION" ]; then
        command -v cargo >/dev/null || die "cargo is needed once, to build the S3 server s3s-fs"
        say "S3: cargo install s3s-fs@$S3S_FS_VERSION (crates.io, about two minutes once)"
        cargo install --locked --quiet --root "$QS_TOOLS" "s3s-fs@$S3S_FS_VERSION" --features binary
        echo "$S3S_FS_VERSION" >"$QS_TOOLS/.s3s-fs.version"
    fi
}

start_s3() {
    local s3s=$QS_TOOLS/bin/s3s-fs
    install_s3s
    # A bucket is a directory under the server's root.
    mkdir -p "$QS_DIR/s3/$BUCKET"
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$S3_PORT") 2>/dev/null; then
        say "S3: s3s-fs on 127.0.0.1:$S3_PORT, objects under $QS_DIR/s3"
        setsid "$s3s" --host 127.0.0.1 --port "$S3_PORT" --access-key "$S3_KEY" --secret-key "$S3_SECRET" \
            "$QS_DIR/s3" >"$QS_DIR/logs/s3.log" 2>&1 </dev/null &
        echo $! >"$QS_DIR/s3.pid"
        wait_for "the S3 server" 30 bash -c "exec 3<>/dev/tcp/127.0.0.1/$S3_PORT"
    fi
}

start_agent() {
    [ -n "$BIN" ] && [ -x "$BIN" ] || die "no rutomq binary: cargo build --release, or set RUTOMQ_BIN"
    if curl -sf "http://127.0.0.1:$HTTP_PORT/health/ready" >/dev/null 2>&1; then
        return
    fi
    say "rutomq: agent on 127.0.0.1:$KAFKA_PORT, objects in s3://$BUCKET/quickstart"
    mkdir -p "$QS_DIR/agent"
    RUTOMQ_POSTGRES_URL="postgresql://rutomq@127.0.0.1:$PG_PORT/postgres" \
    RUTOMQ_OBJECT_STORE="s3://$BUCKET/quickstart" \
    RUTOMQ_S3_ENDPOINT="http://127.0.0.1:$S3_PORT" \
    RUTOMQ_S3_ALLOW_HTTP=true \
    RUTOMQ_S3_REGION=us-east-1 \
    RUTOMQ_S3_ACCESS_KEY_ID=$S3_KEY \
    RUTOMQ_S3_SECRET_ACCESS_KEY=$S3_SECRET \
    RUTOMQ_LISTEN="127.0.0.1:$KAFKA_PORT" \
    RUTOMQ_HTTP="127.0.0.1:$HTTP_PORT" \
    RUTOMQ_DATA_DIR="$QS_DIR/agent" \
        setsid "$BIN" serve >"$QS_DIR/logs/agent.log" 2>&1 </dev/null &
    echo $! >"$QS_DIR/agent.pid"
    wait_for "the agent" 60 curl -sf "http://127.0.0.1:$HTTP_PORT/health/ready"
}

stop_pid() { # name, the program it must be running
    local f=$QS_DIR/$1.pid
    [ -f "$f" ] || return 0
    local pid; pid=$(cat "$f")
    # After a reboot the pid may be someone else's.
    if kill -0 "$pid" 2>/dev/null && [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(realpath -m "$2")" ]; then
        kill -TERM "$pid"
        for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    fi
    rm -f "$f"
}

case "${1:-}" in
tools)
    install_s3s
    ;;
start)
    mkdir -p "$QS_DIR/logs"
    start_postgres
    start_s3
    start_agent
    say "ready: bootstrap 127.0.0.1:$KAFKA_PORT (any Kafka client), health and metrics on http://127.0.0.1:$HTTP_PORT"
    ;;
demo)
    [ -n "$BIN" ] && [ -x "$BIN" ] || die "no rutomq binary: cargo build --release, or set RUTOMQ_BIN"
    export RUTOMQ_BROKERS="127.0.0.1:$KAFKA_PORT"
    say "rutomq topic create quickstart -p 3"
    if ! created=$("$BIN" topic create quickstart -p 3 2>&1); then
        # A second demo finds the topic there; anything else is a failure.
        grep -q TOPIC_ALREADY_EXISTS <<<"$created" || die "$created"
    fi
    echo "$created"
    say "three records in, with keys"
    printf 'alice:hello\nbob:from rutomq\ncarol:on S3\n' | "$BIN" produce quickstart --key-delimiter :
    say "and out again"
    "$BIN" consume quickstart --exit-at-end --key-delimiter ': '
    say "rutomq topic describe quickstart"
    "$BIN" topic describe quickstart
    say "objects in the bucket (s3s-fs keeps them as files)"
    (cd "$QS_DIR/s3/$BUCKET" && find quickstart -type f | sort)
    say "rutomq cluster status"
    "$BIN" cluster status --http "127.0.0.1:$HTTP_PORT"
    ;;
stop)
    stop_pid agent "$BIN"
    stop_pid s3 "$QS_TOOLS/bin/s3s-fs"
    if [ -f "$QS_DIR/pg/PG_VERSION" ]; then
        as_pg "$(pg_bindir)/pg_ctl" -D "$QS_DIR/pg" -m fast stop >/dev/null 2>&1 || true
    fi
    say "stopped (data stays in $QS_DIR)"
    ;;
*)
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
