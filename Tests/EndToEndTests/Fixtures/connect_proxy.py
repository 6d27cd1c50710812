#!/usr/bin/env python3
"""An HTTP proxy on 127.0.0.1 for one test. Usage: connect_proxy.py TARGET_PORT. Prints its port on
one line, then, for each request it is sent, prints the request line. A CONNECT (any host and port)
is tunnelled to 127.0.0.1:TARGET_PORT, so that a name only the proxy "resolves" reaches a local
server and nothing leaves this machine; any other request gets a 502 and no answer from anywhere."""
import socket
import sys
import threading

from relay import pump

target = int(sys.argv[1])
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(64)
print(listener.getsockname()[1], flush=True)
lock = threading.Lock()


def serve(client):
    head = b""
    while b"\r\n\r\n" not in head and len(head) < 65536:
        chunk = client.recv(4096)
        if not chunk:
            break
        head += chunk
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    with lock:
        print(line, flush=True)
    if not line.startswith("CONNECT "):
        client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        client.close()
        return
    upstream = socket.create_connection(("127.0.0.1", target))
    client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
    pump(upstream, client)


while True:
    connection, _ = listener.accept()
    threading.Thread(target=serve, args=(connection,), daemon=True).start()
