#!/usr/bin/env bash
# Build the Kafka Streams program of tests/e2e/test_streams.py:
#   tests/.cache/bin/streams-eos-<version>.jar   (org.apache.kafka:kafka-streams <version>)
# Idempotent: when the sources and the version did not change since the last
# build, nothing is rebuilt (a second run takes well under a second).
#
# Usage: tests/streams/build.sh [VERSION]...   (default: $STREAMS_VERSIONS)
# Env:   STREAMS_VERSIONS="4.2.0 4.4.0" (the promised version and the newest)
# Run:   java -jar tests/.cache/bin/streams-eos-<version>.jar --bootstrap ...
#        (arguments at the top of src/main/java/StreamsEos.java)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tests="$(cd "$here/.." && pwd)"
STREAMS_VERSIONS="${STREAMS_VERSIONS:-4.2.0 4.4.0}"
bin="$tests/.cache/bin"
prog=streams/build.sh
# shellcheck source=../build-common.sh
source "$tests/build-common.sh"
build_lock
require mvn

versions=("$@")
[[ ${#versions[@]} -gt 0 ]] || read -r -a versions <<<"$STREAMS_VERSIONS"
for v in "${versions[@]}"; do
    out="$bin/streams-eos-$v.jar"
    stamp="$(stamp_of "kafka-streams $v" "$here/pom.xml" "$here/src/main/java"/*.java)"
    if fresh "$out" "$stamp"; then
        echo "$prog: streams $v up to date ($out)"
        continue
    fi
    t0=$SECONDS
    maven_package "kafka-streams $v" "$here/pom.xml" "$tests/.cache/build-streams-$v.log" -Dstreams.version="$v"
    install_built "$here/target/$v/streams-eos.jar" "$out" "$stamp"
    echo "$prog: streams $v built in $((SECONDS - t0)) s ($out)"
done
