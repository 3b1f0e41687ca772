"""What staging leaves, and a publish's records before any tag is written: shared by ``publish``
(the one image of a release) and ``indexpublish`` (each platform's image, then the index).

Staging puts a manifest by digest at every endpoint, with its documents, and writes no tag; a
version tag is written only once every endpoint is staged (``Publisher.finish``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from ...manifest import ImageSpec
from ...oci.registry import Manifest
from ..model.plan import Target
from ..model.record import EndpointRecord, ReleaseRecord


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


def source_failed(targets: Sequence[Target], message: str) -> tuple[EndpointRecord, ...]:
    """Every endpoint's record when the first push (to the source, ``targets[0]``) failed: the
    source failed with ``message``, every other endpoint not staged because of it."""
    first = targets[0]
    return tuple(
        replace(planned(t), status="failed", error=message) if t is first
        else replace(planned(t), error=f"not staged: {first.endpoint.name} (the source) failed")
        for t in targets
    )  # fmt: skip


def unpublished(spec: ImageSpec, inputs: str, image_id: str) -> ReleaseRecord:
    """The record of a publish of ``spec`` before anything is done at any endpoint."""
    return ReleaseRecord(ref=spec.ref, manifest=spec.manifest_path, manifest_sha256=spec.content_hash,
                         inputs_sha256=inputs, tested_image_id=image_id, digest=None, published_at=_now(),
                         complete=False, floating_moved=())  # fmt: skip


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
