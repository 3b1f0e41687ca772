"""Reviewed exceptions: OpenVEX documents in the repository (``images/<image>/vex.openvex.json``).

Each statement says, for a vulnerability (by id or alias) and the packages it names (purls, as
products or as subcomponents of the image's ``pkg:oci/<image>`` product), one of:

- ``not_affected``, with a ``justification`` (OpenVEX's five) or an ``impact_statement``;
- ``affected``, with an ``action_statement`` (a risk accepted, and what users should do);
- ``under_investigation``;
- ``fixed``.

The first three are exceptions: each carries ``review_by`` (a date; an xpu-release field, as
OpenVEX has no expiry), past which it stops counting and the gate says so; a date further ahead
than the manifest's ``security.review_horizon_days`` (default 365) is refused, so no exception
escapes review for a century. ``fixed`` is a claim, never an exception: a finding it names is
still a finding. A justification or statement that shows a reader nothing (blanks, zero-width or
other invisible characters) is none. Every statement keeps
the file and line it was written at, so that a stale or expired one can be pointed at.

A product is honoured as exactly as it is written: ``pkg:oci/<image>`` speaks of every release
of the image, ``pkg:oci/<image>@<version>`` of that version only, ``pkg:oci/<image>@sha256:…``
of that image (its id, or its manifest digest once published) only. A ``repository_url``
qualifier narrows it to that repository: it speaks of this image only where it names one the
release is published to. A ``pkg:oci`` purl has no namespace; one written with one
(``pkg:oci/someone-else/<image>``) is about another repository's image and silences nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import Problem
from ..guard.reading import days_after
from ..guard.shown import says_nothing
from ..manifest.yamlsrc import Source, YamlProblems, load
from ..oci.endpoint import Endpoint
from .matching import pypi_name

STATUSES = ("not_affected", "affected", "fixed", "under_investigation")
EXCEPTIONS = ("not_affected", "affected", "under_investigation")
JUSTIFICATIONS = (
    "component_not_present",
    "vulnerable_code_not_present",
    "vulnerable_code_not_in_execute_path",
    "vulnerable_code_cannot_be_controlled_by_adversary",
    "inline_mitigations_already_exist",
)
CONTEXT = "https://openvex.dev/ns/v0.2.0"
REVIEW_HORIZON_DAYS = 365  # the default of security.review_horizon_days: reviewed at least yearly


def vex_path(root: Path, image: str) -> Path:
    return root / "images" / image / "vex.openvex.json"


@dataclass(frozen=True)
class Purl:
    type: str
    namespace: str
    name: str
    version: str | None
    qualifiers: tuple[tuple[str, str], ...] = ()

    def qualifier(self, key: str) -> str:
        return dict(self.qualifiers).get(key, "")

    def __str__(self) -> str:
        return _text(self)

    @classmethod
    def parse(cls, text: str) -> Purl:
        """``text`` parsed (a ``ValueError`` when it is no package URL). Remembered for the run:
        240 releases' SBOMs name mostly the same packages (a Purl is immutable)."""
        return _parse(text)


@lru_cache(maxsize=1 << 16)
def _parse(text: str) -> Purl:
    from packageurl import PackageURL

    p = PackageURL.from_string(text)
    name = pypi_name(p.name) if p.type == "pypi" else p.name
    raw = p.qualifiers if isinstance(p.qualifiers, dict) else {}
    return Purl(type=p.type, namespace=p.namespace or "", name=name, version=p.version,
                qualifiers=tuple(sorted((str(k), str(v)) for k, v in raw.items())))  # fmt: skip


@lru_cache(maxsize=1 << 16)
def _text(purl: Purl) -> str:
    from packageurl import PackageURL

    return str(PackageURL(purl.type, purl.namespace or None, purl.name, purl.version,
                          dict(purl.qualifiers) or None).to_string())  # fmt: skip


