"""What a release is made of and where it came from: its SBOM and its provenance (and, after a
vulnerability gate, its VEX: ``vexdoc.py``).

Both are documents *about* an image, attached to it by digest in every region
(``referrers.py``). xpu-release knows more than a scanner would have to guess:

- the SBOM (CycloneDX 1.6, written by ``cyclonedx-python-lib``) lists every Python
  distribution in the image, the base's own included, with its wheel's sha256 where a lock
  records it; every Debian package, read from the built image's dpkg database in a throwaway
  container with no network; each artifact with its URL and sha256; and the base image by
  digest. It is a pure function of the image and its inputs: the same image gives the same
  bytes on any runner (its serial number and timestamp come from the image id and the
  release's SOURCE_DATE_EPOCH), so a rerun attaches nothing new.
- the provenance is an in-toto statement with a SLSA provenance v1 predicate: the manifest,
  lock and Dockerfile by sha256, the base digest and the git revision; the builder, and when
  the build ran. The release key signs only a statement this run made from its own inputs:
  one found at an endpoint is outside data, reused only when it is provably the same
  (``reuse.choose``).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .. import __version__
from ..errors import ConfigError
from ..files import sha256_file
from ..image.build import BuildRun, known_build, source_date_epoch
from ..image.engine import Engine
from ..image.lock import Lock, load_lock, lock_path
from ..image.normalize import iso
from ..manifest import ImageSpec, Repo
from ..manifest.model import canonical_name
from ..oci.store import canonical_json
from .attachment import KINDS, SLSA_PROVENANCE, Attachment, Kind
from .spdx import to_spdx
from .vexdoc import ReleaseVex, vex_statement

IN_TOTO_STATEMENT = "https://in-toto.io/Statement/v1"
BUILD_TYPE = "https://xpu-release.invalid/build/v1"  # assumed: no public URI is registered for it


@dataclass(frozen=True, kw_only=True)
class Deb:
    name: str
    version: str
    arch: str
    source: str = ""  # the source package it was built from (advisories name sources), "" = name
    source_version: str = ""  # "" = version


@dataclass(frozen=True, kw_only=True)
class Distribution:
    name: str
    version: str
    sha256: str | None  # the wheel's, where a lock records it
    provided: bool  # by the base image, not by a layer of this release


# --- the image's contents ---------------------------------------------------------------------


_DPKG = (
    'if [ -r /etc/os-release ]; then . /etc/os-release; fi; echo "os=${ID:-debian}-${VERSION_ID:-}"; '
    "if command -v dpkg-query >/dev/null; then "
    "dpkg-query -W -f "
    "'${Package}\\t${Version}\\t${Architecture}\\t${source:Package}\\t${source:Version}\\n'; fi"
)


def debian_packages(engine: Engine, image_id: str) -> tuple[str, tuple[Deb, ...]]:
    """The distribution and its release (``debian-12``; ``debian`` when os-release has no
    VERSION_ID) and every package dpkg says is installed in the image, with the source package
    it was built from (none, in an image without dpkg)."""
    out = engine.output(image_id, ["/bin/sh", "-c", _DPKG], purpose="sbom")
    lines = out.splitlines()
    first = lines[0] if lines else ""
    distro = first.partition("=")[2].strip().rstrip("-") if first.startswith("os=") else "debian"
    debs = []
    for line in lines[1:]:
        parts = line.split("\t")
        if len(parts) in (3, 5) and parts[0]:
            source, source_version = (parts[3], parts[4]) if len(parts) == 5 else ("", "")
            debs.append(Deb(name=parts[0], version=parts[1], arch=parts[2],
                            source="" if source == parts[0] else source,
                            source_version="" if source_version == parts[1] else source_version))  # fmt: skip
    return distro, tuple(sorted(debs, key=lambda d: (d.name, d.arch)))


def python_distributions(repo: Repo, spec: ImageSpec, lock: Lock) -> tuple[Distribution, ...]:
    """Every distribution a layer installs, and every one the base provides; a provided one
    gets its wheel's sha256 from the base release's own lock when the base is one of ours."""
    known: dict[str, str] = {}
    parent = spec.base.release_ref
    if parent:
        base_spec = repo.load_ref(parent)
        if lock_path(repo.root, base_spec).is_file():
            # As it is: the lock the base release was built from.
            for layer in load_lock(repo.root, base_spec, current=False).layers:
                known.update((f"{canonical_name(p.name)}=={p.version}", p.sha256) for p in layer.packages)
    out = [
        Distribution(name=n, version=v, sha256=known.get(f"{canonical_name(n)}=={v}"), provided=True)
        for n, v in lock.provided
    ]
    for layer in lock.layers:
        out += [Distribution(name=p.name, version=p.version, sha256=p.sha256, provided=False)
                for p in layer.packages]  # fmt: skip
    return tuple(sorted(out, key=lambda d: canonical_name(d.name)))


# --- the SBOM ---------------------------------------------------------------------------------


def sbom(
    repo: Repo,
    spec: ImageSpec,
    lock: Lock,
    image_id: str,
    debs: tuple[str, tuple[Deb, ...]],
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
    for d in python_distributions(repo, spec, lock):
        purl = PackageURL("pypi", None, canonical_name(d.name), d.version)
        props = [Property(name="io.xpu-release:provided-by", value="base image")] if d.provided else []
        components.append(Component(
            type=ComponentType.LIBRARY, name=d.name, version=d.version, purl=purl, bom_ref=str(purl),
            hashes=sha(d.sha256), properties=props,
        ))  # fmt: skip
    distro, packages = debs
    for deb in packages:
        # As syft writes it: the distribution's release as `distro`, the source as `upstream`.
        qualifiers = {"arch": deb.arch, **({"distro": distro} if "-" in distro else {})}
        if deb.source:
            qualifiers["upstream"] = deb.source
        purl = PackageURL("deb", distro.split("-")[0], deb.name, deb.version, qualifiers)
        source = (
            [Property(name="io.xpu-release:source-version", value=deb.source_version)]
            if deb.source_version
            else []
        )
        components.append(Component(type=ComponentType.LIBRARY, name=deb.name, version=deb.version,
                                    purl=purl, bom_ref=str(purl), properties=source))  # fmt: skip
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


# --- the provenance ---------------------------------------------------------------------------


def git_revision(root: Path) -> str:
    """HEAD's commit, with ``-dirty`` when tracked files differ from it ("" outside git)."""
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=False)  # fmt: skip
    if head.returncode != 0:
        return ""
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, check=False)  # fmt: skip
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def _file_sha256(path: Path) -> str:
    return sha256_file(path) if path.is_file() else ""


