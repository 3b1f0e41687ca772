"""The index of an advisory archive in the cache (``<cache>/advisories/<sha256>.v2.sqlite``): a
scan reads only the records of the packages an image holds (bounded memory, a few milliseconds
per package), and an archive is indexed once, keyed by its sha256.

- **Each record once.** A record's text is one row; each package it names is a small row that
  points at it. (It was stored once per package: a 3 KB archive of one record naming 1,000
  packages wrote 197 MB.)
- **Bounded by its archive.** What an index is made of may be at most ``MAX_INDEX_GROWTH`` times
  the archive's size (or ``MIN_INDEX_ALLOWANCE`` for a small one): past it, the archive is
  refused as damaged (exit 12), nothing kept.
- **Written the guarded way** (``guard.writing.Out``): a temporary of this run's own in
  ``<cache>/advisories``, reached from the cache without following a link (a link there is
  exit 13), 0644 less the umask, renamed into place only when whole. A killed build leaves a
  temporary that ``cache prune`` removes.
- **A cache entry, not a fact.** ``cache prune`` may remove it (least recently used first: a
  scan touches the one it uses); the next scan that reads the archive makes it again. One that
  cannot be read (a full disk, an earlier version's killed writer) is made again too.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from urllib.parse import quote

from ..errors import DamagedFileError, OutputError
from ..files import describe
from ..guard.limits import MAX_INDEX_GROWTH, MIN_INDEX_ALLOWANCE
from ..guard.writing import Out, open_folder

INDEX_VERSION = 3  # of the index's layout: records once, packages pointing at them; 3: malformed counted
FOLDER = "advisories"  # in the cache
_ROW_BYTES = 32  # what a package's row costs beside its names (SQLite's record and b-tree cell)

Keys = tuple[tuple[str, str], ...]  # the (ecosystem, name) pairs a record names
Row = tuple[str, Keys]  # a record's text as stored, and the packages it names
# Reads an archive into rows; the counts of what was not usable are put in the dict given.
Reader = Callable[[Path, dict[str, int]], Iterable[Row]]


def index_of(
    archive: Path, digest: str, cache: Path, read: Reader
) -> tuple[sqlite3.Connection, list[tuple[str, int]]]:
    """The index of ``archive`` (sha256 ``digest``), made with ``read`` when the cache does not
    hold it, opened read-only; and its counts as ``(name, value)`` pairs."""
    name = f"{digest}.v{INDEX_VERSION}.sqlite"
    try:
        folder = open_folder(cache / FOLDER, within=cache)  # a link there: LinkRefused, exit 13
    except OSError as exc:
        msg = f"{cache / FOLDER}: cannot hold the advisory index ({describe(exc)})"
        raise OutputError(msg) from None
    try:
        for _attempt in (1, 2):
            if not _is_file(folder, name):
                build(archive, cache / FOLDER / name, cache, read)
            opened = _opened(folder, name)
            if opened is not None:
                with contextlib.suppress(OSError):  # used now: the last a prune removes
                    os.utime(name, dir_fd=folder, follow_symlinks=False)
                return opened
            with contextlib.suppress(OSError):  # damaged (a full disk, a killed writer): made again
                os.unlink(name, dir_fd=folder)
    finally:
        os.close(folder)
    msg = f"{cache / FOLDER / name}: the advisory index just made cannot be read back"
    raise OutputError(msg)


def _opened(folder: int, name: str) -> tuple[sqlite3.Connection, list[tuple[str, int]]] | None:
    """The index ``name`` in ``folder``, open, with its counts; None if it cannot be read."""
    # immutable: an index is never changed once in place (a new one is renamed over it), so
    # SQLite takes no lock and looks for no journal beside it.
    uri = f"file:{quote(f'/proc/self/fd/{folder}/{name}')}?mode=ro&immutable=1"
    db = sqlite3.connect(uri, uri=True)
    try:
        rows = list(db.execute("SELECT name, value FROM counts"))
    except sqlite3.DatabaseError:
        db.close()
        return None
    return db, [(str(n), v) for n, v in rows if isinstance(v, int)]


def _is_file(folder: int, name: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False


def records_for(db: sqlite3.Connection, key: tuple[str, str]) -> list[str]:
    """The texts of the records that name the package ``key``."""
    rows = db.execute(
        "SELECT r.record FROM packages p JOIN records r ON r.id = p.record "
        "WHERE p.ecosystem = ? AND p.name = ? ORDER BY r.id",
        key,
    )
    return [str(text) for (text,) in rows]


def build(archive: Path, index: Path, cache: Path, read: Reader) -> None:
    """Index ``archive`` into ``index`` (inside ``cache``), whole or not at all: two runs at once
    each build their own temporary and the last rename wins, both whole."""
    limit = max(MIN_INDEX_ALLOWANCE, archive.stat().st_size * MAX_INDEX_GROWTH)
    counted: dict[str, int] = {}
    with Out(index, within=cache, what="advisory index") as out:
        db = sqlite3.connect(out.by_name)
        try:
            db.execute("PRAGMA journal_mode = OFF")  # a failed build is thrown away whole
            db.execute("PRAGMA synchronous = OFF")  # Out.commit syncs the file once
            db.execute("CREATE TABLE records (id INTEGER PRIMARY KEY, record TEXT)")
            db.execute("CREATE TABLE packages (ecosystem TEXT, name TEXT, record INTEGER)")
            db.execute("CREATE TABLE counts (name TEXT, value INTEGER)")
            size = 0
            for n, (text, keys) in enumerate(read(archive, counted), 1):
                size += len(text) + sum(len(e) + len(k) + _ROW_BYTES for e, k in keys)
                if size > limit:
                    msg = (f"advisories: {archive}: its index would take more than {limit} bytes "
                           f"({MAX_INDEX_GROWTH} times the archive's size; records that name thousands "
                           "of packages?): not indexed; download the archive again")  # fmt: skip
                    raise DamagedFileError(msg)
                db.execute("INSERT INTO records VALUES (?, ?)", (n, text))
                db.executemany("INSERT INTO packages VALUES (?, ?, ?)", [(e, k, n) for e, k in keys])
            db.executemany("INSERT INTO counts VALUES (?, ?)", sorted(counted.items()))
            db.execute("CREATE INDEX by_package ON packages (ecosystem, name)")
            db.commit()
        finally:
            db.close()
        out.commit()
