#!/usr/bin/env bash
# librdkafka's own benchmark program, examples/rdkafka_performance, run as a
# user would run it, with its output turned into one JSON object per run.
# Used by benches/race.sh for its librdkafka rows; runs alone too.
#
# Run `benches/rdkafka-perf.sh --help` for the modes and options; the usage
# text is in usage() below.
#
# The build: librdkafka 2.15.0 from the npm registry, as
# tests/clients/librdkafka-tests.sh takes it (@confluentinc/kafka-javascript
# 1.10.0 bundles librdkafka 2.15.0; the version is checked), configured with
# --disable-gssapi, `make libs`, then `make -C examples rdkafka_performance`
# (linked with the static librdkafka.a), into tests/.cache/rdkafka-perf-2.15.0.
# The npm package ships librdkafka without its examples/ folder, so that
# folder (rdkafka_performance.c and its Makefile) comes from the librdkafka
# bundled by the rdkafka-sys crate that this workspace already depends on
# (Cargo.lock: rdkafka-sys 4.10.0+2.12.1, i.e. examples/ of librdkafka
# 2.12.1), found in the cargo registry. The program is thus 2.12.1's
# rdkafka_performance.c compiled against and linked with librdkafka 2.15.0
# (the 2.13.0-2.15.0 changelogs name no change to it). RDKAFKA_PERF_SRC=FILE
# builds another rdkafka_performance.c instead (e.g. from a 2.15.0 checkout);
# the file used and its sha256 are recorded in every JSON.
#
# What the program measures (examples/rdkafka_performance.c):
# - produce with -l: each message's payload starts with "LATENCY:<µs>", the
#   wall clock (gettimeofday) taken just before rd_kafka_produce(); in the
#   delivery-report callback the latency is gettimeofday() minus that stamp,
#   in µs, written one per line in delivery-report order to the -A file.
#   So it is: produce() call -> librdkafka queue -> linger (5 ms here) ->
#   ProduceRequest -> broker ack (acks=all) -> response -> delivery report
#   served to the application in rd_kafka_poll(). The rate limiter (-r)
#   polls in between messages (with a 0 ms timeout when the gap is below
#   1 ms, i.e. above 1,000 msg/s: the client then spins one core), so the
#   report is served at once. A failed delivery also gets a latency sample.
# - rate (-r R): after each produce() it polls until 1/R s has passed, so
#   the achieved rate is somewhat below R (the produce() time adds up);
#   there is no duration option, so a run sends a count (-c).
# - consume (-C, -p per partition, -o beginning): the legacy (no group)
#   consumer; the clock starts at the FIRST MESSAGE RECEIVED (connection,
#   metadata and the first fetch are not in it) and stops when the count is
#   reached; "MB/s" is payload (value) bytes per µs, i.e. 10^6 bytes/s.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
version=2.15.0
npm_pkg=@confluentinc/kafka-javascript@1.10.0
hex=0x020f00ff # RD_KAFKA_VERSION of 2.15.0
cache="$repo/tests/.cache"
out="$cache/rdkafka-perf-$version"

