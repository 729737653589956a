#!/usr/bin/env bash
# Regenerates engine/src/topics/kafka_configs.rs from Apache Kafka's LogConfig:
#   scripts/gen-topic-configs/run.sh [KAFKA_VERSION]   (default: the pom's, 4.2.0)
# Needs Java 17+ and Maven (kafka-storage and its dependencies come from Maven Central).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
version=${1:-4.2.0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mvn -B -q -Dstyle.color=never -f "$here/pom.xml" -Dkafka.version="$version" \
    dependency:build-classpath -Dmdep.outputFile="$work/cp.txt" >"$work/mvn.log" 2>&1 \
    || { cat "$work/mvn.log" >&2; exit 1; }
javac -d "$work" -cp "$(cat "$work/cp.txt")" "$here/TopicConfigs.java"
java -cp "$work:$(cat "$work/cp.txt")" TopicConfigs "$version" >"$work/topic_configs.rs" 2>"$work/java.log" \
    || { cat "$work/java.log" >&2; exit 1; }
mv "$work/topic_configs.rs" "$root/engine/src/topics/kafka_configs.rs"
echo "wrote engine/src/topics/kafka_configs.rs from Kafka $version"
