"""The release's VEX: what its gate concluded, attached to the image by digest like the SBOM.

It is an OpenVEX document, in an in-toto statement about the image manifest (predicate type
``https://openvex.dev/ns``, as ``cosign attest --type openvex`` writes it), and says:

- for each finding of this release that a reviewed exception covers, that exception (status,
  justification or impact, action statement), for the packages the SBOM names;
- ``fixed``, for each finding the release this one extends had and this one does not.

Findings nobody has reviewed are not in it: VEX states what was decided, and a scanner that
reads it (trivy ``--vex oci``) still reports the rest. It is made from the gate's result, not
from the image alone, so it changes when the advisories or the exceptions do; it is dated with
the release's SOURCE_DATE_EPOCH, so the same result gives the same bytes and a rerun attaches
nothing new.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from ..image.build import source_date_epoch
from ..image.normalize import iso
from ..manifest.model import ImageSpec
from ..oci.store import canonical_json
from .attachment import OPENVEX_PREDICATE
from .scan import ScanResult
from .vex import CONTEXT

IN_TOTO_STATEMENT = "https://in-toto.io/Statement/v1"
AUTHOR = "xpu-release"
VEX_ID_BASE = "https://xpu-release.invalid/vex/"  # assumed: no public namespace is registered for it


@dataclass(frozen=True, kw_only=True)
class VexEntry:
    """One statement of the release's VEX."""

    vulnerability: str
    aliases: tuple[str, ...]
    status: str
    packages: tuple[str, ...]  # purls, as the SBOM names them (none: a record too old to say)
    justification: str = ""
    impact: str = ""
    action: str = ""
    review_by: str = ""  # an exception's review date (xpu-release's field; OpenVEX has none)


@dataclass(frozen=True, kw_only=True)
class ReleaseVex:
    """What the gate concluded for one release; ``entries`` in a stable order."""

    entries: tuple[VexEntry, ...]

    @property
    def excepted(self) -> int:
        return sum(1 for e in self.entries if e.status != "fixed")

    @property
    def fixed(self) -> int:
        return sum(1 for e in self.entries if e.status == "fixed")


def unqualified(purl: str) -> str:
    """``purl`` without its qualifiers, as the VEX names a package: OpenVEX matches a purl without
    qualifiers to every qualified one of that name and version, and scanners qualify packages
    their own way (trivy's Debian packages say ``distro=debian-12.15`` where the SBOM, as syft,
    says ``debian-12``: with the SBOM's qualifiers the statement matched nothing in trivy)."""
    from packageurl import PackageURL

    try:
        p = PackageURL.from_string(purl)
    except ValueError:
        return purl
    return str(PackageURL(p.type, p.namespace, p.name, p.version).to_string())


class Earlier(Protocol):
    """A finding on the record of an earlier release (``record.RecordedFinding``: typed when the
    record was read, so that a field of another type there cannot crash this)."""

    @property
    def id(self) -> str: ...
    @property
    def aliases(self) -> tuple[str, ...]: ...
    @property
    def package(self) -> str: ...
    @property
    def purls(self) -> tuple[str, ...]: ...


def release_vex(result: ScanResult, previous: Iterable[Earlier] | None) -> ReleaseVex:
    """The exceptions that apply to ``result``'s findings, and ``fixed`` for each of
    ``previous`` (the findings on the record of the release this one extends) that is gone."""
    entries: list[VexEntry] = []
    for f in result.findings:
        ex = f.exception
        if ex is None:
            continue
        entries.append(VexEntry(
            vulnerability=f.ids[0], aliases=f.ids[1:], status=ex.status,
            packages=tuple(dict.fromkeys(unqualified(str(p)) for p in f.package.purls)),
            justification=ex.justification, impact=ex.impact, action=ex.action,
            review_by=str(ex.review_by or ""),
        ))  # fmt: skip
    present = {(i, f.package.name) for f in result.findings for i in f.ids}
    for old in previous or ():
        ids = [old.id, *old.aliases]
        if not ids[0] or any((i, old.package) in present for i in ids):
            continue
        purls = (unqualified(p) for p in old.purls)
        entries.append(VexEntry(vulnerability=ids[0], aliases=tuple(ids[1:]), status="fixed",
                                packages=tuple(dict.fromkeys(purls))))  # fmt: skip
    entries.sort(key=lambda e: (e.vulnerability, e.status, e.packages))
    return ReleaseVex(entries=tuple(dict.fromkeys(entries)))


def _statement(entry: VexEntry, product: str) -> dict[str, Any]:
    vuln: dict[str, Any] = {"name": entry.vulnerability}
    if entry.aliases:
        vuln["aliases"] = list(entry.aliases)
    item: dict[str, Any] = {"@id": product}
    if entry.packages:
        item["subcomponents"] = [{"@id": p} for p in entry.packages]
    out: dict[str, Any] = {"vulnerability": vuln, "products": [item], "status": entry.status}
    if entry.justification:
        out["justification"] = entry.justification
    if entry.impact:
        out["impact_statement"] = entry.impact
    if entry.action:
        out["action_statement"] = entry.action
    if entry.review_by:
        out["review_by"] = entry.review_by
    return out


def vex_document(spec: ImageSpec, vex: ReleaseVex, subject_digest: str) -> dict[str, Any]:
    """The OpenVEX document: its products are the image by digest (``pkg:oci``), with the
    packages as subcomponents."""
    product = f"pkg:oci/{spec.image.rsplit('/', 1)[-1]}@{subject_digest.replace(':', '%3A')}"
    statements = [_statement(e, product) for e in vex.entries]
    key = hashlib.sha256(canonical_json({"subject": subject_digest, "statements": statements})).hexdigest()
    return {
        "@context": CONTEXT,
        "@id": f"{VEX_ID_BASE}{spec.image}/{spec.version}/{key[:16]}",
        "author": AUTHOR,
        "timestamp": iso(source_date_epoch(spec)),
        "version": 1,
        "statements": statements,
    }


def vex_statement(spec: ImageSpec, vex: ReleaseVex, subject_digest: str) -> bytes:
    """The in-toto statement that carries the document, about the image manifest."""
    return canonical_json({
        "_type": IN_TOTO_STATEMENT,
        "subject": [{"name": spec.image, "digest": {"sha256": subject_digest.removeprefix("sha256:")}}],
        "predicateType": OPENVEX_PREDICATE,
        "predicate": vex_document(spec, vex, subject_digest),
    })  # fmt: skip
