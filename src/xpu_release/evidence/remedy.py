"""What can be done about a finding: the versions that fix it (a newer version of the package
that the advisories name as fixed and that none of them says is affected; for Debian, a fixed
source version), and since when it is known (the advisory's ``published``), for the SLA.

``watch`` names the smallest fix of each open finding; ``patch`` bumps a package to the
smallest version that fixes every finding it has and that the package index offers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import date, datetime
from typing import Any

from .matching import affects, version_key
from .osv import Advisories
from .scan import Finding, Package


def records_for(advisories: Advisories, finding: Finding) -> tuple[dict[str, Any], ...]:
    """The advisory records a finding was made of (its id or one of its aliases)."""
    ids = set(finding.ids)
    pkg = finding.package
    return tuple(a.data for a in advisories.lookup(pkg.ecosystem, pkg.name) if ({a.id, *a.aliases} & ids))


def to_leave(
    advisories: Advisories, package: Package, findings: Iterable[Finding]
) -> tuple[dict[str, Any], ...]:
    """The advisory records a version that fixes ``findings`` of ``package`` must not be affected
    by: those the findings were made of, and every other advisory of the package that the
    installed version is not affected by (a version one of them affects, 1.6.0 where another
    starts, would fix these and open that one). An advisory that affects the installed version
    and is none of ``findings`` (no fix yet, or excepted by VEX) may affect it too: the bump
    neither opens nor closes it."""
    mine = [r for f in findings for r in records_for(advisories, f)]
    others = [
        a.data
        for a in advisories.lookup(package.ecosystem, package.name)
        if affects(a.data, package.ecosystem, package.name, package.version) is None
    ]
    return (*mine, *others)


def fixes(package: Package, fixed: Iterable[str], records: Iterable[dict[str, Any]]) -> tuple[str, ...]:
    """The versions above the installed one that the records name as fixed and that none of
    ``records`` affects, smallest first: each of them fixes them all."""
    return tuple(_fixing(package, fixed, records))


def smallest_fix(package: Package, fixed: Iterable[str], records: Iterable[dict[str, Any]]) -> str | None:
    """The first of ``fixes`` (the larger ones are not judged)."""
    return next(_fixing(package, fixed, records), None)


def _fixing(package: Package, fixed: Iterable[str], records: Iterable[dict[str, Any]]) -> Iterator[str]:
    key = version_key(package.ecosystem)
    if key is None:
        return
    installed = _key(key, package.version)
    if installed is None:
        return
    found = {v: k for v in set(fixed) if (k := _key(key, v)) is not None and k > installed}
    records = tuple(records)
    for v in sorted(found, key=lambda v: found[v]):
        if all(affects(r, package.ecosystem, package.name, v) is None for r in records):
            yield v


def published(records: Iterable[dict[str, Any]]) -> date | None:
    """The first day any of ``records`` was published (OSV's ``published``, RFC 3339)."""
    days = [d for r in records if (d := _day(r.get("published"))) is not None]
    return min(days, default=None)


def _key(key: Any, version: str) -> Any:
    try:
        return key(version)
    except (ValueError, TypeError):
        return None


def _day(value: Any) -> date | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).date()
    except ValueError:
        return None
