"""The re-scan history of a published release: one file per ``watch`` that answered for it,
beside its release record (``out/releases/<image>/<version>.watch/<UTC time>.json``).

Append-only: an entry is written to a temporary file and linked to its name, which fails rather
than replace an entry that is there; no entry and never the release record is rewritten. A
folder that cannot take an entry (a file, a FIFO or a link loop where the folder goes) is an
``OutputError`` naming it and what to do; ``watch`` gives that release its answer anyway.

Read back only what ``watch`` writes: a file named by a UTC time (``20261203T010203.000004Z``,
``-<n>`` when two runs met in one microsecond), read through the guarded layer (a regular file,
at most ``MAX_HISTORY_ENTRY_BYTES``: a FIFO, a link to a device or a huge file is passed over,
never waited on or read whole), a JSON object for this release whose ``state`` is one of
watch's. Anything else in the folder is ignored. ``status`` and ``list`` show the latest entry;
``watch`` reads it for the first time it saw each finding (the SLA's clock when the advisory
says nothing of its publication).

Beside each entry, ``<name>.seen`` holds its ``seen`` alone, the entry's name and the release
(what the next ``watch`` reads: a twentieth of the entry); when it is missing, damaged or names
another entry, the entry is read whole. It is written after the entry, the same way.

Each entry carries every finding any re-scan saw (``seen``: id, package, the first day), open
now or not: a run that read no advisory, or one in which a finding is excepted for a while,
does not restart a clock, and the latest entry alone holds the earliest day over the whole
history (reading every entry of a year of nightly runs for 240 releases would not be cheap).
"""

from __future__ import annotations

import os
import re
import uuid
from contextlib import suppress
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal, get_args

from ...errors import DamagedFileError, OutputError
from ...files import describe as os_reason
from ...files import kind_of
from ...guard.generated import open_repository_folder
from ...guard.limits import MAX_HISTORY_ENTRY_BYTES
from ...guard.reading import read_json
from ...jsontext import readable
from .record import RecordedFinding, default_path

State = Literal[
    "up to date",
    "needs a patch",
    "superseded",
    "out of SLA",
    "not published",
    "could not check",
    "end of life",
]
STATES: tuple[str, ...] = get_args(State)
SUFFIX = ".watch"
SEEN_SUFFIX = ".seen"  # beside an entry: its ``seen`` alone (``latest_seen``)
_NAME = re.compile(r"(?P<stamp>[0-9]{8}T[0-9]{6}\.[0-9]{6}Z)(?:-(?P<n>[1-9][0-9]?))?\.json")
_WHAT = {
    "file": "is a file",
    "special": "is a FIFO, socket or device",
    "dangling-link": "is a symbolic link to nothing",
    "link-loop": "is a symbolic link loop",
    "unreadable": "cannot be examined",
}
Seen = dict[tuple[str, str], date]  # (advisory id, package) → the first day a re-scan saw it


def folder(root: Path, image: str, version: str) -> Path:
    record = default_path(root, image, version)
    return record.with_name(record.stem + SUFFIX)


