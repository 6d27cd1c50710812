#!/usr/bin/env bash
# make bench: release builds, then every benchmark against its baseline measured in the same run.
# Prints a table and writes bench-results.json (docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
# The release binary links the Swift runtime statically, as `make build-release` builds it
# (docs/decisions/0008-fast-start-up.md); ostack-bench too, so the two builds share one cache.
swift build -c release --static-swift-stdlib --product ostack
swift build -c release --static-swift-stdlib --product ostack-bench
swift build -c release --package-path DevServer
export OSTACK_DEVSERVER="$PWD/DevServer/.build/release/ostack-devserver"
exec ./scripts/with-keyring.sh .build/release/ostack-bench --json bench-results.json "$@"
