"""The artifact preflight: a server that serves the file answers, whether or not it takes HEAD;
one that refuses the token or has no such file stops the build before it starts."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from xpu_release.errors import BuildFailed
from xpu_release.release.run.preflight import _reachable

TOKEN = "artifact-token-preflight"
BODY = b"\x1f\x8b" + b"a tarball" * 1000


class GetOnly(BaseHTTPRequestHandler):
    """A file server that answers GET and nothing else (http.server answers HEAD with 501 when a
    handler defines no do_HEAD; an object store's URL signed for GET answers HEAD with 403); it
    keeps the Range headers it was sent."""

    ranges: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        self.ranges.append(self.headers.get("Range"))
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.send_response(401)
            self.end_headers()
            return
        if self.path != "/blob.tar.gz":
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)  # the Range is ignored, as a plain server may: the whole body
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def get_only() -> Iterator[str]:
    GetOnly.ranges = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), GetOnly)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_a_server_that_takes_no_head_is_asked_for_one_byte_and_answers(get_only: str) -> None:
    _reachable(f"{get_only}/blob.tar.gz", TOKEN)

    assert GetOnly.ranges == ["bytes=0-0"]


def test_a_server_that_takes_no_head_still_refuses_a_missing_token(get_only: str) -> None:
    with pytest.raises(BuildFailed, match=re.escape("refused us (401); set XPU_RELEASE_ARTIFACT_TOKEN")):
        _reachable(f"{get_only}/blob.tar.gz", None)


def test_a_server_that_takes_no_head_and_has_no_such_file_stops_the_build(get_only: str) -> None:
    with pytest.raises(BuildFailed, match=re.escape("blob-2.tar.gz answered 404")):
        _reachable(f"{get_only}/blob-2.tar.gz", TOKEN)
