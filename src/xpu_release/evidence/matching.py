"""Whether an installed package is affected by an OSV record, exactly as the OSV schema's
evaluation rules say (ossf/osv-schema ``docs/schema.md``, "Evaluation"), and how severe it is.

- ``affected[].versions``: the installed version is listed;
- ``ECOSYSTEM`` and ``SEMVER`` ranges: events sorted in the ecosystem's version order;
  ``introduced`` opens (``"0"``: from the first version), ``fixed`` closes exclusively,
  ``last_affected`` inclusively; ``limit`` caps the range. ``GIT`` ranges name commits, not
  installed versions, and are ignored.
- PyPI versions are ordered by PEP 440 (``packaging``); a local label (``2.13.0+cpu``) is
  compared by its public version. Debian versions by Debian's rules (epochs, ``~``, revisions)
  with python-debian's implementation.
- Severity: the base score of the record's CVSS vector (v4, else v3, else v2; the ``cvss``
  library), else the ecosystem's own rating; else ``unknown``, a level of its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

LEVELS = ("low", "medium", "high", "critical")  # ordered; "unknown" stands beside them
Key = Callable[[str], Any]


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


def _pypi_key(version: str) -> Any:
    from packaging.version import Version

    v = Version(version)
    return Version(v.public)


def _debian_key(version: str) -> Any:
    from debian.debian_support import Version

    return Version(version)


def version_key(ecosystem: str) -> Key | None:
    """The ordering of ``ecosystem``'s versions (None: an ecosystem we do not evaluate)."""
    if ecosystem == "PyPI":
        return _pypi_key
    if ecosystem.split(":")[0] == "Debian":
        return _debian_key
    return None


def _key_or_none(key: Key, version: str) -> Any:
    try:
        return key(version)
    except (ValueError, TypeError):  # a version the ecosystem cannot order: that event says nothing
        return None


def _in_range(installed: Any, events: list[dict[str, Any]], key: Key) -> bool:
    """The schema's ``includedByEvents`` and ``includedByLimits``."""
    limits = [_key_or_none(key, str(e["limit"])) for e in events if "limit" in e]
    if any(lim is not None for lim in limits) and not any(
        lim is not None and installed < lim for lim in limits
    ):
        return False
    ordered: list[tuple[int, Any, str]] = []
    for e in events:
        for kind in ("introduced", "fixed", "last_affected"):
            if kind not in e:
                continue
            value = str(e[kind])
            if kind == "introduced" and value == "0":
                ordered.append((0, None, kind))
                continue
            k = _key_or_none(key, value)
            if k is not None:
                ordered.append((1, k, kind))
    ordered.sort(key=lambda t: (t[0], t[1]) if t[1] is not None else (t[0],))
    vulnerable = False
    for rank, k, kind in ordered:
        if kind == "introduced" and (rank == 0 or installed >= k):
            vulnerable = True
        elif (kind == "fixed" and installed >= k) or (kind == "last_affected" and installed > k):
            vulnerable = False
    return vulnerable


@dataclass(frozen=True)
class Match:
    fixed: tuple[str, ...]  # the versions that fix it, as the record names them


def _about(
    record: dict[str, Any], ecosystem: str, name: str
) -> Iterator[tuple[dict[str, Any], list[list[Any]]]]:
    """Each ``affected`` entry of ``record`` about ``name`` in ``ecosystem``, with the events of
    its ``ECOSYSTEM`` and ``SEMVER`` ranges (``GIT`` ranges name commits, not installed versions)."""
    want = package_key(ecosystem, name)
    for affected in as_list(record.get("affected")):
        pkg = affected.get("package") if isinstance(affected, dict) else None
        if not isinstance(pkg, dict) or package_key(str(pkg.get("ecosystem")), str(pkg.get("name"))) != want:
            continue
        ranges = [r for r in as_list(affected.get("ranges")) if isinstance(r, dict)]
        yield affected, [[e for e in as_list(r.get("events")) if isinstance(e, dict)]
                         for r in ranges if r.get("type") in ("ECOSYSTEM", "SEMVER")]  # fmt: skip


def _shaped(affected: dict[str, Any], field: str) -> bool:
    """``affected[field]`` absent, or as the schema shapes it: ``versions`` a list of strings,
    ``ranges`` a list of objects whose ``events`` are lists of objects of strings."""
    value = affected.get(field, [])
    if not isinstance(value, list):
        return False
    if field == "versions":
        return all(isinstance(v, str) for v in value)
    for rng in value:
        events = rng.get("events") if isinstance(rng, dict) else None
        if not isinstance(events, list):
            return False
        if not all(isinstance(e, dict) and all(isinstance(v, str) for v in e.values()) for e in events):
            return False
    return True


