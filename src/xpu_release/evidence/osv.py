"""Advisories from OSV, offline: a directory of OSV JSON records, or osv.dev's per-ecosystem
export archives (``PyPI/all.zip``, ``Debian/all.zip``) as they are downloaded.

Nothing is fetched here. An archive is indexed once by (ecosystem, package name) into an SQLite
file in the cache, keyed by the archive's sha256 (``osvindex.py``: each record stored once,
bounded by the archive's size, a cache entry a prune may remove), so a scan reads only the
records of the packages an image holds; loose JSON files are read as they are. A folder is
walked without recursion (``guard.trees``): one deeper than ``MAX_FOLDER_DEPTH`` is counted as
skipped. Records are checked for their schema version (1.x; a record without one is
1.0, as the schema says); withdrawn records are skipped; both are counted, never silent.

Everything is read through the guarded layer: an archive's members bounded in number, size and
inflation (``guard.archives``: a damaged or hostile archive is exit 12, named), each record in
size and nesting (``guard.reading``: one that is too large, too deep or no JSON is counted
unreadable). In a folder, a FIFO, socket, device, dangling link or link loop named like an
advisory is never opened: it is counted as skipped. An id, alias or summary is made safe to show
(``guard.shown``) as it is read: a newline or an escape sequence in it cannot forge a log line.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DamagedFileError
from ..files import sha256_file
from ..guard import archives
from ..guard.limits import MAX_ADVISORY_BYTES
from ..guard.reading import Refused, is_regular, parse_json, read_file
from ..guard.shown import shown
from ..guard.trees import Walk
from .matching import Match, affects, as_list, package_key, unjudgeable
from .osvindex import Row, index_of, records_for


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
    unreadable: int = 0  # not JSON, or not an OSV record, or past a bound (too large, too deep)
    # an OSV record whose ``affected`` does not say which packages it is about in fields of the
    # right types: it may be about any
    malformed: int = 0
    # not read: named like an advisory but no regular file (a FIFO, a dangling link, a loop), or a
    # folder not walked (deeper than MAX_FOLDER_DEPTH, unreadable)
    skipped: int = 0


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
    if _malformed(data):
        counts.malformed += 1
        return False
    counts.records += 1
    return True


def _malformed(data: dict[str, Any]) -> bool:
    """``affected`` present but such that which packages it is about cannot be read: not a list
    (null, a string), an entry that is not an object, a ``package`` that is not one with a
    string ecosystem and name. Such a record is not "about nothing": it may be about any. (A
    record whose packages can be read but whose ranges cannot is judged per package:
    ``matching.unjudgeable``.)"""
    if "affected" not in data:
        return False
    affected = data["affected"]
    if not isinstance(affected, list):
        return True
    for entry in affected:
        if not isinstance(entry, dict):
            return True
        pkg = entry.get("package", {})
        if not isinstance(pkg, dict) or not all(
            isinstance(pkg.get(k, ""), str) for k in ("ecosystem", "name")
        ):
            return True
    return False


def _keys(data: dict[str, Any]) -> set[tuple[str, str]]:
    out = set()
    for affected in as_list(data.get("affected")):
        pkg = affected.get("package") if isinstance(affected, dict) else None
        if isinstance(pkg, dict):
            eco, name = pkg.get("ecosystem"), pkg.get("name")
            if isinstance(eco, str) and isinstance(name, str):
                out.add(package_key(eco, name))
    return out


def _safe(data: dict[str, Any]) -> dict[str, Any]:
    """The record with the text a person is shown (its id, aliases, summary, details, and the
    versions of what it affects: a ``fixed`` version is printed by ``scan`` and kept in the
    record) made safe to show (``guard.shown``); everything else as it was. A version that needs
    an escape is no version any ecosystem parses: it matches nothing, as before."""
    out = {**data, "id": shown(data["id"], 100)}
    if isinstance(data.get("aliases"), list):
        out["aliases"] = [shown(a, 100) if isinstance(a, str) else a for a in data["aliases"]]
    for key in ("summary", "details"):
        if isinstance(data.get(key), str):
            out[key] = shown(data[key], 200)
    if isinstance(data.get("affected"), list):
        out["affected"] = [_safe_affected(a) for a in data["affected"]]
    return out


def _safe_affected(affected: Any) -> Any:
    """One ``affected`` entry with its versions and its ranges' events made safe to show."""
    if not isinstance(affected, dict):
        return affected
    out = dict(affected)
    if isinstance(affected.get("versions"), list):
        out["versions"] = [_shown_version(v) for v in affected["versions"]]
    if isinstance(affected.get("ranges"), list):
        out["ranges"] = [
            {**r, "events": [{k: _shown_version(v) for k, v in e.items()} if isinstance(e, dict) else e
                             for e in r["events"]]}
            if isinstance(r, dict) and isinstance(r.get("events"), list) else r
            for r in affected["ranges"]
        ]  # fmt: skip
    return out


def _shown_version(value: Any) -> Any:
    return shown(value, 100) if isinstance(value, str) else value


def _advisory(data: dict[str, Any]) -> Advisory:
    data = _safe(data)
    return Advisory(
        id=data["id"],
        aliases=tuple(sorted(a for a in as_list(data.get("aliases")) if isinstance(a, str))),
        summary=str(data.get("summary") or data.get("details") or "")[:200],
        data=data,
    )


def _record(raw: bytes, what: str) -> Any:
    """A record's JSON value; ``Refused`` when it is no JSON or past a bound."""
    return parse_json(raw, what=what, error=Refused)


def _is_advisory_file(name: str) -> bool:
    return name.endswith(".json")


