#!/usr/bin/env python3
"""Unlocks the Secret Service's default collection through the standard API (Unlock, then the prompt
it returns), for providers whose wallet is already open and so never show a dialog (KWallet opened by
kwallet-pam-open.py). Prints the collection and its state; exits 1 when it stays locked."""
import sys
import time

import dbus

bus = dbus.SessionBus()
root = bus.get_object("org.freedesktop.secrets", "/org/freedesktop/secrets")
service = dbus.Interface(root, "org.freedesktop.Secret.Service")
alias = service.ReadAlias("default")
if alias == "/":
    print("no default collection")
    sys.exit(1)


def locked():
    collection = bus.get_object("org.freedesktop.secrets", alias)
    properties = dbus.Interface(collection, "org.freedesktop.DBus.Properties")
    return bool(properties.Get("org.freedesktop.Secret.Collection", "Locked"))


if locked():
    _, prompt = service.Unlock([alias])
    if prompt != "/":
        dbus.Interface(bus.get_object("org.freedesktop.secrets", prompt), "org.freedesktop.Secret.Prompt").Prompt("")
    for _ in range(100):
        if not locked():
            break
        time.sleep(0.05)
state = "locked" if locked() else "unlocked"
print(alias, state)
sys.exit(0 if state == "unlocked" else 1)
