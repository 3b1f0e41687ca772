"""Which refs a release pushes, per endpoint: the plan ``plan``, ``publish --dry-run`` print."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..manifest import ImageSpec
from ..manifest.registries import Registries
from ..oci.endpoint import Endpoint


@dataclass(frozen=True, kw_only=True)
class Target:
    endpoint: Endpoint
    version_ref: str  # immutable
    floating_refs: tuple[str, ...]  # moved only after every endpoint verified

    def to_json(self) -> dict[str, Any]:
        return {
            "endpoint": self.endpoint.name,
            "registry": self.endpoint.registry,
            "region": self.endpoint.region,
            "host": self.endpoint.host,
            "version_ref": self.version_ref,
            "floating_refs": list(self.floating_refs),
        }


@dataclass(frozen=True, kw_only=True)
class Plan:
    spec: ImageSpec
    targets: tuple[Target, ...]
    # Floating tags never move backwards: the newer version that keeps them, if there is one.
    newer: str | None = None

    @property
    def moves_floating(self) -> bool:
        return bool(self.spec.floating_tags) and self.newer is None

    def to_json(self) -> dict[str, Any]:
        return {
            "image": self.spec.ref,
            "manifest": self.spec.manifest_path,
            "manifest_sha256": self.spec.content_hash,
            "targets": [t.to_json() for t in self.targets],
            "moves_floating": self.moves_floating,
            "newer_version": self.newer,
        }


def make_plan(spec: ImageSpec, registries: Registries, *, newer: str | None = None) -> Plan:
    """Every ref a publish of ``spec`` writes. ``newer``: a later version of the image exists
    (then the floating tags stay where they are, as publish leaves them)."""
    targets = tuple(
        Target(
            endpoint=ep,
            version_ref=ep.ref(spec.image, spec.version),
            floating_refs=tuple(ep.ref(spec.image, t) for t in spec.floating_tags),
        )
        for ep in registries.publish_endpoints()
    )
    return Plan(spec=spec, targets=targets, newer=newer)
