#!/usr/bin/env bash
# Run a command inside a private D-Bus session with an unlocked gnome-keyring, so keyring
# tests meet a real Secret Service (never skipped, never a mock).
#
#   scripts/with-keyring.sh swift test
#
# When already inside such a session (OSTACK_KEYRING_SESSION=1) the command runs directly.
set -euo pipefail

if [ "${OSTACK_KEYRING_SESSION:-}" = "1" ]; then
  exec "$@"
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec dbus-run-session -- bash "$here/keyring-session.sh" "$@"
