#!/usr/bin/env bash
# Build the Kafka Streams program of tests/e2e/test_streams.py:
#   tests/.cache/bin/streams-eos-<version>.jar   (org.apache.kafka:kafka-streams <version>)
# Idempotent: when the sources and the version did not change since the last
# build, nothing is rebuilt (a second run takes well under a second).
#
# Usage: tests/streams/build.sh
# Env:   STREAMS_VERSION (default 4.2.0, the pom's streams.version)
# Run:   java -jar tests/.cache/bin/streams-eos-<version>.jar --bootstrap ...
#        (arguments at the top of src/main/java/StreamsEos.java)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tests="$(cd "$here/.." && pwd)"
STREAMS_VERSION="${STREAMS_VERSION:-4.2.0}"
bin="$tests/.cache/bin"
prog=streams/build.sh
# shellcheck source=../build-common.sh
source "$tests/build-common.sh"
build_lock
require mvn

out="$bin/streams-eos-$STREAMS_VERSION.jar"
stamp="$(stamp_of "kafka-streams $STREAMS_VERSION" "$here/pom.xml" "$here/src/main/java"/*.java)"
if fresh "$out" "$stamp"; then
    echo "$prog: streams $STREAMS_VERSION up to date ($out)"
    exit 0
fi
t0=$SECONDS
maven_package "kafka-streams $STREAMS_VERSION" "$here/pom.xml" \
    "$tests/.cache/build-streams-$STREAMS_VERSION.log" -Dstreams.version="$STREAMS_VERSION"
install_built "$here/target/$STREAMS_VERSION/streams-eos.jar" "$out" "$stamp"
echo "$prog: streams $STREAMS_VERSION built in $((SECONDS - t0)) s ($out)"
