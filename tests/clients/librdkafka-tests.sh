#!/usr/bin/env bash
# librdkafka's own test programs (tests/test-runner), built from the
# librdkafka 2.15.0 sources, for the e2e test that runs its broker tests
# (0081_admin, ...) against rutomq. The sources come from the npm registry:
# @confluentinc/kafka-javascript 1.10.0 bundles librdkafka 2.15.0 whole,
# tests included (the version is checked below). Built into
# tests/.cache/librdkafka-2.15.0 (shared libraries and the runner, nothing
# installed). Prints the directory; run "$dir/run" TESTS... (a wrapper that
# sets the library path).
set -euo pipefail
version=2.15.0
npm_pkg=@confluentinc/kafka-javascript@1.10.0
hex=0x020f00ff # RD_KAFKA_VERSION of 2.15.0
cache="$(cd "$(dirname "$0")/.." && pwd)/.cache"
out="$cache/librdkafka-$version"
if [ -x "$out/run" ]; then
    echo "$out"
    exit 0
fi
mkdir -p "$cache"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
npm pack --silent "$npm_pkg" >/dev/null
tar xzf ./*.tgz
src="$tmp/package/deps/librdkafka"
got=$(sed -n 's/^#define RD_KAFKA_VERSION *\(0x[0-9a-f]*\).*/\1/p' "$src/src/rdkafka.h")
if [ "$got" != "$hex" ]; then
    echo "error: $npm_pkg holds librdkafka $got, not $version ($hex)" >&2
    exit 1
fi
cd "$src"
# GSSAPI is the one optional dependency the tests here do not need (and
# the machine has no Kerberos headers); the rest comes from the system.
./configure --disable-gssapi >"$tmp/configure.log" 2>&1 || { tail -30 "$tmp/configure.log" >&2; exit 1; }
jobs=$(nproc 2>/dev/null || echo 2)
make -j"$jobs" libs >"$tmp/make.log" 2>&1 || { tail -30 "$tmp/make.log" >&2; exit 1; }
make -j"$jobs" -C tests test-runner >>"$tmp/make.log" 2>&1 || { tail -30 "$tmp/make.log" >&2; exit 1; }
rm -rf "$out.tmp"
mkdir -p "$out.tmp/lib"
cp tests/test-runner "$out.tmp/"
cp -P src/librdkafka.so* src-cpp/librdkafka++.so* "$out.tmp/lib/"
cat > "$out.tmp/run" <<'WRAP'
#!/usr/bin/env bash
# run TEST... : librdkafka's test-runner with the given tests ($TESTS),
# the configuration in $RDKAFKA_TEST_CONF (test.conf in the working
# directory by default).
here="$(cd "$(dirname "$0")" && pwd)"
tests="$*"
TESTS="${tests// /,}" LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/test-runner"
WRAP
chmod +x "$out.tmp/run"
echo "$version" > "$out.tmp/VERSION"
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$out"
