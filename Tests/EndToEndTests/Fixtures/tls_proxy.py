#!/usr/bin/env python3
"""A TLS front for a plain-HTTP server on 127.0.0.1, with a certificate from a private CA made on
the spot (openssl). Usage: tls_proxy.py WORKDIR TARGET_PORT [DNS_NAME]. Prints "PORT CA_PEM_PATH"
on one line, then forwards every accepted TLS connection byte for byte to TARGET_PORT. The
certificate is for 127.0.0.1, and for DNS_NAME when given."""
import os
import socket
import ssl
import subprocess
import sys
import threading

from relay import pump

workdir, target = sys.argv[1], int(sys.argv[2])
dns_name = sys.argv[3] if len(sys.argv) > 3 else None


def run(*args):
    subprocess.run(args, check=True, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
    "-days", "2", "-subj", "/CN=ostack test CA")
run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
    "-subj", "/CN=127.0.0.1")
with open(os.path.join(workdir, "san.ext"), "w") as ext:
    ext.write("subjectAltName=IP:127.0.0.1" + (",DNS:" + dns_name if dns_name else "") + "\n")
run("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
    "-out", "server.pem", "-days", "2", "-extfile", "san.ext")

context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(os.path.join(workdir, "server.pem"), os.path.join(workdir, "server.key"))
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(64)
print(listener.getsockname()[1], os.path.join(workdir, "ca.pem"), flush=True)


def serve(raw):
    try:
        tls = context.wrap_socket(raw, server_side=True)
    except (ssl.SSLError, OSError):
        raw.close()
        return
    upstream = socket.create_connection(("127.0.0.1", target))
    threading.Thread(target=pump, args=(tls, upstream), daemon=True).start()
    pump(upstream, tls)


while True:
    connection, _ = listener.accept()
    threading.Thread(target=serve, args=(connection,), daemon=True).start()
