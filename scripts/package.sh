#!/usr/bin/env bash
# Builds the Debian and RPM packages of the agent:
#   target/packages/rutomq_<version>-1_amd64.deb
#   target/packages/rutomq-<version>-1.x86_64.rpm
# from the release binary (built here unless RUTOMQ_SKIP_CARGO=1), the systemd
# unit and environment file in packaging/, and the license. The package tools
# (cargo-deb, cargo-generate-rpm) are installed from crates.io into
# tests/.cache/cargo-tools on first use.
#   bash scripts/package.sh            build both; print their paths
#   bash scripts/package.sh --tools    only install the package tools
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
TOOLS=$ROOT/tests/.cache/cargo-tools
OUT=$ROOT/target/packages
CARGO_DEB_VERSION=3.8.0
CARGO_GENERATE_RPM_VERSION=0.21.1

log() { echo "==> [$(date +%H:%M:%S)] $*" >&2; }

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    PATH=$HOME/.cargo/bin:$PATH
fi

# The tools, at pinned versions (a stamp file per version).
install_tool() {
    local crate=$1 version=$2
    if [ "$(cat "$TOOLS/.$crate.version" 2>/dev/null || true)" != "$version" ]; then
        log "cargo install $crate@$version"
        cargo install --locked --quiet --root "$TOOLS" "$crate@$version"
        echo "$version" > "$TOOLS/.$crate.version"
    fi
}
install_tool cargo-deb "$CARGO_DEB_VERSION"
install_tool cargo-generate-rpm "$CARGO_GENERATE_RPM_VERSION"
PATH=$TOOLS/bin:$PATH
[ "${1:-}" = --tools ] && exit 0

if [ "${RUTOMQ_SKIP_CARGO:-0}" != 1 ]; then
    log "cargo build --release -p rutomq"
    cargo build --release -p rutomq
fi
[ -x target/release/rutomq ] || { echo "error: target/release/rutomq is missing" >&2; exit 1; }

# The environment file must be what the binary generates (the unit test
# checks the source tree; this checks the binary being packaged).
if ! diff -u packaging/rutomq.env <(target/release/rutomq env-template) >&2; then
    echo "error: packaging/rutomq.env is stale: target/release/rutomq env-template > packaging/rutomq.env" >&2
    exit 1
fi

mkdir -p "$OUT"
rm -f "$OUT"/rutomq*.deb "$OUT"/rutomq*.rpm
# Both packages ship the binary without its debug information (the release
# profile keeps line tables for profiling: 170 MB against 15).
strip --strip-debug -o target/release/rutomq.stripped target/release/rutomq
log "cargo deb"
cargo deb --no-build --no-strip -p rutomq --deb-revision 1 -o "$OUT" >&2
log "cargo generate-rpm"
cargo generate-rpm -p engine --target-dir "$ROOT/target" -o "$OUT" \
    --set-metadata 'release = "1"' >&2
ls -1 "$OUT"/rutomq*.deb "$OUT"/rutomq*.rpm
