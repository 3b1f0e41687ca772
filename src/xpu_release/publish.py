"""``publish``: put the tested image into the public registry and every VPC region, and prove
that each endpoint serves exactly that digest.

Push once through the engine to the first endpoint, then copy registry to registry by digest
(blobs already present are skipped, blobs in the same registry are mounted, regions run in
parallel, the manifest bytes are preserved). Version tags are immutable; floating tags move
only after every endpoint is verified. Every run writes a release record.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

from .build import INPUTS_LABEL
from .credentials import CredentialStore
from .endpoints import Endpoint, Registries
from .engine import Engine
from .errors import PublishError, RegistryAuthError, ReleaseError, TagConflict
from .fetch import cache_dir
from .manifest import ImageSpec
from .plan import Plan, Target, make_plan
from .push import push_image, remember_config
from .record import EndpointRecord, ReleaseRecord, Status
from .registry import Manifest, RegistryClient, RetryPolicy
from .secrets import redact
from .smoke import require_tested

Sink = Callable[[str], None]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, kw_only=True)
class Options:
    allow_overwrite: bool = False
    chunk_size: int | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    parallel: int = 8
    # The first push through the engine's `docker push` instead of our own client (for the
    # benchmark's comparison; blobs then depend on the engine's gzip and its memory).
    engine_push: bool = False
    # Floating tags never move backwards: False when a newer version of the image exists.
    move_floating: bool = True


class _BlobSpool:
    """Blobs downloaded once from the source, shared by every region's copy (and by reruns)."""

    def __init__(self) -> None:
        self.folder = cache_dir() / "oci-blobs"
        self.folder.mkdir(parents=True, exist_ok=True)
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, source: RegistryClient, repo: str, digest: str) -> Path:
        with self._guard:
            lock = self._locks.setdefault(digest, threading.Lock())
        with lock:
            path = self.folder / digest.replace(":", "-")
            if not path.is_file():
                source.download_blob(repo, digest, path)
            return path


