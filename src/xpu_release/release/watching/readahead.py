"""Read ahead: the published SBOMs of the releases ``watch`` asks about next are on their way
while it scans the one before. A real registry answers in tens of milliseconds; 240 releases
asked one after the other wait for each answer in turn.

Workers (threads, each with its own ``Reader``: its own clients and connections, nothing shared
with the caller's) ask a release's version tag and read its SBOMs (of a platformed release, each
declared platform's image's: ``Reader.release_sboms``), in the order ``watch`` will
ask, at most ``WINDOW`` releases ahead of the furthest one it has reached and ``BUDGET`` bytes
of SBOMs not yet taken. The answers are only
a head start: ``watch`` still asks each tag itself, takes the SBOMs read ahead only for the
digest the tag serves to it (content-addressed: the same digest, the same bytes), and reads
them itself when they are not there. A worker that meets a failure stops reading ahead (a
registry down is not asked 240 times over), but for a release whose SBOM is missing or damaged
(skipped); what a failure means is said by ``watch``'s own request, as without read-ahead.
Workers are daemon threads: a run that ends or is interrupted does not wait for them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ...errors import VerifyFailed
from ...manifest.platforms import Platform
from ...oci.endpoint import Endpoint
from .published import Reader, ServedSboms

WINDOW = 16  # releases read ahead of the furthest one watch has reached: memory stays bounded
WORKERS = 2
BUDGET = 256 << 20  # bytes of SBOMs held ahead: past it, workers wait (an SBOM may be 64 MiB)

Wanted = tuple[str, str, str, tuple[Platform, ...]]  # ref, image, version tag, its platforms


class ReadAhead:
    """The SBOMs of ``wanted`` (ref, image, version tag, its platforms), in that order, at ``ep``."""

    def __init__(self, make_reader: Callable[[], Reader], ep: Endpoint, wanted: list[Wanted],
                 *, window: int | None = None, workers: int | None = None) -> None:  # fmt: skip
        self.ep = ep
        self._wanted = wanted
        self._index = {w[0]: n for n, w in enumerate(wanted)}
        self._window = WINDOW if window is None else window
        self._lock = threading.Condition()
        self._next = 0  # the next of wanted a worker takes
        self._reached = -1  # the furthest of wanted watch has reached
        self._done: dict[int, tuple[str, ServedSboms]] = {}  # index → (digest, its SBOMs)
        self._flying: set[int] = set()
        self._held = 0  # bytes of SBOMs read ahead and not taken
        self._stopped = False
        self.read = 0  # releases whose SBOMs were read ahead (for tests and --verbose)
        self._threads = [
            threading.Thread(target=self._work, args=(make_reader,), name=f"read-ahead-{n}", daemon=True)
            for n in range(WORKERS if workers is None else workers)
        ]
        for t in self._threads:
            t.start()

    def reached(self, ref: str) -> None:
        """``watch`` asks about ``ref`` now: the window moves on; what it passed is dropped."""
        n = self._index.get(ref)
        if n is None:
            return
        with self._lock:
            if n > self._reached:
                self._reached = n
                for k in [k for k in self._done if k < n]:
                    self._held -= self._done.pop(k)[1].size
                self._lock.notify_all()

    def sboms(self, ref: str, digest: str) -> ServedSboms | None:
        """The SBOMs read ahead for ``ref`` if its tag served ``digest`` then (waiting for a read
        under way); None: read them yourself."""
        n = self._index.get(ref)
        if n is None:
            return None
        with self._lock:
            while n in self._flying and not self._stopped:
                self._lock.wait()
            got = self._done.pop(n, None)
            if got is not None:
                self._held -= got[1].size
                self._lock.notify_all()
        if got is None or got[0] != digest:
            return None
        return got[1]

    def close(self) -> None:
        with self._lock:
            self._stopped = True
            self._done.clear()
            self._held = 0
            self._lock.notify_all()

    def _work(self, make_reader: Callable[[], Reader]) -> None:
        reader = make_reader()
        while True:
            with self._lock:
                while (
                    not self._stopped
                    and self._next < len(self._wanted)
                    and (self._next > self._reached + self._window or self._held > BUDGET)
                ):
                    self._lock.wait()
                if self._stopped or self._next >= len(self._wanted):
                    return
                n = self._next
                self._next += 1
                self._flying.add(n)
            got: tuple[str, ServedSboms] | None = None
            try:
                _, image, tag, platforms = self._wanted[n]
                digest = reader.served(self.ep, image, tag)
                if digest is not None:
                    got = (digest, reader.release_sboms(self.ep, image, digest, platforms))
            except VerifyFailed:  # this release's SBOM is missing or damaged: watch says so
                pass
            except Exception:  # anything else (a registry down, refused): stop; watch says why
                with self._lock:
                    self._stopped = True
                return
            finally:
                with self._lock:
                    self._flying.discard(n)
                    if got is not None and n >= self._reached and not self._stopped:
                        self._done[n] = got
                        self._held += got[1].size
                        self.read += 1
                    self._lock.notify_all()
