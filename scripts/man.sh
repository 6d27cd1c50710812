#!/usr/bin/env bash
# make man: docs/man/ostack.1 = the page swift-argument-parser's generate-manual builds from the command
# tree, with its generic EXIT STATUS replaced by the hand-written sections in docs/man/sections.mdoc
# (ENVIRONMENT, FILES, EXIT STATUS, EXAMPLES, SEE ALSO).
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
${SWIFT:-swift} package --allow-writing-to-directory "$out" generate-manual --output-directory "$out" >/dev/null
page="$out/ostack.1"
# Everything before the generated EXIT STATUS, then ours.
awk '/^\.Sh "EXIT STATUS"/ { exit } { print }' "$page" > docs/man/ostack.1
cat docs/man/sections.mdoc >> docs/man/ostack.1
echo "docs/man/ostack.1 written"
