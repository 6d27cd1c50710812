#!/usr/bin/env bash
# Inside dbus-run-session: start gnome-keyring with a fresh, unlocked login collection in a
# throw-away data directory, wait until the default collection reports Locked=false, then run
# the command. Called by with-keyring.sh.
set -euo pipefail

keyring_home="$(mktemp -d "${TMPDIR:-/tmp}/ostack-keyring.XXXXXX")"
# gnome-keyring-daemon exits by itself when this D-Bus session closes.
cleanup() { rm -rf "$keyring_home"; }
trap cleanup EXIT

# gnome-keyring keeps its collections under $XDG_DATA_HOME/keyrings.
export XDG_DATA_HOME="$keyring_home/data"
export XDG_RUNTIME_DIR="$keyring_home/run"
mkdir -p "$XDG_DATA_HOME" "$XDG_RUNTIME_DIR"
chmod 700 "$keyring_home" "$XDG_RUNTIME_DIR"

# A non-empty password creates and unlocks a "login" collection that becomes the default.
printf '%s' "ostack-test-keyring" | gnome-keyring-daemon --unlock --components=secrets >/dev/null

# Wait (bounded) until the daemon owns org.freedesktop.secrets. GetNameOwner never D-Bus-activates
# a service; asking the collection first could activate a second, empty gnome-keyring that wins the
# race for the name and never has an unlocked login collection.
owned=""
for _ in $(seq 1 200); do
  if dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
      org.freedesktop.DBus.GetNameOwner string:org.freedesktop.secrets >/dev/null 2>&1; then
    owned=1
    break
  fi
  sleep 0.05
done
if [ -z "$owned" ]; then
  echo "keyring-session: gnome-keyring did not register on the session bus" >&2
  exit 1
fi

# Then until the default collection exists and is unlocked.
locked=""
for _ in $(seq 1 100); do
  locked="$(dbus-send --session --print-reply --dest=org.freedesktop.secrets \
    /org/freedesktop/secrets/aliases/default org.freedesktop.DBus.Properties.Get \
    string:org.freedesktop.Secret.Collection string:Locked 2>/dev/null | awk '/boolean/ {print $3}')" || true
  if [ "$locked" = "false" ]; then break; fi
  sleep 0.1
done
if [ "$locked" != "false" ]; then
  echo "keyring-session: the default collection did not come up unlocked" >&2
  exit 1
fi

export OSTACK_KEYRING_SESSION=1 OSTACK_KEYRING_PROVIDER=gnome-keyring
"$@"