class Publisher:
    def __init__(
        self,
        spec: ImageSpec,
        registries: Registries,
        engine: Engine | None,
        credentials: CredentialStore,
        options: Options,
        on_line: Sink,
    ) -> None:
        self.spec = spec
        self.plan: Plan = make_plan(spec, registries)
        self.engine = engine
        self.credentials = credentials
        self.options = options
        self.on_line = on_line
        self.spool = _BlobSpool()
        self._clients: dict[str, RegistryClient] = {}

    def client(self, ep: Endpoint, *, fresh: bool = False) -> RegistryClient:
        """One client per endpoint for the whole run, so its report counts every retry; a
        ``fresh`` one for work shared across threads (downloads from the source)."""
        if fresh or ep.name not in self._clients:
            made = RegistryClient(ep, self.credentials.for_host(ep.host), self.options.retry, self.on_line)
            if fresh:
                return made
            self._clients[ep.name] = made
        return self._clients[ep.name]

    def repo(self, ep: Endpoint) -> str:
        return ep.repository(self.spec.image)

    # --- stages -----------------------------------------------------------------------------

    def check_tags(self, image_id: str) -> None:
        """Before anything is pushed: refuse if any endpoint's version tag holds another image."""
        conflicts: list[str] = []

        def look(t: Target) -> tuple[Target, Manifest | None]:
            try:
                return t, self.client(t.endpoint).get_manifest(self.repo(t.endpoint), self.spec.version)
            except RegistryAuthError:
                raise  # definitive: without access nothing can be published there
            except ReleaseError:
                return t, None  # a region that is down fails later, on its own

        with ThreadPoolExecutor(max_workers=self.options.parallel) as pool:
            for t, m in pool.map(look, self.plan.targets):
                if m is not None and m.config_digest != image_id:
                    conflicts.append(
                        f"  {t.version_ref}: serves {m.digest} (config {m.config_digest[:19]}), "
                        f"ours is config {image_id[:19]}"
                    )
        if conflicts and not self.options.allow_overwrite:
            msg = (
                f"{self.spec.ref} is already published with other content; version tags are immutable:\n"
                + "\n".join(conflicts)
                + "\nnothing was pushed. Release a new version, or pass --allow-overwrite."
            )
            raise TagConflict(msg)

    def _current(self, target: Target, image_id: str) -> Manifest | None:
        """What ``target``'s version tag holds right now. Asked again at the moment of writing:
        an endpoint that was unreachable during ``check_tags`` is held to the same rule."""
        current = self.client(target.endpoint).get_manifest(self.repo(target.endpoint), self.spec.version)
        if current is not None and current.config_digest != image_id and not self.options.allow_overwrite:
            msg = f"{target.version_ref} holds other content ({current.digest}); version tags are immutable"
            raise TagConflict(msg)
        return current

    def push_source(self, image_id: str) -> Manifest:
        """The first endpoint gets the image from our client (deterministic blobs, layers of
        earlier releases reused by digest); its manifest is the source of every copy."""
        first = self.plan.targets[0]
        client = self.client(first.endpoint)
        repo = self.repo(first.endpoint)
        current = self._current(first, image_id)
        if current is None or current.config_digest != image_id:
            assert self.engine is not None
            self.on_line(f"pushing {first.version_ref}")
            if self.options.engine_push:
                self.engine.tag(image_id, first.version_ref)
                creds = self.credentials.for_host(first.endpoint.host)
                self.engine.push(first.version_ref, creds.docker_auth() if creds else None, self.on_line)
            else:
                earlier = [t for t in (self.spec.extends, *self.spec.floating_tags) if t]
                push_image(
                    self.engine, image_id, client, repo, self.spec.version,
                    spool=self.spool.folder, earlier_tags=earlier, chunk_size=self.options.chunk_size,
                    on_line=self.on_line,
                )  # fmt: skip
        manifest = client.get_manifest(repo, self.spec.version)
        if manifest is None or manifest.config_digest != image_id:
            got = manifest.config_digest if manifest else "nothing"
            msg = f"{first.version_ref} serves {got}, not the tested image {image_id}"
            raise PublishError(msg)
        return manifest

    def copy_to(self, target: Target, source: Manifest, image_id: str) -> EndpointRecord:
        started = time.monotonic()
        ep = target.endpoint
        client = self.client(ep)
        repo = self.repo(ep)
        first = self.plan.targets[0].endpoint
        src_client = self.client(first, fresh=True)
        src_repo = self.repo(first)
        status: str = "unchanged"
        try:
            current = self._current(target, image_id)
            if current is None or current.digest != source.digest:
                status = "verified"
                self.on_line(f"copying {source.digest[:19]} to {ep.name}")
                for digest, _size in source.blobs():
                    if client.blob_exists(repo, digest):
                        client.stats["skipped_blobs"] += 1
                        continue
                    if ep.host == first.host and client.mount_blob(repo, digest, src_repo):
                        continue
                    path = self.spool.get(src_client, src_repo, digest)
                    client.upload_blob(repo, digest, path, chunk_size=self.options.chunk_size)
                client.put_manifest(repo, self.spec.version, source)
            served = client.head_manifest(repo, self.spec.version)
            if served != source.digest:
                msg = f"{target.version_ref} serves {served}, expected {source.digest}"
                raise PublishError(msg)
            return self._record(
                target,
                "verified" if status == "verified" else "unchanged",
                source.digest,
                None,
                started,
                client,
            )
        except ReleaseError as exc:
            return self._record(target, "failed", None, exc.message, started, client)
        except Exception as exc:  # a region's unexpected failure must not hide the others'
            return self._record(
                target, "failed", None, f"{type(exc).__name__}: {redact(str(exc))}", started, client
            )

    def _record(
        self,
        target: Target,
        status: str,
        digest: str | None,
        error: str | None,
        started: float,
        client: RegistryClient,
    ) -> EndpointRecord:
        return EndpointRecord(
            endpoint=target.endpoint.name,
            host=target.endpoint.host,
            version_ref=target.version_ref,
            floating_refs=target.floating_refs,
            status=cast(Status, status),
            digest=digest,
            error=error,
            seconds=round(time.monotonic() - started, 3),
            uploaded_bytes=client.stats["uploaded_bytes"],
            mounted_blobs=client.stats["mounted"],
            skipped_blobs=client.stats["skipped_blobs"],
            retries=client.stats["retries"],
            verified_at=_now() if status in ("verified", "unchanged") else None,
        )

    def move_floating(self, source: Manifest) -> tuple[str, ...]:
        moved: list[str] = []
        for t in self.plan.targets:
            client = self.client(t.endpoint)
            for tag, ref in zip(self.spec.floating_tags, t.floating_refs, strict=True):
                if client.head_manifest(self.repo(t.endpoint), tag) != source.digest:
                    client.put_manifest(self.repo(t.endpoint), tag, source)
                if client.head_manifest(self.repo(t.endpoint), tag) != source.digest:
                    msg = f"{ref} does not serve {source.digest} after moving it"
                    raise PublishError(msg)
                moved.append(ref)
        return tuple(moved)

    def run(self, image_id: str, inputs: str) -> ReleaseRecord:
        self.check_tags(image_id)
        base = ReleaseRecord(
            ref=self.spec.ref,
            manifest=self.spec.manifest_path,
            manifest_sha256=self.spec.content_hash,
            inputs_sha256=inputs,
            tested_image_id=image_id,
            digest=None,
            published_at=_now(),
            complete=False,
            floating_moved=(),
        )
        first = self.plan.targets[0]
        started = time.monotonic()
        try:
            source = self.push_source(image_id)
        except ReleaseError as exc:
            failed = tuple(
                EndpointRecord(
                    endpoint=t.endpoint.name,
                    host=t.endpoint.host,
                    version_ref=t.version_ref,
                    floating_refs=t.floating_refs,
                    status="failed" if t is first else "planned",
                    digest=None,
                    error=exc.message
                    if t is first
                    else f"not attempted: {first.endpoint.name} (the source) failed",
                )
                for t in self.plan.targets
            )
            return replace(base, endpoints=failed)
        first_record = self._record(
            first, "verified", source.digest, None, started, self.client(first.endpoint)
        )
        with ThreadPoolExecutor(max_workers=self.options.parallel) as pool:
            rest = list(pool.map(lambda t: self.copy_to(t, source, image_id), self.plan.targets[1:]))
        endpoints = (first_record, *rest)
        complete = all(e.status in ("verified", "unchanged") for e in endpoints)
        record = replace(base, digest=source.digest, endpoints=endpoints, complete=complete)
        if complete and self.spec.floating_tags and self.options.move_floating:
            record = replace(record, floating_moved=self.move_floating(source))
        return record