def orderable(ecosystem: str, version: str) -> bool:
    """Whether ``ecosystem`` can order ``version`` (an ecosystem not evaluated: nothing to order)."""
    key = version_key(ecosystem)
    return key is None or _key_or_none(key, version) is not None


def affects(record: dict[str, Any], ecosystem: str, name: str, version: str) -> Match | None:
    """Whether ``record`` affects ``name`` at ``version`` in ``ecosystem`` (None: it does not)."""
    key = version_key(ecosystem)
    if key is None:
        return None
    installed = _key_or_none(key, version)
    if installed is None:
        return None
    for affected, ranges in _about(record, ecosystem, name):
        listed = {_key_or_none(key, str(v)) for v in as_list(affected.get("versions"))}
        hit = installed in listed
        fixed = [str(e["fixed"]) for events in ranges for e in events if "fixed" in e]
        hit = hit or any(_in_range(installed, events, key) for events in ranges)
        if hit:
            return Match(fixed=tuple(sorted(set(fixed))))
    return None


def unjudgeable(record: dict[str, Any], ecosystem: str, name: str) -> str | None:
    """Why ``record`` cannot be judged for ``name`` (None: it can): one of its ranges about the
    package holds an event whose version ``ecosystem`` cannot order (``introduced: "0"`` aside).
    Read as nothing, such an event would leave the package "not affected" when the record may
    well say it is."""
    key = version_key(ecosystem)
    if key is None:
        return None
    for affected, ranges in _about(record, ecosystem, name):
        if not all(_shaped(affected, field) for field in ("ranges", "versions")):
            return "its ranges or versions are not as the OSV schema shapes them"
        for e in (e for events in ranges for e in events):
            for kind in ("introduced", "fixed", "last_affected"):
                value = e.get(kind)
                if value is None or (kind == "introduced" and value == "0"):
                    continue
                if _key_or_none(key, str(value)) is None:
                    return f"its {kind} version {str(value)[:40]!r} is no {ecosystem} version"
    return None


# --- severity --------------------------------------------------------------------------------

_RATINGS = {
    "low": "low", "moderate": "medium", "medium": "medium", "important": "high", "high": "high",
    "critical": "critical", "negligible": "low", "unimportant": "low",
}  # fmt: skip


def level_of_score(score: float) -> str:
    """CVSS's qualitative scale: 0.1 to 3.9 low, 4.0 to 6.9 medium, 7.0 to 8.9 high, from 9.0 critical."""
    if score >= 9.0:
        return "critical"
    if score >= 7.0:
        return "high"
    if score >= 4.0:
        return "medium"
    return "low" if score > 0 else "unknown"


@lru_cache(maxsize=1 << 14)
def _base_score(version: str, vector: str) -> float | None:
    """A CVSS vector's base score (None: not a vector of that version), computed once a run:
    thousands of records share a few hundred vectors."""
    from cvss import CVSS2, CVSS3, CVSS4

    try:
        if version == "4":
            return float(CVSS4(vector).base_score)
        return float((CVSS3 if version == "3" else CVSS2)(vector).scores()[0])
    except Exception:  # the cvss library raises its own error classes for a bad vector
        return None


def severity(record: dict[str, Any]) -> tuple[str, float | None, str]:
    """(level, base score, where it came from) of ``record``."""
    scored: dict[str, tuple[float, str]] = {}
    for s in as_list(record.get("severity")):
        if not isinstance(s, dict):
            continue
        kind, vector = str(s.get("type")), str(s.get("score") or "")
        version = {"CVSS_V4": "4", "CVSS_V3": "3", "CVSS_V2": "2"}.get(kind)
        if version is not None and (score := _base_score(version, vector)) is not None:
            scored[version] = (score, vector)
    for version in ("4", "3", "2"):
        if version in scored:
            score, vector = scored[version]
            return level_of_score(score), score, vector
    affected = [a for a in as_list(record.get("affected")) if isinstance(a, dict)]
    ratings = [record.get("database_specific")]
    ratings += [a.get(field) for a in affected for field in ("ecosystem_specific", "database_specific")]
    for r in (r for r in ratings if isinstance(r, dict)):
        for field in ("severity", "urgency"):
            rating = str(r.get(field) or "").lower()
            if rating in _RATINGS:
                return _RATINGS[rating], None, f"{field}: {r.get(field)}"
    return "unknown", None, "no CVSS vector, no rating"


def at_or_above(level: str, threshold: str) -> bool:
    """``level`` is ``threshold`` or worse (``unknown`` is never ordered among them)."""
    if level not in LEVELS or threshold not in LEVELS:
        return False
    return LEVELS.index(level) >= LEVELS.index(threshold)
