#!/usr/bin/env python3
"""A fake Secret Service that owns org.freedesktop.secrets and never answers: every method call
sent to it waits forever. Used to prove that ostack's keyring calls honour their deadline."""
import sys
import time

import dbus

bus = dbus.SessionBus()
bus.request_name("org.freedesktop.secrets", dbus.bus.NAME_FLAG_DO_NOT_QUEUE)
print("ready", flush=True)
# No main loop: incoming calls are never dispatched, so none is ever answered.
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 60)