def append(root: Path, image: str, version: str, entry: dict[str, Any], now: datetime) -> Path:
    """Add ``entry`` as the newest file of the history, named by ``now`` (UTC); never over one.
    Its ``seen`` goes beside it as well (``<name>.seen``, best effort: ``seen_at``)."""
    where = folder(root, image, version)
    kind = kind_of(where)
    if kind not in ("missing", "directory"):
        msg = (
            f"{where}: cannot write the re-scan history: it {_WHAT.get(kind, kind)}, not a folder; "
            "move it away (or remove it), and the next watch starts the history there"
        )
        raise OutputError(msg)
    stamp = now.strftime("%Y%m%dT%H%M%S.%fZ")
    body = (readable(entry, depth=2) + "\n").encode()  # a finding a line
    try:
        # Reached from out/ one folder at a time, none followed (a .watch folder planted as a
        # link to somewhere else is refused: generated.within_repository's rule)
        top = open_repository_folder(root, where)
        try:
            path = _link_new(top, where, stamp, body)
            if path is not None:
                seen = {"ref": f"{image}:{version}", "entry": path.name, "seen": entry.get("seen") or []}
                text = (readable(seen, depth=1) + "\n").encode()
                with suppress(OSError):  # without it, the next run reads the entry whole
                    _link_new(
                        top, where, path.name.removesuffix(".json"), text, suffix=SEEN_SUFFIX, clash=False
                    )
        finally:
            os.close(top)
    except OSError as exc:
        msg = (
            f"{where}: cannot write the re-scan history ({os_reason(exc)}); make it a folder this "
            "user can write to"
        )
        raise OutputError(msg) from None
    if path is None:
        msg = f"{where}: 100 entries already named {stamp}; nothing was written"
        raise OutputError(msg)
    return path


def _link_new(
    top: int, where: Path, stem: str, body: bytes, *, suffix: str = ".json", clash: bool = True
) -> Path | None:
    """``body`` as ``<stem><suffix>`` in the folder ``top`` (``where``: its name), or
    ``<stem>-<n><suffix>`` when taken and ``clash``, through a temporary file linked to its
    name: never over a file that is there, never through a link."""
    tmp = f".{stem}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=top)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(body)
        for n in range(100 if clash else 1):
            name = f"{stem}{suffix}" if n == 0 else f"{stem}-{n}{suffix}"
            try:  # fails if the name is taken: an entry is never replaced
                os.link(tmp, name, src_dir_fd=top, dst_dir_fd=top, follow_symlinks=False)
            except FileExistsError:
                continue
            return where / name
    finally:
        with suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=top)
    return None


def _entries(where: Path) -> list[str]:
    """The names of the entries ``watch`` wrote, newest first (time, then the clash number)."""
    if kind_of(where) != "directory":
        return []
    try:
        names = [p.name for p in where.iterdir()]
    except OSError:
        return []
    found = [(m["stamp"], int(m["n"] or 0), name) for name in names if (m := _NAME.fullmatch(name))]
    return [name for *_, name in sorted(found, reverse=True)]


def is_entry(data: Any, ref: str) -> bool:
    """``data`` has the shape of an entry ``watch`` writes for ``ref``."""
    return (
        isinstance(data, dict)
        and data.get("ref") == ref
        and data.get("state") in STATES
        and isinstance(data.get("checked_at"), str)
    )


def latest(root: Path, image: str, version: str) -> dict[str, Any] | None:
    """The newest entry that reads as one (anything else is passed over, never guessed from)."""
    where = folder(root, image, version)
    for name in _entries(where):
        try:
            data = read_json(where / name, what=str(where / name), limit=MAX_HISTORY_ENTRY_BYTES)
        except DamagedFileError:
            continue
        if is_entry(data, f"{image}:{version}"):
            return dict(data)
    return None


def latest_findings(root: Path, image: str, version: str) -> tuple[RecordedFinding, ...] | None:
    """The findings the latest re-scan saw, typed (None: never re-scanned, a re-scan that read no
    advisory and so saw nothing, or findings not of the shape ``watch`` writes)."""
    entry = latest(root, image, version)
    if entry is None or entry.get("advisories") == 0 or not entry.get("scanned"):
        return None
    listed = entry.get("findings")
    found = [_finding(f) for f in listed] if isinstance(listed, list) else [None]
    return tuple(f for f in found if f is not None) if all(f is not None for f in found) else None