@dataclass(frozen=True)
class Subject:
    """The image a scan is about: its name, its version, the digests that name it where they
    are known (its id; its manifest digest once published), and the repositories it is
    published to (``host/namespace/image``) where they are known."""

    name: str
    version: str
    digests: frozenset[str] = frozenset()
    repositories: frozenset[str] = frozenset()

    def is_named_by(self, product: Purl) -> bool:
        """``product`` (a ``pkg:oci`` purl) names this image: by name alone, or by name and
        this version or one of its digests. A ``pkg:oci`` purl has no namespace (the purl
        spec): one written with a namespace names another repository's image of the same last
        name, never this one; a ``repository_url`` names this image only where it is one of the
        repositories it is published to."""
        if product.namespace or product.name != self.name:
            return False
        where = product.qualifier("repository_url")
        if where and repository_of(where) not in self.repositories:
            return False
        return product.version in (None, self.version, *self.digests)


def published_at(image: str, endpoints: Iterable[Endpoint]) -> frozenset[str]:
    """The repositories ``image`` is published to, as ``repository_of`` writes a purl's
    ``repository_url``: one for each endpoint a release goes to."""
    return frozenset(repository_of(f"{ep.prefix}/{image}") for ep in endpoints)


def repository_of(url: str) -> str:
    """A purl's ``repository_url`` as ``host/namespace/image`` (``docker.io/ns/img``): without
    a scheme or a closing slash, in lower case (hosts and repository names are)."""
    return url.removeprefix("https://").removeprefix("http://").rstrip("/").lower()


@dataclass(frozen=True)
class Statement:
    vulnerability: str
    aliases: tuple[str, ...]
    status: str
    justification: str
    impact: str
    action: str
    images: tuple[Purl, ...]  # the pkg:oci products it is about (none: any image)
    packages: tuple[Purl, ...]  # the packages it names (none: every package of those images)
    review_by: date | None
    where: str  # file:line

    @property
    def ids(self) -> frozenset[str]:
        return frozenset((self.vulnerability, *self.aliases))

    @property
    def reason(self) -> str:
        """Why it holds, as it says: the justification, else the impact or action statement."""
        return self.justification or self.impact or self.action

    @property
    def is_exception(self) -> bool:
        return self.status in EXCEPTIONS

    def about(self, image: Subject) -> bool:
        """It speaks of ``image``: it names no image, or names this one as exactly as it is."""
        return not self.images or any(image.is_named_by(p) for p in self.images)

    def covers(self, image: Subject, ids: frozenset[str], package: Purl, also: tuple[str, ...] = ()) -> bool:
        """It speaks of one of ``ids`` for ``package`` (or one of the ``also`` names: a Debian
        source's binaries) in ``image``."""
        if not self.ids & ids or not self.about(image):
            return False
        if not self.packages:
            return True
        names = {package.name, *also}
        return any(
            p.type == package.type and p.name in names and p.version in (None, package.version)
            for p in self.packages
        )

    def expired(self, today: date) -> bool:
        return self.review_by is not None and today > self.review_by


def _str(value: Any) -> str:
    """A text field as written; one that shows a reader nothing (blanks, zero-width or other
    invisible characters: ``guard.shown.says_nothing``) says nothing, so it is ""."""
    return "" if not isinstance(value, str) or says_nothing(value) else value.strip()


