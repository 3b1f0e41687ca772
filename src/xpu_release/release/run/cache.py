"""A runner's disk: what the cache holds (``cache du``) and giving space back (``cache prune``).

Self-hosted runners keep the cache and the engine between jobs, and every release of a 25 GB
image would otherwise add its layers for good. Three kinds of entry are bulky and can always be
made again, so they are what a prune removes, least recently used first (a use touches the
entry's mtime):

- ``oci-blobs``: compressed layers and documents (the publish spool);
- ``blobs``: fetched artifacts and wheels (one folder per sha256);
- ``contexts``: build contexts;
- ``advisories``: the index of an advisory archive (made again from the archive by the next scan
  that reads it; a scan touches the one it uses);
- and what a killed run left: temporary folders (a mirror's spool, ``xpu-mirror-*``; the shared
  ``mirror`` folder of earlier versions), ``*.partial`` downloads and the temporary files of the
  guarded way out (``.<name>.<pid>-<token>.tmp``; an index build's ``.index-*.db`` of earlier
  versions), wherever in the cache they are. While a prune
  holds the cache exclusively no command runs, so every one of them is a dead run's.

The rest are small facts (digest maps, configs, smoke-test markers, build observations, kept
evaluations) whose loss would change what a later run does (test or measure again, or know no
build run), so they stay.

Every command that uses the cache holds ``in_use`` (a shared ``flock`` on ``.in-use.lock``) for
its whole run; a prune takes it exclusively, so it never removes what a running release holds:
``cache prune`` waits for them, the automatic cap after a release skips when another runs.

The cache is walked and removed without recursion (``guard.trees``): a folder deeper than
``MAX_FOLDER_DEPTH`` is counted as skipped, and an entry that cannot be removed whole is named.
Choosing is linear in the entries (the automatic cap runs it after every publish).
"""

from __future__ import annotations

import fcntl
import re
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import ConfigError
from ...guard.limits import MAX_INT64
from ...guard.locks import LockFile
from ...guard.shown import shown
from ...guard.trees import Found, Walk, remove_tree

if TYPE_CHECKING:  # only `--engine` needs them: a command taking the lock does not load them
    from ...image.engine import Engine
    from ...manifest import Repo

LOCK_NAME = ".in-use.lock"
BULKY = {
    "oci-blobs": "compressed layers and documents (the publish spool)",
    "blobs": "fetched artifacts and wheels",
    "contexts": "build contexts",
    "advisories": "advisory indexes (each made again from its archive)",
    "leftovers": "what a killed run left (temporary folders, mirror spools, partial downloads)",
}
FACTS = "facts kept (digest maps, configs, smoke-test markers, build observations, kept evaluations)"
# A killed run's: temporary folders, partial downloads, the guarded way out's temporaries, a
# compressor's scratch, an advisory index build of earlier versions (``.index-*.db``).
LEFTOVER = re.compile(
    r"^(xpu-(push|normalize|repro|config|mirror)-.*|.*\.partial|\..*\.tmp.*|\.gz-.*|\.index-.*\.db)$"
)
LEGACY_SPOOLS = {"mirror"}  # earlier versions' shared mirror spool: only ever temporary files
UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
AGES = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclass(frozen=True)
class Entry:
    kind: str
    path: Path
    size: int
    used: float  # mtime: when a run last used it


@dataclass(frozen=True)
class Usage:
    kind: str
    what: str
    count: int
    size: int


@dataclass(frozen=True)
class PruneReport:
    removed: tuple[Entry, ...]
    kept_size: int  # bulky entries kept
    facts_size: int
    dry_run: bool
    stayed: tuple[Entry, ...] = ()  # chosen, but not removed whole (too deep, no permission)
    skipped: int = 0  # folders not walked (deeper than MAX_FOLDER_DEPTH, unreadable)

    @property
    def freed(self) -> int:
        return sum(e.size for e in self.removed)


def parse_size(text: str, *, what: str) -> int:
    """``20G``, ``500MB``, ``1.5g``, ``1048576``: bytes (binary units), at most an int64 (a
    400-digit size is a mistake, named, never an overflow)."""
    m = re.fullmatch(r"\s*([0-9]{1,20}(?:\.[0-9]{1,9})?)\s*([kmgt]?)(?:i?b)?\s*", text.lower())
    if not m:
        msg = f"{what}: {shown(repr(text), 60)} is not a size; write it like 20G, 500M or 1048576"
        raise ConfigError(msg)
    size = int(Decimal(m[1]) * UNITS[m[2]])
    if size > MAX_INT64:
        msg = f"{what}: {shown(text, 40)} is more bytes than any disk holds; write it like 20G or 500M"
        raise ConfigError(msg)
    return size