def provenance(
    repo: Repo,
    spec: ImageSpec,
    lock: Lock,
    image_id: str,
    subject_digest: str,
    run: BuildRun | None,
    builder: str,
) -> bytes:
    """An in-toto v1 statement, SLSA provenance v1 predicate, about the image manifest
    ``subject_digest``. Without a known build (an image pulled by build avoidance, made
    elsewhere), the run's times are left out rather than invented, and the builder named is
    ``builder``, who vouches for it by publishing."""
    root = repo.root
    manifest_file = root / spec.manifest_path
    dockerfile = root / "images" / spec.image / spec.version / "Dockerfile"
    lock_file = lock_path(root, spec)
    manifest_sha256 = _file_sha256(manifest_file)
    epoch = source_date_epoch(spec)
    revision = git_revision(root)
    dependencies: list[dict[str, object]] = [
        {"name": "manifest", "uri": spec.manifest_path, "digest": {"sha256": manifest_sha256}},
        {"name": "lock", "uri": repo.rel(lock_file), "digest": {"sha256": _file_sha256(lock_file)}},
        {"name": "dockerfile", "uri": repo.rel(dockerfile), "digest": {"sha256": _file_sha256(dockerfile)}},
        {"name": "base", "uri": lock.base, "digest": {"sha256": lock.base_digest.removeprefix("sha256:")}},
    ]
    if revision:
        dependencies.append({"name": "source", "digest": {"gitCommit": revision.removesuffix("-dirty")},
                             "annotations": {"dirty": revision.endswith("-dirty")}})  # fmt: skip
    metadata: dict[str, object] = {"invocationId": f"{spec.ref}@{image_id}"}
    if run is not None:
        metadata |= {"startedOn": run.started, "finishedOn": run.finished}
    statement = {
        "_type": IN_TOTO_STATEMENT,
        "subject": [{"name": spec.image, "digest": {"sha256": subject_digest.removeprefix("sha256:")}}],
        "predicateType": SLSA_PROVENANCE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "ref": spec.ref,
                    "manifest": spec.manifest_path,
                    "manifestSha256": manifest_sha256,
                    "resolvedManifestSha256": spec.content_hash,
                },
                "internalParameters": {
                    "imageId": image_id,
                    "sourceDateEpoch": epoch,
                    "created": iso(epoch),
                },
                "resolvedDependencies": dependencies,
            },
            "runDetails": {
                "builder": {"id": run.builder if run else builder},
                "metadata": metadata,
            },
        },
    }
    return canonical_json(statement)


def image_sbom(repo: Repo, spec: ImageSpec, lock: Lock, engine: Engine, image_id: str) -> bytes:
    """The SBOM of ``image_id``, which the engine holds: the one throwaway container a release
    runs for it (dpkg's database), made once and handed to the gate and to publish."""
    return sbom(repo, spec, lock, image_id, debian_packages(engine, image_id))


@dataclass(frozen=True, kw_only=True)
class Documents:
    """The documents of one release's image, made from what the release worked out once: its
    lock, and the SBOM (``image_sbom``) the gate scanned, the very bytes attached."""

    repo: Repo
    spec: ImageSpec
    lock: Lock
    image_id: str
    sbom: bytes
    builder: str  # who builds (or, for a pulled image, publishes): the command read it once
    vex: ReleaseVex | None = None  # what the release's gate concluded (None: it did not run)

    @property
    def kinds(self) -> tuple[Kind, ...]:
        """What a publish attaches: the SBOM and the provenance, the VEX when the gate ran, the
        SPDX SBOM when the manifest asks for it (``sbom_formats``)."""
        out: tuple[Kind, ...] = (*KINDS, "vex") if self.vex is not None else KINDS
        return (*out, "spdx") if "spdx" in self.spec.sbom_formats else out

    def run_known(self) -> bool:
        """This runner knows the build run of the image (it built it)."""
        return known_build(self.image_id) is not None

    def make(self, kind: Kind, subject: str) -> Attachment:
        if kind == "sbom":
            return Attachment(kind=kind, payload=self.sbom)
        if kind == "spdx":  # from the very CycloneDX SBOM attached beside it: the same facts
            return Attachment(kind=kind, payload=to_spdx(self.sbom, tool_version=__version__))
        if kind == "vex":
            if self.vex is None:  # a defect of ours: ``kinds`` does not list it
                msg = f"no gate result to make the VEX of {self.spec.ref} from"
                raise ConfigError(msg)
            return Attachment(kind=kind, payload=vex_statement(self.spec, self.vex, subject))
        run = known_build(self.image_id)
        payload = provenance(self.repo, self.spec, self.lock, self.image_id, subject, run, self.builder)
        return Attachment(kind=kind, payload=payload)
