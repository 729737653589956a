#!/usr/bin/env bash
# Build the FlinkEos job (tests/flink) used by tests/e2e/test_flink.py:
#   tests/.cache/bin/flink-eos-<flink version>.jar   (one per Flink version)
# Each jar holds Flink (flink-streaming-java, flink-clients: a local
# MiniCluster) and org.apache.flink:flink-connector-kafka $FLINK_CONNECTOR_KAFKA.
# Idempotent: a jar whose sources (and versions) did not change since its last
# build is not rebuilt, so a second run takes well under a second.
#
# Usage: tests/flink/build.sh [FLINK_VERSION]...   (default: $FLINK_VERSIONS)
# Env:   FLINK_VERSIONS="2.2.1 2.3.0", FLINK_CONNECTOR_KAFKA=5.0.0-2.2
# Run a jar with: java -jar tests/.cache/bin/flink-eos-2.2.1.jar ARGS...
# (usage at the top of tests/flink/src/main/java/FlinkEos.java).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tests="$(cd "$here/.." && pwd)"
FLINK_VERSIONS="${FLINK_VERSIONS:-2.2.1 2.3.0}"
FLINK_CONNECTOR_KAFKA="${FLINK_CONNECTOR_KAFKA:-5.0.0-2.2}"
bin="$tests/.cache/bin"
mkdir -p "$bin"

# One build at a time (parallel test workers may all call this; shared with
# tests/clients/build.sh, which also runs Maven).
exec 9>"$tests/.cache/.build.lock"
flock 9

command -v mvn >/dev/null || { echo "flink/build.sh: mvn not found" >&2; exit 1; }
srcs=("$here/pom.xml" "$here/src/main/java"/*.java)
versions=("$@")
[[ ${#versions[@]} -gt 0 ]] || read -r -a versions <<<"$FLINK_VERSIONS"
for v in "${versions[@]}"; do
    out="$bin/flink-eos-$v.jar"
    stamp="$({ echo "flink $v connector $FLINK_CONNECTOR_KAFKA"; cat "${srcs[@]}"; } | sha256sum | cut -d' ' -f1)"
    if [[ -f "$out" && -f "$out.stamp" && "$(cat "$out.stamp")" == "$stamp" ]]; then
        echo "flink/build.sh: flink $v up to date ($out)"
        continue
    fi
    t0=$SECONDS
    log="$tests/.cache/build-flink-$v.log"
    if ! mvn -B -q -Dstyle.color=never -f "$here/pom.xml" package \
            -Dflink.version="$v" -Dflink.connector.kafka.version="$FLINK_CONNECTOR_KAFKA" >"$log" 2>&1; then
        cat "$log" >&2
        echo "flink/build.sh: mvn package for flink $v failed" >&2
        exit 1
    fi
    cp "$here/target/$v/flink-eos.jar" "$out.tmp"
    mv "$out.tmp" "$out"
    echo "$stamp" >"$out.stamp"
    echo "flink/build.sh: flink $v built in $((SECONDS - t0)) s ($out)"
done
