#!/usr/bin/env bash
# Build the RoundTrip client programs used by the end-to-end tests:
#   tests/.cache/bin/roundtrip-java-<version>.jar   (one per kafka-clients version)
#   tests/.cache/bin/roundtrip-go                   (franz-go, newest: tests/go/go.mod)
#   tests/.cache/bin/roundtrip-go-<version>         (franz-go $FRANZ_GO_PROMISED: tests/go/franz-<version>.mod)
#   tests/.cache/kafka-tools-<version>/*.jar        (Apache Kafka's CLI tools, kafka-tools $KAFKA_TOOLS)
# Each also holds the consumer-group programs (first argument group-consume,
# group-admin for Java; group-consume for Go) of tests/e2e/test_groups_java_go.py.
# Idempotent: a program whose sources (and version) did not change since its
# last build is not rebuilt, so a second run takes well under a second.
#
# Usage: tests/clients/build.sh [java|go|tools]...  (default: all)
# Env:   JAVA_CLIENT_4, JAVA_CLIENT_39, JAVA_CLIENT_NEWEST (see versions.sh), or
#        JAVA_CLIENT_VERSIONS="4.1.1 3.9.1 ..." to build an explicit list.
# Run them with tests/clients/run.sh.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tests="$(cd "$here/.." && pwd)"
# shellcheck source=versions.sh
source "$here/versions.sh"
JAVA_CLIENT_VERSIONS="${JAVA_CLIENT_VERSIONS:-$JAVA_CLIENT_4 $JAVA_CLIENT_39 $JAVA_CLIENT_NEWEST}"
bin="$tests/.cache/bin"
prog=build.sh
# shellcheck source=../build-common.sh
source "$tests/build-common.sh"
build_lock

build_java() {
    require mvn
    local srcs=("$tests/java/pom.xml" "$tests/java/src/main/java"/*.java)
    local v
    for v in $JAVA_CLIENT_VERSIONS; do
        local out="$bin/roundtrip-java-$v.jar" stamp
        stamp="$(stamp_of "kafka-clients $v" "${srcs[@]}")"
        if fresh "$out" "$stamp"; then
            echo "$prog: java $v up to date ($out)"
            continue
        fi
        local t0=$SECONDS
        maven_package "kafka-clients $v" "$tests/java/pom.xml" "$tests/.cache/build-java-$v.log" \
            -Dkafka.version="$v"
        install_built "$tests/java/target/$v/roundtrip.jar" "$out" "$stamp"
        echo "$prog: java $v built in $((SECONDS - t0)) s ($out)"
    done
}

build_go() {
    require go
    # The newest franz-go (go.mod) and the promised one (its own module file).
    go_binary roundtrip-go go.mod go.sum ""
    go_binary "roundtrip-go-$FRANZ_GO_PROMISED" "franz-$FRANZ_GO_PROMISED.mod" "franz-$FRANZ_GO_PROMISED.sum" \
        franz_1_21
}

go_binary() {  # go_binary NAME MODFILE SUMFILE TAGS
    local name="$1" mod="$2" sum="$3" tags="$4" out="$bin/$1" stamp
    stamp="$(stamp_of "$(go env GOVERSION) tags=$tags" "$tests/go/$mod" "$tests/go/$sum" "$tests/go"/*.go)"
    if fresh "$out" "$stamp"; then
        echo "$prog: $name up to date ($out)"
        return
    fi
    local t0=$SECONDS
    (cd "$tests/go" && CGO_ENABLED=0 go build -modfile="$mod" -tags="$tags" -buildvcs=false -trimpath \
        -o "$out.tmp" .)
    mv "$out.tmp" "$out"
    echo "$stamp" >"$out.stamp"
    echo "$prog: $name built in $((SECONDS - t0)) s ($out)"
}

build_tools() {
    require mvn
    local v="$KAFKA_TOOLS" out="$tests/.cache/kafka-tools-$KAFKA_TOOLS" stamp
    stamp="$(stamp_of "kafka-tools $v" "$tests/kafka-tools/pom.xml")"
    if fresh "$out" "$stamp"; then
        echo "$prog: kafka-tools $v up to date ($out)"
        return
    fi
    local t0=$SECONDS
    maven_package "kafka-tools $v" "$tests/kafka-tools/pom.xml" "$tests/.cache/build-kafka-tools-$v.log" \
        -Dkafka.version="$v"
    install_built "$tests/kafka-tools/target/$v/lib" "$out" "$stamp"
    echo "$prog: kafka-tools $v fetched in $((SECONDS - t0)) s ($out)"
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
