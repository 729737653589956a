#!/usr/bin/env bash
# Regenerates the Kafka config tables from Apache Kafka's own definitions:
#   engine/src/topics/kafka_configs.rs   topic configs (LogConfig)
#   engine/src/dynamic/kafka_configs.rs  broker configs (KafkaConfig, DynamicBrokerConfig),
#                                        topic config synonyms, group configs (GroupConfig)
#   scripts/gen-kafka-configs/run.sh [KAFKA_VERSION]   (default: the pom's, 4.2.0)
# Needs Java 17+ and Maven (the Kafka jars come from Maven Central).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
version=${1:-4.2.0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mvn -B -q -Dstyle.color=never -f "$here/pom.xml" -Dkafka.version="$version" \
    dependency:build-classpath -Dmdep.outputFile="$work/cp.txt" >"$work/mvn.log" 2>&1 \
    || { cat "$work/mvn.log" >&2; exit 1; }
cp=$(cat "$work/cp.txt")
javac -d "$work" -cp "$cp" "$here/TopicConfigs.java" "$here/BrokerConfigs.java"
for gen in TopicConfigs:topics BrokerConfigs:dynamic; do
    java -cp "$work:$cp" "${gen%%:*}" "$version" >"$work/out.rs" 2>"$work/java.log" \
        || { cat "$work/java.log" >&2; exit 1; }
    mkdir -p "$root/engine/src/${gen##*:}"
    mv "$work/out.rs" "$root/engine/src/${gen##*:}/kafka_configs.rs"
    echo "wrote engine/src/${gen##*:}/kafka_configs.rs from Kafka $version"
done
