#!/usr/bin/env bash
# make bench: release build, then every benchmark against its baseline measured in the same run.
# Prints a table and writes bench-results.json (SPEC §12).
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product ostack --product ostack-bench >/dev/null 2>&1 || swift build -c release
exec ./scripts/with-keyring.sh .build/release/ostack-bench --json bench-results.json "$@"