def _statement(
    src: Source, i: int, s: dict[str, Any], problems: list[Problem], latest: date | None
) -> Statement | None:
    path: tuple[str | int, ...] = ("statements", i)
    where = f"{src.file}:{src.mark(path).line}"
    vuln = s.get("vulnerability")
    name = _str(vuln.get("name") if isinstance(vuln, dict) else vuln)
    status = _str(s.get("status"))
    if not name:
        problems.append(src.problem((*path, "vulnerability"), "needs a vulnerability name (CVE-…, GHSA-…)"))
    if status not in STATUSES:
        problems.append(src.problem((*path, "status"), f"status must be one of {', '.join(STATUSES)}"))
    justification, impact = _str(s.get("justification")), _str(s.get("impact_statement"))
    if status == "not_affected" and justification not in JUSTIFICATIONS and not impact:
        problems.append(src.problem((*path, "justification"), "not_affected needs a justification "
                                    f"({', '.join(JUSTIFICATIONS)}) or an impact_statement"))  # fmt: skip
    action = _str(s.get("action_statement"))
    if status == "affected" and not action:
        problems.append(src.problem(path, "affected needs an action_statement (what users should do)"))
    review_by = None
    raw_review = s.get("review_by")
    if status in EXCEPTIONS:
        try:
            review_by = date.fromisoformat(str(raw_review))
        except ValueError:
            why = "an exception needs review_by, the date it is reviewed again (2027-03-31)"
            problems.append(src.problem((*path, "review_by"), why))
        if review_by is not None and latest is not None and review_by > latest:
            why = (f"review_by {review_by} is further ahead than {latest}, the review horizon "
                   "(security.review_horizon_days): review exceptions within it")  # fmt: skip
            problems.append(src.problem((*path, "review_by"), why))
    images, packages = _products(src, path, s.get("products") or [], problems)
    raw_aliases = vuln.get("aliases") if isinstance(vuln, dict) else None
    aliases = tuple(_str(a) for a in (raw_aliases if isinstance(raw_aliases, list) else ()))
    if problems:
        return None
    return Statement(vulnerability=name, aliases=tuple(a for a in aliases if a), status=status,
                     justification=justification, impact=impact, action=action, images=tuple(images),
                     packages=tuple(packages), review_by=review_by, where=where)  # fmt: skip


def _products(
    src: Source, path: tuple[str | int, ...], products: Any, problems: list[Problem]
) -> tuple[list[Purl], list[Purl]]:
    """The images (``pkg:oci``) and the packages a statement's products name, with their
    subcomponents; each that is not a package URL is a problem."""
    images: list[Purl] = []
    packages: list[Purl] = []
    if not isinstance(products, list):
        problems.append(src.problem((*path, "products"), "products must be a list of package URLs"))
        products = []
    for j, product in enumerate(products):
        ids = [product]
        if isinstance(product, dict):
            subs = product.get("subcomponents")
            subs = subs if isinstance(subs, list) else []
            ids = [product.get("@id"), *(c.get("@id") for c in subs if isinstance(c, dict))]
        for purl in ids:
            try:
                parsed = Purl.parse(str(purl))
            except ValueError:
                problems.append(src.problem((*path, "products", j), f"{purl!r} is not a package URL"))
                continue
            (images.append(parsed) if parsed.type == "oci" else packages.append(parsed))
    return images, packages


def read_vex(
    path: Path, display: str, *, today: date | None = None, horizon_days: int = REVIEW_HORIZON_DAYS
) -> tuple[tuple[Statement, ...], list[Problem]]:
    """The statements of one OpenVEX document, and every problem of its shape (file:line); with
    ``today``, an exception to be reviewed later than ``horizon_days`` from it is one."""
    try:
        src = load(path, display)
    except YamlProblems as exc:
        return (), exc.problems
    return vex_statements(src, today=today, horizon_days=horizon_days)


def vex_statements(
    src: Source, *, today: date | None = None, horizon_days: int = REVIEW_HORIZON_DAYS
) -> tuple[tuple[Statement, ...], list[Problem]]:
    """The statements of an OpenVEX document already read (a file, or the predicate of a VEX a
    registry serves), and every problem of its shape."""
    latest = days_after(today, horizon_days) if today is not None else None
    problems: list[Problem] = []
    data = src.data
    if not isinstance(data, dict) or not str(data.get("@context", "")).startswith("https://openvex.dev/ns"):
        return (), [src.problem((), f"not an OpenVEX document (its @context must be {CONTEXT})")]
    statements = data.get("statements")
    if not isinstance(statements, list):
        return (), [src.problem(("statements",), "needs a list of statements")]
    out = []
    for i, s in enumerate(statements):
        mine: list[Problem] = []
        st = _statement(src, i, s if isinstance(s, dict) else {}, mine, latest)
        problems += mine
        if st is not None:
            out.append(st)
    return tuple(out), problems