class Advisories:
    """Every advisory under the paths given, looked up by package."""

    def __init__(self, paths: Iterable[Path], cache: Path) -> None:
        self.counts = Counts()
        self._loose: dict[tuple[str, str], list[Advisory]] = {}
        self._indexes: list[sqlite3.Connection] = []
        self._looked: dict[tuple[str, str], tuple[Advisory, ...]] = {}  # a package's, read once a run
        self._judged: dict[tuple[str, str, str], tuple[tuple[dict[str, Any], Match], ...]] = {}
        self.grouped: dict[tuple[str, str, str], Any] = {}  # scan's judgement of a package, once a run
        self.sources: list[str] = []
        # One folder or file named twice (or by two spellings, a link) is read once: the same
        # records counted three times would say three times as many advisories were checked.
        for path in dict.fromkeys(p.resolve() for p in paths):
            self._add(path, cache)

    def _add(self, path: Path, cache: Path) -> None:
        if path.is_dir():
            walk = Walk(path)  # no recursion: a folder 1,100 deep is counted, never a crash
            found = [f.path for f in walk if f.path.suffix in (".zip", ".json") and not f.is_dir]
            self.counts.skipped += walk.skipped
            for item in sorted(found):
                if not is_regular(item):  # never opened: a FIFO would hang the read
                    self.counts.skipped += 1
                elif item.suffix == ".zip":
                    self._add_zip(item, cache)
                else:
                    self._add_loose(item)
            self.sources.append(str(path))
        elif path.suffix == ".zip" and is_regular(path):
            self._add_zip(path, cache)
        elif path.suffix == ".json" and is_regular(path):
            self._add_loose(path)
            self.sources.append(str(path))
        else:
            msg = (
                f"advisories: {path} is neither a directory of OSV JSON records nor an OSV export "
                "archive (.zip); download e.g. https://osv-vulnerabilities.storage.googleapis.com/"
                "PyPI/all.zip"
            )
            raise ConfigError(msg)

    def _add_loose(self, path: Path) -> None:
        try:
            raw = read_file(path, what=str(path), limit=MAX_ADVISORY_BYTES, error=Refused)
            data = _record(raw, str(path))
        except Refused:
            self.counts.unreadable += 1
            return
        if _usable(data, self.counts):
            for key in _keys(data):
                self._loose.setdefault(key, []).append(_advisory(data))

    def _add_zip(self, path: Path, cache: Path) -> None:
        digest = sha256_file(path)
        db, counts = index_of(path, digest, cache, records_of)
        for name, value in counts:
            if name in vars(self.counts):
                setattr(self.counts, name, getattr(self.counts, name) + value)
        self._indexes.append(db)
        self.sources.append(f"{path} (sha256:{digest[:12]})")

    def lookup(self, ecosystem: str, name: str) -> list[Advisory]:
        """The advisories of a package. Read (and made safe) once a run: ``watch`` asks the same
        packages of every release, and ``remedy`` again for each finding."""
        key = package_key(ecosystem, name)
        if key not in self._looked:
            found = list(self._loose.get(key, ()))
            for db in self._indexes:
                for raw in records_for(db, key):
                    record = parse_json(raw, what="an advisory index in the cache", error=DamagedFileError)
                    found.append(_advisory(record))
            self._looked[key] = tuple(found)
        return list(self._looked[key])

    def affecting(self, ecosystem: str, name: str, version: str) -> tuple[tuple[dict[str, Any], Match], ...]:
        """The records that affect a package at a version, each with its match; judged once a run
        (the releases ``watch`` checks share most of their packages and versions)."""
        key = (ecosystem, name, version)
        if key not in self._judged:
            judged = (
                (a.data, affects(a.data, ecosystem, name, version)) for a in self.lookup(ecosystem, name)
            )
            self._judged[key] = tuple((data, match) for data, match in judged if match is not None)
        return self._judged[key]

    def unjudged(self, ecosystem: str, name: str) -> tuple[str, ...]:
        """Each record about a package that cannot be judged for it, as ``ID: why``."""
        return tuple(f"{a.id}: {why}" for a in self.lookup(ecosystem, name)
                     if (why := unjudgeable(a.data, ecosystem, name)) is not None)  # fmt: skip

    @property
    def unread(self) -> str | None:
        """Why no answer that rests on these advisories can be trusted (None: it can): records
        that could not be read, which packages they are about being unknown."""
        c = self.counts
        unread = c.unreadable + c.malformed + c.other_schema + c.skipped
        if unread:
            where = ", ".join(self.sources) or "the advisories"
            return (f"{unread} advisory record(s) in {where} could not be read ({c.unreadable} not OSV "
                    f"JSON, {c.malformed} naming their packages in fields of the wrong type, "
                    f"{c.other_schema} of another schema, {c.skipped} not regular files or in folders "
                    "not walked): any of them may be about this release; fix or fetch them")  # fmt: skip
        return None  # none at all is said by `watch` itself (a warning: nothing to check against)

    def close(self) -> None:
        for db in self._indexes:
            db.close()


def records_of(archive: Path, counted: dict[str, int]) -> Iterator[Row]:
    """What an archive's index holds: each usable record once (made safe to show, compact JSON)
    with the packages it names; the counts of the rest are put in ``counted`` at the end."""
    counts = Counts()
    what = f"advisories: {archive}"
    for member, raw in archives.members(archive, what=what, wanted=_is_advisory_file):
        try:
            data = _record(raw, f"{what}: {member}")
        except Refused:
            counts.unreadable += 1
            continue
        if _usable(data, counts):
            yield json.dumps(_safe(data), separators=(",", ":")), tuple(sorted(_keys(data)))
    counted.update(vars(counts))
