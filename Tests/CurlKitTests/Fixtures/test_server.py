#!/usr/bin/env python3
"""Loopback HTTP/1.1 server for CurlKit's tests. Prints its port on the first line.

Routes: /echo (any method: JSON of method, path, headers, body), /not-modified (304),
/slow?seconds=S, /big?bytes=N, /redirect?to=URL&status=302, /drop (closes without a response),
/connections (how many TCP connections were accepted so far, and how many /drop requests arrived).
"""
import json
import socket
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

connections = 0
drops = 0
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        global connections
        with lock:
            connections += 1
        super().setup()
        # Headers and body go out in separate writes: without NODELAY, Nagle + delayed ACK add 40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args):
        pass

    def send_json(self, status, payload):
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Multi", "one")
        self.send_header("X-Multi", "two")
        self.end_headers()
        self.wfile.write(body)

    def handle_any(self):
        url = urlparse(self.path)
        query = parse_qs(url.query)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if url.path == "/echo":
            self.send_json(200, {
                "method": self.command, "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body.decode("utf-8", "replace"),
            })
        elif url.path == "/not-modified":
            self.send_response(304)
            self.send_header("ETag", '"abc"')
            self.end_headers()
        elif url.path == "/slow":
            time.sleep(float(query.get("seconds", ["3"])[0]))
            self.send_json(200, {"slow": True})
        elif url.path == "/big":
            size = int(query.get("bytes", ["1000"])[0])
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            self.wfile.write(b"x" * size)
        elif url.path == "/big-headers":
            self.send_response(200)
            for index in range(int(query.get("lines", ["10"])[0])):
                self.send_header("X-Filler-%d" % index, "a" * 90)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")
        elif url.path == "/redirect":
            self.send_response(int(query.get("status", ["302"])[0]))
            self.send_header("Location", query["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif url.path == "/drop":
            global drops
            with lock:
                drops += 1
            self.close_connection = True
            self.connection.shutdown(2)
        elif url.path == "/connections":
            with lock:
                count, dropped = connections, drops
            self.send_json(200, {"connections": count, "drops": dropped})
        else:
            self.send_json(404, {"error": "no route"})

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = handle_any

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


server = Server(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
