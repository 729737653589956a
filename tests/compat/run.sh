#!/usr/bin/env bash
# The dated compatibility result: runs the end-to-end suite (scripts/test.sh,
# every client at the versions the product promises and the newest) with a
# JUnit XML result, and writes docs/compatibility/<today>.md from it
# (tests/compat/report.py). Exits non-zero if a test failed; the result file
# is written either way (failures listed).
#
# Usage: tests/compat/run.sh [PYTEST ARGS...]   (e.g. -k flink to refresh one area)
# Env:   as scripts/test.sh (RUTOMQ_SKIP_CARGO=1 reuses the built binary)
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
date=$(date -u +%F)
xml=$(mktemp --suffix=.xml)
trap 'rm -f "$xml"' EXIT
bash scripts/test.sh --junitxml="$xml" "$@"
status=$?
[[ -s "$xml" ]] || { echo "tests/compat/run.sh: no JUnit result ($xml)" >&2; exit 1; }
mkdir -p docs/compatibility
rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]] || rev="$rev + local changes"
.venv/bin/python tests/compat/report.py "$xml" "$date" "$rev" > "docs/compatibility/$date.md"
echo "tests/compat/run.sh: wrote docs/compatibility/$date.md (suite exit $status)"
exit $status