def parse_age(text: str, *, what: str) -> float:
    """``7d``, ``12h``, ``30m``, ``2w``: seconds (at most 12 digits: some 30,000 years)."""
    m = re.fullmatch(r"\s*([0-9]{1,12}(?:\.[0-9]{1,9})?)\s*([smhdw])\s*", text.lower())
    if not m:
        msg = f"{what}: {shown(repr(text), 60)} is not an age; write it like 7d, 12h, 30m or 2w"
        raise ConfigError(msg)
    return float(m[1]) * AGES[m[2]]


def _tree_size(path: Path, survey: Survey | None = None) -> tuple[int, float]:
    """Bytes under ``path`` (not following links) and its latest mtime. With ``survey``, what a
    killed run left inside (a temporary, a partial download) is added there as a leftover
    instead, and the folders not walked (deeper than ``MAX_FOLDER_DEPTH``, unreadable) are
    counted there."""
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode):
        return st.st_size, st.st_mtime
    size, used = 0, st.st_mtime

    def enter(found: Found) -> bool:
        return survey is None or not LEFTOVER.match(found.path.name)

    walk = Walk(path, enter=enter)
    for found in walk:
        if survey is not None and LEFTOVER.match(found.path.name):
            survey.entries.append(Entry("leftovers", found.path, *_tree_size(found.path)))
        elif not found.is_dir:
            size += found.st.st_size
            used = max(used, found.st.st_mtime)
    if survey is not None:
        survey.skipped += walk.skipped
    return size, used


@dataclass
class Survey:
    """What the cache holds: its bulky entries (what a prune may remove), the bytes of facts
    kept, and the folders not walked (deeper than ``MAX_FOLDER_DEPTH``, unreadable)."""

    entries: list[Entry] = field(default_factory=list)
    facts: int = 0
    skipped: int = 0


def entries(cache: Path) -> Survey:
    """Every entry of ``cache``, by kind (see the module's docstring)."""
    survey = Survey()
    if not cache.is_dir():
        return survey
    for top in sorted(cache.iterdir()):
        if top.name == LOCK_NAME:
            continue
        try:
            if LEFTOVER.match(top.name) or top.name in LEGACY_SPOOLS:
                survey.entries.append(Entry("leftovers", top, *_tree_size(top)))
            elif top.name in BULKY and top.is_dir() and not top.is_symlink():
                for item in sorted(top.iterdir()):
                    if LEFTOVER.match(item.name):
                        survey.entries.append(Entry("leftovers", item, *_tree_size(item)))
                    else:
                        survey.entries.append(Entry(top.name, item, *_tree_size(item, survey)))
            else:
                survey.facts += _tree_size(top, survey)[0]
        except OSError:  # gone meanwhile, or unreadable: not counted, said
            survey.skipped += 1
    return survey


def usage(cache: Path) -> tuple[list[Usage], Survey]:
    """Per kind of bulky entry: how many and how big; and the survey they were counted from."""
    survey = entries(cache)
    sizes: dict[str, list[int]] = {kind: [] for kind in BULKY}
    for e in survey.entries:
        sizes[e.kind].append(e.size)
    return [Usage(kind, what, len(sizes[kind]), sum(sizes[kind])) for kind, what in BULKY.items()], survey


def choose(
    found: list[Entry], *, keep_storage: int | None, older_than: float | None, now: float
) -> list[Entry]:
    """What a prune removes: leftovers always; entries unused for ``older_than`` seconds; then the
    least recently used until the bulky entries fit in ``keep_storage`` bytes."""
    doomed = [e for e in found if e.kind == "leftovers"]
    if older_than is not None:
        doomed += [e for e in found if e.kind != "leftovers" and now - e.used > older_than]
    if keep_storage is not None:
        gone = {id(e) for e in doomed}
        left = sorted((e for e in found if id(e) not in gone), key=lambda e: (e.used, str(e.path)))
        total = sum(e.size for e in left)
        for e in left:
            if total <= keep_storage:
                break
            doomed.append(e)
            total -= e.size
    return doomed


