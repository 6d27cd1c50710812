#!/usr/bin/env python3
"""Unlocks gnome-keyring's login collection without a GUI prompter, through gnome-keyring's
internal D-Bus interface (the password arrives on stdin)."""
import sys

import dbus

password = sys.stdin.read().encode()
bus = dbus.SessionBus()
service = bus.get_object("org.freedesktop.secrets", "/org/freedesktop/secrets")
_, session = dbus.Interface(service, "org.freedesktop.Secret.Service").OpenSession("plain", dbus.String("", variant_level=1))
internal = dbus.Interface(service, "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface")
secret = dbus.Struct((session, dbus.ByteArray(b""), dbus.ByteArray(password), "text/plain"), signature="oayays")
internal.UnlockWithMasterPassword(dbus.ObjectPath("/org/freedesktop/secrets/collection/login"), secret)
print("unlocked")