def publish(
    spec: ImageSpec,
    registries: Registries,
    engine: Engine,
    credentials: CredentialStore,
    options: Options,
    on_line: Sink,
) -> ReleaseRecord:
    """Publish the built, smoke-tested ``spec``; the record says what each endpoint serves."""
    info = engine.require_image(spec.ref)
    require_tested(spec, info.id)
    publisher = Publisher(spec, registries, engine, credentials, options, on_line)
    return publisher.run(info.id, info.labels.get(INPUTS_LABEL, ""))


def failure_report(record: ReleaseRecord) -> str:
    lines = [f"{record.ref} is not published everywhere; rerun `xpu-release publish {record.ref}` to finish:"]
    for e in record.endpoints:
        lines.append(f"  {e.endpoint:<22} {e.status:<10} {e.error or e.digest or ''}")
    lines.append("no floating tag was moved")
    return "\n".join(lines)


@dataclass(frozen=True, kw_only=True)
class Published:
    """An image an endpoint already serves at the version tag, made from the same inputs."""

    endpoint: Endpoint
    ref: str  # host/namespace/image@sha256:… (the manifest digest)
    image_id: str  # its config digest


def find_published(
    spec: ImageSpec, registries: Registries, credentials: CredentialStore, inputs: str
) -> Published | None:
    """The first endpoint (public first) whose version tag serves an image whose config carries
    ``inputs`` as its inputs hash: that image can be pulled instead of built (build avoidance).
    Unreachable endpoints are passed over; a different image at the tag is left to publish's
    immutability check."""
    publisher = _reader(spec, registries, credentials)
    for t in publisher.plan.targets:
        client = publisher.client(t.endpoint)
        repo = publisher.repo(t.endpoint)
        try:
            manifest = client.get_manifest(repo, spec.version)
            if manifest is None or not manifest.config_digest:
                continue
            with tempfile.TemporaryDirectory(prefix="xpu-config-") as tmp:
                path = Path(tmp) / "config.json"
                client.download_blob(repo, manifest.config_digest, path)
                raw = path.read_bytes()
                config = json.loads(raw)
        except (ReleaseError, ValueError):
            continue
        labels = (config.get("config") or {}).get("Labels") or {}
        if labels.get(INPUTS_LABEL) == inputs:
            remember_config(raw)  # a push to another endpoint needs its exact bytes
            return Published(
                endpoint=t.endpoint,
                ref=f"{t.endpoint.prefix}/{spec.image}@{manifest.digest}",
                image_id=manifest.config_digest,
            )
    return None


def _reader(spec: ImageSpec, registries: Registries, credentials: CredentialStore) -> Publisher:
    """A publisher that only asks (no engine, few retries): for ``status`` and ``catalog``."""
    return Publisher(
        spec, registries, None, credentials, Options(retry=RetryPolicy(attempts=2)), lambda _: None
    )


def status(
    spec: ImageSpec, registries: Registries, credentials: CredentialStore, record: ReleaseRecord | None
) -> list[dict[str, str | bool | None]]:
    """What each endpoint serves now for the version and floating tags, against the record."""
    publisher = _reader(spec, registries, credentials)
    rows: list[dict[str, str | bool | None]] = []
    for t in publisher.plan.targets:
        client = publisher.client(t.endpoint)
        for tag, ref in (
            (spec.version, t.version_ref),
            *zip(spec.floating_tags, t.floating_refs, strict=True),
        ):
            try:
                served = client.head_manifest(publisher.repo(t.endpoint), tag)
                error = None
            except ReleaseError as exc:
                served, error = None, exc.message
            expected = record.digest if record else None
            rows.append(
                {
                    "endpoint": t.endpoint.name,
                    "ref": ref,
                    "serves": served,
                    "expected": expected,
                    "matches": served is not None and served == expected,
                    "error": error,
                }
            )
    return rows


def catalog(
    spec: ImageSpec, registries: Registries, credentials: CredentialStore
) -> dict[str, dict[str, str | None]]:
    """Every tag of the image's repository, per endpoint, with the digest it serves now."""
    publisher = _reader(spec, registries, credentials)
    out: dict[str, dict[str, str | None]] = {}
    for t in publisher.plan.targets:
        client = publisher.client(t.endpoint)
        repo = publisher.repo(t.endpoint)
        try:
            out[t.endpoint.name] = {tag: client.head_manifest(repo, tag) for tag in sorted(client.tags(repo))}
        except ReleaseError as exc:
            out[t.endpoint.name] = {"(unreachable)": exc.message}
    return out
