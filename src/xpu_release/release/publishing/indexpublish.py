"""``publish`` of a platformed release (``platforms:``): one OCI image index at every endpoint,
fail-closed.

Each platform's image goes first, as the one image of a release does (``publish.Publisher``: our
own push to the first endpoint, every other endpoint staged by digest, the image's own SBOM,
provenance and VEX attached to it), but no tag is written. Only once every declared platform's
image is staged at every endpoint is the index made (each platform's image manifest with its
``platform``, in the manifest's order: ``image_index``) and put by digest at every endpoint, with
its own provenance naming each platform's image by digest; then the version tag names the index
at every endpoint; then the floating tags. A platform whose image is not staged everywhere leaves
every endpoint without the index and without any tag of the version; the record and the message
name the platform. The version tag is held to an index of exactly the tested images
(``TagRules`` with ``platform_images``), before anything is pushed and again as it is written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from ...errors import PublishError, ReleaseError, SmokeTestFailed
from ...evidence.annotations import PREFIX, image_annotations
from ...evidence.attest import Documents, IndexDocuments, PlatformImage, image_sbom
from ...image.engine import Engine
from ...image.lock import load_locks
from ...image.smoke import require_tested
from ...labels import INPUTS_LABEL
from ...manifest import ImageSpec, Repo
from ...manifest.platforms import Platform
from ...oci.model import OCI_INDEX
from ...oci.registry import Manifest, sha256_digest
from ...progress import Sink
from ..model.pool import EndpointPool
from ..model.record import EndpointRecord, PlatformRecord, ReleaseRecord
from .publish import Options, Publisher
from .staging import Staged, source_failed, unpublished
from .tags import TagRules


def image_index(images: Sequence[tuple[Platform, Manifest]], annotations: dict[str, str]) -> Manifest:
    """The OCI image index of ``images`` (each platform's image manifest), annotated."""
    data: dict[str, object] = {
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [
            {"mediaType": m.media_type, "digest": m.digest, "size": len(m.body), "platform": p.oci()}
            for p, m in images
        ],
    }
    if annotations:
        data["annotations"] = dict(sorted(annotations.items()))
    body = json.dumps(data, indent=3).encode()
    return Manifest(digest=sha256_digest(body), media_type=OCI_INDEX, body=body)


def index_annotations(image: dict[str, str]) -> dict[str, str]:
    """The index's annotations: an image's, but its base (each platform has its own base image)."""
    return {k: v for k, v in image.items() if not k.startswith(PREFIX + "base.")}


@dataclass(frozen=True, kw_only=True)
class PlatformBuild:
    """One platform's tested image and the documents publish attaches to it."""

    platform: Platform
    documents: Documents
    inputs: str  # its inputs digest

    @property
    def image_id(self) -> str:
        return self.documents.image_id

    def annotations(self) -> dict[str, str]:
        """Its image manifest's annotations (its own base image among them)."""
        return image_annotations(self.documents.repo.root, self.documents.spec, self.documents.lock)


def platform_builds(repo: Repo, spec: ImageSpec, engine: Engine, builder: str) -> list[PlatformBuild]:
    """Each declared platform's tested image in the engine (``NAME:VERSION`` for linux/amd64,
    ``NAME:VERSION-ARCH`` else) with its documents, its SBOM made from it: what ``publish``
    hands ``publish_index``. An image missing or untested is refused, naming its platform, before
    any SBOM is made."""
    locks = load_locks(repo.root, spec)
    images = []
    for platform in spec.platforms:
        image = engine.require_image(platform.local_ref(spec.ref))
        _require_tested(spec, platform, image.id)
        images.append((platform, image))
    out = []
    for p, image in images:
        lock = locks.of(p)
        sbom = image_sbom(repo, spec, lock, engine, image.id)
        docs = Documents(repo=repo, spec=spec, lock=lock, image_id=image.id, sbom=sbom, builder=builder)
        out.append(PlatformBuild(platform=p, documents=docs, inputs=image.labels.get(INPUTS_LABEL, "")))
    return out


def _require_tested(spec: ImageSpec, platform: Platform, image_id: str) -> None:
    try:
        require_tested(spec, image_id)
    except SmokeTestFailed as exc:
        msg = f"{platform}: {exc.message}; nothing was pushed"
        raise SmokeTestFailed(msg) from exc


def publish_index(pool: EndpointPool, engine: Engine, builds: Sequence[PlatformBuild], options: Options,
                  on_line: Sink, builder: str) -> ReleaseRecord:  # fmt: skip
    """Publish the platformed release ``pool.spec``: every platform it declares built and
    smoke-tested (``builds``, one per platform), each platform's image staged at every endpoint,
    then the index, then the tags; the record says what each endpoint serves and each platform's
    image. Nothing is pushed unless every declared platform is in ``builds`` and tested."""
    spec = pool.spec
    by_platform = {b.platform: b for b in builds}
    missing = [p.name for p in spec.platforms if p not in by_platform]
    if missing or len(by_platform) != len(builds) or len(builds) != len(spec.platforms):
        msg = (
            f"{spec.ref} is published for every platform it declares or not at all: no tested image "
            f"of {', '.join(missing) or 'one platform'} (`xpu-release build {spec.ref}` and "
            f"`xpu-release test {spec.ref}` make one); nothing was pushed"
        )
        raise PublishError(msg)
    ordered = [by_platform[p] for p in spec.platforms]
    for build in ordered:
        _require_tested(spec, build.platform, build.image_id)
    with pool.metering():
        return IndexPublisher(pool, engine, options, on_line, ordered, builder).run()


class IndexPublisher:
    """One publish of a platformed release, through the run's endpoint pool."""

    def __init__(self, pool: EndpointPool, engine: Engine | None, options: Options, on_line: Sink,
                 builds: Sequence[PlatformBuild], builder: str) -> None:  # fmt: skip
        self.pool, self.engine, self.options, self.on_line = pool, engine, options, on_line
        self.builds, self.builder, self.spec = tuple(builds), builder, pool.spec
        workers = options.parallel or min(32, len(pool.plan.targets))
        images = {b.platform: b.image_id for b in self.builds}
        self.tags = TagRules(self.spec, pool, engine, allow_overwrite=options.allow_overwrite,
                             workers=workers, on_line=on_line, platform_images=images)  # fmt: skip

    def run(self) -> ReleaseRecord:
        self.tags.check("")  # the version tag holds nothing, or an index of exactly these images
        first = self.builds[0]
        record = unpublished(self.spec, first.inputs, first.image_id)
        made: list[PlatformRecord] = []
        sources: list[tuple[Platform, Manifest]] = []
        annotations = {b.platform: b.annotations() for b in self.builds}
        for build in self.builds:
            self.on_line(f"staging the {build.platform} image of {self.spec.ref}")
            options = replace(self.options, annotations=annotations[build.platform])
            publisher = Publisher(self.pool, self.engine, options, self.on_line, build.documents,
                                  tags=self.tags, platform=build.platform)  # fmt: skip
            staged = publisher.staged(build.image_id)
            made.append(_platform_record(build, staged))
            if staged.source is None or staged.failed:
                # Fail-closed: no index and no tag of the version anywhere; the record names the
                # platform (its image may be staged by digest where it got: a rerun finishes).
                return replace(
                    record, endpoints=_naming(build.platform, staged.endpoints), platforms=tuple(made)
                )
            sources.append((build.platform, staged.source))
        index = image_index(sources, index_annotations(annotations[first.platform]))
        images = tuple(PlatformImage(platform=p, digest=m.digest, image_id=b.image_id)
                       for (p, m), b in zip(sources, self.builds, strict=True))  # fmt: skip
        documents = IndexDocuments(spec=self.spec, images=images, builder=self.builder)
        publisher = Publisher(self.pool, self.engine, self.options, self.on_line, documents, tags=self.tags)
        staged = self._stage_index(publisher, index)
        record = replace(
            record, attachments=staged.attachments, endpoints=staged.endpoints, platforms=tuple(made)
        )
        if staged.failed:
            return replace(record, digest=index.digest)
        return publisher.finish(record, index, "")

    def _stage_index(self, publisher: Publisher, index: Manifest) -> Staged:
        """The index by digest at every endpoint, its documents attached: every platform's image
        is there already (``Publisher.staged``), so it is served, untagged, where it lands."""
        targets = self.pool.plan.targets
        first = targets[0].endpoint
        self.on_line(
            f"staging the index {index.digest[:19]} of {', '.join(b.platform.name for b in self.builds)}"
        )
        try:
            client, repo = self.pool.client(first), self.pool.repo(first)
            if client.head_manifest(repo, index.digest) != index.digest:
                client.put_manifest(repo, index.digest, index)
            publisher.attachments = publisher.documents_for(index)
        except ReleaseError as exc:
            return Staged(source=None, endpoints=source_failed(targets, exc.message))
        publisher.documents_first(index)
        with ThreadPoolExecutor(max_workers=publisher.workers) as pool:
            staged = tuple(pool.map(lambda t: publisher.stage(t, index, ""), targets))
        return Staged(source=index, endpoints=staged, attachments=publisher.attached(index))


def _platform_record(build: PlatformBuild, staged: Staged) -> PlatformRecord:
    source = staged.source
    return PlatformRecord(
        platform=build.platform.name, digest=source.digest if source is not None else None,
        tested_image_id=build.image_id, inputs_sha256=build.inputs,
        size=sum(size for _, size in source.blobs()) if source is not None else 0,
        attachments=dict(staged.attachments),
    )  # fmt: skip


def _naming(platform: Platform, endpoints: tuple[EndpointRecord, ...]) -> tuple[EndpointRecord, ...]:
    """Each endpoint's record, its error saying which platform's image it is about."""
    return tuple(replace(e, error=f"{platform}: {e.error}") if e.error else e for e in endpoints)
