"""Which refs a release pushes, per endpoint: the plan ``plan``, ``publish --dry-run`` print."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .endpoints import Endpoint, Registries
from .manifest import ImageSpec


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

    def to_json(self) -> dict[str, Any]:
        return {
            "image": self.spec.ref,
            "manifest": self.spec.manifest_path,
            "manifest_sha256": self.spec.content_hash,
            "targets": [t.to_json() for t in self.targets],
        }


def make_plan(spec: ImageSpec, registries: Registries) -> Plan:
    targets = tuple(
        Target(
            endpoint=ep,
            version_ref=ep.ref(spec.image, spec.version),
            floating_refs=tuple(ep.ref(spec.image, t) for t in spec.floating_tags),
        )
        for ep in registries.publish_endpoints()
    )
    return Plan(spec=spec, targets=targets)
