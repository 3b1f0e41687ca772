"""``publish``: put the tested image into the public registry and every VPC region, and prove
that each endpoint serves exactly that digest. (What endpoints serve now, asked read-only, is
``serving.py``: status, the catalog, build avoidance.)

Push once with our own client to the first endpoint; every blob, as soon as it is compressed
into the spool, also goes to the regions on other hosts while the next layer is compressed
(``_EarlyCopies``); then every endpoint is staged by digest (blobs already present are skipped,
blobs in the same registry are mounted, regions run in parallel, the manifest bytes are
preserved). Version tags are immutable and written only once every endpoint is staged; floating
tags move only after every endpoint is verified. Every run writes a release record.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

from ..errors import PublishError, ReleaseError
from ..evidence.annotations import image_annotations
from ..evidence.attachment import Attachment
from ..evidence.attest import Documents, IndexDocuments
from ..evidence.referrers import artifact_manifest, attach
from ..evidence.signing import Signer
from ..image.build import source_date_epoch
from ..image.engine import Engine
from ..image.normalize import iso
from ..image.smoke import require_tested
from ..manifest import ImageSpec
from ..manifest.platforms import Platform
from ..oci.codec import DEFAULT, Codec
from ..oci.endpoint import Endpoint
from ..oci.registry import Manifest, RegistryClient
from ..progress import Sink
from ..secrets import redact
from .copies import BlobSpool, EarlyCopies
from .documents import documents_for
from .held import base_layers, mount_source
from .plan import Plan, Target, moving
from .pool import EndpointPool
from .push import push_image
from .record import EndpointRecord, ReleaseRecord, Status, endpoint_record
from .tags import TagRules
from .withdraw import withdrawal_in_force


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, kw_only=True)
class Options:
    allow_overwrite: bool = False
    chunk_size: int | None = None
    # Endpoints worked on at once; None: all of them (at most 32), so twelve regions are not
    # copied in two rounds behind a worker limit.
    parallel: int | None = None
    # The first push through the engine's `docker push` instead of our own client (for the
    # benchmark's comparison; blobs then depend on the engine's gzip and its memory).
    engine_push: bool = False
    # Floating tags never move backwards: False when a newer version of the image exists;
    # move_line: False when a later release of its line exists (its line's tag stays there).
    move_floating: bool = True
    move_line: bool = True

    def floating(self, spec: ImageSpec) -> tuple[str, ...]:
        """The floating tags a publish of ``spec`` moves with these options (never backwards)."""
        return moving(spec, newest=self.move_floating, newest_of_line=self.move_line)

    # Signs the provenance (a DSSE envelope); None: it is attached unsigned.
    signer: Signer | None = None
    # The image manifest's standard annotations (evidence/annotations.py); publish() makes them.
    annotations: dict[str, str] = field(default_factory=dict)
    # How our first push compresses the layers it makes (oci/codec.py).
    codec: Codec = DEFAULT


def copy_blobs(
    client: RegistryClient,
    repo: str,
    source: Manifest,
    sent_early: set[str],
    chunk_size: int | None,
    *,
    fetch: Callable[[str, int], Path],
    mount_from: Callable[[str], str | None],
) -> None:
    """Every blob of ``source`` into ``repo`` but those the early copies sent: present ones
    skipped, mounted where ``mount_from`` names a repository of that registry (the source on its
    own host; the base release's repository for its layers), else uploaded from ``fetch``."""
    for digest, size in source.blobs():
        if digest not in sent_early:
            client.ensure_blob(repo, digest, functools.partial(fetch, digest, size),
                               mount_from=mount_from(digest), chunk_size=chunk_size)  # fmt: skip


class Publisher:
    """One publish, through the run's endpoint pool (handed in: the pool that found the image
    for build avoidance and verifies after, so each endpoint authenticates once)."""

    def __init__(
        self,
        pool: EndpointPool,
        engine: Engine | None,
        options: Options,
        on_line: Sink,
        documents: Documents | IndexDocuments | None = None,
        *,
        tags: TagRules | None = None,
        platform: Platform | None = None,
    ) -> None:
        """``tags``: the tag rules of a platformed release, shared by its platforms' publishers
        (each stages its platform's image; none writes a tag); ``platform``: the platform of the
        image this one stages (None: the release's one image)."""
        spec = self.spec = pool.spec
        self.documents = documents
        self.attachments: tuple[Attachment, ...] = ()
        self.created = iso(source_date_epoch(spec))  # the documents' created annotation
        self.plan: Plan = pool.plan
        self.workers = options.parallel or min(32, len(self.plan.targets))
        self.engine = engine
        self.credentials = pool.credentials
        self.options = options
        self.on_line = on_line
        self.spool = BlobSpool(on_line)
        self.pool = pool
        self.tags = tags or TagRules(spec, self.pool, engine, allow_overwrite=options.allow_overwrite,
                                     workers=self.workers, on_line=on_line)  # fmt: skip
        self.platform = platform
        self.early: EarlyCopies | None = None
        self.base_digests: frozenset[str] = frozenset()  # blobs of the release it builds on

    def client(self, ep: Endpoint, *, fresh: bool = False) -> RegistryClient:
        return self.pool.client(ep, fresh=fresh)

    def repo(self, ep: Endpoint) -> str:
        return self.pool.repo(ep)

    # --- stages -----------------------------------------------------------------------------

    def push_source(self, image_id: str) -> Manifest:
        """The first endpoint gets the image from our client (deterministic blobs, layers of
        earlier releases reused by digest), by digest only: no tag is written here. Its manifest
        is the source of every copy."""
        first = self.plan.targets[0]
        client = self.client(first.endpoint)
        repo = self.repo(first.endpoint)
        assert self.engine is not None
        base = base_layers(self.spec, first.endpoint, client, self.engine.inspect_raw(image_id))
        self.base_digests = base.digests if base is not None else frozenset()  # regions mount them
        current = self.current(first, image_id)
        if current is not None and current.config_digest == image_id:
            return current  # current() checked it is the tested image, layers and all
        self.on_line(f"pushing {first.endpoint.prefix}/{self.spec.image}")
        if self.options.engine_push:
            # `docker push` can only push a tag: this comparison mode tags the first endpoint early.
            self.engine.tag(image_id, first.version_ref)
            creds = self.credentials.for_host(first.endpoint.host)
            self.engine.push(first.version_ref, creds.docker_auth() if creds else None, self.on_line)
            manifest = client.get_manifest(repo, self.spec.version)
        else:
            earlier = [t for t in (self.spec.extends, *self.spec.floating_tags) if t]
            report = push_image(
                self.engine, image_id, client, repo, None,
                spool=self.spool.folder, earlier_tags=earlier, chunk_size=self.options.chunk_size,
                on_line=self.on_line, on_spooled=self.early.send if self.early else None,
                annotations=self.options.annotations, codec=self.options.codec, base=base,
                platform=self.platform,
            )  # fmt: skip
            manifest = client.get_manifest(repo, report.manifest.digest)
        if manifest is None or manifest.config_digest != image_id:
            got = manifest.config_digest if manifest else "nothing"
            msg = f"{first.endpoint.name} serves {got}, not the tested image {image_id}"
            raise PublishError(msg)
        return manifest

    def current(self, target: Target, image_id: str) -> Manifest | None:
        """What ``target``'s version tag holds (``TagRules.current``: checked); of a platform's
        image of a platformed release, the image its index names for that platform."""
        current = self.tags.current(target, image_id)
        if current is not None and current.is_index and self.platform is not None:
            return self.tags.platform_image(target, current, self.platform)
        return current

    def documents_for(self, source: Manifest) -> tuple[Attachment, ...]:
        if self.documents is None:
            return ()
        first = self.plan.targets[0].endpoint
        return documents_for(self.client(first), self.repo(first), first.name, self.documents, source,
                             self.options.signer, self.on_line)  # fmt: skip

    def attached(self, source: Manifest) -> dict[str, str]:
        """kind → the digest of the artifact manifest that attaches it to ``source``."""
        return {a.kind: artifact_manifest(a, source, self.created).digest for a in self.attachments}

    def _attach(self, target: Target, client: RegistryClient, repo: str, source: Manifest) -> None:
        if not self.attachments:
            return
        first = self.plan.targets[0].endpoint
        same = target is not self.plan.targets[0] and target.endpoint.host == first.host
        attach(client, repo, source, self.attachments, created=self.created,
               spool=self.spool.folder, mount_from=self.repo(first) if same else None)  # fmt: skip

    def stage(self, target: Target, source: Manifest, image_id: str) -> EndpointRecord:
        """Blobs and the manifest, by digest, and the documents attached to it: the endpoint
        holds the release but serves no new tag yet. Tags are written only once every endpoint
        is staged (``tag``)."""
        started = time.monotonic()
        ep = target.endpoint
        client = self.client(ep)
        repo = self.repo(ep)
        first = self.plan.targets[0].endpoint
        try:
            sent_early: set[str] = set()
            if self.early is not None:
                sent_early = self.early.settle(target)
                started = min(started, self.early.began(target) or started)
            current = self.current(target, image_id)
            if current is not None and current.digest == source.digest:
                self._attach(target, client, repo, source)
                return self._record(target, "unchanged", source.digest, None, started, client)
            if target is not self.plan.targets[0]:
                src_client = self.client(first, fresh=True)
                src_repo = self.repo(first)
                self.on_line(f"copying {source.digest[:19]} to {ep.name}")
                mount_from = mount_source(self.spec, ep, first, src_repo, self.base_digests)
                copy_blobs(client, repo, source, sent_early, self.options.chunk_size,
                           fetch=functools.partial(self.spool.get, src_client, src_repo),
                           mount_from=mount_from)  # fmt: skip
                client.put_manifest(repo, source.digest, source)
            if client.head_manifest(repo, source.digest) != source.digest:
                msg = f"{ep.name} does not serve {source.digest} after the copy"
                raise PublishError(msg)
            self._attach(target, client, repo, source)
            return self._record(target, "staged", source.digest, None, started, client)
        except ReleaseError as exc:
            return self._record(target, "failed", None, exc.message, started, client)
        except Exception as exc:  # a region's unexpected failure must not hide the others'
            return self._record(
                target, "failed", None, f"{type(exc).__name__}: {redact(str(exc))}", started, client
            )

    def tag(self, target: Target, source: Manifest, image_id: str, staged: EndpointRecord) -> EndpointRecord:
        """Write the version tag at a staged endpoint, held to immutability at the moment of
        writing, and verify it."""
        if staged.status == "unchanged":
            return staged
        started = time.monotonic() - staged.seconds
        client = self.client(target.endpoint)
        repo = self.repo(target.endpoint)
        try:
            self.tags.current(target, image_id)
            client.put_manifest(repo, self.spec.version, source)
            served = client.head_manifest(repo, self.spec.version)
            if served != source.digest:
                msg = f"{target.version_ref} serves {served}, expected {source.digest}"
                raise PublishError(msg)
            return self._record(target, "verified", source.digest, None, started, client)
        except ReleaseError as exc:
            return self._record(target, "failed", source.digest, exc.message, started, client)

    def _record(self, target: Target, status: str, digest: str | None, error: str | None, started: float,
                client: RegistryClient) -> EndpointRecord:  # fmt: skip
        return endpoint_record(target, cast(Status, status), digest, error, started, client.stats)

    def staged(self, image_id: str) -> Staged:
        """The image at every endpoint by digest, with its documents: no tag is written. Early
        copies need our own first push (it spools each blob as it compresses it), and go to the
        endpoints on other hosts than the source's (the same host mounts, in stage)."""
        first = self.plan.targets[0].endpoint
        others = [t for t in self.plan.targets[1:] if t.endpoint.host != first.host]
        self.early = (
            EarlyCopies(
                self.pool, self.spool, others, workers=self.workers, chunk_size=self.options.chunk_size
            )
            if others and not self.options.engine_push
            else None
        )
        try:
            return self._staged(image_id)
        finally:
            if self.early is not None:  # no copy outlives the run (an interrupt, a failure)
                self.early.close()

    def _staged(self, image_id: str) -> Staged:
        first = self.plan.targets[0]
        try:
            source = self.push_source(image_id)
        except ReleaseError as exc:
            failed = tuple(
                replace(planned(t), status="failed", error=exc.message) if t is first
                else replace(planned(t), error=f"not staged: {first.endpoint.name} (the source) failed")
                for t in self.plan.targets
            )  # fmt: skip
            return Staged(source=None, endpoints=failed)
        self.attachments = self.documents_for(source)
        attached = self.attached(source)
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            staged = list(pool.map(lambda t: self.stage(t, source, image_id), self.plan.targets))
        if any(e.status == "failed" for e in staged):
            # Not every endpoint holds the release: no version tag is written anywhere, so no
            # user sees a release that is missing in one region. A rerun finishes.
            waiting = "staged by digest; no tag is written until every endpoint is staged"
            staged = [replace(e, error=waiting) if e.status == "staged" else e for e in staged]
        return Staged(source=source, endpoints=tuple(staged), attachments=attached)

    def finish(self, base: ReleaseRecord, source: Manifest, image_id: str) -> ReleaseRecord:
        """The version tag at every endpoint ``base`` says is staged, then the floating tags."""
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            pairs = zip(self.plan.targets, base.endpoints, strict=True)
            endpoints = tuple(pool.map(lambda p: self.tag(p[0], source, image_id, p[1]), pairs))
        complete = all(e.status in ("verified", "unchanged") for e in endpoints)
        record = replace(base, digest=source.digest, endpoints=endpoints, complete=complete)
        if not complete:
            return record
        return floating(record, self.pool, self.tags, source, self.options.floating(self.spec), self.on_line)


@dataclass(frozen=True, kw_only=True)
class Staged:
    """What staging left: the source manifest (None: the first push failed), each endpoint's
    record, and the documents attached (kind → artifact manifest digest)."""

    source: Manifest | None
    endpoints: tuple[EndpointRecord, ...]
    attachments: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return any(e.status == "failed" for e in self.endpoints)


def planned(target: Target) -> EndpointRecord:
    """An endpoint's record before anything is done there."""
    ep = target.endpoint
    return EndpointRecord(endpoint=ep.name, host=ep.host, version_ref=target.version_ref,
                          floating_refs=target.floating_refs, status="planned", digest=None)  # fmt: skip


def floating(record: ReleaseRecord, pool: EndpointPool, tags: TagRules, source: Manifest,
             moving: tuple[str, ...], on_line: Sink) -> ReleaseRecord:  # fmt: skip
    """The floating tags, last: ``moving`` (``Options.floating``: those a newer release does not
    keep) moved onto the release, but none onto a withdrawn release (``withdraw.py``), which the
    record then says."""
    withdrawn = withdrawal_in_force(pool, source.digest)
    if withdrawn is not None:
        on_line(f"{pool.spec.ref} is {withdrawn.words()}; no floating tag moves onto it "
                f"(`xpu-release reinstate {pool.spec.ref}` undoes the withdrawal)")  # fmt: skip
        return replace(record, withdrawn=withdrawn.to_json())
    return replace(record, floating_moved=tags.move_floating(source, moving)) if moving else record


def publish(
    pool: EndpointPool,
    engine: Engine,
    image_id: str,
    inputs: str,
    options: Options,
    on_line: Sink,
    documents: Documents | None = None,
) -> ReleaseRecord:
    """Publish the built, smoke-tested image ``image_id`` of ``pool.spec``, made of ``inputs``
    (with its SBOM and provenance attached, given ``documents``), at the pool's endpoints; the
    record says what each endpoint serves."""
    spec = pool.spec
    require_tested(spec, image_id)
    assert documents is None or documents.image_id == image_id, "the documents are of another image"
    if documents is not None and not options.annotations:
        annotations = image_annotations(documents.repo.root, spec, documents.lock)
        options = replace(options, annotations=annotations)
    publisher = Publisher(pool, engine, options, on_line, documents)
    with pool.metering():
        return publish_with(publisher, image_id, inputs)


def publish_with(publisher: Publisher, image_id: str, inputs: str) -> ReleaseRecord:
    """``publish``'s workflow with ``publisher``: the version tag checked, the image staged at
    every endpoint, then tagged (the benchmark runs it on an image with no smoke tests)."""
    publisher.tags.check(image_id)
    record = unpublished(publisher.spec, inputs, image_id)
    staged = publisher.staged(image_id)
    record = replace(record, attachments=staged.attachments, endpoints=staged.endpoints)
    if staged.source is None or staged.failed:
        return replace(record, digest=staged.source.digest if staged.source else None)
    return publisher.finish(record, staged.source, image_id)


def unpublished(spec: ImageSpec, inputs: str, image_id: str) -> ReleaseRecord:
    """The record of a publish of ``spec`` before anything is done at any endpoint."""
    return ReleaseRecord(ref=spec.ref, manifest=spec.manifest_path, manifest_sha256=spec.content_hash,
                         inputs_sha256=inputs, tested_image_id=image_id, digest=None, published_at=_now(),
                         complete=False, floating_moved=())  # fmt: skip


def failure_report(record: ReleaseRecord) -> str:
    lines = [f"{record.ref} is not published everywhere; rerun `xpu-release publish {record.ref}` to finish:"]
    for e in record.endpoints:
        lines.append(f"  {e.endpoint:<22} {e.status:<10} {e.error or e.digest or ''}")
    lines.append("no floating tag was moved")
    return "\n".join(lines)
