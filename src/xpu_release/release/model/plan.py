"""Which refs a release pushes, per endpoint: the plan ``plan``, ``publish --dry-run`` print."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...manifest import ImageSpec
from ...manifest.lines import line_tag
from ...manifest.registries import Registries
from ...oci.endpoint import Endpoint


def floating_tags(spec: ImageSpec) -> tuple[str, ...]:
    """Every floating tag a release of ``spec`` may move: the manifest's (``latest``), then its
    line's (``25.03-latest``, moved by 25.03 and then by each of its patches); none when the
    manifest has none."""
    if not spec.floating_tags:
        return ()
    return tuple(dict.fromkeys((*spec.floating_tags, line_tag(spec))))


def moving(spec: ImageSpec, *, newest: bool, newest_of_line: bool) -> tuple[str, ...]:
    """The floating tags a publish moves, never backwards: all of them when it is the newest
    version of the image; only its line's when it is the newest of its line (a patch of an
    older line); none otherwise."""
    if newest:
        return floating_tags(spec)
    return tuple(t for t in floating_tags(spec) if t == line_tag(spec)) if newest_of_line else ()


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
    # Floating tags never move backwards: the newer version that keeps them, if there is one;
    # the floating tags this publish moves, as a plan says them (``line.Line.planned``, or the
    # manifests' rule, ``line.forward``); None: not said here (a pool's plan: its targets only;
    # the line rule decides when the tags move).
    newer: str | None = None
    moves: tuple[str, ...] | None = None

    @property
    def moves_floating(self) -> bool:
        """Whether the image's own floating tags (``latest``: the manifest's) move: by the
        manifests when it is the newest version, or because every newer release carrying them
        has left them (the line's tag is in ``moves`` either way). False when not said."""
        return any(tag in (self.moves or ()) for tag in self.spec.floating_tags)

    def to_json(self) -> dict[str, Any]:
        """As ``plan --json`` prints it: each target's ``floating_refs`` are the refs of the tags
        this publish moves there (``moves``), never one that stays where it is."""
        tags, moves = floating_tags(self.spec), self.moves or ()

        def moved(t: Target) -> list[str]:
            return [ref for tag, ref in zip(tags, t.floating_refs, strict=True) if tag in moves]

        return {
            "image": self.spec.ref,
            "manifest": self.spec.manifest_path,
            "manifest_sha256": self.spec.content_hash,
            "targets": [{**t.to_json(), "floating_refs": moved(t)} for t in self.targets],
            "moves_floating": self.moves_floating,
            "moves": None if self.moves is None else list(self.moves),
            "newer_version": self.newer,
        }


def make_plan(
    spec: ImageSpec, registries: Registries, *, newer: str | None = None, moves: tuple[str, ...] | None = None
) -> Plan:
    """Every ref a publish of ``spec`` writes. ``newer``: a later version of the image exists;
    ``moves``: the floating tags it moves, as a plan says them (None: not said)."""
    targets = tuple(
        Target(
            endpoint=ep,
            version_ref=ep.ref(spec.image, spec.version),
            floating_refs=tuple(ep.ref(spec.image, t) for t in floating_tags(spec)),
        )
        for ep in registries.publish_endpoints()
    )
    return Plan(spec=spec, targets=targets, newer=newer, moves=moves)
