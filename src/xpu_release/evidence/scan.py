"""The vulnerability gate: the SBOM a release publishes (the very bytes), matched offline
against OSV advisories (``osv.py``, ``matching.py``), with the repository's reviewed exceptions
(``vex.py``).

A finding is one vulnerability (its ids and aliases merged) in one package: a Python
distribution by its PyPI name, a Debian package by its **source** package (what advisories
name), at the version advisories compare. It stops the release when it is at or above the
manifest's threshold (``security.fail_on``, default ``high``; unknown severity too, unless
``security.fail_on_unknown: false``) and no valid exception covers it. An exception that covers
nothing in this release is stale and stops the release too (as AWS's ECR-scan test does), with
the file:line that holds it; an expired one no longer counts, and the gate says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from ..errors import ManifestError, VulnerabilityGateFailed
from ..guard.reading import loads
from ..guard.shown import shown
from ..manifest import Repo
from ..manifest.model import ImageSpec
from .judging import judged
from .matching import LEVELS, at_or_above, orderable
from .osv import Advisories, Counts
from .vex import Purl, Statement, Subject, read_vex, vex_path

NO_ADVISORIES = "no advisories configured (--advisories or XPU_RELEASE_ADVISORIES)"


@dataclass(frozen=True)
class Package:
    ecosystem: str  # PyPI, Debian:12
    name: str  # the name advisories use: a PyPI distribution, a Debian source package
    version: str  # the version advisories compare (a Debian source's version)
    purl: Purl  # as the SBOM names it (the binary package, for Debian)
    binaries: tuple[str, ...] = ()  # a Debian source's installed binary packages
    members: tuple[Purl, ...] = ()  # a Debian source's binary packages, as the SBOM names them

    @property
    def purls(self) -> tuple[Purl, ...]:
        """Every package the SBOM lists for it (a Debian source: each of its binaries)."""
        return self.members or (self.purl,)


@dataclass(frozen=True)
class Finding:
    package: Package
    ids: tuple[str, ...]  # the main id first (a CVE where there is one), then its aliases
    summary: str
    level: str  # low, medium, high, critical, unknown
    score: float | None
    rated_by: str  # the CVSS vector, or the ecosystem rating it came from
    fixed: tuple[str, ...]
    exception: Statement | None  # the valid exception that covers it
    note: str  # what else VEX says of it (an expired exception, a claim of `fixed`)
    blocking: bool

    def to_json(self) -> dict[str, Any]:
        ex = self.exception
        return {
            "id": self.ids[0], "aliases": list(self.ids[1:]), "package": self.package.name,
            "ecosystem": self.package.ecosystem, "installed": self.package.version,
            "binaries": list(self.package.binaries), "fixed": list(self.fixed), "severity": self.level,
            "score": self.score, "rated_by": self.rated_by, "summary": self.summary,
            "vex": {"status": ex.status, "justification": ex.reason,
                    "review_by": str(ex.review_by), "where": ex.where} if ex else None,
            "note": self.note, "blocking": self.blocking,
        }  # fmt: skip


@dataclass(frozen=True)
class ScanResult:
    ref: str
    threshold: str
    fail_on_unknown: bool
    findings: tuple[Finding, ...]
    stale: tuple[Statement, ...]  # exceptions that cover nothing in this release
    packages: int
    sources: tuple[str, ...]
    counts: Counts
    # findings that statements in force speak of with different statuses: which one holds?
    conflicts: tuple[str, ...] = ()
    # records about a package of the release that cannot be judged for it ("six 1.16.0:
    # GHSA-…: its introduced version 'x' is no PyPI version"): the answer rests on them
    unjudged: tuple[str, ...] = ()

    @property
    def blocking(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.blocking)

    @property
    def passed(self) -> bool:
        return not self.blocking and not self.stale and not self.conflicts

    def to_json(self) -> dict[str, Any]:
        return {
            "ref": self.ref, "passed": self.passed, "threshold": self.threshold,
            "fail_on_unknown": self.fail_on_unknown, "packages": self.packages,
            "advisories": list(self.sources), "records": vars(self.counts),
            "findings": [f.to_json() for f in self.findings],
            "stale_exceptions": [{"vulnerability": s.vulnerability, "status": s.status, "where": s.where}
                                 for s in self.stale],
            "conflicts": list(self.conflicts),
        }  # fmt: skip


def components_of(document: Any) -> Iterator[tuple[str, Any]]:
    """Every component of a CycloneDX document with where it is (``components[2].components[0]``),
    nested ones too (an assembly's ``components``), in document order; one walk, no recursion
    (the nesting is bounded by the guarded parse before this)."""
    top = document.get("components") if isinstance(document, dict) else None
    listed = top if isinstance(top, list) else []
    stack = [(f"components[{i}]", c) for i, c in reversed(list(enumerate(listed)))]
    while stack:
        where, c = stack.pop()
        yield where, c
        inner = c.get("components") if isinstance(c, dict) else None
        if isinstance(inner, list):
            stack += [(f"{where}.components[{i}]", x) for i, x in reversed(list(enumerate(inner)))]


def packages_in(*documents: Any) -> tuple[Package, ...]:
    """The packages advisories can name, from CycloneDX documents (several: the SBOMs attached
    to one image, read as one): PyPI distributions, and Debian packages grouped by source
    (``upstream`` qualifier; ``io.xpu-release:source-version``). One package is one package
    however often it is listed: copies of a distribution in several places (a vendored one),
    a purl with another qualifier, the same package in two SBOMs."""
    pypi: dict[tuple[str, str], Package] = {}
    sources: dict[tuple[str, str, str], dict[str, Purl]] = {}
    for document in documents:
        for _, c in components_of(document):
            if not isinstance(c, dict) or not c.get("purl"):
                continue
            purl = Purl.parse(c["purl"])
            if purl.type == "pypi" and purl.version:
                if (purl.name, purl.version) not in pypi:
                    pypi[(purl.name, purl.version)] = Package(ecosystem="PyPI", name=purl.name,
                                                              version=purl.version, purl=purl)  # fmt: skip
            elif purl.type == "deb" and purl.version:
                release = purl.qualifier("distro").partition("-")[2]
                if purl.namespace != "debian" or not release:
                    continue  # a Debian package of unknown release: no advisory set to match
                props = {x.get("name"): x.get("value") for x in c.get("properties") or ()}
                source = purl.qualifier("upstream") or purl.name
                version = str(props.get("io.xpu-release:source-version") or purl.version)
                sources.setdefault((f"Debian:{release}", source, version), {}).setdefault(purl.name, purl)
    debs = [
        Package(ecosystem=eco, name=src, version=ver, purl=next(iter(members.values())),
                binaries=tuple(sorted(members)), members=tuple(sorted(members.values(), key=str)))
        for (eco, src, ver), members in sorted(sources.items())
    ]  # fmt: skip
    return (*pypi.values(), *debs)


def packages_of(sbom: bytes) -> tuple[Package, ...]:
    """The packages of one CycloneDX SBOM's bytes (``packages_in``), parsed within the guarded
    layer's bounds (a refusal is a ``ValueError``)."""
    return packages_in(loads(sbom, "the SBOM"))


def named_by(sbom: bytes) -> frozenset[str]:
    """The digests the SBOM says name its image (the image id it was made from): a VEX product
    ``pkg:oci/<image>@<that digest>`` is about this image."""
    try:
        component = json.loads(sbom).get("metadata", {}).get("component", {})
        props = {p.get("name"): p.get("value") for p in component.get("properties") or ()}
    except (ValueError, AttributeError, TypeError):
        return frozenset()
    image_id = props.get("io.xpu-release:image-id")
    return frozenset({image_id}) if isinstance(image_id, str) and image_id else frozenset()


def scan(
    spec: ImageSpec,
    sbom: bytes,
    advisories: Advisories,
    statements: tuple[Statement, ...],
    *,
    today: date,
    digests: frozenset[str] = frozenset(),
    repositories: frozenset[str] = frozenset(),
) -> ScanResult:
    """Every finding in ``sbom``, what VEX says of each, and the stale exceptions. ``digests``:
    what names this image besides its version (its id; its manifest digest once published), for
    the statements whose product names a digest; ``repositories``: where it is published
    (``vex.published_at``), for those whose product names a ``repository_url``."""
    return scan_packages(spec, packages_of(sbom), advisories, statements, today=today, digests=digests,
                         repositories=repositories)  # fmt: skip


def scan_packages(
    spec: ImageSpec,
    packages: tuple[Package, ...],
    advisories: Advisories,
    statements: tuple[Statement, ...],
    *,
    today: date,
    digests: frozenset[str] = frozenset(),
    repositories: frozenset[str] = frozenset(),
) -> ScanResult:
    """``scan`` of packages already read (``watch`` reads a published SBOM's once, checked)."""
    image = Subject(name=spec.image, version=spec.version, digests=digests, repositories=repositories)
    mine = tuple(s for s in statements if s.about(image))
    used: set[int] = set()
    findings: list[Finding] = []
    conflicts: list[str] = []
    unjudged: list[str] = []
    for pkg in packages:
        if not orderable(pkg.ecosystem, pkg.version):
            unjudged.append(
                f"{pkg.name} {shown(pkg.version, 40)}: no {pkg.ecosystem} version, no record can be judged"
            )
        unjudged += [
            f"{pkg.name} {pkg.version}: {why}" for why in advisories.unjudged(pkg.ecosystem, pkg.name)
        ]
        for g in judged(advisories, pkg.ecosystem, pkg.name, pkg.version):
            ids, level = g.ids, g.level
            covering = [(n, s) for n, s in enumerate(mine)
                        if s.covers(image, ids, pkg.purl, pkg.binaries)]  # fmt: skip
            used.update(n for n, s in covering if s.is_exception)
            valid = [s for _, s in covering if s.is_exception and not s.expired(today)]
            in_force = [s for _, s in covering if not s.expired(today)]
            if len({s.status for s in in_force}) > 1:
                said = ", ".join(f"{s.where} says {s.status}" for s in in_force)
                conflicts.append(f"{g.ordered[0]} in {pkg.name} {pkg.version}: {said}")
            notes = [f"the exception at {s.where} expired on {s.review_by}: review it"
                     for _, s in covering if s.is_exception and s.expired(today)]  # fmt: skip
            notes += [f"{s.where} says fixed, but {pkg.version} is affected"
                      for _, s in covering if s.status == "fixed"]  # fmt: skip
            severe = at_or_above(level, spec.fail_on) or (level == "unknown" and spec.fail_on_unknown)
            findings.append(Finding(
                package=pkg, ids=g.ordered, summary=g.summary, level=level, score=g.score,
                rated_by=g.rated_by, fixed=g.fixed,
                exception=valid[0] if valid else None, note="; ".join(notes),
                blocking=severe and not valid,
            ))  # fmt: skip
    stale = tuple(s for n, s in enumerate(mine) if s.is_exception and n not in used)
    findings.sort(key=lambda f: (-_rank(f.level), f.package.name, f.ids[0]))
    return ScanResult(ref=spec.ref, threshold=spec.fail_on, fail_on_unknown=spec.fail_on_unknown,
                      findings=tuple(findings), stale=stale, packages=len(packages),
                      sources=tuple(advisories.sources), counts=advisories.counts,
                      conflicts=tuple(conflicts), unjudged=tuple(unjudged))  # fmt: skip


def _rank(level: str) -> int:
    return LEVELS.index(level) + 1 if level in LEVELS else 5  # unknown first: it needs a look


# --- the gate in a release ---------------------------------------------------------------------


@dataclass(frozen=True)
class GatePolicy:
    """What a release's scan stage reads: the advisories (none: the release says nothing was
    checked), or the reason given with ``--no-scan``; and the day exceptions are reviewed by."""

    advisories: tuple[str, ...] = ()
    skip_reason: str | None = None
    today: date | None = None  # None: the day the release runs


def record_entry(result: ScanResult | None, *, skipped: str | None = None) -> dict[str, Any]:
    """The record's ``scan``: passed with what was found and excepted, or skipped and why."""
    if result is None:
        return {"status": "skipped", "reason": skipped or "", "findings": []}
    return {
        "status": "passed" if result.passed else "failed",
        "reason": f"threshold {result.threshold}; {result.counts.records} advisories",
        "findings": [
            {"id": f.ids[0], "aliases": list(f.ids[1:]), "package": f.package.name,
             "purls": [str(p) for p in f.package.purls],
             "installed": f.package.version, "severity": f.level, "fixed": list(f.fixed),
             "vex": f.exception.status if f.exception else None,
             "justification": f.exception.reason if f.exception else ""}
            for f in result.findings
        ],
    }  # fmt: skip


def merged_entry(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The record's ``scan`` of a platformed release, from each platform's (their SBOMs differ):
    every finding once (by advisory, package and installed version), failed if any failed,
    skipped only if every one was."""
    if len(entries) == 1:
        return entries[0]
    statuses = {e["status"] for e in entries}
    status = "failed" if "failed" in statuses else "skipped" if statuses == {"skipped"} else "passed"
    findings: dict[tuple[str, str, str], dict[str, Any]] = {}
    for e in entries:
        for f in e["findings"]:
            findings.setdefault((f["id"], f["package"], f["installed"]), f)
    return {"status": status, "reason": entries[0]["reason"], "findings": list(findings.values())}


def shown_finding(f: Finding) -> tuple[str, str, str, str]:
    """A finding's id, package, version and fixed versions as they may be shown: the image's
    packages, the advisories' and VEX's texts are outside data (``guard.shown``)."""
    fixed = ", ".join(shown(v) for v in f.fixed)
    return shown(f.ids[0]), shown(f.package.name), shown(f.package.version), fixed


def gate_failure(result: ScanResult) -> str:
    """Why the gate stops the release, one line per reason, each saying what to do; every outside
    text in it made safe to show."""
    lines = [f"the vulnerability gate stops {result.ref}: nothing is published"]
    for f in result.blocking:
        vid, name, version, fixed = shown_finding(f)
        fix = f"fixed in {fixed}" if fixed else "no fixed version yet"
        note = f" ({shown(f.note, len(f.note))})" if f.note else ""
        lines.append(f"  {f.level:<8} {vid} in {name} {version}: {fix}{note}")
    for s in result.stale:
        lines.append(f"  stale exception {shown(s.vulnerability)} at {s.where}: it matches nothing in "
                     "this release; remove it")  # fmt: skip
    for c in result.conflicts:
        lines.append(f"  conflicting statements for {shown(c, len(c))}: keep the one that holds")
    lines.append("upgrade the package, or add a reviewed statement to the image's vex.openvex.json")
    return "\n".join(lines)


def scan_image(
    repo: Repo, spec: ImageSpec, sbom: bytes, gate: GatePolicy, *, cache: Path, repositories: frozenset[str]
) -> ScanResult:
    """Scan ``sbom`` (the image's, as ``attest.image_sbom`` made it: the bytes publish attaches)
    with the image's VEX (``images/<image>/vex.openvex.json``; a mistake in it is exit 2, named);
    ``repositories``: where the release is published (``vex.published_at``)."""
    statements: tuple[Statement, ...] = ()
    path = vex_path(repo.root, spec.image)
    if path.exists():
        today = gate.today or date.today()
        statements, problems = read_vex(
            path, repo.rel(path), today=today, horizon_days=spec.review_horizon_days
        )
        if problems:
            raise ManifestError(problems)
    advisories = Advisories([Path(p) for p in gate.advisories], cache)
    try:
        return scan(spec, sbom, advisories, statements, today=gate.today or date.today(),
                    digests=named_by(sbom), repositories=repositories)  # fmt: skip
    finally:
        advisories.close()


@dataclass(frozen=True)
class Gated:
    """What a release's scan stage hands on: the record's ``scan``, the result (None: the gate
    did not run) that the release's VEX is made from, and what the stage says of it."""

    entry: dict[str, Any]
    detail: str
    result: ScanResult | None = None


def run_gate(
    repo: Repo, spec: ImageSpec, sbom: bytes, gate: GatePolicy, *, cache: Path, repositories: frozenset[str]
) -> Gated:
    """A release's scan stage, between the smoke test and the publish. A finding it stops on
    raises, and nothing is published. Skipped only when said (``--no-scan REASON``); with no
    advisories it says that nothing was checked."""
    if gate.skip_reason is not None:
        why = f"--no-scan: {gate.skip_reason}"
        return Gated(record_entry(None, skipped=why), why)
    if not gate.advisories:
        why = f"{NO_ADVISORIES}: nothing was checked"
        return Gated(record_entry(None, skipped=why), why)
    result = scan_image(repo, spec, sbom, gate, cache=cache, repositories=repositories)
    if not result.passed:
        raise VulnerabilityGateFailed(gate_failure(result))
    excepted = sum(1 for f in result.findings if f.exception is not None)
    detail = (f"{len(result.findings)} findings in {result.packages} packages, none blocking "
              f"({excepted} excepted by VEX)")  # fmt: skip
    return Gated(record_entry(result), detail, result)


def plan_of_gate(gate: GatePolicy) -> str:
    """What a dry run says the scan stage would do."""
    if gate.skip_reason is not None:
        return f"would skip: --no-scan: {gate.skip_reason}"
    if not gate.advisories:
        return f"would check nothing: {NO_ADVISORIES}"
    return f"would scan the SBOM against {', '.join(gate.advisories)}"
