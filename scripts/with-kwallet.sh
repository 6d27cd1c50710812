#!/usr/bin/env bash
# Run a command inside a private D-Bus session whose Secret Service (org.freedesktop.secrets) is
# KWallet's kwalletd5, headless and without any dialog, so keyring tests also meet KWallet:
#
#   scripts/with-kwallet.sh swift test --skip-build --filter SecretServiceKeyringTests
#
# Needs libkf5wallet-bin (kwalletd5) and libqca-qt5-2-plugins (make deps installs both).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec dbus-run-session -- bash "$here/kwallet-session.sh" "$@"