usage() {
    cat <<EOF
Usage: benches/rdkafka-perf.sh build
       benches/rdkafka-perf.sh [OPTIONS] produce BOOTSTRAP TOPIC RATE SECONDS
       benches/rdkafka-perf.sh [OPTIONS] consume BOOTSTRAP TOPIC COUNT

librdkafka $version's examples/rdkafka_performance against a broker; prints
one JSON object on stdout (its own progress goes to stderr). Builds the
program first when needed (build: only that; prints the folder).

Modes:
  produce   1 KiB records, acks=all (-a -1), enable.idempotence=true,
            linger.ms=5, no key (librdkafka's partitioner spreads them over
            all partitions, sticky for sticky.partitioning.linger.ms),
            paced at RATE msg/s (-r) for 1 + SECONDS seconds' worth of
            messages (-c RATE*(1+SECONDS)), with per-message delivery
            latency (-l -A FILE). Reports p50/p99/p99.9/max ack latency in
            ms of the messages after the first second (the first
            "messages produced" figure of the program's 1-second stats line
            is how many are left out, counted in delivery-report order),
            the same over all messages, messages sent, delivered, failed,
            backpressure retries and error callbacks. A start-up longer
            than the first second (nothing delivered in it) is flagged,
            as its backlog then stays in the kept samples.
  consume   COUNT messages from the beginning of partitions 0..N-1 of TOPIC
            (-C -p 0 .. -p N-1 -o beginning -c COUNT -e: it also stops when
            every partition is at its end). Reports msgs/s and MiB/s as the
            program times them (from the first message received), its own
            MB/s (10^6 bytes/s of payload) and the messages and bytes read.

Options:
  --out-dir DIR      keep the program's raw output there (NAME.out, with the
                     exact command on its first line, and for produce
                     NAME.latency-us.gz, one sample in µs per line, in
                     delivery-report order) and the JSON (NAME.json)
  --name NAME        file name stem in --out-dir (default rdk-MODE-TOPIC)
  --partitions N     partitions of TOPIC (default 8): consume reads 0..N-1,
                     --create makes N
  --create           create TOPIC first (N partitions) with
                     \`rutomq topic create\`, which speaks the Kafka protocol
                     (works against Apache Kafka too)
  --rutomq BIN       rutomq binary for --create (default target/release/rutomq)
  --timeout SECS     kill the program after this long (default: produce
                     10 x (1 + SECONDS) + 60, consume 600)
  -X PROP=VALUE      extra librdkafka property for the program (repeatable)
  -h, --help         this text

Environment: RDKAFKA_PERF_SRC (an rdkafka_performance.c to build instead of
the one from the rdkafka-sys crate; delete tests/.cache/rdkafka-perf-$version
to rebuild).
Exit status: 0 when the program exited 0 and every message was delivered
(produce) or COUNT messages were read (consume); 3 when it ran but not so
(the JSON is printed all the same, with "ok": false); 1 on other failures.
EOF
}

die() { echo "rdkafka-perf: $*" >&2; exit 1; }

# ------------------------------------------------------------------ build --
# rdkafka_performance.c of the rdkafka-sys crate in Cargo.lock, from the
# cargo registry (the unpacked source, or the .crate file).
find_example_dir() {
    local cargo_home="${CARGO_HOME:-$HOME/.cargo}" crate d f
    crate="$(sed -n '/^name = "rdkafka-sys"$/{n;s/^version = "\(.*\)"$/\1/p;}' "$repo/Cargo.lock" 2>/dev/null | head -n 1)"
    [[ -n "$crate" ]] || die "no rdkafka-sys in $repo/Cargo.lock; set RDKAFKA_PERF_SRC to an rdkafka_performance.c"
    for d in "$cargo_home"/registry/src/*/"rdkafka-sys-$crate"/librdkafka/examples; do
        if [[ -f "$d/rdkafka_performance.c" && -f "$d/Makefile" ]]; then
            echo "$d"
            return 0
        fi
    done
    for f in "$cargo_home"/registry/cache/*/"rdkafka-sys-$crate.crate"; do
        [[ -f "$f" ]] || continue
        mkdir -p "$tmp/crate"
        tar xzf "$f" -C "$tmp/crate" "rdkafka-sys-$crate/librdkafka/examples" \
            || die "cannot unpack $f"
        echo "$tmp/crate/rdkafka-sys-$crate/librdkafka/examples"
        return 0
    done
    die "rdkafka-sys $crate is not in $cargo_home/registry (cargo fetch brings it), or set RDKAFKA_PERF_SRC"
}

build() {
    if [[ -x "$out/run" ]]; then
        echo "$out"
        return 0
    fi
    command -v npm >/dev/null || die "npm not found"
    mkdir -p "$cache"
    exec 8>"$cache/.rdkafka-perf.lock"
    flock 8
    if [[ -x "$out/run" ]]; then echo "$out"; return 0; fi
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    local exdir src_c src_note
    if [[ -n "${RDKAFKA_PERF_SRC:-}" ]]; then
        [[ -f "$RDKAFKA_PERF_SRC" ]] || die "RDKAFKA_PERF_SRC=$RDKAFKA_PERF_SRC is no file"
        src_c="$(cd "$(dirname "$RDKAFKA_PERF_SRC")" && pwd)/$(basename "$RDKAFKA_PERF_SRC")"
        exdir="$(find_example_dir 2>/dev/null || true)"   # only for its Makefile
        src_note="$src_c (RDKAFKA_PERF_SRC)"
    else
        exdir="$(find_example_dir)"
        src_c="$exdir/rdkafka_performance.c"
        src_note="examples/rdkafka_performance.c of the librdkafka in crate $(basename "$(dirname "$(dirname "$exdir")")")"
    fi
    echo "rdkafka-perf: building rdkafka_performance ($src_note) with librdkafka $version from $npm_pkg" >&2
    (cd "$tmp" && npm pack --silent "$npm_pkg" >/dev/null && tar xzf ./*.tgz) || die "npm pack $npm_pkg failed"
    local src="$tmp/package/deps/librdkafka" got
    got=$(sed -n 's/^#define RD_KAFKA_VERSION *\(0x[0-9a-f]*\).*/\1/p' "$src/src/rdkafka.h")
    [[ "$got" == "$hex" ]] || die "$npm_pkg holds librdkafka $got, not $version ($hex)"
    mkdir -p "$src/examples"
    if [[ -n "$exdir" && -f "$exdir/Makefile" ]]; then
        cp "$exdir/Makefile" "$src/examples/Makefile"
    else    # the examples Makefile's rule for this one program
        printf '%s\n' 'include ../mklove/Makefile.base' 'CFLAGS += -I../src' \
            'rdkafka_performance: ../src/librdkafka.a rdkafka_performance.c' \
            '	$(CC) $(CPPFLAGS) $(CFLAGS) rdkafka_performance.c -o $@ $(LDFLAGS) ../src/librdkafka.a $(LIBS)' \
            >"$src/examples/Makefile"
    fi
    cp "$src_c" "$src/examples/rdkafka_performance.c"
    local jobs
    jobs=$(nproc 2>/dev/null || echo 2)
    (
        cd "$src"
        # GSSAPI is the one optional dependency not needed here (and the
        # machine has no Kerberos headers); the rest comes from the system.
        ./configure --disable-gssapi >"$tmp/configure.log" 2>&1 || { tail -30 "$tmp/configure.log" >&2; exit 1; }
        make -j"$jobs" libs >"$tmp/make.log" 2>&1 || { tail -30 "$tmp/make.log" >&2; exit 1; }
        make -C examples rdkafka_performance >>"$tmp/make.log" 2>&1 || { tail -30 "$tmp/make.log" >&2; exit 1; }
    ) || die "build failed"
    rm -rf "$out.tmp"
    mkdir -p "$out.tmp/lib"
    cp "$src/examples/rdkafka_performance" "$out.tmp/"
    cp -P "$src"/src/librdkafka.so* "$out.tmp/lib/"
    cp "$src_c" "$out.tmp/rdkafka_performance.c"
    cat >"$out.tmp/run" <<'WRAP'
#!/usr/bin/env bash
# run ARGS...: rdkafka_performance with the given arguments (it is linked
# with the static librdkafka 2.15.0; the library path is set for any
# plugin or interceptor that loads librdkafka.so).
here="$(cd "$(dirname "$0")" && pwd)"
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/rdkafka_performance" "$@"
WRAP
    chmod +x "$out.tmp/run"
    echo "$version" >"$out.tmp/VERSION"
    printf '%s\nsha256 %s\n' "$src_note" "$(sha256sum "$src_c" | cut -d' ' -f1)" >"$out.tmp/SOURCE"
    rm -rf "$out"
    mv "$out.tmp" "$out"
    exec 8>&-
    echo "$out"
}

# -------------------------------------------------------------- options ----
OUT_DIR=""
NAME=""
PARTITIONS=8
CREATE=0
RUTOMQ="$repo/target/release/rutomq"
TIMEOUT=""
EXTRA_X=()
need_arg() { [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value (see --help)"; }
while [[ $# -gt 0 ]]; do
    case "$1" in
        --out-dir) need_arg "$@"; OUT_DIR="$2"; shift 2 ;;
        --name) need_arg "$@"; NAME="$2"; shift 2 ;;
        --partitions) need_arg "$@"; PARTITIONS="$2"; shift 2 ;;
        --create) CREATE=1; shift ;;
        --rutomq) need_arg "$@"; RUTOMQ="$2"; shift 2 ;;
        --timeout) need_arg "$@"; TIMEOUT="$2"; shift 2 ;;
        -X) need_arg "$@"; EXTRA_X+=(-X "$2"); shift 2 ;;
        -h|--help) usage; exit 0 ;;
        -*) usage >&2; die "unknown option: $1" ;;
        *) break ;;
    esac
done
MODE="${1:-}"
[[ -n "$MODE" ]] || { usage >&2; exit 1; }
shift
is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }

case "$MODE" in
    build) [[ $# -eq 0 ]] || die "build takes no arguments"; build; exit 0 ;;
    produce)
        [[ $# -eq 4 ]] || die "usage: $0 [OPTIONS] produce BOOTSTRAP TOPIC RATE SECONDS"
        BOOTSTRAP="$1"; TOPIC="$2"; RATE="$3"; SECS="$4"
        { is_uint "$RATE" && ((RATE > 0)); } || die "RATE must be a positive integer, got $RATE"
        { is_uint "$SECS" && ((SECS > 0)); } || die "SECONDS must be a positive integer, got $SECS"
        TIMEOUT="${TIMEOUT:-$((10 * (1 + SECS) + 60))}" ;;
    consume)
        [[ $# -eq 3 ]] || die "usage: $0 [OPTIONS] consume BOOTSTRAP TOPIC COUNT"
        BOOTSTRAP="$1"; TOPIC="$2"; COUNT="$3"
        { is_uint "$COUNT" && ((COUNT > 0 && COUNT < 2147483647)); } || die "COUNT must be a positive integer below 2^31, got $COUNT"
        TIMEOUT="${TIMEOUT:-600}" ;;
    *) usage >&2; die "unknown mode: $MODE" ;;
esac
{ is_uint "$PARTITIONS" && ((PARTITIONS > 0)); } || die "--partitions must be a positive integer"
is_uint "$TIMEOUT" || die "--timeout must be an integer"
command -v python3 >/dev/null || die "python3 not found"

build >/dev/null

NAME="${NAME:-rdk-$MODE-$TOPIC}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [[ -n "$OUT_DIR" ]]; then
    mkdir -p "$OUT_DIR"
    OUT_DIR="$(cd "$OUT_DIR" && pwd)"
    raw="$OUT_DIR/$NAME.out"
    lat="$OUT_DIR/$NAME.latency-us"
    json_out="$OUT_DIR/$NAME.json"
else
    raw="$work/$NAME.out"
    lat="$work/$NAME.latency-us"
    json_out=""
fi

if ((CREATE)); then
    [[ -x "$RUTOMQ" ]] || die "no rutomq at $RUTOMQ for --create (--rutomq BIN)"
    "$RUTOMQ" topic create -b "$BOOTSTRAP" -p "$PARTITIONS" "$TOPIC" >&2 \
        || die "creating $TOPIC ($PARTITIONS partitions) on $BOOTSTRAP failed"
fi

prog=("$out/run" -b "$BOOTSTRAP" -t "$TOPIC")
if [[ "$MODE" == produce ]]; then
    COUNT=$((RATE * (1 + SECS)))
    prog+=(-P -s 1024 -a -1 -X enable.idempotence=true -X linger.ms=5
           -r "$RATE" -c "$COUNT" -l -A "$lat" -i 1000 "${EXTRA_X[@]}")
else
    prog+=(-C -o beginning -c "$COUNT" -e -i 1000)
    for ((p = 0; p < PARTITIONS; p++)); do prog+=(-p "$p"); done
    prog+=("${EXTRA_X[@]}")
fi

# shellcheck source=benches/lib.sh
source "$repo/benches/lib.sh"   # quote_cmd
cmd_txt="$(quote_cmd "${prog[@]}")"
echo "rdkafka-perf: $cmd_txt" >&2
printf '# %s\n' "$cmd_txt" >"$raw"
start_utc="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
rc=0
# Its output goes to the raw file and, live, to stderr. In the background,
# so that a TERM or Ctrl-C here stops it too (timeout runs it in a process
# group of its own, which a signal to this script's group does not reach).
timeout -k 10 "$TIMEOUT" "${prog[@]}" >>"$raw" 2>&1 </dev/null &
prog_pid=$!
tail -n +2 -f --pid="$prog_pid" "$raw" >&2 &
tail_pid=$!
trap 'kill -TERM "$prog_pid" 2>/dev/null; kill "$tail_pid" 2>/dev/null; rm -rf "$work"; exit 143' TERM
trap 'kill -TERM "$prog_pid" 2>/dev/null; kill "$tail_pid" 2>/dev/null; rm -rf "$work"; exit 130' INT
wait "$prog_pid" || rc=$?
wait "$tail_pid" 2>/dev/null || true
trap - TERM INT
((rc != 124)) || echo "rdkafka-perf: still running after --timeout $TIMEOUT s, killed" >&2

prc=0
(RDK_MODE="$MODE" RDK_RC="$rc" RDK_RAW="$raw" RDK_LAT="$lat" RDK_CMD="$cmd_txt" \
RDK_BOOTSTRAP="$BOOTSTRAP" RDK_TOPIC="$TOPIC" RDK_RATE="${RATE:-}" RDK_SECS="${SECS:-}" \
RDK_COUNT="$COUNT" RDK_PARTITIONS="$PARTITIONS" RDK_SOURCE="$(tr '\n' ' ' <"$out/SOURCE")" \
RDK_VERSION="$version" RDK_START="$start_utc" RDK_JSON="$json_out" RDK_OUTDIR="$OUT_DIR" \
python3 - <<'PYEOF'
import json, math, os, re, sys

e = os.environ
mode, rc, raw = e["RDK_MODE"], int(e["RDK_RC"]), e["RDK_RAW"]
with open(raw, errors="replace") as f:
    lines = f.read().splitlines()

def pct(sorted_us, q):
    """Nearest-rank percentile (the smallest sample with at least q of the
    samples at or below it), µs -> ms."""
    if not sorted_us:
        return None
    k = max(1, math.ceil(q * len(sorted_us)))
    return sorted_us[k - 1] / 1000.0

def lat_stats(us):
    s = sorted(us)
    if not s:
        return None
    return {"p50": pct(s, 0.50), "p90": pct(s, 0.90), "p99": pct(s, 0.99), "p999": pct(s, 0.999),
            "max": s[-1] / 1000.0, "min": s[0] / 1000.0, "mean": sum(s) / len(s) / 1000.0,
            "count": len(s)}

error_cbs = [l for l in lines if "ERROR CALLBACK" in l]
res = {
    "tool": "rdkafka_performance", "mode": mode, "librdkafka_version": e["RDK_VERSION"],
    "program_source": e["RDK_SOURCE"].strip(), "time_utc": e["RDK_START"],
    "bootstrap": e["RDK_BOOTSTRAP"], "topic": e["RDK_TOPIC"], "partitions": int(e["RDK_PARTITIONS"]),
    "command": e["RDK_CMD"], "exit_code": rc, "error_callbacks": len(error_cbs),
    "error_callback_lines": error_cbs[:20],
}
if e.get("RDK_OUTDIR"):
    res["raw_output"] = os.path.basename(raw)
ok = rc == 0

if mode == "produce":
    rate, secs, count = int(e["RDK_RATE"]), int(e["RDK_SECS"]), int(e["RDK_COUNT"])
    # "% N messages produced (B bytes), D delivered (offset O, F failed) in
    #  T ms: R msgs/s and X MB/s, E produce failures, Q in queue, no compression"
    PL = re.compile(r"^% (\d+) messages produced \((\d+) bytes\), (\d+) delivered \(offset (-?\d+), (\d+) failed\) "
                    r"in (\d+)ms: (\d+) msgs/s and ([0-9.]+) MB/s, (\d+) produce failures, (-?\d+) in queue")
    rows = []
    for l in lines:
        m = PL.match(l)
        if m:
            g = m.groups()
            rows.append({"produced": int(g[0]), "bytes": int(g[1]), "delivered": int(g[2]), "failed": int(g[4]),
                         "ms": int(g[5]), "msgs_s": int(g[6]), "mb_s": float(g[7]), "produce_failures": int(g[8]),
                         "in_queue": int(g[9])})
    try:
        with open(e["RDK_LAT"]) as f:
            us = [int(x) for x in f.read().split()]
    except OSError:
        us = []
    res.update({"target_msgs_per_sec": rate, "seconds": secs, "first_second_left_out": True,
                "messages_requested": count, "record_size": 1024,
                "config": {"acks": "all (-a -1)", "enable.idempotence": "true", "linger.ms": "5",
                           "key": None, "compression": "none", "rate_limit": f"-r {rate}",
                           "program_defaults_kept": "message.send.max.retries=3, retry.backoff.ms=500"},
                "latency_definition": ("per message: gettimeofday() in the delivery-report callback (served in "
                                       "rd_kafka_poll) minus the gettimeofday() stamp written into the payload "
                                       "just before rd_kafka_produce(); acks=all"),
                "latency_samples_file": None})  # set below when the samples are kept
    final = rows[-1] if rows else None
    if final is None:
        ok = False
        res["parse_error"] = "no final 'messages produced' line"
    else:
        res.update({"messages_sent": final["produced"], "messages_delivered": final["delivered"],
                    "messages_failed": final["failed"], "backpressure_retries": final["produce_failures"],
                    "in_queue_at_end": final["in_queue"], "elapsed_ms": final["ms"],
                    "program_msgs_per_sec": final["msgs_s"], "program_mb_per_sec": final["mb_s"]})
        # The first periodic line (every 1,000 ms from the start) says how many
        # messages were produced in the first second: that many samples are
        # left out, in delivery-report order (produce order per partition).
        first = next((r for r in rows[:-1] if r["ms"] >= 1000), None)
        skip = first["produced"] if first else None
        res["first_second"] = ({"stats_line_ms": first["ms"], "messages_produced": first["produced"],
                                "messages_delivered": first["delivered"]} if first else None)
        # Nothing delivered in the first second: the start-up (connection,
        # metadata, InitProducerId) took longer, and its backlog is still in
        # the kept samples.
        res["startup_stall_over_first_second"] = bool(first and first["delivered"] == 0)
        if first and final["ms"] > first["ms"]:
            res["achieved_msgs_per_sec"] = (final["delivered"] - first["delivered"]) * 1000.0 / (final["ms"] - first["ms"])
        elif final["ms"] > 0:
            res["achieved_msgs_per_sec"] = final["delivered"] * 1000.0 / final["ms"]
        res["achieved_msgs_per_sec_note"] = ("delivered after the first stats line / ms from it to the last delivery"
                                             if first else "whole run: no stats line after 1 s")
        if skip is None:
            res["latency_ms"] = lat_stats(us)
            res["first_second_left_out"] = False
        else:
            res["latency_ms"] = lat_stats(us[skip:])
        res["latency_ms_all"] = lat_stats(us)
        res["latency_samples"] = len(us)
        if len(us) != final["delivered"] + final["failed"]:
            res["latency_samples_note"] = "samples != delivered + failed"
        if final["delivered"] != final["produced"] or final["failed"] or final["produced"] < count:
            ok = False
        res["errors"] = final["failed"] + len(error_cbs) + (0 if rc == 0 else 1)
else:
    count = int(e["RDK_COUNT"])
    # "% N messages (B bytes) consumed in T ms: R msgs/s (X MB/s)"
    CL = re.compile(r"^% (\d+) messages \((\d+) bytes\) consumed in (\d+)ms: (\d+) msgs/s \(([0-9.]+) MB/s\)")
    rows = [m.groups() for m in map(CL.match, lines) if m]
    fetch = next((int(m.group(1)) for m in (re.match(r"^% Average application fetch latency: (\d+)us", l) for l in lines) if m), None)
    eofs = sum(1 for l in lines if l.startswith("% Consumer reached end of"))
    cerrs = [l for l in lines if l.startswith("% Consume error")]
    res.update({"messages_requested": count, "from": "beginning",
                "timing": "program clock: from the first message received to the count reached (or every partition at its end)",
                "partition_eofs": eofs, "consume_errors": len(cerrs), "consume_error_lines": cerrs[:20]})
    if not rows:
        ok = False
        res["parse_error"] = "no final 'messages ... consumed' line"
    else:
        n, b, ms, r, mb = rows[-1]
        n, b, ms, r, mb = int(n), int(b), int(ms), int(r), float(mb)
        # Its msgs/s and MB/s come from its µs clock (the ms figure is
        # rounded down): MiB/s is its MB/s (10^6 bytes/s of payload) / 1.048576.
        res.update({"messages": n, "bytes": b, "elapsed_ms": ms, "program_msgs_per_sec": r,
                    "program_mb_per_sec": mb, "msgs_per_sec": r, "mib_per_sec": mb * 1e6 / 1048576.0,
                    "avg_fetch_latency_us": fetch})
        if n < count:
            ok = False
    res["errors"] = len(cerrs) + len(error_cbs) + (0 if rc == 0 else 1)

if mode == "produce" and e.get("RDK_OUTDIR") and os.path.exists(e["RDK_LAT"]):
    res["latency_samples_file"] = os.path.basename(e["RDK_LAT"]) + ".gz"   # gzipped below
res["ok"] = ok
text = json.dumps(res, indent=2)
if e.get("RDK_JSON"):
    with open(e["RDK_JSON"], "w") as f:
        f.write(text + "\n")
print(text)
sys.exit(0 if ok else 3)
PYEOF
) || prc=$?
# The samples (one line per message, millions at high rates) are kept gzipped.
if [[ -n "$OUT_DIR" && -f "$lat" ]]; then gzip -f "$lat"; fi
exit "$prc"
