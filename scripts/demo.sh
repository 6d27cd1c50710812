#!/usr/bin/env bash
# make demo: a narrated walkthrough against a local ostack-devserver, in a temporary OSTACK_HOME and
# a private keyring namespace (inside its own D-Bus session and gnome-keyring when no Secret Service
# is usable here). Cleans up after itself.
#
# Two accounts, switching, records, an offline change synced later, a conflict resolved, PIN lock and
# unlock, audit, audit verify, doctor.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${OSTACK_KEYRING_SESSION:-}" != "1" ]; then
  if ! { printf probe | secret-tool store --label="ostack demo probe" app ostack-demo-probe k v >/dev/null 2>&1 \
         && secret-tool clear app ostack-demo-probe k v >/dev/null 2>&1; }; then
    echo "No usable Secret Service here: running the demo in its own D-Bus session and gnome-keyring."
    exec ./scripts/with-keyring.sh "$0" "$@"
  fi
fi

echo "Building ostack and ostack-devserver…"
swift build --product ostack >/dev/null
swift build --package-path DevServer >/dev/null
ostack="$PWD/.build/debug/ostack"
devserver="$PWD/DevServer/.build/debug/ostack-devserver"

home="$(mktemp -d "${TMPDIR:-/tmp}/ostack-demo.XXXXXX")"
export OSTACK_HOME="$home" OSTACK_KEYRING_PREFIX="ostack-demo-$$" NO_COLOR=1
unset OSTACK_ACCOUNT
server_log="$home/devserver.log"
"$devserver" --port 0 >"$server_log" 2>&1 &
server_pid=$!
cleanup() {
  "$ostack" agent stop >/dev/null 2>&1 || true
  "$ostack" accounts remove work --force >/dev/null 2>&1 || true
  "$ostack" accounts remove personal --force >/dev/null 2>&1 || true
  kill "$server_pid" 2>/dev/null || true
  rm -rf "$home"
}
trap cleanup EXIT
for _ in $(seq 100); do grep -q "listening on" "$server_log" 2>/dev/null && break; sleep 0.05; done
server="$(sed -n 's/^listening on //p' "$server_log")"

say() { printf '\n\033[1m# %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

echo "ostack demo — server $server, home $home, keyring prefix $OSTACK_KEYRING_PREFIX"

say "Sign in to two accounts (passwords come from stdin or a no-echo prompt, never argv)"
printf 'alice-pass\n' | run "$ostack" login --server "$server" --email alice@example.com --password-stdin --alias work
printf 'bob-pass\n' | run "$ostack" login --server "$server" --email bob@example.com --password-stdin --alias personal --no-switch

say "Every account, the default marked with *"
run "$ostack" accounts list

say "Which account a command uses: the default…"
run "$ostack" status
say "…or per shell with OSTACK_ACCOUNT, or per command with --account"
printf '$ OSTACK_ACCOUNT=personal %s status\n' "$ostack"
OSTACK_ACCOUNT=personal "$ostack" status
run "$ostack" status --account work --json
echo

say "Switch the default"
run "$ostack" switch personal
run "$ostack" accounts list

say "Refresh a session (single flight across processes; rotated tokens are adopted)"
run "$ostack" auth refresh --account work

say "Each account has its own keyring namespace (secrets), database and key"
secret-tool search --all namespace "$OSTACK_KEYRING_PREFIX:auth:${server#http://}::usr_alice" 2>&1 \
  | grep -E "attribute.(namespace|kind)" | sort -u
find "$home/data/accounts" -name data.db | sed "s|$home|\$OSTACK_HOME|"

say "Objects and their fields come from the server's metadata (cached per account)"
run "$ostack" objects list --account work
run "$ostack" objects show task --account work

say "Create records: validated against metadata first, written locally, pushed at once"
run "$ostack" records create task --account work --set title="Write the quarterly report" --set amount=1200 --set priority=high
run "$ostack" records create task --account work --set amount=1.234 || echo "(exit $?: checked before anything is written)"

say "Mirror the object locally; reads then work offline, with the server's filter semantics"
run "$ostack" sync track task --account work
curl -s -X POST -H 'Content-Type: application/json' -d '{"object":"task","count":500,"ids":"sequential"}' "$server/__control__/seed" >/dev/null
run "$ostack" sync --account work
run "$ostack" records list task --account work --filter "status = 'open' and (amount >= 900 or title contains 'report')" --fields title,amount --limit 5

say "An offline change: saved and queued, pushed by the next sync"
curl -s -X POST -H 'Content-Type: application/json' -d '{"action":"drop-before","count":1000}' "$server/__control__/faults" >/dev/null
run "$ostack" records update task tsk_s1 --account work --set status=in_progress
run "$ostack" queue list --account work
curl -s -X DELETE "$server/__control__/faults" >/dev/null
run "$ostack" sync --account work
run "$ostack" status --account work

say "A conflict: the same field changed here and on the server"
curl -s -X POST -H 'Content-Type: application/json' -d '{"object":"task","id":"tsk_s2","fields":{"title":"Renamed on the server"}}' "$server/__control__/modify" >/dev/null
run "$ostack" records update task tsk_s2 --account work --set title="Renamed here" || echo "(exit $?)"
run "$ostack" conflicts list --account work
conflict="$("$ostack" conflicts list --account work --json | sed -n 's/.*"id":"\(q_[0-9a-f.]*\)".*/\1/p')"
run "$ostack" conflicts show "$conflict" --account work
run "$ostack" conflicts resolve "$conflict" --keep mine --account work
run "$ostack" records get task tsk_s2 --account work

say "Lock local data behind a PIN (the recovery key is shown once)"
printf '7319\n' | run "$ostack" pin set work --pin-stdin
run "$ostack" lock work
run "$ostack" status --account work
run "$ostack" auth refresh --account work || echo "(exit $?: locked accounts refuse auth and data commands)"
printf '0000\n' | run "$ostack" unlock work --pin-stdin || echo "(exit $?)"
printf '7319\n' | run "$ostack" unlock work --pin-stdin
run "$ostack" agent status
run "$ostack" auth refresh --account work

say "The audit trail: every event of the account, chained and anchored in the keyring"
run "$ostack" audit --account work --limit 12
run "$ostack" audit verify --all

say "Doctor: keyring, files, database, session, queue, sync, audit, clock"
run "$ostack" doctor

say "Errors are ours, with a hint and a stable exit code"
run "$ostack" switch nobody || echo "(exit $?)"
printf 'wrong\n' | run "$ostack" login --server "$server" --email alice@example.com --password-stdin || echo "(exit $?)"

say "Sign out (data kept) and remove (crypto-erase)"
run "$ostack" logout personal
run "$ostack" accounts remove personal
run "$ostack" status --all

echo
echo "Done. Everything above lived in $home and the keyring prefix $OSTACK_KEYRING_PREFIX; both are gone now."
