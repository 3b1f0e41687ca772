"""A registry that attacks its client below the level the fake registry fakes: its status line,
headers and redirects. ``evil_registry(answer)`` serves every request with ``answer(handler)``,
which writes whatever it likes to ``handler.wfile``; ``stopped`` is set when the test ends, so
an answer that trickles for ever stops then."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Answer = Callable[["Handler"], None]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    @property
    def stopped(self) -> threading.Event:
        return self.server.stopped

    def send(self, code: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _route(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        with contextlib.suppress(OSError):  # the client left: as it should
            self.server.answer(self)

    do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = _route


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, answer: Answer, address: str) -> None:
        super().__init__((address, 0), Handler)
        self.answer = answer
        self.stopped = threading.Event()

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hung up (as a deadline makes it): not the test's output


def trickles(h: Handler) -> None:
    """An answer: 20 bytes a second of a 100,000-byte JSON body (its headers at once)."""
    h.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
    h.wfile.flush()
    while h.command != "HEAD" and not h.stopped.wait(0.05):
        h.wfile.write(b"x")
        h.wfile.flush()


@contextmanager
def evil_registry(answer: Answer, address: str = "127.0.0.1") -> Iterator[tuple[str, threading.Event]]:
    """``host:port`` of a server (on ``address``, a loopback one) answering every request with
    ``answer``, and its stop event."""
    server = _Server(answer, address)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"{address}:{server.server_address[1]}", server.stopped
    finally:
        server.stopped.set()
        server.shutdown()
        server.server_close()


@contextmanager
def silent_registry(address: str = "127.0.0.1") -> Iterator[str]:
    """``host:port`` of a server that takes every connection and never sends a byte (a region
    whose load balancer accepts and whose registry behind it is gone)."""
    server = socket.create_server((address, 0), backlog=256)
    server.settimeout(0.05)
    held: list[socket.socket] = []
    stop = threading.Event()

    def take() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    try:
        yield f"{address}:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()
