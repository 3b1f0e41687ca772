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

import contextlib
import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import cast

from ...errors import PublishError, ReleaseError, ReleaseWithdrawn
from ...evidence.annotations import image_annotations
from ...evidence.attachment import Attachment
from ...evidence.attest import Documents, IndexDocuments
from ...evidence.referrers import artifact_manifest, attach
from ...evidence.signing import Signer
from ...image.build import source_date_epoch
from ...image.engine import Engine
from ...image.layerform import GZIP, LayerForm
from ...image.normalize import iso
from ...image.smoke import require_tested
from ...manifest.platforms import Platform
from ...oci.codec import DEFAULT, Codec
from ...oci.registry import Manifest, RegistryClient
from ...progress import Sink
from ...secrets import redact
from ..model.line import Line
from ..model.plan import Plan, Target
from ..model.pool import EndpointPool
from ..model.record import EndpointRecord, ReleaseRecord, Status, endpoint_record
from ..model.withdrawn import withdrawal_in_force
from .copies import BlobSpool, EarlyCopies
from .documents import documents_for
from .held import base_layers, mount_source
from .push import PushOptions, push_image
from .staging import Staged, source_failed, unpublished
from .tags import TagRules, point


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
    # The line rule (``line.Line``) that says which floating tags move, asked when they move;
    # None: none move (a benchmark's or a test's publish of bytes alone).
    line: Line | None = None

    # Signs the provenance (a DSSE envelope); None: it is attached unsigned.
    signer: Signer | None = None
    # The image manifest's standard annotations (evidence/annotations.py); publish() makes them.
    annotations: dict[str, str] = field(default_factory=dict)
    # How our first push compresses the layers it makes (oci/codec.py).
    codec: Codec = DEFAULT
    # How the image's own layers are written (image/layerform.py): an eStargz image's own codec.
    form: LayerForm = GZIP


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
        self.options = options
        self.on_line = on_line
        self.spool = BlobSpool(on_line)
        self.pool = pool
        self.tags = tags or TagRules(spec, self.pool, engine, allow_overwrite=options.allow_overwrite,
                                     workers=self.workers, on_line=on_line)  # fmt: skip
        self.platform = platform
        self.early: EarlyCopies | None = None
        self.base_digests: frozenset[str] = frozenset()  # blobs of the release it builds on

    # --- stages -----------------------------------------------------------------------------

    def push_source(self, image_id: str) -> Manifest:
        """The first endpoint gets the image from our client (deterministic blobs, layers of
        earlier releases reused by digest), by digest only: no tag is written here. Its manifest
        is the source of every copy."""
        first = self.plan.targets[0]
        client = self.pool.client(first.endpoint)
        repo = self.pool.repo(first.endpoint)
        assert self.engine is not None
        base = base_layers(self.spec, first.endpoint, client, self.engine.inspect_raw(image_id))
        self.base_digests = base.digests if base is not None else frozenset()  # regions mount them
        current = self.tags.current(first, image_id, self.platform)
        if current is not None and self.tags.is_tested(first, current, image_id):
            return current  # the tested image, layers and all, whatever --allow-overwrite allowed
        self.on_line(f"pushing {first.endpoint.prefix}/{self.spec.image}")
        if self.options.engine_push:
            # `docker push` can only push a tag: this comparison mode tags the first endpoint early.
            self.engine.tag(image_id, first.version_ref)
            creds = self.pool.credentials.for_host(first.endpoint.host)
            self.engine.push(first.version_ref, creds.docker_auth() if creds else None, self.on_line)
            manifest = client.get_manifest(repo, self.spec.version)
        else:
            earlier = [t for t in (self.spec.extends, *self.spec.floating_tags) if t]
            how = PushOptions(
                spool=self.spool.folder, earlier_tags=tuple(earlier), chunk_size=self.options.chunk_size,
                on_line=self.on_line, on_spooled=self.early.send if self.early else None,
                annotations=self.options.annotations, codec=self.options.codec, base=base,
                platform=self.platform, form=self.options.form,
            )  # fmt: skip
            report = push_image(self.engine, image_id, client, repo, None, how)
            manifest = client.get_manifest(repo, report.manifest.digest)
        if manifest is None or manifest.config_digest != image_id:
            got = manifest.config_digest if manifest else "nothing"
            msg = f"{first.endpoint.name} serves {got}, not the tested image {image_id}"
            raise PublishError(msg)
        return manifest

    def documents_for(self, source: Manifest) -> tuple[Attachment, ...]:
        if self.documents is None:
            return ()
        first = self.plan.targets[0].endpoint
        client, repo, signer = self.pool.client(first), self.pool.repo(first), self.options.signer
        return documents_for(client, repo, first.name, self.documents, source, signer, self.on_line)

    def attached(self, source: Manifest) -> dict[str, str]:
        """kind → the digest of the artifact manifest that attaches it to ``source``."""
        return {a.kind: artifact_manifest(a, source, self.created).digest for a in self.attachments}

    def _attach(self, target: Target, client: RegistryClient, repo: str, source: Manifest) -> None:
        if not self.attachments:
            return
        first = self.plan.targets[0].endpoint
        same = target is not self.plan.targets[0] and target.endpoint.host == first.host
        attach(client, repo, source, self.attachments, created=self.created,
               spool=self.spool.folder, mount_from=self.pool.repo(first) if same else None)  # fmt: skip

    def documents_first(self, source: Manifest) -> None:
        """The documents at the source endpoint before the others are staged, when one of them is
        in the same registry: it mounts them from there (staged at once, it found them there or
        not, by chance, and sent them again). A failure here is the source's stage's to say."""
        first = self.plan.targets[0]
        if not any(t.endpoint.host == first.endpoint.host for t in self.plan.targets[1:]):
            return
        with contextlib.suppress(ReleaseError):
            self._attach(first, self.pool.client(first.endpoint), self.pool.repo(first.endpoint), source)

    def stage(self, target: Target, source: Manifest, image_id: str) -> EndpointRecord:
        """Blobs and the manifest, by digest, and the documents attached to it: the endpoint
        holds the release but serves no new tag yet. Tags are written only once every endpoint
        is staged (``tag``)."""
        started = time.monotonic()
        ep = target.endpoint
        client, repo = self.pool.client(ep), self.pool.repo(ep)
        first = self.plan.targets[0].endpoint
        try:
            sent_early: set[str] = set()
            if self.early is not None:
                sent_early = self.early.settle(target)
                started = min(started, self.early.began(target) or started)
            current = self.tags.current(target, image_id, self.platform)
            if current is not None and current.digest == source.digest:
                self._attach(target, client, repo, source)
                return self._record(target, "unchanged", source.digest, None, started, client)
            if target is not self.plan.targets[0]:
                src_client, src_repo = self.pool.client(first, fresh=True), self.pool.repo(first)
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
            said = f"{type(exc).__name__}: {redact(str(exc))}"
            return self._record(target, "failed", None, said, started, client)

    def tag(self, target: Target, source: Manifest, image_id: str, staged: EndpointRecord) -> EndpointRecord:
        """Write the version tag at a staged endpoint, held to immutability at the moment of
        writing, and verify it."""
        if staged.status == "unchanged":
            return staged
        started = time.monotonic() - staged.seconds
        client, repo = self.pool.client(target.endpoint), self.pool.repo(target.endpoint)
        try:
            self.tags.current(target, image_id)
            point(client, repo, self.spec.version, source, target.version_ref)
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
        self.early = None
        if others and not self.options.engine_push:
            self.early = EarlyCopies(self.pool, self.spool, others, workers=self.workers,
                                     chunk_size=self.options.chunk_size)  # fmt: skip
        try:
            return self._staged(image_id)
        finally:
            if self.early is not None:  # no copy outlives the run (an interrupt, a failure)
                self.early.close()

    def _staged(self, image_id: str) -> Staged:
        try:
            source = self.push_source(image_id)
        except ReleaseError as exc:
            return Staged(source=None, endpoints=source_failed(self.plan.targets, exc.message))
        self.attachments = self.documents_for(source)
        attached = self.attached(source)
        self.documents_first(source)
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
        return floating(record, self.pool, self.tags, source, self.options.line, self.on_line)


