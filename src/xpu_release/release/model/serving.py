"""What the endpoints serve: the read-only questions asked through the ``EndpointPool`` the
command (or the release) built.

``status`` (typed rows: what each version and floating
tag serves against the record), ``catalog`` (every tag per endpoint; an endpoint that does not
answer is reported as such, never as a tag), and ``find_published`` (build avoidance).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ...errors import PublishError, RegistryAuthError, ReleaseError, StackError, WireError, is_down
from ...evidence.attachment import ALL_KINDS, SIGNED_KINDS
from ...evidence.lifecycle import Notice, in_force, notices_in
from ...evidence.referrers import Referrers, is_referrers_tag, list_referrers
from ...evidence.signing import ENVELOPE_TYPE
from ...image.engine import Engine
from ...labels import INPUTS_LABEL
from ...oci.endpoint import Endpoint
from ...oci.model import parse_config
from ...oci.registry import RegistryClient
from ...oci.store import remember_config
from ...progress import Sink
from .plan import Target, floating_tags
from .pool import EndpointPool
from .record import ReleaseRecord

# Why an endpoint gave no answer to use: it refused our credentials (exit 8), it is down (no
# answer, or only "try later": 10), or it answered against the protocol (7) (``errors.is_down``).
ErrorKind = Literal["auth", "unreachable", "protocol"]
# What one of our documents is at an endpoint: ok (the recorded one, or with no record one of
# ours), unsigned (a provenance or VEX with no DSSE envelope), missing (the referrers list it, the
# registry no longer serves it), foreign (not the digest the record names: someone else's).
DocState = Literal["ok", "unsigned", "missing", "foreign"]


def _kind(exc: ReleaseError) -> ErrorKind:
    if isinstance(exc, RegistryAuthError):
        return "auth"
    return "unreachable" if is_down(exc) else "protocol"


@dataclass(frozen=True, kw_only=True)
class StatusRow:
    """What one ref (an endpoint's version or floating tag) serves now."""

    endpoint: str
    ref: str
    tag: str
    serves: str | None  # the manifest digest; None: absent, or the endpoint did not answer
    expected: str | None  # the digest the release record says (None: no record)
    error: str | None = None
    error_kind: ErrorKind | None = None
    # Which of our documents (sbom, provenance, vex) the referrers of what it serves list; asked for
    # version tags only (a floating tag serves the same manifest).
    attached: tuple[str, ...] = ()
    # Each document the referrers list, with what it is (``DocState``).
    documents: tuple[tuple[str, DocState], ...] = ()
    # The withdrawal in force at this endpoint (version tags only; None: not withdrawn here).
    withdrawn: Notice | None = None
    # A platformed release's version tag: each declared platform's image the index names.
    platforms: tuple[PlatformState, ...] = ()

    @property
    def matches(self) -> bool:
        return self.serves is not None and self.serves == self.expected

    def to_json(self) -> dict[str, Any]:
        return {
            "endpoint": self.endpoint, "ref": self.ref, "tag": self.tag, "serves": self.serves,
            "expected": self.expected, "matches": self.matches, "error": self.error,
            "error_kind": self.error_kind, "attached": list(self.attached),
            "documents": dict(self.documents),
            "withdrawn": self.withdrawn.to_json() if self.withdrawn else None,
        } | ({"platforms": [p.to_json() for p in self.platforms]} if self.platforms else {})  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class PlatformState:
    """One platform's image of the index a version tag serves: its digest (None: the index names
    none), whether the endpoint serves it, and its own documents (``DocState``)."""

    platform: str
    digest: str | None
    served: bool
    documents: tuple[tuple[str, DocState], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"platform": self.platform, "digest": self.digest, "served": self.served,
                "documents": dict(self.documents)}  # fmt: skip


def _document_states(
    client: RegistryClient, repo: str, found: Referrers, attachments: dict[str, str] | None
) -> tuple[tuple[str, DocState], ...]:
    """Each of our documents the referrers list, against ``attachments`` (the record's: kind →
    artifact manifest digest; None: no record)."""
    out: list[tuple[str, DocState]] = []
    for kind in ALL_KINDS:
        listed = found.ours(kind)
        if not listed:
            continue
        digest = listed[0].digest
        recorded = (attachments or {}).get(kind)
        manifest = client.get_manifest(repo, digest) if digest else None
        state: DocState = "ok"
        if manifest is None:
            state = "missing"
        elif recorded and recorded != digest:
            state = "foreign"
        elif kind in SIGNED_KINDS:
            layers = manifest.layers
            state = "ok" if layers and layers[0].media_type == ENVELOPE_TYPE else "unsigned"
        out.append((kind, state))
    return tuple(out)


def status(pool: EndpointPool, record: ReleaseRecord | None) -> list[StatusRow]:
    """What each endpoint serves now for the version and floating tags, against the record;
    every endpoint asked at once, so one that does not answer is a row of the answer, not a wait
    before the others (the command's deadline ends its wait alone)."""
    targets = pool.plan.targets
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(targets)))) as ex:
        found = list(ex.map(lambda t: _rows_of(pool, t, record), targets))
    return [row for rows in found for row in rows]


