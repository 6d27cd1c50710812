#!/usr/bin/env bash
# make demo: a narrated walkthrough in a temporary OSTACK_HOME and a private keyring namespace.
#
# The full walkthrough (two accounts, login, records, offline change, sync, PIN lock/unlock, switch,
# audit, doctor) grows with the product. Today it shows what exists.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${OSTACK_KEYRING_SESSION:-}" != "1" ] && ! secret-tool search --all app ostack-demo-probe >/dev/null 2>&1; then
  # No usable Secret Service here: run the demo inside its own D-Bus session and gnome-keyring.
  exec ./scripts/with-keyring.sh "$0" "$@"
fi

swift build --product ostack >/dev/null
ostack="$PWD/.build/debug/ostack"
home="$(mktemp -d "${TMPDIR:-/tmp}/ostack-demo.XXXXXX")"
trap 'rm -rf "$home"' EXIT
export OSTACK_HOME="$home" OSTACK_KEYRING_PREFIX="ostack-demo-$$"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

echo "ostack demo — temporary home $home, keyring prefix $OSTACK_KEYRING_PREFIX"
step "$ostack" --version
step "$ostack" --help
step "$ostack" accounts list
step "$ostack" status || true
echo
echo "The account, sync, PIN and audit walkthrough arrives with the next issues."
