"""The regions' early copies: blobs sent while the first push still compresses the next layer.
(End to end, on the stack: tests/integration/test_publish.py.)"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from xpu_release.errors import PublishError
from xpu_release.oci.registry import RegistryClient
from xpu_release.release.publishing.copies import EarlyCopies
from xpu_release.release.publishing.manifests import Blob

D1, D2 = "sha256:" + "1" * 64, "sha256:" + "2" * 64


class Client:
    """One endpoint: which blobs it holds, which it was sent, and whether it refuses uploads."""

    def __init__(self, name: str, *, holds: tuple[str, ...] = (), refuses: bool = False) -> None:
        self.name, self.held, self.refuses = name, set(holds), refuses
        self.sent: list[str] = []
        self.stats = {"skipped_blobs": 0}
        self.busy = threading.Lock()
        self.overlapped = False

    ensure_blob = RegistryClient.ensure_blob  # the real one, on this fake's HEAD and upload

    def blob_exists(self, repo: str, digest: str) -> bool:
        return digest in self.held

    def upload_blob(self, repo: str, digest: str, path: Path, *, chunk_size: int | None = None) -> None:
        if not self.busy.acquire(blocking=False):
            self.overlapped = True  # two copies at once on one client
        try:
            self.sent.append(digest)
            time.sleep(0.005)  # long enough for a second thread to arrive, were it let in
            if self.refuses:
                msg = f"{self.name}: upload of {digest} kept breaking"
                raise PublishError(msg)
            self.held.add(digest)
        finally:
            self.busy.release()


def copies(*clients: Client) -> tuple[EarlyCopies, list[SimpleNamespace]]:
    by_name = {c.name: c for c in clients}
    pool = SimpleNamespace(client=lambda ep: by_name[ep.name], repo=lambda ep: "ns/image")
    spool = SimpleNamespace(folder=Path("/spool"))
    targets = [SimpleNamespace(endpoint=SimpleNamespace(name=c.name)) for c in clients]
    return EarlyCopies(pool, spool, targets, workers=4), targets  # type: ignore[arg-type]


def test_every_blob_goes_to_every_endpoint_and_a_present_one_is_not_sent() -> None:
    a, b = Client("vpc/a"), Client("vpc/b", holds=(D1,))
    early, (ta, tb) = copies(a, b)

    early.send(Blob(digest=D1, size=1))
    early.send(Blob(digest=D2, size=1))

    assert early.settle(ta) == {D1, D2}
    assert early.settle(tb) == {D1, D2}
    assert early.began(ta) is not None  # the region's time starts with its first copy
    assert a.sent == [D1, D2]
    assert b.sent == [D2]
    assert b.stats["skipped_blobs"] == 1
    early.close()


def test_an_endpoint_whose_copy_fails_gets_no_more_and_its_stage_hears_why() -> None:
    good, bad = Client("vpc/good"), Client("vpc/bad", refuses=True)
    early, (tg, tb) = copies(good, bad)

    early.send(Blob(digest=D1, size=1))
    early.send(Blob(digest=D2, size=1))

    assert early.settle(tg) == {D1, D2}
    with pytest.raises(PublishError, match=r"vpc/bad: upload of sha256:1+ kept breaking"):
        early.settle(tb)
    assert bad.sent == [D1]  # the second blob was not tried after the first failed
    early.close()


def test_an_endpoint_sent_nothing_early_has_no_early_start() -> None:
    early, (t,) = copies(Client("vpc/quiet"))

    assert early.settle(t) == set()
    assert early.began(t) is None
    early.close()


def test_an_endpoint_gets_its_copies_one_after_another() -> None:
    # Its client serves one thread at a time; other endpoints go on in parallel.
    one = Client("vpc/one")
    early, (t,) = copies(one)

    for n in range(16):
        early.send(Blob(digest=f"sha256:{n:064x}", size=1))

    assert len(early.settle(t)) == 16
    assert not one.overlapped
    early.close()
