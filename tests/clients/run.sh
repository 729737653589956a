#!/usr/bin/env bash
# Run one RoundTrip client program built by tests/clients/build.sh.
#
# Usage: tests/clients/run.sh CLIENT --bootstrap HOST:PORT --topic T --partitions P --records N
#   CLIENT: java-4        kafka-clients $JAVA_CLIENT_4   (default 4.2.0)
#           java-3.9      kafka-clients $JAVA_CLIENT_39  (default 3.9.2)
#           java-newest   kafka-clients $JAVA_CLIENT_NEWEST (default 4.4.0)
#           java-X.Y.Z    kafka-clients X.Y.Z (build it with JAVA_CLIENT_VERSIONS=X.Y.Z build.sh java)
#           go            franz-go, newest (tests/go/go.mod)
#           go-X.Y.Z      franz-go X.Y.Z ($FRANZ_GO_PROMISED: tests/go/franz-X.Y.Z.mod)
# The last stdout line is "RESULT ok produced=N consumed=N" (exit 0) or
# "RESULT fail <reason>" (exit 1).
#
#        tests/clients/run.sh tools CLASS ARGS...            Apache Kafka's CLI tools
#        tests/clients/run.sh CLIENT group-consume ARGS...   (java-*, go)
#        tests/clients/run.sh CLIENT group-admin ARGS...     (java-*)
#   The consumer-group programs of tests/e2e/test_groups_java_go.py (usage at the
#   top of tests/java/src/main/java/GroupConsume.java, GroupAdmin.java, tests/go/group.go).
#   The program replaces this shell (exec): signals sent to its pid reach the client.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$(cd "$here/.." && pwd)/.cache/bin"
# shellcheck source=versions.sh
source "$here/versions.sh"

client="${1:-}"
[[ -n "$client" ]] || { sed -n '2,18p' "$0" >&2; exit 2; }
shift
case "$client" in
    java-4) v="$JAVA_CLIENT_4" ;;
    java-3.9) v="$JAVA_CLIENT_39" ;;
    java-newest) v="$JAVA_CLIENT_NEWEST" ;;
    java-[0-9]*) v="${client#java-}" ;;
    tools)
        # Apache Kafka's command-line tools: run.sh tools CLASS ARGS...
        # (kafka-transactions.sh = org.apache.kafka.tools.TransactionsCommand).
        lib="$(cd "$here/.." && pwd)/.cache/kafka-tools-$KAFKA_TOOLS"
        [[ -d "$lib" ]] || { echo "run.sh: $lib missing; run tests/clients/build.sh tools" >&2; exit 2; }
        cls="$1"; shift
        exec java -XX:+UseSerialGC -cp "$lib/*" "$cls" "$@" ;;
    go|franz-go|go-[0-9]*)
        prog="$bin/roundtrip-${client/franz-go/go}"
        [[ -x "$prog" ]] || { echo "run.sh: $prog missing; run tests/clients/build.sh" >&2; exit 2; }
        exec "$prog" "$@" ;;
    *) echo "run.sh: unknown client $client" >&2; exit 2 ;;
esac
jar="$bin/roundtrip-java-$v.jar"
[[ -f "$jar" ]] || { echo "run.sh: $jar missing; run tests/clients/build.sh" >&2; exit 2; }
exec java -XX:+UseSerialGC -jar "$jar" "$@"
