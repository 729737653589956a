#!/usr/bin/env bash
# rutomq full test run (run from anywhere; works as root and as non-root):
#   1. make sure PostgreSQL server binaries exist (the e2e suite starts its own cluster),
#      and OpenSSL headers + tool (datum-mq: librdkafka with SSL, TLS test certificates)
#   2. cargo build --release --workspace   (the e2e suite runs target/release/rutomq)
#   3. cargo test --release --workspace --no-fail-fast
#   4. create/refresh .venv from tests/requirements.txt (skipped when unchanged)
#   5. build the Java/Go RoundTrip clients (tests/clients/build.sh) and the Kafka
#      Streams program (tests/streams/build.sh), unpack Debian's kcat
#      (tests/clients/kcat.sh), build librdkafka's test-runner from its
#      2.15.0 sources (tests/clients/librdkafka-tests.sh), build Prometheus'
#      promtool (tests/clients/promtool.sh), the package tools (cargo-deb,
#      cargo-generate-rpm), the quick start's S3 server (s3s-fs) and helm and
#      kubeconform (packaging/check-deploy.sh), then
#      pytest tests/e2e  (extra arguments to this script are passed to pytest)
# Exits non-zero if any step fails. Environment:
#   RUTOMQ_SKIP_CARGO=1    skip steps 2-3 (iterate on the e2e suite with an existing binary)
#   RUTOMQ_BIN=path        broker binary for the e2e suite (default target/release/rutomq)
#   RUTOMQ_TEST_PG_URL=url use this PostgreSQL instead of starting a private cluster
#   PYTHON=python3         interpreter used to create the venv
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
PYTHON=${PYTHON:-python3}
VENV=$ROOT/.venv
REQ=$ROOT/tests/requirements.txt
status=0

log() { echo "==> [$(date +%H:%M:%S)] $*"; }

is_root() { [ "$(id -u)" = 0 ]; }

apt_install() {
    local sudo=()
    if ! is_root; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo=(sudo -n)
        else
            echo "error: need root (or passwordless sudo) to apt-get install $*" >&2
            return 1
        fi
    fi
    log "apt-get install $*"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq || true
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

have_pg_server() {
    local d
    for d in "$(pg_config --bindir 2>/dev/null || true)" "$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/x)")" /usr/lib/postgresql/*/bin; do
        [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ] && return 0
    done
    return 1
}

# ---- 1. PostgreSQL server binaries ------------------------------------------
if ! have_pg_server; then
    apt_install postgresql
    have_pg_server || { echo "error: PostgreSQL server binaries still not found" >&2; exit 1; }
fi

# ---- 1b. OpenSSL ---------------------------------------------------------------
# datum-mq's rdkafka backend builds librdkafka against the system's OpenSSL
# (headers found with pkg-config); its TLS tests make certificates with the
# openssl tool.
if ! { command -v pkg-config >/dev/null 2>&1 && pkg-config --exists openssl \
        && command -v openssl >/dev/null 2>&1; }; then
    apt_install pkg-config libssl-dev openssl
fi

# ---- 1c. rpm, curl -------------------------------------------------------------
# test_packaging reads the .rpm's files and scripts with rpm -qlp; the quick
# start (test_quickstart) waits for its servers with curl.
if ! command -v rpm >/dev/null 2>&1; then
    apt_install rpm
fi
if ! command -v curl >/dev/null 2>&1; then
    apt_install curl
fi

# ---- 2-3. Rust ----------------------------------------------------------------
if [ "${RUTOMQ_SKIP_CARGO:-0}" != 1 ]; then
    if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
        PATH=$HOME/.cargo/bin:$PATH
    fi
    log "cargo build --release --workspace"
    cargo build --release --workspace
    # --no-fail-fast: one failing test binary must not hide the others.
    log "cargo test --release --workspace --no-fail-fast"
    if ! cargo test --release --workspace --no-fail-fast; then
        echo "error: cargo test failed (continuing with the e2e suite)" >&2
        status=1
    fi
fi

