"""What one release knows, worked out once and handed down to its stages (``stages.py``), and
what each stage hands back.

The release's first stages (validate, render, lock) make the ``ReleaseContext``: the manifest,
the rendered Dockerfile, the lock and their digest (``BuildInputs``), the registries file as read
once, and one endpoint pool for the run. Every later stage reads it and never works any of it
out again; what a stage finds (the image id, the SBOM, the record) is its ``Outcome``'s value,
handed to the stages after it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Generic, TypeVar

from ...evidence.scan import GatePolicy
from ...image.inputs import BuildInputs
from ...manifest import ImageSpec, Repo
from ...manifest.registries import Registries
from ...progress import Sink
from ..model.pool import EndpointPool
from ..publishing.publish import Options

T = TypeVar("T")


class Status(StrEnum):
    """How a stage ended (a stage that fails raises instead)."""

    DONE = "done"
    SKIPPED = "skipped"  # nothing to do: the build's inputs, a passed smoke test, a gate not run
    PULLED = "pulled"  # the build: an endpoint served the same inputs (build avoidance)
    PLANNED = "planned"  # a dry run: what the real run would do


@dataclass(frozen=True, kw_only=True)
class Outcome(Generic[T]):
    """What a stage hands back: how it ended, one line for the report, and its value for the
    stages after it."""

    status: Status
    detail: str
    value: T


def done(detail: str, value: T) -> Outcome[T]:
    return Outcome(status=Status.DONE, detail=detail, value=value)


@dataclass(frozen=True, kw_only=True)
class StageResult:
    """One row of the release's report: a stage, how it ended, in how long."""

    name: str
    status: Status
    seconds: float
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": str(self.status), "seconds": self.seconds, "detail": self.detail}


@dataclass(frozen=True, kw_only=True)
class ReleaseContext:
    repo: Repo
    inputs: BuildInputs  # the manifest, its Dockerfile, its lock and their digest
    registries: Registries  # as the command read it, once
    pool: EndpointPool  # the run's one client per endpoint
    options: Options
    gate: GatePolicy
    builder: str  # who builds (or publishes a pulled image): the command read it once
    on_line: Sink
    no_evaluate: str | None = None  # `--no-evaluate REASON`: the evaluation is skipped, and why
    # A platformed release: every platform's inputs, in the manifest's order (``inputs`` is the
    # first's); empty for a release of linux/amd64 alone.
    each: tuple[BuildInputs, ...] = ()

    @property
    def spec(self) -> ImageSpec:
        return self.inputs.spec

    def per_platform(self) -> tuple[ReleaseContext, ...]:
        """The context of each platform's image: its inputs (its lock section, its digest)."""
        return tuple(replace(self, inputs=i) for i in self.each) if self.each else (self,)