def _finding(f: Any) -> RecordedFinding | None:
    """A finding of a ``watch`` history entry (outside data: one of another shape says nothing)."""
    strings = ("id", "package", "installed", "severity")
    if not isinstance(f, dict) or not all(isinstance(f.get(k), str) for k in strings):
        return None
    lists = {k: f.get(k) or [] for k in ("aliases", "purls", "fixed")}
    if not all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in lists.values()):
        return None
    vex, why = f.get("vex"), f.get("justification") or ""
    return RecordedFinding(id=f["id"], package=f["package"], installed=f["installed"], severity=f["severity"],
                           aliases=tuple(lists["aliases"]), purls=tuple(lists["purls"]),
                           fixed=tuple(lists["fixed"]), vex=vex if isinstance(vex, str) else None,
                           justification=why if isinstance(why, str) else "")  # fmt: skip


def latest_seen(root: Path, image: str, version: str) -> Seen:
    """``first_seen`` of the latest entry, read from the ``seen`` written beside it (a twentieth
    of the entry's size: ``watch`` over 240 releases spent a fifth of its time reading entries
    whole); the entry itself when that is missing, damaged or not this entry's."""
    where = folder(root, image, version)
    names = _entries(where)
    if names:
        beside = where / (names[0].removesuffix(".json") + SEEN_SUFFIX)
        try:
            data = read_json(beside, what=str(beside), limit=MAX_HISTORY_ENTRY_BYTES)
        except DamagedFileError:
            data = None
        if (
            isinstance(data, dict)
            and data.get("ref") == f"{image}:{version}"
            and data.get("entry") == names[0]
        ):
            return first_seen(data)
    return first_seen(latest(root, image, version))


def first_seen(entry: dict[str, Any] | None) -> Seen:
    """(advisory id, package) → the day a re-scan first saw it, as ``entry`` carries it forward
    (``seen``; and its open findings, as entries written before ``seen`` say it)."""
    out: Seen = {}
    if not isinstance(entry, dict):
        return out
    for key in ("seen", "findings"):
        listed = entry.get(key)
        for f in listed if isinstance(listed, list) else ():
            if not isinstance(f, dict) or not all(isinstance(f.get(k), str) for k in ("id", "package")):
                continue
            try:
                day = date.fromisoformat(str(f.get("first_seen")))
            except ValueError:
                continue
            mark = (f["id"], f["package"])
            out[mark] = min(day, out.get(mark, day))
    return out


def seen_json(seen: Seen) -> list[dict[str, str]]:
    """``seen`` as an entry writes it, in a stable order."""
    return [{"id": i, "package": p, "first_seen": str(d)} for (i, p), d in sorted(seen.items())]


def security(root: Path, image: str, version: str) -> dict[str, Any] | None:
    """A release's security state as its latest re-scan found it, for ``status`` and ``list``:
    its answer, open findings by severity, the SLA, what patched it, when, against how many
    advisories (None: never watched)."""
    entry = latest(root, image, version)
    if entry is None:
        return None
    found = entry.get("open")
    counts: dict[Any, Any] = found if isinstance(found, dict) else {}
    sla = entry.get("sla")
    read = entry.get("advisories")
    return {
        "state": entry["state"],
        "checked_at": entry["checked_at"],
        "open": {str(k): v for k, v in counts.items() if type(v) is int and v >= 0},
        "sla": sla if sla in ("within", "out", "none") else "none",
        "superseded_by": entry.get("superseded_by") if isinstance(entry.get("superseded_by"), str) else None,
        "advisories": read if type(read) is int and read >= 0 else None,
    }


def describe(state: dict[str, Any]) -> str:
    """One line: ``needs a patch: 1 high, 2 medium open; out of SLA (watched 2026-12-03T…)``."""
    opened = ", ".join(f"{n} {level}" for level, n in state["open"].items() if n)
    words = [state["state"] + (f" by {state['superseded_by']}" if state["superseded_by"] else "")]
    if opened:
        words.append(f"{opened} open")
    if state["sla"] == "out":
        words.append("out of SLA")
    against = " against no advisory" if state.get("advisories") == 0 else ""
    return "; ".join(words) + f" (watched {state['checked_at'] or 'at an unknown time'}{against})"
