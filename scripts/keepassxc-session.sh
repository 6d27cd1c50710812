#!/usr/bin/env bash
# Inside dbus-run-session: KeePassXC as the Secret Service, headless and non-interactive, with a
# fresh database in a throw-away home. Called by with-keepassxc.sh.
#
# How it is made headless: QT_QPA_PLATFORM=offscreen (no display needed); TMPDIR and
# XDG_RUNTIME_DIR in the throw-away home (KeePassXC allows one instance per user, found through a
# lock and socket there); keepassxc.ini with its Secret Service integration on, no notification, no
# confirmation of access to or deletion of items (the dialogs a user would click through); a
# database whose root group is exposed as the Secret Service collection (the exposed group is the
# database's own custom data FDO_SECRETS_EXPOSED_GROUP, written here through keepassxc-cli's XML
# export and import); and the database opened at start with its password on stdin (--pw-stdin).
set -euo pipefail

home="$(mktemp -d "${TMPDIR:-/tmp}/ostack-keepassxc.XXXXXX")"
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
  rm -rf "$home"
}
trap cleanup EXIT

export HOME="$home" TMPDIR="$home" XDG_CONFIG_HOME="$home/config" XDG_DATA_HOME="$home/data"
export XDG_CACHE_HOME="$home/cache" XDG_RUNTIME_DIR="$home/run" QT_QPA_PLATFORM=offscreen
mkdir -p "$XDG_CONFIG_HOME/keepassxc" "$XDG_DATA_HOME" "$XDG_CACHE_HOME" "$XDG_RUNTIME_DIR"
chmod 700 "$home" "$XDG_RUNTIME_DIR"

# A throw-away database: its password protects nothing but this session's test items.
password="ostack-test-$$"
printf '%s\n%s\n' "$password" "$password" | keepassxc-cli db-create -p -t 100 "$home/base.kdbx" >/dev/null 2>&1
printf '%s\n' "$password" | keepassxc-cli export -f xml "$home/base.kdbx" >"$home/base.xml" 2>/dev/null
/usr/bin/python3 - "$home/base.xml" <<'PY'
import base64
import re
import sys
import uuid

path = sys.argv[1]
text = open(path, encoding="utf-8").read()
root = re.search(r"<Root>\s*<Group>\s*<UUID>([^<]+)</UUID>", text)
group = uuid.UUID(bytes=base64.b64decode(root.group(1)))
item = "<Item><Key>FDO_SECRETS_EXPOSED_GROUP</Key><Value>{%s}</Value></Item>" % group
meta, rest = text.split("</Meta>", 1)
if "<CustomData>" in meta:
    meta = meta.replace("<CustomData>", "<CustomData>" + item, 1)
elif "<CustomData/>" in meta:
    meta = meta.replace("<CustomData/>", "<CustomData>" + item + "</CustomData>", 1)
else:
    meta += "<CustomData>" + item + "</CustomData>"
open(path, "w", encoding="utf-8").write(meta + "</Meta>" + rest)
PY
printf '%s\n%s\n' "$password" "$password" | keepassxc-cli import -p -t 100 "$home/base.xml" "$home/ostack.kdbx" >/dev/null 2>&1
rm -f "$home/base.kdbx" "$home/base.xml"
cat > "$XDG_CONFIG_HOME/keepassxc/keepassxc.ini" <<'INI'
[General]
ConfigVersion=2
UpdateCheckMessageShown=true

[GUI]
CheckForUpdates=false
MinimizeOnStartup=true

[FdoSecrets]
Enabled=true
ShowNotification=false
ConfirmDeleteItem=false
ConfirmAccessItem=false
INI

printf '%s\n' "$password" | keepassxc --pw-stdin "$home/ostack.kdbx" >"$home/keepassxc.log" 2>&1 &
pid=$!

# Asking for org.freedesktop.secrets before KeePassXC owns it would start gnome-keyring (D-Bus
# activation): first wait for the owner, then for the default collection to be unlocked.
owner() {
  dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
    org.freedesktop.DBus.GetNameOwner string:org.freedesktop.secrets >/dev/null 2>&1
}
unlocked() {
  local collection
  collection="$(gdbus call --session --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets \
    --method org.freedesktop.Secret.Service.ReadAlias default 2>/dev/null | grep -o "/org/freedesktop/secrets/collection/[A-Za-z0-9_]*")" || return 1
  gdbus call --session --dest org.freedesktop.secrets --object-path "$collection" \
    --method org.freedesktop.DBus.Properties.Get org.freedesktop.Secret.Collection Locked 2>/dev/null | grep -q false
}
for _ in $(seq 1 300); do owner && break; sleep 0.05; done
for _ in $(seq 1 300); do unlocked && break; sleep 0.05; done
if ! unlocked; then
  echo "keepassxc-session: KeePassXC did not serve an unlocked default collection (log below)" >&2
  cat "$home/keepassxc.log" >&2 || true
  exit 1
fi

export OSTACK_KEYRING_SESSION=1 OSTACK_KEYRING_PROVIDER=keepassxc
set +e
"$@"
status=$?
set -e
exit "$status"
