"""The SBOM as SPDX 2.3 JSON, for consumers that ask for SPDX: made from the very CycloneDX SBOM
publish attaches (the same facts, so the two never disagree), deterministically.

One package for the image (``DESCRIBES``), one per component (``CONTAINS``): its name, version,
purl (an ``externalRefs`` entry of category ``PACKAGE-MANAGER``), sha256 where the SBOM has one,
and where it was downloaded from (an artifact's URL; ``NOASSERTION`` otherwise). Licenses are
``NOASSERTION``: the CycloneDX SBOM does not state them either. As syft and trivy write it, the
operating system is a package of purpose ``OPERATING-SYSTEM`` that ``CONTAINS`` the Debian
packages, and each Debian package names its source in ``sourceInfo`` ("built package from:
<source> <version>"): what trivy reads them by (the tests run it).
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime
from typing import Any

NOASSERTION = "NOASSERTION"


def _spdx_id(n: int, name: str, kind: str = "") -> str:
    # trivy takes the operating system from the package whose SPDXID starts so, as its own
    # writer names it (not from its primaryPackagePurpose): without it, 'Unsupported os'.
    prefix = "SPDXRef-OperatingSystem" if kind == "operating-system" else "SPDXRef-Package"
    return f"{prefix}-{n}-" + (re.sub(r"[^A-Za-z0-9.-]+", "-", name).strip("-") or "x")


def _spdx_location(url: str) -> bool:
    from urllib.parse import urlparse

    parts = urlparse(url)
    host = parts.hostname or ""
    return parts.scheme in ("http", "https", "ftp", "sftp") and bool(
        re.fullmatch(r"[a-z0-9]+([-.][a-z0-9]+)*\.[a-z]{2,5}", host)
    )


def _package(spdx_id: str, c: dict[str, Any]) -> dict[str, Any]:
    pkg: dict[str, Any] = {
        "SPDXID": spdx_id,
        "name": str(c.get("name") or "unnamed"),
        "downloadLocation": NOASSERTION,
        "filesAnalyzed": False,
        "licenseConcluded": NOASSERTION,
        "licenseDeclared": NOASSERTION,
        "copyrightText": NOASSERTION,
    }
    if c.get("version"):
        pkg["versionInfo"] = str(c["version"])
    sums = [{"algorithm": "SHA256", "checksumValue": h["content"]}
            for h in c.get("hashes") or () if h.get("alg") == "SHA-256"]  # fmt: skip
    if sums:
        pkg["checksums"] = sums
    urls = [str(r["url"]) for r in c.get("externalReferences") or () if r.get("type") == "distribution"]
    if urls:
        # SPDX's download location is a URL of a DNS host with a TLD (its specification's
        # pattern): an address by IP or an intranet name is kept in sourceInfo instead.
        if _spdx_location(urls[0]):
            pkg["downloadLocation"] = urls[0]
        else:
            pkg["sourceInfo"] = f"downloaded from {urls[0]}"
    if c.get("purl"):
        ref = {"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl", "referenceLocator": c["purl"]}
        pkg["externalRefs"] = [ref]
    if c.get("type") == "container":
        pkg["primaryPackagePurpose"] = "CONTAINER"
    if c.get("type") == "operating-system":
        pkg["primaryPackagePurpose"] = "OPERATING-SYSTEM"
    source = _debian_source(c)
    if source:
        pkg["sourceInfo"] = f"built package from: {source}"
    return pkg


def _debian_source(c: dict[str, Any]) -> str:
    """A Debian package's source and its version ("glibc 2.36-9+deb12u14"), from the purl's
    ``upstream`` qualifier and the SBOM's source-version property; "" for anything else."""
    purl = str(c.get("purl") or "")
    if not purl.startswith("pkg:deb/"):
        return ""
    from packageurl import PackageURL

    try:
        qualifiers = PackageURL.from_string(purl).qualifiers
    except ValueError:
        return ""
    props = {p.get("name"): p.get("value") for p in c.get("properties") or () if isinstance(p, dict)}
    name = (qualifiers.get("upstream") if isinstance(qualifiers, dict) else None) or c.get("name")
    version = props.get("io.xpu-release:source-version") or c.get("version")
    return f"{name} {version}" if name and version else ""


def to_spdx(cyclonedx: bytes, *, tool_version: str) -> bytes:
    """SPDX 2.3 JSON of the CycloneDX SBOM ``cyclonedx`` (same input, same bytes)."""
    bom = json.loads(cyclonedx)
    meta = bom.get("metadata") or {}
    image = meta.get("component") or {}
    name = f"{image.get('name', 'image')}-{image.get('version', '')}".strip("-")
    serial = str(bom.get("serialNumber") or "")
    ident = uuid.uuid5(uuid.NAMESPACE_URL, f"xpu-release:spdx:{serial or name}")
    image_pkg = _package("SPDXRef-Image", image)
    image_pkg["primaryPackagePurpose"] = "CONTAINER"
    packages = [image_pkg]
    describes = {"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
                 "relatedSpdxElement": "SPDXRef-Image"}  # fmt: skip
    relationships = [describes]
    components = list(bom.get("components") or ())
    ids = [
        _spdx_id(n, str(c.get("name") or ""), str(c.get("type") or "")) for n, c in enumerate(components, 1)
    ]
    system = next(
        (i for i, c in zip(ids, components, strict=True) if c.get("type") == "operating-system"), None
    )
    for spdx_id, c in zip(ids, components, strict=True):
        packages.append(_package(spdx_id, c))
        # The operating system holds its own packages; the image holds everything else.
        owner = system if system and str(c.get("purl") or "").startswith("pkg:deb/") else "SPDXRef-Image"
        relationships.append(
            {"spdxElementId": owner, "relationshipType": "CONTAINS", "relatedSpdxElement": spdx_id}
        )
    stamp = datetime.fromisoformat(str(meta.get("timestamp") or "1970-01-01T00:00:00+00:00"))
    created = stamp.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # SPDX: YYYY-MM-DDThh:mm:ssZ
    doc = {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": name,
        # The SPDX specification's own example form of a namespace; unique per image (its
        # CycloneDX serial number is made from the image id).
        "documentNamespace": f"https://spdx.org/spdxdocs/{re.sub(r'[^A-Za-z0-9.-]+', '-', name)}-{ident}",
        "creationInfo": {"created": created, "creators": [f"Tool: xpu-release-{tool_version}"]},
        "packages": packages,
        "relationships": relationships,
    }
    return json.dumps(doc, indent=2, sort_keys=False).encode()
