#!/usr/bin/env bash
# Regenerates engine/src/api/generated/ (the Kafka messages, or the
# versions of them, kafka-protocol 0.18 lacks) from Apache Kafka's JSON
# message specs, which ship inside the kafka-clients jar
# (common/message/*.json):
#   scripts/gen-kafka-messages/run.sh [KAFKA_VERSION]   (default 4.3.0)
# Needs Python 3, unzip and Maven (the jar comes from Maven Central).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
version=${1:-4.3.0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
jar="$HOME/.m2/repository/org/apache/kafka/kafka-clients/$version/kafka-clients-$version.jar"
if [[ ! -f "$jar" ]]; then
    mvn -B -q -Dstyle.color=never dependency:get -Dartifact="org.apache.kafka:kafka-clients:$version" >"$work/mvn.log" 2>&1 \
        || { cat "$work/mvn.log" >&2; exit 1; }
fi
unzip -q -o "$jar" 'common/message/*.json' -d "$work"
# KIP-1071 streams groups; ListOffsets 11 (KIP-1023), OffsetCommit and
# OffsetFetch 10 (topic ids, KIP-848), DescribeLogDirs 5 (KIP-1066).
messages=(
    StreamsGroupHeartbeatRequest StreamsGroupHeartbeatResponse
    StreamsGroupDescribeRequest StreamsGroupDescribeResponse
    ListOffsetsRequest ListOffsetsResponse
    OffsetCommitRequest OffsetCommitResponse
    OffsetFetchRequest OffsetFetchResponse
    DescribeLogDirsRequest DescribeLogDirsResponse
)
rm -f "$root"/engine/src/api/generated/*_request.rs "$root"/engine/src/api/generated/*_response.rs
python3 "$here/gen.py" "$work/common/message" "$version" "$root/engine/src/api/generated" "${messages[@]}"
rustfmt --edition 2021 "$root"/engine/src/api/generated/*.rs
# Test vectors: the samples encoded by Kafka's own classes at each version.
cp_jars="$(dirname "$jar")/*"
for dep in com/fasterxml/jackson/core/jackson-databind com/fasterxml/jackson/core/jackson-core \
           com/fasterxml/jackson/core/jackson-annotations; do
    cp_jars="$cp_jars:$(ls -d "$HOME/.m2/repository/$dep"/*/ | sort -V | tail -1)*"
done
javac -d "$work" -cp "$cp_jars" "$here/Vectors.java"
java -cp "$work:$cp_jars" Vectors "$here/samples" "${messages[@]}" \
    >"$root/engine/src/api/generated/vectors.txt"
echo "wrote engine/src/api/generated/ from Kafka $version"
