"""Judging the advisories that affect one package at one version: which records name the same
vulnerability (by id or alias), its ids in order (a CVE first), its level and score (the worst
rating its records give), and the versions that fix it. A pure function of the advisories and
the package, so judged once a run: the scan of every release that has that package reuses it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .matching import LEVELS, as_list, severity
from .osv import Advisories

ID_ORDER = ("CVE-", "GHSA-", "PYSEC-", "DSA-", "DLA-", "DEBIAN-")


@dataclass(frozen=True)
class Group:
    """The records of one vulnerability that affect a package at a version, judged: the same in
    every release that has that package at that version."""

    ids: frozenset[str]
    ordered: tuple[str, ...]  # the main id first
    summary: str
    level: str
    score: float | None
    rated_by: str
    fixed: tuple[str, ...]


def judged(advisories: Advisories, ecosystem: str, name: str, version: str) -> tuple[Group, ...]:
    """The vulnerabilities affecting a package at a version, each judged once a run (``watch``
    scans 240 releases that share most of their packages)."""
    key = (ecosystem, name, version)
    if key not in advisories.grouped:
        hits = advisories.affecting(ecosystem, name, version)
        found = []
        for members in _groups([h[0] for h in hits]):
            group = [hits[n][0] for n in members]
            ids = {str(i) for r in group for i in (r["id"], *as_list(r.get("aliases")))}
            rated = [severity(r) for r in group]
            known = [r for r in rated if r[0] in LEVELS]
            level, score, rated_by = max(known, key=lambda r: LEVELS.index(r[0])) if known else rated[0]
            found.append(Group(
                ids=frozenset(ids), ordered=_ordered_ids(ids),
                summary=str(group[0].get("summary") or "")[:200], level=level, score=score, rated_by=rated_by,
                fixed=tuple(sorted({f for n in members for f in hits[n][1].fixed})),
            ))  # fmt: skip
        advisories.grouped[key] = tuple(found)
    return advisories.grouped[key]  # type: ignore[no-any-return]


def _ordered_ids(ids: set[str]) -> tuple[str, ...]:
    def rank(i: str) -> tuple[int, str]:
        return next((n for n, p in enumerate(ID_ORDER) if i.startswith(p)), len(ID_ORDER)), i

    return tuple(sorted(ids, key=rank))


def _groups(records: list[dict[str, Any]]) -> list[list[int]]:
    """Which of ``records`` (of one package) name the same vulnerability, by id or alias: their
    indexes, together, each group in the order its records were met. Near-linear in the records
    (a union-find joined through the ids they share): one package may have thousands."""
    parent = list(range(len(records)))

    def root(n: int) -> int:
        while parent[n] != n:
            parent[n] = parent[parent[n]]  # halving: the trees stay flat
            n = parent[n]
        return n

    first: dict[str, int] = {}  # an id → the first record that names it
    for n, r in enumerate(records):
        for i in {str(r["id"]), *(str(a) for a in as_list(r.get("aliases")))}:
            a, b = root(first.setdefault(i, n)), root(n)
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for n in range(len(records)):
        groups.setdefault(root(n), []).append(n)
    return list(groups.values())
