"""Blobs on their way to the regions: the spool (each blob downloaded or compressed once, shared
by every region's copy and by reruns) and the early copies (each blob sent to the regions on
other hosts while the first push still compresses the next layer). Handed the endpoint pool
and the spool; they never call back into the publisher."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ...files import touch
from ...oci.downloads import save_blob
from ...oci.members import Blob, blob_file, spool_dir
from ...oci.registry import RegistryClient
from ...oci.store import holds
from ...progress import Sink
from ..model.plan import Target
from ..model.pool import EndpointPool


class BlobSpool:
    """Blobs downloaded once from the source (or compressed by our push), shared by every
    region's copy and by reruns. An entry is hashed again the first time a process uses it: a
    damaged one is dropped and fetched again, and the message names the cache."""

    def __init__(self, on_line: Sink = lambda _: None) -> None:
        self.folder = spool_dir()
        self.on_line = on_line
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._checked: set[str] = set()

    def get(self, source: RegistryClient, repo: str, digest: str, size: int) -> Path:
        with self._guard:
            lock = self._locks.setdefault(digest, threading.Lock())
        with lock:
            path = blob_file(self.folder, digest)
            if path.is_file() and digest not in self._checked and not holds(path, digest):
                self.on_line(f"the blob cache {self.folder} held a damaged {digest[:19]}; fetching it again")
                path.unlink()
            if not path.is_file():
                save_blob(source, repo, digest, path, size=size)
            else:
                touch(path)
            self._checked.add(digest)
            return path


class EarlyCopies:
    """Blobs sent to the other endpoints while the first push is still compressing the next
    layer: each blob, once in the spool, goes to every endpoint on another host, by digest only
    (nothing is served until ``stage`` writes the manifest and ``tag`` the tag). Endpoints on the
    source's host are left to ``stage``, which mounts instead. An endpoint whose early copy fails
    (after the client's retries) gets no more of them, and ``stage`` reports that failure."""

    def __init__(
        self, pool: EndpointPool, spool: BlobSpool, targets: list[Target], *, workers: int,
        chunk_size: int | None = None,
    ) -> None:  # fmt: skip
        self.pool = pool
        self.spool = spool
        self.chunk_size = chunk_size
        self.targets = targets
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="early-copy")
        self._sent: dict[str, list[Future[None]]] = {t.endpoint.name: [] for t in targets}
        self._failed: dict[str, BaseException] = {}
        self._done: dict[str, set[str]] = {t.endpoint.name: set() for t in targets}  # digests
        # An endpoint's client serves one thread at a time: its copies go one after another.
        self._turn = {t.endpoint.name: threading.Lock() for t in targets}
        self._began: dict[str, float] = {}  # endpoint → when its first copy started (monotonic)

    def send(self, blob: Blob) -> None:
        for t in self.targets:
            self._sent[t.endpoint.name].append(self._pool.submit(self._copy, t, blob.digest))

    def _copy(self, target: Target, digest: str) -> None:
        name = target.endpoint.name
        with self._turn[name]:
            if name in self._failed:
                return
            self._began.setdefault(name, time.monotonic())
            client, repo = self.pool.client(target.endpoint), self.pool.repo(target.endpoint)
            path = blob_file(self.spool.folder, digest)
            try:
                client.ensure_blob(repo, digest, lambda: path, chunk_size=self.chunk_size)
                self._done[name].add(digest)
            except Exception as exc:  # handed to stage, which records it against this endpoint
                self._failed[name] = exc

    def settle(self, target: Target) -> set[str]:
        """Wait for ``target``'s early copies: the digests it now holds. A failed copy is raised
        here, in ``stage``, which records it against the endpoint."""
        for sent in self._sent.get(target.endpoint.name, ()):
            sent.result()
        failed = self._failed.get(target.endpoint.name)
        if failed is not None:
            raise failed
        return self._done.get(target.endpoint.name, set())

    def began(self, target: Target) -> float | None:
        """When ``target``'s first early copy started (None: it had none), so that the time
        its record states covers the copies made before its stage."""
        return self._began.get(target.endpoint.name)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