def prune(
    cache: Path,
    *,
    keep_storage: int | None = None,
    older_than: float | None = None,
    dry_run: bool = False,
    now: float | None = None,
) -> PruneReport:
    """Remove what ``choose`` picks (the caller holds the cache exclusively, see ``exclusive``).
    An entry that cannot be removed whole (deeper than ``MAX_FOLDER_DEPTH``, no permission) is
    reported in ``stayed``; what of it could go is gone."""
    survey = entries(cache)
    found = survey.entries
    doomed = choose(found, keep_storage=keep_storage, older_than=older_than, now=now or time.time())
    stayed = () if dry_run else tuple(e for e in doomed if not remove_tree(e.path))
    gone = {id(e) for e in doomed}
    kept = sum(e.size for e in found if id(e) not in gone)
    return PruneReport(removed=tuple(doomed), kept_size=kept, facts_size=survey.facts, dry_run=dry_run,
                       stayed=stayed, skipped=survey.skipped)  # fmt: skip


# --- the lock --------------------------------------------------------------------------------


@contextmanager
def in_use(cache: Path, on_wait: Callable[[], None] | None = None) -> Iterator[LockFile | None]:
    """Held (shared) by a command that uses the cache, for its whole run; released at exit, also
    when the process dies (the kernel drops a dead process's flock: no stale lock). While a
    prune holds the cache, ``on_wait`` hears that the command waits for it. The lock file is
    never followed if it is a link, nor waited on if it is a FIFO (``guard/locks.py``)."""
    lock = LockFile.open(cache, LOCK_NAME)
    try:
        if lock is not None:
            lock.take(fcntl.LOCK_SH, wait=True, on_wait=on_wait)
        yield lock
    finally:
        if lock is not None:
            lock.close()


@contextmanager
def exclusive(cache: Path, *, wait: bool, on_wait: Callable[[], None] | None = None) -> Iterator[bool]:
    """Hold the cache alone: True once held; with ``wait=False``, False at once if another run
    uses it (nothing is removed then). ``on_wait`` hears that we wait."""
    lock = LockFile.open(cache, LOCK_NAME)
    if lock is None:
        yield True
        return
    try:
        yield lock.take(fcntl.LOCK_EX, wait=wait, on_wait=on_wait)
    finally:
        lock.close()


def cap_after_run(cache: Path, limit: int, held: LockFile | None) -> PruneReport | None:
    """The automatic cap after a release: the cache is brought under ``limit`` if no other run
    uses it (this run's shared hold is turned exclusive without waiting), else left for the
    next run (None)."""
    if held is None:
        return None
    if not held.take(fcntl.LOCK_EX, wait=False):
        held.take(fcntl.LOCK_SH, wait=True)  # a failed conversion drops the shared hold: taken again
        return None
    try:
        return prune(cache, keep_storage=limit)
    finally:
        held.take(fcntl.LOCK_SH, wait=True)


# --- the engine ------------------------------------------------------------------------------


@dataclass(frozen=True)
class EngineReport:
    removed: tuple[str, ...]  # image ids
    kept: tuple[str, ...]  # image ids a kept release needs
    refused: tuple[tuple[str, str], ...]  # (image id, why the engine would not remove it)


def prune_engine(engine: Engine, repo: Repo, *, dry_run: bool = False) -> EngineReport:
    """Remove the images xpu-release built (they carry its inputs label) that no kept release
    needs. Kept: the image the engine holds at ``NAME:VERSION`` for every manifest in the
    repository, and every image a release record names as tested. Anything unlabelled is not
    ours and is never looked at; an image a container uses stays (the engine refuses)."""
    from docker.errors import APIError

    from ...labels import INPUTS_LABEL
    from ..model import record as records

    keep: set[str] = set()
    for ref in repo.refs():
        info = engine.image(ref)
        if info is not None:
            keep.add(info.id)
    for path in sorted((repo.root / "out" / "releases").glob("*/*.json")):
        rec = records.read_optional(path) if not path.name.endswith(".attempt.json") else None
        if rec is not None:
            keep.add(rec.tested_image_id)
    removed: list[str] = []
    refused: list[tuple[str, str]] = []
    for image in engine.api.images(filters={"label": INPUTS_LABEL}):
        image_id = str(image["Id"])
        if image_id in keep:
            continue
        if dry_run:
            removed.append(image_id)
            continue
        try:
            for tag in image.get("RepoTags") or ():
                if tag != "<none>:<none>":
                    engine.api.remove_image(tag)
            if engine.image(image_id) is not None:
                engine.api.remove_image(image_id)
            removed.append(image_id)
        except APIError as exc:
            refused.append((image_id, str(exc.explanation or exc)))
    return EngineReport(removed=tuple(removed), kept=tuple(sorted(keep)), refused=tuple(refused))
