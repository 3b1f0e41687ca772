"""Reading a blob from an endpoint while the caller works on what has arrived.

``read_blob`` reads a blob's bytes a few chunks ahead on a thread of its own, so the caller's
inflating and hashing of one stream (the identity check) run beside the network read rather
than after it; or, where many streams run at once (``verify --deep``), as the caller reads,
with the kernel's socket buffer reading ahead. Memory stays at a few chunks.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Generator

import requests

from ..errors import WireError
from .registry import RegistryClient

AHEAD = 8  # chunks read ahead of the caller


def read_blob(
    client: RegistryClient, repo: str, digest: str, chunk: int = 1 << 20, *, ahead: bool = True
) -> Generator[bytes, None, None]:
    """A blob's bytes in chunks. WireError if it is missing or the connection breaks; the bytes
    are not checked here (the caller hashes them). Closing the iterator early stops the read.

    ``ahead``: a thread of its own reads a few chunks ahead, so one stream's inflating and hashing
    run beside its read. Without: the caller reads as it works, and the kernel's socket buffer is
    the only read-ahead — cheaper where many streams already keep the cores busy (``verify
    --deep``'s workers: 13 % less wall time on 2 cores, bench/verify.py)."""
    resp = client.open_blob(repo, digest)
    blocks = _ahead(resp, chunk) if ahead else _direct(resp, chunk)
    try:
        yield from blocks
    except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
        msg = f"{client.endpoint.name}: download of {digest} broke ({type(exc).__name__})"
        raise WireError(msg) from None
    finally:
        blocks.close()


def _direct(resp: requests.Response, chunk: int) -> Generator[bytes, None, None]:
    """The response's chunks as they are read."""
    try:
        yield from resp.iter_content(chunk)
    finally:
        resp.close()


def _ahead(resp: requests.Response, chunk: int) -> Generator[bytes, None, None]:
    """The response's chunks, read up to ``AHEAD`` ahead by a thread; what the read raised is
    raised here."""
    queued: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=AHEAD)

    def read() -> None:
        try:
            for block in resp.iter_content(chunk):
                queued.put(block)
            queued.put(None)
        except BaseException as exc:  # handed to the caller, who raises it
            queued.put(exc)

    reader = threading.Thread(target=read, name="blob-read", daemon=True)
    reader.start()
    try:
        while (item := queued.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        resp.close()  # a reader still running ends on the closed connection
        while reader.is_alive():
            with contextlib.suppress(queue.Empty):
                queued.get(timeout=0.1)
