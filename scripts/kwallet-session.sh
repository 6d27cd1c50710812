#!/usr/bin/env bash
# Inside dbus-run-session: KWallet (kwalletd5) as the Secret Service, headless and non-interactive,
# with a fresh wallet in a throw-away home. Called by with-kwallet.sh.
#
# How it is made headless: QT_QPA_PLATFORM=offscreen (no display needed); kwalletrc with the wallet
# enabled, "First Use=false" (no first-use wizard), "Prompt on Open=false" (no per-application access
# dialog) and the Secret Service API enabled; and the wallet opened the way pam_kwallet5 opens it at
# desktop login (kwallet-pam-open.py: its key hash on a pipe), so no password dialog is ever shown.
# kwalletd5 builds its Secret Service collections from the wallets that exist when it starts, so it
# is started twice: once to create the wallet, then again to serve it.
set -euo pipefail

home="$(mktemp -d "${TMPDIR:-/tmp}/ostack-kwallet.XXXXXX")"
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
  rm -rf "$home"
}
trap cleanup EXIT

export XDG_CONFIG_HOME="$home/config" XDG_DATA_HOME="$home/data" XDG_RUNTIME_DIR="$home/run"
export QT_QPA_PLATFORM=offscreen
mkdir -p "$XDG_CONFIG_HOME" "$XDG_DATA_HOME" "$XDG_RUNTIME_DIR"
chmod 700 "$home" "$XDG_RUNTIME_DIR"
cat > "$XDG_CONFIG_HOME/kwalletrc" <<'RC'
[Wallet]
Enabled=true
First Use=false
Default Wallet=kdewallet
Use One Wallet=true
Prompt on Open=false
Close When Idle=false
Leave Open=true

[org.freedesktop.secrets]
apiEnabled=true
RC

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python=/usr/bin/python3

owner() {
  dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
    org.freedesktop.DBus.GetNameOwner string:org.freedesktop.secrets >/dev/null 2>&1
}
wait_for_owner() {
  for _ in $(seq 1 200); do owner && return 0; sleep 0.05; done
  echo "kwallet-session: kwalletd5 did not register org.freedesktop.secrets (log: $home/kwalletd.log)" >&2
  cat "$home/kwalletd.log" >&2 || true
  exit 1
}

# 1. Create the wallet.
pid="$("$python" "$here/kwallet-pam-open.py" "$home/wallet.hash" "$home/kwalletd.log")"
wait_for_owner
for _ in $(seq 1 100); do [ -s "$XDG_DATA_HOME/kwalletd/kdewallet.kwl" ] && break; sleep 0.05; done
kill "$pid"
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
for _ in $(seq 1 100); do owner || break; sleep 0.05; done

# 2. Serve it, open, with its default collection unlocked.
pid="$("$python" "$here/kwallet-pam-open.py" "$home/wallet.hash" "$home/kwalletd.log")"
wait_for_owner
if ! "$python" "$here/unlock-default-collection.py" >/dev/null; then
  echo "kwallet-session: the default collection did not come up unlocked" >&2
  exit 1
fi

export OSTACK_KEYRING_SESSION=1 OSTACK_KEYRING_PROVIDER=kwallet
set +e
"$@"
status=$?
set -e
exit "$status"
