#!/usr/bin/env bash
# Run a command inside a private D-Bus session whose Secret Service (org.freedesktop.secrets) is
# KeePassXC, headless and without any dialog, so keyring tests also meet KeePassXC:
#
#   scripts/with-keepassxc.sh swift test --skip-build --filter SecretServiceKeyringTests
#
# Needs keepassxc (make deps installs it).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec dbus-run-session -- bash "$here/keepassxc-session.sh" "$@"
