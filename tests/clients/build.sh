#!/usr/bin/env bash
# Build the RoundTrip client programs used by the end-to-end tests:
#   tests/.cache/bin/roundtrip-java-<version>.jar   (one per kafka-clients version)
#   tests/.cache/bin/roundtrip-go                   (franz-go)
#   tests/.cache/kafka-tools-<version>/*.jar        (Apache Kafka's CLI tools, kafka-tools $KAFKA_TOOLS)
# Each also holds the consumer-group programs (first argument group-consume,
# group-admin for Java; group-consume for Go) of tests/e2e/test_groups_java_go.py.
# Idempotent: a program whose sources (and version) did not change since its
# last build is not rebuilt, so a second run takes well under a second.
#
# Usage: tests/clients/build.sh [java|go|tools]...  (default: all)
# Env:   JAVA_CLIENT_4, JAVA_CLIENT_39 (see versions.sh), or
#        JAVA_CLIENT_VERSIONS="4.1.1 3.9.1 ..." to build an explicit list.
# Run them with tests/clients/run.sh.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tests="$(cd "$here/.." && pwd)"
# shellcheck source=versions.sh
source "$here/versions.sh"
JAVA_CLIENT_VERSIONS="${JAVA_CLIENT_VERSIONS:-$JAVA_CLIENT_4 $JAVA_CLIENT_39}"
bin="$tests/.cache/bin"
mkdir -p "$bin"

# One build at a time (parallel test workers may all call this).
exec 9>"$tests/.cache/.build.lock"
flock 9

stamp_of() {  # stamp_of EXTRA FILE... -> hash of the files' contents plus EXTRA
    local extra="$1"; shift
    { echo "$extra"; cat "$@"; } | sha256sum | cut -d' ' -f1
}

build_java() {
    command -v mvn >/dev/null || { echo "build.sh: mvn not found" >&2; exit 1; }
    local srcs=("$tests/java/pom.xml" "$tests/java/src/main/java"/*.java)
    local v
    for v in $JAVA_CLIENT_VERSIONS; do
        local out="$bin/roundtrip-java-$v.jar" stamp
        stamp="$(stamp_of "kafka-clients $v" "${srcs[@]}")"
        if [[ -f "$out" && -f "$out.stamp" && "$(cat "$out.stamp")" == "$stamp" ]]; then
            echo "build.sh: java $v up to date ($out)"
            continue
        fi
        local t0=$SECONDS log="$tests/.cache/build-java-$v.log"
        if ! mvn -B -q -Dstyle.color=never -f "$tests/java/pom.xml" package \
                -Dkafka.version="$v" >"$log" 2>&1; then
            cat "$log" >&2
            echo "build.sh: mvn package for kafka-clients $v failed" >&2
            exit 1
        fi
        cp "$tests/java/target/$v/roundtrip.jar" "$out.tmp"
        mv "$out.tmp" "$out"
        echo "$stamp" >"$out.stamp"
        echo "build.sh: java $v built in $((SECONDS - t0)) s ($out)"
    done
}

build_go() {
    command -v go >/dev/null || { echo "build.sh: go not found" >&2; exit 1; }
    local out="$bin/roundtrip-go" stamp
    stamp="$(stamp_of "$(go env GOVERSION)" "$tests/go/go.mod" "$tests/go/go.sum" "$tests/go"/*.go)"
    if [[ -x "$out" && -f "$out.stamp" && "$(cat "$out.stamp")" == "$stamp" ]]; then
        echo "build.sh: go up to date ($out)"
        return
    fi
    local t0=$SECONDS
    (cd "$tests/go" && CGO_ENABLED=0 go build -buildvcs=false -trimpath -o "$out.tmp" .)
    mv "$out.tmp" "$out"
    echo "$stamp" >"$out.stamp"
    echo "build.sh: go built in $((SECONDS - t0)) s ($out)"
}

build_tools() {
    command -v mvn >/dev/null || { echo "build.sh: mvn not found" >&2; exit 1; }
    local v="$KAFKA_TOOLS" out="$tests/.cache/kafka-tools-$KAFKA_TOOLS" stamp
    stamp="$(stamp_of "kafka-tools $v" "$tests/kafka-tools/pom.xml")"
    if [[ -d "$out" && -f "$out.stamp" && "$(cat "$out.stamp")" == "$stamp" ]]; then
        echo "build.sh: kafka-tools $v up to date ($out)"
        return
    fi
    local t0=$SECONDS log="$tests/.cache/build-kafka-tools-$v.log"
    if ! mvn -B -q -Dstyle.color=never -f "$tests/kafka-tools/pom.xml" package \
            -Dkafka.version="$v" >"$log" 2>&1; then
        cat "$log" >&2
        echo "build.sh: fetching kafka-tools $v failed" >&2
        exit 1
    fi
    rm -rf "$out"
    cp -r "$tests/kafka-tools/target/$v/lib" "$out"
    echo "$stamp" >"$out.stamp"
    echo "build.sh: kafka-tools $v fetched in $((SECONDS - t0)) s ($out)"
}

targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(java go tools)
for t in "${targets[@]}"; do
    case "$t" in
        java) build_java ;;
        go) build_go ;;
        tools) build_tools ;;
        *) echo "build.sh: unknown target $t (java|go|tools)" >&2; exit 2 ;;
    esac
done
