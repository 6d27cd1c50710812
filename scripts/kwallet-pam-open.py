#!/usr/bin/env python3
"""Starts kwalletd5 the way pam_kwallet5 does at desktop login, so its wallet is open without any
dialog: a pipe carries the wallet's 56-byte key hash (kept in HASH_FILE, random the first time) and
a listening Unix socket the session environment. kwalletd5 then creates the wallet (first start) or
opens it (later starts) and serves the Secret Service on the session bus headless.

    kwallet-pam-open.py HASH_FILE LOG_FILE   → prints kwalletd5's pid
"""
import os
import socket
import subprocess
import sys
import tempfile

hash_file, log_file = sys.argv[1], sys.argv[2]
if not os.path.exists(hash_file):
    with open(os.open(hash_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
        out.write(os.urandom(56))
with open(hash_file, "rb") as source:
    key = source.read()

read_end, write_end = os.pipe()
os.write(write_end, key)
os.close(write_end)
directory = tempfile.mkdtemp(prefix="ostack-kwallet-")
path = os.path.join(directory, "env.sock")
listener = socket.socket(socket.AF_UNIX)
listener.bind(path)
listener.listen(1)
environment = dict(os.environ, PAM_KWALLET5_LOGIN=path, QT_QPA_PLATFORM="offscreen")
with open(log_file, "ab") as log:
    daemon = subprocess.Popen(
        ["kwalletd5", "--pam-login", str(read_end), str(listener.fileno())],
        pass_fds=(read_end, listener.fileno()), env=environment,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
os.close(read_end)
client = socket.socket(socket.AF_UNIX)
client.connect(path)
client.sendall(b"OSTACK_KWALLET=1\n")
client.close()
listener.close()
os.unlink(path)
os.rmdir(directory)
print(daemon.pid, flush=True)
