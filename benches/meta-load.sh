#!/usr/bin/env bash
# How many agents one PostgreSQL primary carries: starts a throwaway
# PostgreSQL cluster, runs rutomq-meta-load against it (simulated agents
# committing flush windows through the real commit path) and stops it.
#
#   benches/meta-load.sh RESULTS_FILE [rutomq-meta-load ARGS...]
#   benches/meta-load.sh results/meta-load.jsonl --sweep 1,2,4,8,16,32 --duration 30 --warmup 5
#
# The cluster is made like the agent's embedded one (engine/src/embedded_pg.rs:
# initdb -U rutomq --auth=trust -E UTF8 --locale=C --no-sync; shared_buffers
# 128MB, jit off, fsync and synchronous_commit at their defaults, on), but
# listens on 127.0.0.1 at a free port and allows MAX_CONNECTIONS (default 400)
# connections instead of 100: every simulated agent holds 5. Its folder is a
# fresh temporary one, removed at the end (KEEP=1 keeps it, with its log).
# The driver gets the postmaster's pid for PostgreSQL's CPU seconds. Each
# agent count's JSON line is appended to RESULTS_FILE (and shown); the
# summaries go to stderr. The driver is target/release/rutomq-meta-load
# (LOAD=path to change it); build it first:
#   cargo build --release -p rutomq-bench --bin rutomq-meta-load
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
[[ $# -ge 1 ]] || { sed -n '2,19p' "$0" >&2; exit 2; }
out="$1"
shift
LOAD="${LOAD:-$repo/target/release/rutomq-meta-load}"
MAX_CONNECTIONS="${MAX_CONNECTIONS:-400}"
[[ -x "$LOAD" ]] || { echo "meta-load.sh: no executable $LOAD (build it first)" >&2; exit 2; }

# shellcheck source=benches/lib.sh
source "$here/lib.sh"

# The server binaries, found as the agent finds them: PATH, pg_config
# --bindir, then the newest /usr/lib/postgresql/*/bin.
pg_bindir() {
    local d
    for d in "$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/x)")" \
        "$(pg_config --bindir 2>/dev/null || true)" \
        $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -t/ -k4 -n -r); do
        [[ -n "$d" && -x "$d/initdb" && -x "$d/pg_ctl" && -x "$d/postgres" ]] && { echo "$d"; return 0; }
    done
    return 1
}
bin="$(pg_bindir)" || { echo "meta-load.sh: no PostgreSQL server binaries (apt-get install postgresql)" >&2; exit 1; }

work="$(mktemp -d /tmp/rutomq-meta-load.XXXXXX)"
data="$work/data"
# PostgreSQL refuses to run as root: as root, the cluster is the postgres
# user's, as the embedded one is.
as_pg=()
if [[ "$(id -u)" == 0 ]]; then
    id postgres >/dev/null 2>&1 || { echo "meta-load.sh: running as root needs a postgres user" >&2; exit 1; }
    chown postgres: "$work"
    as_pg=(runuser -u postgres --)
fi
started=""
cleanup() {
    if [[ -n "$started" ]]; then
        "${as_pg[@]}" "$bin/pg_ctl" stop -D "$data" -m fast -w >/dev/null 2>&1 || true
    fi
    if [[ "${KEEP:-0}" == 1 ]]; then
        echo "meta-load.sh: kept $work" >&2
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT

"${as_pg[@]}" "$bin/initdb" -D "$data" -U rutomq --auth=trust -E UTF8 --locale=C --no-sync >"$work/initdb.log" 2>&1 \
    || { cat "$work/initdb.log" >&2; exit 1; }
read -r port <<<"$(free_ports 1)"
opts="-c listen_addresses=127.0.0.1 -p $port -k $work -c max_connections=$MAX_CONNECTIONS"
opts+=" -c shared_buffers=128MB -c jit=off"
started=1
"${as_pg[@]}" "$bin/pg_ctl" start -w -t 60 -D "$data" -l "$work/postgres.log" -o "$opts" >/dev/null \
    || { tail -20 "$work/postgres.log" >&2; exit 1; }
# pg_ctl start -w returned: the file is this server's.
pid="$(head -n 1 "$data/postmaster.pid")"
echo "meta-load.sh: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port, postmaster $pid" >&2

mkdir -p "$(dirname "$out")"
"$LOAD" --postgres-url "postgresql://rutomq@127.0.0.1:$port/postgres" --postgres-pid "$pid" "$@" \
    | tee -a "$out"
