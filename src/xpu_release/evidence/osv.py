"""Advisories from OSV, offline: a directory of OSV JSON records, or osv.dev's per-ecosystem
export archives (``PyPI/all.zip``, ``Debian/all.zip``) as they are downloaded.

Nothing is fetched here. An archive is indexed once by (ecosystem, package name) into an SQLite
file in the cache, keyed by the archive's sha256, so a scan reads only the records of the
packages an image holds (bounded memory, a few milliseconds per package); loose JSON files are
read as they are. Records are checked for their schema version (1.x; a record without one is
1.0, as the schema says); withdrawn records are skipped; both are counted, never silent.
"""

from __future__ import annotations

import json
import re
import sqlite3
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..errors import ConfigError
from ..files import sha256_file

INDEX_VERSION = 1  # of the cached index's layout


def as_list(value: Any) -> list[Any]:
    """A record's list field as a list (advisories are outside data: a field of another type
    counts as absent, never as an error of ours)."""
    return value if isinstance(value, list) else []


def pypi_name(name: str) -> str:
    """PEP 503: lower case, runs of ``-``, ``_`` and ``.`` become one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def package_key(ecosystem: str, name: str) -> tuple[str, str]:
    """How records are looked up: the ecosystem as written (``PyPI``, ``Debian:12``) and the
    package name, PEP 503-normalised for PyPI."""
    return ecosystem, pypi_name(name) if ecosystem == "PyPI" else name


@dataclass(frozen=True)
class Advisory:
    id: str
    aliases: tuple[str, ...]
    summary: str
    data: dict[str, Any] = field(repr=False, compare=False)  # the record as published


@dataclass
class Counts:
    """What reading the advisories met besides usable records."""

    records: int = 0
    withdrawn: int = 0
    other_schema: int = 0  # a schema version this reader does not know (not 1.x)
    unreadable: int = 0  # not JSON, or not an OSV record


def _usable(data: Any, counts: Counts) -> bool:
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        counts.unreadable += 1
        return False
    version = str(data.get("schema_version") or "1.0.0")
    if not version.startswith("1."):
        counts.other_schema += 1
        return False
    if data.get("withdrawn"):
        counts.withdrawn += 1
        return False
    counts.records += 1
    return True


def _keys(data: dict[str, Any]) -> set[tuple[str, str]]:
    out = set()
    for affected in as_list(data.get("affected")):
        pkg = affected.get("package") if isinstance(affected, dict) else None
        if isinstance(pkg, dict):
            eco, name = pkg.get("ecosystem"), pkg.get("name")
            if isinstance(eco, str) and isinstance(name, str):
                out.add(package_key(eco, name))
    return out


def _advisory(data: dict[str, Any]) -> Advisory:
    return Advisory(
        id=data["id"],
        aliases=tuple(sorted(a for a in as_list(data.get("aliases")) if isinstance(a, str))),
        summary=str(data.get("summary") or data.get("details") or "")[:200],
        data=data,
    )


def _records_of_zip(path: Path) -> Iterator[bytes]:
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            if info.filename.endswith(".json") and not info.is_dir():
                yield z.read(info)


class Advisories:
    """Every advisory under the paths given, looked up by package."""

    def __init__(self, paths: Iterable[Path], cache: Path) -> None:
        self.counts = Counts()
        self._loose: dict[tuple[str, str], list[Advisory]] = {}
        self._indexes: list[sqlite3.Connection] = []
        self.sources: list[str] = []
        for path in paths:
            self._add(path, cache)

    def _add(self, path: Path, cache: Path) -> None:
        if path.is_dir():
            for item in sorted(path.rglob("*")):
                if item.suffix == ".zip" and item.is_file():
                    self._add_zip(item, cache)
                elif item.suffix == ".json" and item.is_file():
                    self._add_loose(item.read_bytes())
            self.sources.append(str(path))
        elif path.suffix == ".zip" and path.is_file():
            self._add_zip(path, cache)
        elif path.suffix == ".json" and path.is_file():
            self._add_loose(path.read_bytes())
            self.sources.append(str(path))
        else:
            msg = (
                f"advisories: {path} is neither a directory of OSV JSON records nor an OSV export "
                "archive (.zip); download e.g. https://osv-vulnerabilities.storage.googleapis.com/"
                "PyPI/all.zip"
            )
            raise ConfigError(msg)

    def _add_loose(self, raw: bytes) -> None:
        try:
            data = json.loads(raw)
        except ValueError:
            self.counts.unreadable += 1
            return
        if _usable(data, self.counts):
            for key in _keys(data):
                self._loose.setdefault(key, []).append(_advisory(data))

    def _add_zip(self, path: Path, cache: Path) -> None:
        digest = sha256_file(path)
        index = cache / "advisories" / f"{digest}.v{INDEX_VERSION}.sqlite"
        for attempt in (1, 2):
            if not index.is_file():
                build_index(path, index)
            db = sqlite3.connect(f"file:{quote(str(index))}?mode=ro", uri=True)
            try:
                counts = list(db.execute("SELECT name, value FROM counts"))
                break
            except sqlite3.DatabaseError:  # a damaged index (a full disk, a killed writer): made again
                db.close()
                if attempt == 2:
                    raise
                index.unlink(missing_ok=True)
        for name, value in counts:
            setattr(self.counts, name, getattr(self.counts, name) + int(value))
        self._indexes.append(db)
        self.sources.append(f"{path} (sha256:{digest[:12]})")

    def lookup(self, ecosystem: str, name: str) -> list[Advisory]:
        key = package_key(ecosystem, name)
        found = list(self._loose.get(key, ()))
        for db in self._indexes:
            for (raw,) in db.execute("SELECT record FROM records WHERE ecosystem = ? AND name = ?", key):
                found.append(_advisory(json.loads(raw)))
        return found

    def close(self) -> None:
        for db in self._indexes:
            db.close()


def build_index(archive: Path, index: Path) -> None:
    """Index ``archive`` by (ecosystem, name) into ``index`` (written aside, renamed into place:
    two runs at once each build their own and the last rename wins, both whole)."""
    index.parent.mkdir(parents=True, exist_ok=True)
    counts = Counts()
    with tempfile.NamedTemporaryFile(dir=index.parent, prefix=".index-", suffix=".db", delete=False) as tmp:
        partial = Path(tmp.name)
    try:
        db = sqlite3.connect(partial)
        db.execute("CREATE TABLE records (ecosystem TEXT, name TEXT, record TEXT)")
        db.execute("CREATE TABLE counts (name TEXT, value INTEGER)")
        try:
            rows = []
            for raw in _records_of_zip(archive):
                try:
                    data = json.loads(raw)
                except ValueError:
                    counts.unreadable += 1
                    continue
                if _usable(data, counts):
                    text = json.dumps(data, separators=(",", ":"))
                    rows += [(eco, name, text) for eco, name in _keys(data)]
                if len(rows) > 5000:
                    db.executemany("INSERT INTO records VALUES (?, ?, ?)", rows)
                    rows.clear()
            db.executemany("INSERT INTO records VALUES (?, ?, ?)", rows)
        except zipfile.BadZipFile as exc:
            msg = f"advisories: {archive} is not a readable zip archive ({exc}); download it again"
            raise ConfigError(msg) from None
        db.executemany("INSERT INTO counts VALUES (?, ?)", list(vars(counts).items()))
        db.execute("CREATE INDEX by_package ON records (ecosystem, name)")
        db.commit()
        db.close()
        partial.replace(index)
    finally:
        partial.unlink(missing_ok=True)
