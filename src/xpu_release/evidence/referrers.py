"""Documents attached to an image by digest: OCI 1.1 artifacts whose ``subject`` is the image.

Each attachment is an OCI image manifest with an ``artifactType``, the empty config and one
layer (the document), and ``subject`` pointing at the image manifest. How a client finds them:

- a registry with the referrers API (``GET /v2/<repo>/referrers/<digest>``) indexes them
  itself: once it lists what was pushed, nothing else is written;
- a registry without it (distribution 2.8, the local stack) gets the referrers tag schema of
  the OCI distribution spec 1.1: an image index at the tag ``sha256-<hex of the subject>``,
  which this module keeps: read, merged, written, read back.

A signed statement is also written in cosign's two layouts (``cosign.py``): as a Sigstore
bundle referrer, and in the ``sha256-<hex>.att`` tag cosign 2.x reads.

Attachments are pushed by digest; one kind (SBOM, provenance) has one attachment per image:
a rerun adds no duplicate, and an earlier attachment of ours of the same kind with other bytes
is dropped from the index. Descriptors that are not ours stay.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PublishError, WireError
from ..guard import limits
from ..guard.reading import parse_json
from ..guard.writing import write_bytes
from ..oci.members import blob_file
from ..oci.model import Descriptor, ImageIndex, parse_index
from ..oci.model import descriptor as parse_descriptor
from ..oci.registry import OCI_INDEX, OCI_MANIFEST, Manifest, RegistryClient, sha256_digest
from ..oci.store import canonical_json, holds
from .attachment import ALL_KINDS, ARTIFACT_TYPES, BUNDLED, Attachment, Kind
from .cosign import att_manifest, att_tag, signed_statements

EMPTY_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY = b"{}"
KIND_ANNOTATION = "io.xpu-release.attachment"
CREATED_ANNOTATION = "org.opencontainers.image.created"


def referrers_tag(subject: str) -> str:
    return subject.replace(":", "-")


_REFERRERS_TAG = re.compile(r"sha256-[0-9a-f]{64}(\.att)?")


def is_referrers_tag(tag: str) -> bool:
    """A tag of the referrers tag schema (an index of documents) or cosign's ``.att`` tag of
    the same image, not a release's tag."""
    return bool(_REFERRERS_TAG.fullmatch(tag))


def _manifest(data: dict[str, Any], media_type: str) -> Manifest:
    body = canonical_json(data)
    return Manifest(digest=sha256_digest(body), media_type=media_type, body=body)


def artifact_manifest(att: Attachment, subject: Manifest, created: str) -> Manifest:
    config: dict[str, Any] = {"mediaType": EMPTY_TYPE, "digest": sha256_digest(EMPTY), "size": len(EMPTY)}
    if att.kind in BUNDLED:  # cosign names a bundle's artifact type on the config too
        config["artifactType"] = att.artifact_type
    return _manifest(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": att.artifact_type,
            "config": config,
            "layers": [
                {
                    "mediaType": att.layer_type,
                    "digest": att.digest,
                    "size": len(att.payload),
                    **({"annotations": a} if (a := att.layer_annotations) else {}),
                }
            ],
            "subject": {"mediaType": subject.media_type, "digest": subject.digest, "size": len(subject.body)},
            "annotations": {
                CREATED_ANNOTATION: att.created or created,
                KIND_ANNOTATION: att.kind,
                **att.manifest_annotations,
            },
        },
        OCI_MANIFEST,
    )


def kind_of(manifest: Manifest) -> str | None:
    """Which of our documents an artifact manifest carries (None: not one of ours)."""
    return manifest.view.annotations.get(KIND_ANNOTATION)