def _rows_of(pool: EndpointPool, t: Target, record: ReleaseRecord | None) -> list[StatusRow]:
    """``status``'s rows of one endpoint."""
    spec = pool.spec
    expected = record.digest if record else None
    client = pool.client(t.endpoint)
    rows: list[StatusRow] = []
    for tag, ref in ((spec.version, t.version_ref), *zip(floating_tags(spec), t.floating_refs, strict=True)):
        try:
            served = client.head_manifest(pool.repo(t.endpoint), tag)
            attached: tuple[str, ...] = ()
            documents: tuple[tuple[str, DocState], ...] = ()
            withdrawn: tuple[Notice, ...] = ()
            platforms: tuple[PlatformState, ...] = ()
            if served is not None and tag == spec.version:
                found = list_referrers(client, pool.repo(t.endpoint), served)
                documents = _document_states(client, pool.repo(t.endpoint), found,
                                             record.attachments if record else None)  # fmt: skip
                attached = tuple(k for k, state in documents if state in ("ok", "unsigned"))
                withdrawn = in_force(notices_in(client, pool.repo(t.endpoint), found))
                if spec.platformed:
                    platforms = _platform_states(client, pool.repo(t.endpoint), served, pool, record)
        except ReleaseError as exc:
            row = StatusRow(endpoint=t.endpoint.name, ref=ref, tag=tag, serves=None, expected=expected,
                            error=exc.message, error_kind=_kind(exc))  # fmt: skip
        else:
            row = StatusRow(endpoint=t.endpoint.name, ref=ref, tag=tag, serves=served, expected=expected,
                            attached=attached, documents=documents, platforms=platforms,
                            withdrawn=withdrawn[0] if withdrawn else None)  # fmt: skip
        rows.append(row)
    return rows


def _platform_states(client: RegistryClient, repo: str, served: str, pool: EndpointPool,
                     record: ReleaseRecord | None) -> tuple[PlatformState, ...]:  # fmt: skip
    """Each declared platform's image of the index ``served`` (an image there: none named)."""
    index = client.get_manifest(repo, served)
    recorded = {p.platform: p.attachments for p in record.platforms} if record else {}
    out = []
    for platform in pool.spec.platforms:
        entry = platform.entry(index.manifests) if index else None
        there = entry is not None and client.head_manifest(repo, entry.digest) == entry.digest
        documents: tuple[tuple[str, DocState], ...] = ()
        if entry is not None and there:
            found = list_referrers(client, repo, entry.digest)
            documents = _document_states(client, repo, found, recorded.get(platform.name))
        out.append(PlatformState(platform=platform.name, digest=entry.digest if entry else None,
                                 served=there, documents=documents))  # fmt: skip
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class CatalogEntry:
    """Every tag of the image's repository at one endpoint, with the digest each serves; or why
    the endpoint did not say."""

    endpoint: str
    tags: tuple[tuple[str, str | None], ...] = ()
    error: str | None = None
    error_kind: ErrorKind | None = None


def catalog(pool: EndpointPool) -> list[CatalogEntry]:
    """Every tag of every endpoint, the endpoints asked at once (as ``status``)."""
    targets = pool.plan.targets
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(targets)))) as ex:
        return list(ex.map(lambda t: _catalog_of(pool, t), targets))


def _catalog_of(pool: EndpointPool, t: Target) -> CatalogEntry:
    client = pool.client(t.endpoint)
    repo = pool.repo(t.endpoint)
    try:
        # The referrers tag schema's indexes are not release tags: `status` says what is attached.
        names = sorted(tag for tag in client.tags(repo) if not is_referrers_tag(tag))
        tags = tuple((tag, client.head_manifest(repo, tag)) for tag in names)
    except ReleaseError as exc:
        return CatalogEntry(endpoint=t.endpoint.name, error=exc.message, error_kind=_kind(exc))
    return CatalogEntry(endpoint=t.endpoint.name, tags=tags)


@dataclass(frozen=True, kw_only=True)
class Published:
    """An image an endpoint already serves at the version tag, made from the same inputs."""

    endpoint: Endpoint
    ref: str  # host/namespace/image@sha256:… (the manifest digest)
    image_id: str  # its config digest