def floating(record: ReleaseRecord, pool: EndpointPool, tags: TagRules, source: Manifest,
             line: Line | None, on_line: Sink) -> ReleaseRecord:  # fmt: skip
    """The floating tags, last: those the line rule gives the release (``line.Line.move``, asked
    now), moved onto it, but none onto a withdrawn release (``withdrawn.py``: asked of
    every endpoint, failing closed), which the record then says. Asked again once they moved: a
    withdraw that ran meanwhile may have found them not yet on the release (exit 16, saying to
    rerun it)."""
    ref = pool.spec.ref
    withdrawn = withdrawal_in_force(pool, source.digest, then="no floating tag was moved")
    if withdrawn is not None:
        on_line(f"{ref} is {withdrawn.words()}; no floating tag moves onto it "
                f"(`xpu-release reinstate {ref}` undoes the withdrawal)")  # fmt: skip
        return replace(record, withdrawn=withdrawn.to_json())
    moved = line.move(pool, tags, source) if line is not None else ()
    if not moved:
        return record
    late = withdrawal_in_force(pool, source.digest, then=f"{', '.join(moved)} moved onto it")
    if late is not None:
        msg = (f"{ref} was {late.words()} while {', '.join(moved)} moved onto it: rerun "
               f"`xpu-release withdraw {ref} --reason ...` to move them off it (a rerun keeps the first "
               "reason)")  # fmt: skip
        raise ReleaseWithdrawn(msg)
    return replace(record, floating_moved=moved)


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


def failure_report(record: ReleaseRecord, rerun: str = "publish") -> str:
    """What a publish that did not reach every endpoint says: each endpoint, and the command that
    finishes it (``release`` for a release: ``publish`` alone attaches no VEX, no gate result)."""
    again = f"`xpu-release {rerun} {record.ref}`"
    if rerun == "release":
        again += " with the same options (--advisories, --signing-key, ...)"
    lines = [f"{record.ref} is not published everywhere; rerun {again} to finish:"]
    for e in record.endpoints:
        lines.append(f"  {e.endpoint:<22} {e.status:<10} {e.error or e.digest or ''}")
    lines.append("no floating tag was moved")
    return "\n".join(lines)
