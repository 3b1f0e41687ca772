"""What a release is made of and where it came from: its SBOM and its provenance (and, after a
vulnerability gate, its VEX: ``vexdoc.py``).

Both are documents *about* an image, attached to it by digest in every region
(``referrers.py``). xpu-release knows more than a scanner would have to guess:

- the SBOM (``sbom.py``) names what the image holds, read from it in a throwaway container
  with no network (``contents.py``): its operating system, every Debian package, every Python
  distribution on disk with its wheel's sha256 where a lock installed it; each artifact with
  its URL and sha256; and the base image by digest. The same image gives the same bytes.
- the provenance is an in-toto statement with a SLSA provenance v1 predicate: the manifest,
  lock and Dockerfile by sha256, the base digest and the git revision; the builder, and when
  the build ran. The release key signs only a statement this run made from its own inputs:
  one found at an endpoint is outside data, reused only when it is provably the same
  (``reuse.choose``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from .. import __version__
from ..errors import ConfigError
from ..files import sha256_file
from ..image.build import BuildRun, known_build, source_date_epoch
from ..image.engine import Engine
from ..image.lock import Lock, lock_path
from ..image.normalize import iso
from ..manifest import ImageSpec, Repo
from ..manifest.platforms import Platform
from ..oci.store import canonical_json
from .attachment import KINDS, SLSA_PROVENANCE, Attachment, Kind
from .contents import read_contents
from .lifecycle import lifecycle_statement
from .sbom import sbom
from .spdx import to_spdx
from .vexdoc import ReleaseVex, vex_statement

IN_TOTO_STATEMENT = "https://in-toto.io/Statement/v1"
BUILD_TYPE = "https://xpu-release.invalid/build/v1"  # assumed: no public URI is registered for it


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
    external = {"ref": spec.ref, "manifest": spec.manifest_path, "manifestSha256": manifest_sha256,
                "resolvedManifestSha256": spec.content_hash}  # fmt: skip
    internal = {"imageId": image_id, "sourceDateEpoch": epoch, "created": iso(epoch)}
    details = {"builder": {"id": run.builder if run else builder}, "metadata": metadata}
    return _slsa_statement(spec, subject_digest, external, internal, dependencies, details)


def _slsa_statement(
    spec: ImageSpec, subject_digest: str, external: Mapping[str, object], internal: Mapping[str, object],
    dependencies: list[dict[str, object]], run: Mapping[str, object],
) -> bytes:  # fmt: skip
    """An in-toto v1 statement with a SLSA provenance v1 predicate about ``subject_digest``."""
    statement = {
        "_type": IN_TOTO_STATEMENT,
        "subject": [{"name": spec.image, "digest": {"sha256": subject_digest.removeprefix("sha256:")}}],
        "predicateType": SLSA_PROVENANCE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": external,
                "internalParameters": internal,
                "resolvedDependencies": dependencies,
            },
            "runDetails": run,
        },
    }
    return canonical_json(statement)


def index_provenance(
    spec: ImageSpec, subject_digest: str, images: Sequence[PlatformImage], builder: str
) -> bytes:
    """An in-toto v1 statement, SLSA provenance v1 predicate, about the image index
    ``subject_digest`` of a platformed release: it names each platform's image manifest by
    digest (its resolved dependencies), each of which carries its own SBOM and provenance."""
    epoch = source_date_epoch(spec)
    external = {"ref": spec.ref, "manifest": spec.manifest_path, "resolvedManifestSha256": spec.content_hash,
                "platforms": [i.platform.name for i in images]}  # fmt: skip
    dependencies: list[dict[str, object]] = [
        {"name": i.platform.name, "uri": f"{spec.image}@{i.digest}",
         "digest": {"sha256": i.digest.removeprefix("sha256:")}, "annotations": {"imageId": i.image_id}}
        for i in images
    ]  # fmt: skip
    run = {"builder": {"id": builder}, "metadata": {"invocationId": f"{spec.ref}@index"}}
    internal = {"sourceDateEpoch": epoch, "created": iso(epoch)}
    return _slsa_statement(spec, subject_digest, external, internal, dependencies, run)


@dataclass(frozen=True, kw_only=True)
class PlatformImage:
    """One platform's image of a platformed release, as its index names it."""

    platform: Platform
    digest: str  # its image manifest's
    image_id: str  # its config's: the tested image


@dataclass(frozen=True, kw_only=True)
class IndexDocuments:
    """The documents of a platformed release's image index: its provenance (naming each
    platform's image by digest) and its lifecycle document. Each platform's image carries its
    own SBOM, provenance and VEX (``Documents``)."""

    spec: ImageSpec
    images: tuple[PlatformImage, ...]
    builder: str

    @property
    def kinds(self) -> tuple[Kind, ...]:
        support = self.spec.support
        return ("provenance", "lifecycle") if support and support.end(self.spec.version) else ("provenance",)

    def run_known(self) -> bool:
        return True  # the statement holds no fact of a build run: found, it is kept only if equal

    def make(self, kind: Kind, subject: str) -> Attachment:
        end = self.spec.support.end(self.spec.version) if self.spec.support is not None else None
        if kind == "lifecycle" and end is not None:
            return Attachment(
                kind=kind, payload=lifecycle_statement(self.spec.image, self.spec.ref, end, subject)
            )
        return Attachment(
            kind="provenance", payload=index_provenance(self.spec, subject, self.images, self.builder)
        )


def image_sbom(repo: Repo, spec: ImageSpec, lock: Lock, engine: Engine, image_id: str) -> bytes:
    """The SBOM of ``image_id``, which the engine holds: the one throwaway container a release
    runs for it (dpkg's database), made once and handed to the gate and to publish."""
    return sbom(repo, spec, lock, image_id, read_contents(engine, image_id))


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
        SPDX SBOM when the manifest asks for it (``sbom_formats``), the lifecycle document when
        it gives a support date."""
        out: tuple[Kind, ...] = (*KINDS, "vex") if self.vex is not None else KINDS
        out = (*out, "spdx") if "spdx" in self.spec.sbom_formats else out
        return (*out, "lifecycle") if self.end_of_life is not None else out

    @property
    def end_of_life(self) -> date | None:
        return self.spec.support.end(self.spec.version) if self.spec.support is not None else None

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
        if kind == "lifecycle" and self.end_of_life is not None:
            payload = lifecycle_statement(self.spec.image, self.spec.ref, self.end_of_life, subject)
            return Attachment(kind=kind, payload=payload)
        run = known_build(self.image_id)
        payload = provenance(self.repo, self.spec, self.lock, self.image_id, subject, run, self.builder)
        return Attachment(kind=kind, payload=payload)
