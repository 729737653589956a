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
prog=flink/build.sh
# shellcheck source=../build-common.sh
source "$tests/build-common.sh"
build_lock
require mvn

srcs=("$here/pom.xml" "$here/src/main/java"/*.java)
versions=("$@")
[[ ${#versions[@]} -gt 0 ]] || read -r -a versions <<<"$FLINK_VERSIONS"
for v in "${versions[@]}"; do
    out="$bin/flink-eos-$v.jar"
    stamp="$(stamp_of "flink $v connector $FLINK_CONNECTOR_KAFKA" "${srcs[@]}")"
    if fresh "$out" "$stamp"; then
        echo "$prog: flink $v up to date ($out)"
        continue
    fi
    t0=$SECONDS
    maven_package "flink $v" "$here/pom.xml" "$tests/.cache/build-flink-$v.log" \
        -Dflink.version="$v" -Dflink.connector.kafka.version="$FLINK_CONNECTOR_KAFKA"
    install_built "$here/target/$v/flink-eos.jar" "$out" "$stamp"
    echo "$prog: flink $v built in $((SECONDS - t0)) s ($out)"
done