def descriptor(manifest: Manifest) -> Descriptor:
    """How an index lists ``manifest`` (one of ours) as a referrer."""
    view = manifest.view
    return parse_descriptor({
        "mediaType": manifest.media_type, "digest": manifest.digest, "size": len(manifest.body),
        "artifactType": view.artifact_type, "annotations": dict(view.annotations),
    })  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Referrers:
    """What an endpoint says refers to a subject, and how it said it."""

    descriptors: tuple[Descriptor, ...]
    via: str  # "api" | "tag" | "none"

    def ours(self, kind: Kind) -> list[Descriptor]:
        return [
            d for d in self.descriptors
            if d.artifact_type == ARTIFACT_TYPES[kind] and d.annotation(KIND_ANNOTATION) == kind
        ]  # fmt: skip

    def firsts(self) -> dict[str, str]:
        """kind → the artifact manifest of ours listed first of each kind (what a release attached)."""
        return {k: d[0].digest for k in ALL_KINDS if (d := self.ours(k))}


def _listed(index: ImageIndex, what: str) -> tuple[Descriptor, ...]:
    if len(index.manifests) > limits.MAX_REFERRERS:
        msg = f"{what}: {len(index.manifests)} referrers; the limit is {limits.MAX_REFERRERS}"
        raise WireError(msg)
    return _once(index.manifests)


def _once(descriptors: tuple[Descriptor, ...]) -> tuple[Descriptor, ...]:
    """Each referrer once, as first listed: an answer that lists one 150 times would otherwise
    have it fetched, held and counted 150 times."""
    first: dict[str, Descriptor] = {}
    for d in descriptors:
        first.setdefault(d.digest, d)
    return tuple(first.values())


def list_referrers(client: RegistryClient, repo: str, subject: str) -> Referrers:
    """The referrers of ``subject``, each once (by digest): from the API where the registry has
    it, else the tag. An answer of another shape is a WireError naming it; more than
    ``MAX_REFERRERS`` too."""
    resp = client.t.request(
        "GET", f"/v2/{repo}/referrers/{subject}", scope=f"repository:{repo}:pull",
        headers={"Accept": OCI_INDEX}, ok=(200, 400, 405),  # without the API: 404, or one of these
        limit=limits.MAX_MANIFEST_BYTES,
    )  # fmt: skip
    what = f"{client.endpoint.name}: the referrers of {repo}@{subject}"
    if resp.status_code == 200 and resp.headers.get("Content-Type", "").startswith(OCI_INDEX):
        data = parse_json(resp.content, what=what, error=WireError)
        index = parse_index(data, what=what, bound=limits.MAX_REFERRERS, error=WireError)
        return Referrers(descriptors=_once(index.manifests), via="api")
    found = client.get_manifest(repo, referrers_tag(subject))
    if found is None:
        return Referrers(descriptors=(), via="none")
    listed = _listed(found.view, what) if isinstance(found.view, ImageIndex) else ()
    return Referrers(descriptors=listed, via="tag")


def fetch_attachment(client: RegistryClient, repo: str, desc: Descriptor, kind: Kind) -> Attachment:
    """The document a referrers descriptor names, each digest checked."""
    manifest = client.get_manifest(repo, desc.digest)
    if manifest is None:
        msg = f"{client.endpoint.name}: the {kind} {desc.digest} is listed but not served"
        raise PublishError(msg)
    return attachment_of(client, repo, manifest, kind)


def attachment_of(client: RegistryClient, repo: str, manifest: Manifest, kind: Kind) -> Attachment:
    """The document an artifact manifest carries as its one layer, checked against its digest."""
    layers = manifest.layers
    if len(layers) != 1:
        msg = f"{client.endpoint.name}: the {kind} {manifest.digest} has {len(layers)} layers, not 1"
        raise PublishError(msg)
    payload = client.blob_bytes(repo, layers[0].digest, limit=limits.MAX_DOCUMENT_BYTES)  # digest checked
    media = layers[0].media_type
    return Attachment(kind=kind, payload=payload, media_type="" if media == ARTIFACT_TYPES[kind] else media)


def _upload(client: RegistryClient, repo: str, data: bytes, spool: Path, mount_from: str | None) -> None:
    digest = sha256_digest(data)
    if client.blob_exists(repo, digest):
        return
    if mount_from and client.mount_blob(repo, digest, mount_from):
        return
    path = blob_file(spool, digest)
    if not holds(path, digest):
        write_bytes(path, data, what="document")
    client.upload_blob(repo, digest, path)


