"""A small fault-injecting HTTP proxy in front of a real registry (loopback only).

Faults are switched on per test: 429 with Retry-After, bursts of 503, a connection reset in
the middle of a blob upload, a slow endpoint, an endpoint down for good, a bearer-token
challenge with its own token service, and PUTs refused for a path (a manifest it will not
take). Everything else is forwarded byte for byte.
"""

from __future__ import annotations

import base64
import http.client
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-authorization"}


@dataclass
class Faults:
    throttle: int = 0  # answer the next N requests 429
    retry_after: str = "1"
    unavailable: int = 0  # answer the next N requests 503
    reset_uploads: int = 0  # break the next N blob uploads half-way (connection reset)
    delay: float = 0.0  # seconds added to every request
    down: bool = False  # every request 503, for good
    bearer: tuple[str, str] | None = None  # (user, password) the token service accepts
    refuse_put: str | None = None  # answer 400 to every PUT whose path contains this
    seen: list[str] = field(default_factory=list)
    uploads_completed: int = 0
    tokens_issued: int = 0


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream  # host:port of a plain-HTTP registry
        self.faults = Faults()
        self._lock = threading.Lock()
        self._token = secrets.token_hex(16)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                proxy.handle(self)

            do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _take(self, name: str) -> bool:
        with self._lock:
            left = getattr(self.faults, name)
            if left > 0:
                setattr(self.faults, name, left - 1)
                return True
            return False

    def _reply(
        self, h: BaseHTTPRequestHandler, status: int, headers: dict[str, str], body: bytes = b""
    ) -> None:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(body)

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        f = self.faults
        f.seen.append(f"{h.command} {h.path}")
        length = int(h.headers.get("Content-Length") or 0)
        if f.delay:
            time.sleep(f.delay)
        if h.path.startswith("/token"):
            self._token_service(h)
            return
        if f.down or self._take("unavailable"):
            h.rfile.read(length)
            self._reply(h, 503, {"Content-Type": "application/json"}, b'{"errors":[{"code":"UNAVAILABLE"}]}')
            return
        if self._take("throttle"):
            h.rfile.read(length)
            self._reply(h, 429, {"Retry-After": f.retry_after})
            return
        if f.bearer and h.headers.get("Authorization") != f"Bearer {self._token}":
            h.rfile.read(length)
            challenge = (
                f'Bearer realm="http://{self.host}/token",service="fault-proxy",'
                'scope="repository:any:pull,push"'
            )
            self._reply(h, 401, {"WWW-Authenticate": challenge})
            return
        if f.refuse_put and h.command == "PUT" and f.refuse_put in h.path:
            h.rfile.read(length)
            self._reply(h, 400, {"Content-Type": "application/json"}, b'{"errors":[{"code":"DENIED"}]}')
            return
        is_upload = h.command in ("PUT", "PATCH") and "/blobs/uploads/" in h.path and length > 0
        if is_upload and self._take("reset_uploads"):
            h.rfile.read(max(1, length // 2))
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            h.connection.close()
            h.close_connection = True
            return
        self._forward(h, length, is_upload)

    def _token_service(self, h: BaseHTTPRequestHandler) -> None:
        expected = self.faults.bearer
        auth = h.headers.get("Authorization", "")
        if expected and auth == "Basic " + base64.b64encode(f"{expected[0]}:{expected[1]}".encode()).decode():
            self.faults.tokens_issued += 1
            self._reply(
                h, 200, {"Content-Type": "application/json"}, f'{{"token": "{self._token}"}}'.encode()
            )
        else:
            self._reply(h, 401, {})

    def _forward(self, h: BaseHTTPRequestHandler, length: int, is_upload: bool) -> None:
        conn = http.client.HTTPConnection(self.upstream, timeout=120)
        headers = {
            k: v for k, v in h.headers.items() if k.lower() not in HOP and k.lower() != "authorization"
        }
        body = h.rfile.read(length) if length else None
        conn.request(h.command, h.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        h.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() in HOP or k.lower() == "content-length":
                continue
            if k.lower() == "location" and v.startswith("http"):
                parts = urlsplit(v)
                v = f"http://{self.host}{parts.path}" + (f"?{parts.query}" if parts.query else "")
            h.send_header(k, v)
        # A HEAD answer has no body but announces the size of the one a GET would have.
        size = resp.getheader("Content-Length", "0") if h.command == "HEAD" else str(len(data))
        h.send_header("Content-Length", size)
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(data)
        if is_upload and h.command == "PUT" and resp.status == 201:
            self.faults.uploads_completed += 1
        conn.close()