# ---- 4. Python venv -----------------------------------------------------------
want_hash=$( { cat "$REQ"; "$PYTHON" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)
stamp=$VENV/.requirements.sha256
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import sys' 2>/dev/null \
        && [ "$(cat "$stamp" 2>/dev/null || true)" = "$want_hash" ]; then
    log "venv $VENV is up to date"
else
    log "creating venv $VENV from $REQ"
    probe=$(mktemp -d)
    if ! "$PYTHON" -m venv "$probe/v" >/dev/null 2>&1; then
        apt_install python3-venv
    fi
    rm -rf "$probe"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQ"
    echo "$want_hash" > "$stamp"
fi

# The promised client versions (tests/requirements-promised.txt), beside the
# newest: a --target directory that tests put first on PYTHONPATH.
PROMISED_REQ=$ROOT/tests/requirements-promised.txt
PROMISED_PY=$ROOT/tests/.cache/py/promised
want_hash=$( { cat "$PROMISED_REQ"; "$VENV/bin/python" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)
if [ "$(cat "$PROMISED_PY/.requirements.sha256" 2>/dev/null || true)" = "$want_hash" ]; then
    log "$PROMISED_PY is up to date"
else
    log "installing $PROMISED_REQ into $PROMISED_PY"
    rm -rf "$PROMISED_PY"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --target "$PROMISED_PY" \
        -r "$PROMISED_REQ"
    echo "$want_hash" > "$PROMISED_PY/.requirements.sha256"
fi

# ---- 5. e2e suite -------------------------------------------------------------
# The Java/Go RoundTrip programs used by tests/e2e/test_java_go.py are built here,
# up front (idempotent, fast when unchanged), so a cold Maven/Go build is not
# counted against a single test's --timeout.
if [ -f tests/clients/build.sh ]; then
    log "tests/clients/build.sh (Java/Go RoundTrip clients)"
    if ! bash tests/clients/build.sh; then
        echo "error: tests/clients/build.sh failed (continuing; test_java_go will fail)" >&2
        status=1
    fi
fi
if [ -f tests/streams/build.sh ]; then
    log "tests/streams/build.sh (Kafka Streams program)"
    if ! bash tests/streams/build.sh; then
        echo "error: tests/streams/build.sh failed (continuing; test_streams will fail)" >&2
        status=1
    fi
fi
# Debian's kcat, unpacked from its packages (not installed), for the test
# that librdkafka before 2.11 compresses against rutomq.
log "tests/clients/kcat.sh (Debian's kcat)"
if ! bash tests/clients/kcat.sh >/dev/null; then
    echo "error: tests/clients/kcat.sh failed (continuing; test_admin_tools will fail)" >&2
    status=1
fi
# librdkafka 2.15.0's own test programs, built from its sources (npm),
# for test_librdkafka_suite (0081_admin against rutomq).
log "tests/clients/librdkafka-tests.sh (librdkafka's test-runner)"
if ! bash tests/clients/librdkafka-tests.sh >/dev/null; then
    echo "error: tests/clients/librdkafka-tests.sh failed (continuing; test_librdkafka_suite will fail)" >&2
    status=1
fi
# promtool from its Go module (minutes cold, so not inside a test's timeout),
# for test_observability's checks of the alerting rules and dashboard queries.
log "tests/clients/promtool.sh (Prometheus' promtool)"
if ! bash tests/clients/promtool.sh >/dev/null; then
    echo "error: tests/clients/promtool.sh failed (continuing; test_observability skips its promtool checks)" >&2
    status=1
fi
# The packaging and deployment tools, built from crates.io and the Go module
# proxy (minutes cold, seconds warm), so no test's timeout counts a cold build.
log "scripts/package.sh --tools (cargo-deb, cargo-generate-rpm)"
if ! bash scripts/package.sh --tools; then
    echo "error: scripts/package.sh --tools failed (continuing; test_packaging will fail)" >&2
    status=1
fi
log "packaging/quickstart/quickstart.sh tools (s3s-fs)"
if ! QS_TOOLS=$ROOT/tests/.cache/cargo-tools bash packaging/quickstart/quickstart.sh tools; then
    echo "error: quickstart.sh tools failed (continuing; test_quickstart will fail)" >&2
    status=1
fi
log "packaging/check-deploy.sh (helm, kubeconform; the chart and compose file)"
if ! bash packaging/check-deploy.sh >/dev/null; then
    echo "error: packaging/check-deploy.sh failed (continuing; test_deploy will fail)" >&2
    status=1
fi
# --durations: the slowest tests in the log, to keep the suite inside CI's
# 90-minute budget.
pytest_args=(-q tests/e2e --durations=25)
if "$VENV/bin/python" -c 'import pytest_timeout' 2>/dev/null; then
    pytest_args+=(--timeout=300)
fi
log "pytest ${pytest_args[*]} $*"
if ! "$VENV/bin/python" -m pytest "${pytest_args[@]}" "$@"; then
    status=1
fi

if [ "$status" != 0 ]; then
    log "FAILED"
else
    log "all tests passed"
fi
exit "$status"
