"""Read ahead (``readahead.py``): the SBOMs of the releases ``watch`` asks about next are read by
workers with clients of their own, in watch's order, a bounded window ahead; ``watch`` takes
them only for the digest its own request finds; a failure stops the read-ahead and ``watch``'s
own request says what it means. The answers are the same with and without it."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from xpu_release.errors import StackError, VerifyFailed
from xpu_release.manifest.platforms import DEFAULT, Platform
from xpu_release.oci.endpoint import Endpoint
from xpu_release.release.watching import readahead
from xpu_release.release.watching.published import ServedSboms
from xpu_release.release.watching.readahead import ReadAhead, Wanted
from xpu_release.release.watching.watch import watch_all

from .published_kit import CPU, SDK, World

EP = Endpoint(registry="public", role="public", region=None, host="127.0.0.1:5000", namespace="ns")


class Registry:
    """What the workers' readers ask: each version tag serves ``sha256:<tag>``, its SBOM is
    ``sbom-<tag>``; ``fail``: tag → the error that reading its SBOM raises."""

    def __init__(self, fail: dict[str, Exception] | None = None) -> None:
        self.asked: list[str] = []
        self.fail = fail or {}
        self.readers = 0
        self.lock = threading.Lock()

    def reader(self) -> Any:
        registry = self
        with self.lock:
            self.readers += 1

        class Reader:
            def served(self, ep: Endpoint, image: str, tag: str) -> str:
                with registry.lock:
                    registry.asked.append(tag)
                return f"sha256:{tag}"

            def release_sboms(
                self, ep: Endpoint, image: str, digest: str, platforms: tuple[Platform, ...]
            ) -> ServedSboms:
                tag = digest.removeprefix("sha256:")
                if tag in registry.fail:
                    raise registry.fail[tag]
                return ServedSboms(images=(digest,), payloads=(f"sbom-{tag}".encode(),))

        return Reader()


def wanted(n: int) -> list[Wanted]:
    return [(f"img:{v}", "img", str(v), DEFAULT) for v in range(n)]


def payloads(served: ServedSboms | None) -> tuple[bytes, ...] | None:
    return served.payloads if served is not None else None


def settled(registry: Registry, count: int) -> list[str]:
    """What the workers asked, once ``count`` asks were made (or after 5 s) and a moment more."""
    deadline = time.monotonic() + 5
    while len(registry.asked) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    return sorted(registry.asked, key=int)


def test_every_release_is_read_ahead_by_workers_with_readers_of_their_own() -> None:
    registry = Registry()
    ahead = ReadAhead(registry.reader, EP, wanted(5), workers=2)
    try:
        got = [payloads(ahead.sboms(f"img:{v}", f"sha256:{v}")) for v in range(5)]
    finally:
        ahead.close()

    assert got == [(f"sbom-{v}".encode(),) for v in range(5)]
    assert registry.readers == 2
    assert ahead.read == 5


def test_an_sbom_read_for_another_digest_is_not_taken() -> None:
    registry = Registry()
    ahead = ReadAhead(registry.reader, EP, wanted(2), workers=1)
    try:
        settled(registry, 2)
        moved = ahead.sboms("img:0", "sha256:" + "f" * 64)  # the tag serves another digest now
        unknown = ahead.sboms("other:1", "sha256:1")
    finally:
        ahead.close()

    assert moved is None
    assert unknown is None


def test_workers_stay_a_window_ahead_of_the_release_watch_has_reached() -> None:
    registry = Registry()
    ahead = ReadAhead(registry.reader, EP, wanted(40), window=3, workers=2)
    try:
        before = settled(registry, 3)
        ahead.reached("img:10")
        after = settled(registry, 14)
    finally:
        ahead.close()

    assert before == ["0", "1", "2"]  # the 3 after none reached
    assert after == [str(v) for v in range(14)]  # up to the 3 after the 11th


def test_workers_wait_while_the_sboms_held_ahead_pass_the_byte_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(readahead, "BUDGET", 10)  # each SBOM here is 6 bytes: two pass it
    registry = Registry()
    ahead = ReadAhead(registry.reader, EP, wanted(10), workers=1)
    try:
        before = settled(registry, 2)
        taken = payloads(ahead.sboms("img:0", "sha256:0"))  # 6 bytes fewer held: one more may be read
        after = settled(registry, 3)
    finally:
        ahead.close()

    assert before == ["0", "1"]
    assert taken == (b"sbom-0",)
    assert after == ["0", "1", "2"]


def test_a_registry_that_fails_stops_the_read_ahead_and_watch_reads_itself() -> None:
    registry = Registry(fail={"2": StackError("public (127.0.0.1:5000) does not answer")})
    ahead = ReadAhead(registry.reader, EP, wanted(30), workers=1)
    try:
        asked = settled(registry, 3)
        later = ahead.sboms("img:5", "sha256:5")
    finally:
        ahead.close()

    assert asked == ["0", "1", "2"]  # nothing after the failure
    assert later is None


def test_a_release_with_a_damaged_sbom_is_skipped_and_the_rest_still_read_ahead() -> None:
    registry = Registry(fail={"1": VerifyFailed("public: img@sha256:1 has no SBOM attached")})
    ahead = ReadAhead(registry.reader, EP, wanted(4), workers=1)
    try:
        got = [payloads(ahead.sboms(f"img:{v}", f"sha256:{v}")) for v in range(4)]
    finally:
        ahead.close()

    assert got == [(b"sbom-0",), None, (b"sbom-2",), (b"sbom-3",)]


def test_closing_ends_the_workers() -> None:
    registry = Registry()
    ahead = ReadAhead(registry.reader, EP, wanted(100), window=1, workers=2)
    settled(registry, 1)  # then both wait: the window is full

    ahead.close()

    for t in ahead._threads:
        t.join(timeout=5)
        assert not t.is_alive()


@pytest.mark.parametrize("workers", [0, 2])
def test_watch_answers_the_same_with_and_without_reading_ahead(
    published: World, tmp_path: Path, read_aheads: list[ReadAhead], workers: int
) -> None:
    published.advisory("CVE-2026-0009", "transformers", "4.50.0")
    watcher = published.watcher(tmp_path / "cache")
    watcher.keep_history = False
    watcher.read_ahead_workers = workers  # watch --jobs
    try:
        results = watch_all(watcher, [f"{SDK}:2.13.0", f"{CPU}:25.03"], lambda refs: [refs])
    finally:
        watcher.advisories.close()

    answers = {w.ref: (w.state, [r.id for r in w.reasons], w.digest) for w in results}
    assert answers[f"{SDK}:2.13.0"][0] == "up to date"
    assert answers[f"{CPU}:25.03"][:2] == ("needs a patch", ["CVE-2026-0009"])
    assert [a.read for a in read_aheads] == ([2] if workers else [])  # --jobs 0: no read-ahead at all
    assert watcher.ahead is None  # closed when the run ends
