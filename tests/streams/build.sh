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
mkdir -p "$bin"

# One build at a time (parallel test workers may all call this; shared with
# tests/clients/build.sh, whose Maven runs use the same local repository).
exec 9>"$tests/.cache/.build.lock"
flock 9

command -v mvn >/dev/null || { echo "build.sh: mvn not found" >&2; exit 1; }
out="$bin/streams-eos-$STREAMS_VERSION.jar"
stamp="$({ echo "kafka-streams $STREAMS_VERSION"; cat "$here/pom.xml" "$here/src/main/java"/*.java; } \
         | sha256sum | cut -d' ' -f1)"
if [[ -f "$out" && -f "$out.stamp" && "$(cat "$out.stamp")" == "$stamp" ]]; then
    echo "build.sh: streams $STREAMS_VERSION up to date ($out)"
    exit 0
fi
t0=$SECONDS
log="$tests/.cache/build-streams-$STREAMS_VERSION.log"
if ! mvn -B -q -Dstyle.color=never -f "$here/pom.xml" package \
        -Dstreams.version="$STREAMS_VERSION" >"$log" 2>&1; then
    cat "$log" >&2
    echo "build.sh: mvn package for kafka-streams $STREAMS_VERSION failed" >&2
    exit 1
fi
cp "$here/target/$STREAMS_VERSION/streams-eos.jar" "$out.tmp"
mv "$out.tmp" "$out"
echo "$stamp" >"$out.stamp"
echo "build.sh: streams $STREAMS_VERSION built in $((SECONDS - t0)) s ($out)"
