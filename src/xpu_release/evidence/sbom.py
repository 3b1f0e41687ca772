"""The image's SBOM: CycloneDX 1.6 JSON, written with ``cyclonedx-python-lib`` and validated
against the CycloneDX schema, from what the image holds (``contents.py``) and what its locks know.

It names what a scanner finds in the image, the way scanners read it (trivy and syft; the
tests run trivy on it): the operating system as an ``operating-system`` component; every Debian
package dpkg installed, with its source package; every Python distribution on disk, where it is,
with its wheel's sha256 where a lock installed it there; each artifact with its URL and sha256;
and the base image by digest. It is a pure function of the image and its inputs: the same image
gives the same bytes on any runner (its serial number and timestamp come from the image id and
the release's SOURCE_DATE_EPOCH), so a rerun attaches nothing new.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..errors import ConfigError
from ..image.build import source_date_epoch
from ..image.lock import Lock, load_lock, lock_path
from ..manifest import ImageSpec, Repo
from ..manifest.model import canonical_name
from ..oci.store import canonical_json
from .contents import Contents, Deb, OperatingSystem


@dataclass(frozen=True, kw_only=True)
class Distribution:
    """A Python distribution the SBOM names: found in the image (``contents.py``), with what the
    locks know of it."""

    name: str
    version: str
    sha256: str | None  # the wheel's, where a lock records it for this place
    provided: bool  # by the base image, not by a layer of this release
    location: str = ""  # where it is installed ("" for one known from the lock alone)


def _lock_knowledge(repo: Repo, spec: ImageSpec, lock: Lock) -> tuple[dict[str, str | None], set[str]]:
    """``name==version`` → the wheel's sha256, for every distribution a lock installed (the base
    release's own lock too, when the base is one of ours); and which ones the base provides."""
    known: dict[str, str | None] = {}
    parent = spec.base.release_ref
    if parent:
        base_spec = repo.load_ref(parent)
        if lock_path(repo.root, base_spec).is_file():
            # As it is: the lock the base release was built from.
            for layer in load_lock(repo.root, base_spec, current=False).layers:
                known.update((f"{canonical_name(p.name)}=={p.version}", p.sha256) for p in layer.packages)
    for layer in lock.layers:
        known.update((f"{canonical_name(p.name)}=={p.version}", p.sha256) for p in layer.packages)
    provided = {f"{canonical_name(n)}=={v}" for n, v in lock.provided}
    return known, provided


def python_distributions(
    repo: Repo, spec: ImageSpec, lock: Lock, contents: Contents
) -> tuple[Distribution, ...]:
    """Every Python distribution installed in the image, where it is; one pip installed into an
    environment gets its wheel's sha256 from the lock that pinned it (a vendored copy inside
    another package's tree does not: no wheel of it was installed). An image that could not be
    searched (no ``find``) is described by its locks alone."""
    known, provided = _lock_knowledge(repo, spec, lock)
    if contents.python is None:
        listed = [(n, v) for n, v in lock.provided] + [
            (p.name, p.version) for x in lock.layers for p in x.packages
        ]
        return tuple(sorted(
            (Distribution(name=n, version=v, sha256=known.get(f"{canonical_name(n)}=={v}"),
                          provided=f"{canonical_name(n)}=={v}" in provided) for n, v in listed),
            key=lambda d: canonical_name(d.name),
        ))  # fmt: skip
    out = []
    for d in contents.python:
        key = f"{canonical_name(d.name)}=={d.version}"
        pip_installed = d.top_level
        out.append(Distribution(name=d.name, version=d.version, location=d.location,
                                sha256=known.get(key) if pip_installed else None,
                                provided=pip_installed and key in provided))  # fmt: skip
    return tuple(sorted(out, key=lambda d: (canonical_name(d.name), d.version, d.location)))


# --- the SBOM ---------------------------------------------------------------------------------


def _split_debian(version: str) -> tuple[str, str, str]:
    """``[epoch:]upstream[-revision]`` → (epoch, upstream, revision), "" where absent."""
    epoch, _, rest = version.rpartition(":") if ":" in version else ("", "", version)
    upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "")
    return epoch, upstream, revision


def _deb_component(deb: Deb, system: OperatingSystem | None) -> Any:
    """A Debian package as syft names it (the release as purl ``distro``, the source as
    ``upstream``), with its source package and version also as the properties trivy reads from
    any SBOM (``aquasecurity:trivy:Src*``): advisories name the source, and without them trivy
    takes the binary for its own source and matches nothing a source advisory names."""
    from cyclonedx.model import Property
    from cyclonedx.model.component import Component, ComponentType
    from packageurl import PackageURL

    distro = system.distro if system is not None else "debian"
    qualifiers = {"arch": deb.arch, **({"distro": distro} if "-" in distro else {})}
    if deb.source:
        qualifiers["upstream"] = deb.source
    purl = PackageURL("deb", distro.split("-")[0], deb.name, deb.version, qualifiers)
    props = (
        [Property(name="io.xpu-release:source-version", value=deb.source_version)]
        if deb.source_version
        else []
    )
    epoch, upstream, revision = _split_debian(deb.source_version or deb.version)
    trivy = {
        "SrcName": deb.source or deb.name,
        "SrcVersion": upstream,
        "SrcRelease": revision,
        "SrcEpoch": epoch,
    }
    props += [Property(name=f"aquasecurity:trivy:{k}", value=v) for k, v in trivy.items() if v]
    return Component(type=ComponentType.LIBRARY, name=deb.name, version=deb.version, purl=purl,
                     bom_ref=str(purl), properties=props)  # fmt: skip


