"""Reading a blob from an endpoint while the caller works on what has arrived.

``read_blob`` reads a blob's bytes a few chunks ahead on a thread of its own, so the caller's
hashing and inflating (``verify --deep``, the identity check) run beside the network read
rather than after it. Memory stays at a few chunks.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterator

import requests

from ..errors import WireError
from .registry import RegistryClient

AHEAD = 8  # chunks read ahead of the caller


def read_blob(client: RegistryClient, repo: str, digest: str, chunk: int = 1 << 20) -> Iterator[bytes]:
    """A blob's bytes in chunks. WireError if it is missing or the connection breaks; the bytes
    are not checked here (the caller hashes them). Closing the iterator early stops the read."""
    resp = client.open_blob(repo, digest)
    ahead: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=AHEAD)

    def read() -> None:
        try:
            for block in resp.iter_content(chunk):
                ahead.put(block)
            ahead.put(None)
        except BaseException as exc:  # handed to the caller, who raises it
            ahead.put(exc)

    reader = threading.Thread(target=read, name="blob-read", daemon=True)
    reader.start()
    try:
        while (item := ahead.get()) is not None:
            if isinstance(item, (requests.ConnectionError, requests.exceptions.ChunkedEncodingError)):
                msg = f"{client.endpoint.name}: download of {digest} broke ({type(item).__name__})"
                raise WireError(msg) from None
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        resp.close()  # a reader still running ends on the closed connection
        while reader.is_alive():
            with contextlib.suppress(queue.Empty):
                ahead.get(timeout=0.1)
