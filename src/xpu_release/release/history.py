"""The re-scan history of a published release: one file per ``watch`` that answered for it,
beside its release record (``out/releases/<image>/<version>.watch/<UTC time>.json``).

Append-only: an entry is written to a temporary file and linked to its name, which fails rather
than replace an entry that is there; no entry and never the release record is rewritten.
``status`` and ``list`` show the latest; ``watch`` reads it for the first time it saw each
finding (the SLA's clock when the advisory says nothing of its publication).
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import date, datetime
from pathlib import Path
from typing import Any

from ..errors import OutputError
from .record import default_path

SUFFIX = ".watch"


def folder(root: Path, image: str, version: str) -> Path:
    record = default_path(root, image, version)
    return record.with_name(record.stem + SUFFIX)


def append(root: Path, image: str, version: str, entry: dict[str, Any], now: datetime) -> Path:
    """Add ``entry`` as the newest file of the history, named by ``now`` (UTC); never over one."""
    where = folder(root, image, version)
    stamp = now.strftime("%Y%m%dT%H%M%S.%fZ")
    body = (json.dumps(entry, indent=2, ensure_ascii=False) + "\n").encode()
    try:
        where.mkdir(parents=True, exist_ok=True)
        tmp = where / f".{stamp}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            tmp.write_bytes(body)
            for n in range(100):
                path = where / (f"{stamp}.json" if n == 0 else f"{stamp}-{n}.json")
                try:
                    os.link(tmp, path)  # fails if the name is taken: an entry is never replaced
                except FileExistsError:
                    continue
                return path
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as exc:
        msg = f"{where}: cannot write the re-scan history ({exc.strerror or type(exc).__name__})"
        raise OutputError(msg) from None
    msg = f"{where}: 100 entries already named {stamp}; nothing was written"
    raise OutputError(msg)


def latest(root: Path, image: str, version: str) -> dict[str, Any] | None:
    """The newest entry that reads as one (a damaged file is passed over, never guessed from)."""
    where = folder(root, image, version)
    try:
        names = sorted((p.name for p in where.iterdir() if p.suffix == ".json"), key=_order, reverse=True)
    except OSError:
        return None
    for name in names:
        try:
            data = json.loads((where / name).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if (
            isinstance(data, dict)
            and data.get("ref") == f"{image}:{version}"
            and isinstance(data.get("state"), str)
        ):
            return data
    return None


def _order(name: str) -> tuple[str, int]:
    """Entries in the order they were written: by time, then by the number a clash added."""
    stamp, _, n = name.removesuffix(".json").partition("-")
    return stamp, int(n) if n.isdigit() else 0


def first_seen(entry: dict[str, Any] | None) -> dict[tuple[str, str], date]:
    """(advisory id, package) → the day a scan first saw it, as ``entry`` carries it forward."""
    out: dict[tuple[str, str], date] = {}
    findings = entry.get("findings") if isinstance(entry, dict) else None
    for f in findings if isinstance(findings, list) else ():
        if not isinstance(f, dict):
            continue
        try:
            out[(str(f["id"]), str(f["package"]))] = date.fromisoformat(str(f["first_seen"]))
        except (KeyError, ValueError):
            continue
    return out


def security(root: Path, image: str, version: str) -> dict[str, Any] | None:
    """A release's security state as its latest re-scan found it, for ``status`` and ``list``:
    its answer, open findings by severity, the SLA, what patched it, when (None: never watched)."""
    entry = latest(root, image, version)
    if entry is None:
        return None
    found = entry.get("open")
    counts: dict[Any, Any] = found if isinstance(found, dict) else {}
    return {
        "state": entry["state"],
        "checked_at": str(entry.get("checked_at") or ""),
        "open": {str(k): v for k, v in counts.items() if isinstance(v, int)},
        "sla": str(entry.get("sla") or "none"),
        "superseded_by": entry.get("superseded_by") if isinstance(entry.get("superseded_by"), str) else None,
    }


def describe(state: dict[str, Any]) -> str:
    """One line: ``needs a patch: 1 high, 2 medium open; out of SLA (watched 2026-12-03T…)``."""
    opened = ", ".join(f"{n} {level}" for level, n in state["open"].items() if n)
    words = [state["state"] + (f" by {state['superseded_by']}" if state["superseded_by"] else "")]
    if opened:
        words.append(f"{opened} open")
    if state["sla"] == "out":
        words.append("out of SLA")
    return "; ".join(words) + f" (watched {state['checked_at'] or 'at an unknown time'})"