def find_published(pool: EndpointPool, inputs: str) -> Published | None:
    """The first endpoint (public first) whose version tag serves an image whose config carries
    ``inputs`` as its inputs hash: that image can be pulled instead of built (build avoidance).
    Unreachable endpoints are passed over; a different image at the tag is left to publish's
    immutability check."""
    spec = pool.spec
    for t in pool.plan.targets:
        client = pool.client(t.endpoint)
        repo = pool.repo(t.endpoint)
        try:
            manifest = client.get_manifest(repo, spec.version)
            if manifest is None or not manifest.config_digest:
                continue
            raw = client.blob_bytes(repo, manifest.config_digest)
            what = f"{client.endpoint.name}: the config of {repo}:{spec.version}"
            config = parse_config(raw, what=what, error=WireError)
        except ReleaseError:
            continue
        if config.labels.get(INPUTS_LABEL) == inputs:
            remember_config(raw)  # a push to another endpoint needs its exact bytes
            return Published(
                endpoint=t.endpoint,
                ref=f"{t.endpoint.prefix}/{spec.image}@{manifest.digest}",
                image_id=manifest.config_digest,
            )
    return None


def pull_published(pool: EndpointPool, inputs: str, engine: Engine, on_line: Sink) -> str | None:
    """Build avoidance: on a runner without the image, an endpoint that already serves this
    version made from the same inputs gives it by digest (its image id; None: build it). It is
    smoke-tested like a build, and publish then finishes the other endpoints with that image."""
    spec = pool.spec
    if spec.platformed:  # an index is served, not one image: each platform's is built
        return None
    existing = engine.image(spec.ref)
    if existing is not None and existing.labels.get(INPUTS_LABEL) == inputs:
        return None  # the build stage skips it
    found = find_published(pool, inputs)
    if found is None:
        return None
    creds = pool.credentials.for_host(found.endpoint.host)
    on_line(f"pulling {found.ref}: {found.endpoint.name} serves this version, same inputs")
    engine.pull(found.ref, creds.docker_auth() if creds else None)
    engine.tag(found.image_id, spec.ref)
    info = engine.require_image(spec.ref)
    if info.id != found.image_id or info.labels.get(INPUTS_LABEL) != inputs:
        msg = f"the image pulled from {found.ref} is {info.id}, not {found.image_id}"
        raise PublishError(msg)
    return info.id


def raise_answers(found: list[tuple[str, str | None, str | None]]) -> None:
    """The verdict of a question every endpoint answers on its own (``status``, the catalog;
    ``found``: endpoint, error, kind): exit 8 if one refused our credentials, else 7 if one
    answered against the protocol (a retry will not mend it), else 10 if one did not answer
    (retry later). Each error is said whole (a table cuts it): it may name the limit that stopped
    it. A command that changes the endpoints asks ``errors.endpoints_failed`` instead."""

    refused = [(ep, err) for ep, err, kind in found if kind == "auth"]
    wrong = [(ep, err) for ep, err, kind in found if kind == "protocol"]
    down = [(ep, err) for ep, err, kind in found if kind == "unreachable"]
    errors = {ep: err for ep, err, _ in found if err}
    said = "".join(
        f"\n  {err}" if err.startswith(f"{ep}") else f"\n  {ep}: {err}" for ep, err in errors.items()
    )
    if refused:
        msg = f"{refused[0][0]} refused our credentials: {refused[0][1]}"
        raise RegistryAuthError(msg)
    if wrong:
        names = ", ".join(sorted({ep for ep, _ in wrong}))
        msg = f"answered against the protocol: {names}{said}"
        raise WireError(msg)
    if down:
        names = ", ".join(sorted({ep for ep, _ in down}))
        msg = f"unreachable: {names}{said}"
        raise StackError(msg)


def raise_status(rows: list[StatusRow], record: ReleaseRecord | None, path: Path, version: str) -> None:
    """``status``'s verdict: the endpoints' answers (``raise_answers``), then every version tag
    serving the digest the record at ``path`` names (exit 7) and, of an index, each platform's
    image (exit 7)."""
    raise_answers([(r.endpoint, r.error, r.error_kind) for r in rows])
    version_rows = [r for r in rows if r.tag == version]
    if record is not None and not all(r.matches for r in version_rows):
        msg = f"some endpoints do not serve {record.digest} as recorded in {path}"
        raise PublishError(msg)
    lacking = [f"{r.endpoint} ({p.platform})" for r in version_rows for p in r.platforms if not p.served]
    if lacking:
        msg = f"the index is served without its image at: {', '.join(lacking)}"
        raise PublishError(msg)
