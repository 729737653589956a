#!/usr/bin/env bash
# Prometheus' promtool, built from its Go module into
# tests/.cache/go-bin/promtool@$PROMTOOL_VERSION, for the test that
# packaging/observability/alerts.yaml is a valid rule file
# (tests/e2e/test_observability.py). Prints the binary's path.
#
# promtool ships no other way in than its Go module (no Debian package new
# enough, no prebuilt download here). A cold build takes about 4.5 minutes
# on two cores, downloads included, so scripts/test.sh runs this before the
# e2e suite rather than inside a test's timeout; a second run is instant.
#
# The version is the module's (v0.316.0 is Prometheus 3.16.0). GOTOOLCHAIN is
# local: a module asking for a newer Go must fail here, not fetch a toolchain.
set -euo pipefail
PROMTOOL_VERSION="${PROMTOOL_VERSION:-v0.316.0}"
cache="$(cd "$(dirname "$0")/.." && pwd)/.cache"
dir="$cache/go-bin/promtool@$PROMTOOL_VERSION"
if [ -x "$dir/promtool" ]; then
    echo "$dir/promtool"
    exit 0
fi
command -v go >/dev/null || { echo "promtool.sh: go not found" >&2; exit 1; }
mkdir -p "$cache/go-bin"
# Built beside the final place and moved in whole, so an interrupted build
# never leaves a binary that looks finished.
rm -rf "$dir.tmp"
mkdir -p "$dir.tmp"
t0=$SECONDS
if ! GOTOOLCHAIN=local GOBIN="$dir.tmp" go install \
        "github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_VERSION" >"$cache/promtool-build.log" 2>&1; then
    tail -50 "$cache/promtool-build.log" >&2
    echo "promtool.sh: go install of promtool $PROMTOOL_VERSION failed" >&2
    rm -rf "$dir.tmp"
    exit 1
fi
"$dir.tmp/promtool" --help >/dev/null
rm -rf "$dir"
mv "$dir.tmp" "$dir"
echo "promtool.sh: built promtool $PROMTOOL_VERSION in $((SECONDS - t0)) s" >&2
echo "$dir/promtool"