def sbom(
    repo: Repo,
    spec: ImageSpec,
    lock: Lock,
    image_id: str,
    contents: Contents,
) -> bytes:
    """The image's CycloneDX 1.6 JSON SBOM, validated against the CycloneDX schema."""
    from cyclonedx.model import (
        ExternalReference,
        ExternalReferenceType,
        HashAlgorithm,
        HashType,
        Property,
        XsUri,
    )
    from cyclonedx.model.bom import Bom, BomMetaData
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.output.json import JsonV1Dot6
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator
    from packageurl import PackageURL

    def sha(value: str | None) -> list[HashType]:
        return [HashType(alg=HashAlgorithm.SHA_256, content=value)] if value else []

    image = Component(
        type=ComponentType.CONTAINER,
        name=spec.image,
        version=spec.version,
        bom_ref=f"image:{spec.ref}",
        properties=[
            Property(name="io.xpu-release:image-id", value=image_id),
            Property(name="io.xpu-release:manifest", value=spec.manifest_path),
            Property(name="io.xpu-release:manifest-sha256", value=spec.content_hash),
        ],
    )
    components: list[Component] = []
    base_name, _, base_digest = lock.base.partition("@")
    base_repo = base_name.rpartition(":")[0] or base_name
    if base_digest:
        # A registry path gives the purl its repository_url; a family release (pytorch-cpu-sdk)
        # is named as the lock names it.
        where = {"repository_url": base_repo} if "/" in base_repo else None
        purl = PackageURL("oci", None, base_repo.rsplit("/", 1)[-1], base_digest, where)
        components.append(Component(
            type=ComponentType.CONTAINER, name=base_repo, version=base_digest, purl=purl,
            bom_ref=str(purl), hashes=sha(base_digest.removeprefix("sha256:")),
            properties=[Property(name="io.xpu-release:role", value="base image")],
        ))  # fmt: skip
    dists = python_distributions(repo, spec, lock, contents)
    purls = Counter(PackageURL("pypi", None, canonical_name(d.name), d.version).to_string() for d in dists)
    for d in dists:
        purl = PackageURL("pypi", None, canonical_name(d.name), d.version)
        props = [Property(name="io.xpu-release:provided-by", value="base image")] if d.provided else []
        if d.location:
            props.append(Property(name="io.xpu-release:location", value=d.location))
        # A bom-ref is unique: copies of one distribution in several places are told apart.
        ref = str(purl) if purls[str(purl)] == 1 else f"{purl}#{d.location}"
        components.append(Component(
            type=ComponentType.LIBRARY, name=d.name, version=d.version, purl=purl, bom_ref=ref,
            hashes=sha(d.sha256), properties=props,
        ))  # fmt: skip
    system = contents.os
    if system is not None:
        # Scanners read the OS packages of an SBOM only beside an operating-system component
        # (trivy: 'Unsupported os family="none"' without one), named as they name it.
        components.append(
            Component(
                type=ComponentType.OPERATING_SYSTEM,
                name=system.family,
                version=system.version,
                bom_ref=f"os:{system.family}@{system.version}".rstrip("@"),
            )
        )
    for deb in contents.debs:
        components.append(_deb_component(deb, system))
    for art in spec.of_kind("artifact"):
        refs = (
            [
                ExternalReference(
                    type=ExternalReferenceType.DISTRIBUTION, url=XsUri(art.url), hashes=sha(art.sha256)
                )
            ]
            if art.url
            else []
        )
        components.append(Component(
            type=ComponentType.LIBRARY, name=art.name, version=art.version, bom_ref=f"artifact:{art.id}",
            hashes=sha(art.sha256), external_references=refs,
            properties=[Property(name="io.xpu-release:kind", value="artifact")],
        ))  # fmt: skip
    bom = Bom(
        serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"xpu-release:sbom:{image_id}"),
        metadata=BomMetaData(
            component=image,
            timestamp=datetime.fromtimestamp(source_date_epoch(spec), UTC),
        ),
    )
    for c in components:
        bom.components.add(c)
    bom.register_dependency(image, components)
    text = JsonV1Dot6(bom).output_as_string(indent=None)
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    if error is not None:  # a defect of ours, never of the user's input
        msg = f"the SBOM of {spec.ref} does not validate against CycloneDX 1.6: {error}"
        raise ConfigError(msg)
    return canonical_json(json.loads(text))