def attach(
    client: RegistryClient,
    repo: str,
    subject: Manifest,
    attachments: Iterable[Attachment],
    *,
    created: str,
    spool: Path,
    mount_from: str | None = None,
) -> tuple[Manifest, ...]:
    """Push each attachment by digest and make it findable from ``subject``; idempotent. Blobs
    are mounted from ``mount_from`` (a repository of the same registry) where it has them."""
    attachments = tuple(attachments)
    pushed: list[Manifest] = []
    for att in attachments:
        manifest = artifact_manifest(att, subject, created)
        pushed.append(manifest)
        if client.head_manifest(repo, manifest.digest) == manifest.digest:
            continue  # pushed by an earlier run
        _upload(client, repo, EMPTY, spool, mount_from)
        _upload(client, repo, att.payload, spool, mount_from)
        client.put_manifest(repo, manifest.digest, manifest)
    if not pushed:
        return ()
    _write_att(client, repo, subject, tuple(attachments), spool, mount_from)
    findable(client, repo, subject, pushed)
    return tuple(pushed)


def findable(client: RegistryClient, repo: str, subject: Manifest, pushed: list[Manifest]) -> None:
    """Make the referrers ``pushed`` (already in ``repo`` by digest) findable from ``subject``.
    A registry with the referrers API lists them by itself (it answers their push with
    OCI-Subject); asking it is the proof. Otherwise the tag schema's index is kept here."""
    found = list_referrers(client, repo, subject.digest)
    if found.via == "api" and {m.digest for m in pushed} <= {d.digest for d in found.descriptors}:
        return
    _merge_tag_index(client, repo, subject.digest, pushed, found)


def _write_att(
    client: RegistryClient,
    repo: str,
    subject: Manifest,
    attachments: tuple[Attachment, ...],
    spool: Path,
    mount_from: str | None,
) -> None:
    """cosign's ``.att`` tag for the signed statements (``cosign.py``): written, idempotent,
    keeping what others attested there."""
    signed = signed_statements(attachments)
    if not signed:
        return
    tag = att_tag(subject.digest)
    manifest, config = att_manifest(signed, client.get_manifest(repo, tag))
    if client.head_manifest(repo, tag) == manifest.digest:
        return
    _upload(client, repo, config, spool, mount_from)
    for att in signed:
        _upload(client, repo, att.payload, spool, mount_from)
    client.put_manifest(repo, tag, manifest)


def _merge_tag_index(
    client: RegistryClient, repo: str, subject: str, pushed: list[Manifest], found: Referrers
) -> None:
    """The referrers tag schema: ``sha256-<hex>`` holds an index of every referrer; ours are
    added, a stale one of ours of the same kind is dropped, anything else is kept. Written, then
    read back (two runs at once: the later write wins, and a missing entry is written again).
    ``found`` is the index as just read; only a retry reads it again."""
    tag = referrers_tag(subject)
    ours = {m.digest: descriptor(m) for m in pushed}
    kinds = {k for d in ours.values() if (k := d.annotation(KIND_ANNOTATION))}
    entries, exists = list(found.descriptors), found.via == "tag"
    if found.via == "api":  # the API did not list them yet: the tag's index is read as it is
        current = client.get_manifest(repo, tag)
        entries, exists = _entries(current), current is not None
    for _attempt in range(3):
        keep = [e for e in entries if e.digest not in ours and e.annotation(KIND_ANNOTATION) not in kinds]
        merged = [e.to_json() for e in sorted([*keep, *ours.values()], key=lambda e: e.digest)]
        if exists and merged == [e.to_json() for e in entries]:
            return
        index = _manifest({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": merged}, OCI_INDEX)
        client.put_manifest(repo, tag, index)
        back = client.get_manifest(repo, tag)
        entries, exists = _entries(back), back is not None
        if set(ours) <= {e.digest for e in entries}:
            return
    msg = (
        f"{client.endpoint.name}: the referrers index {repo}:{tag} keeps losing entries (concurrent writers?)"
    )
    raise PublishError(msg)


def _entries(index: Manifest | None) -> list[Descriptor]:
    """The descriptors the referrers tag's index lists (none: no index, or not an index there)."""
    return list(index.view.manifests) if index is not None and isinstance(index.view, ImageIndex) else []
