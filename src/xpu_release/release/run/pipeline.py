"""``release`` (alias ``build-release``): every stage in order, stopping at the first failure.

validate → render check → lock check → build → smoke test → evaluate → scan → publish → verify → notes
→ record. A smoke-test failure, a regression the evaluation finds and a stopping scan publish nothing.
A rerun resumes: the build is skipped by its inputs hash, a passed smoke test by its marker, publish
per endpoint.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from ...errors import PerformanceRegression, ReleaseError
from ...evidence.scan import GatePolicy, merged_entry
from ...image.engine import Engine
from ...image.inputs import BuildInputs
from ...image.lock import Locks, load_locks
from ...image.render import Rendered, image_layers, require_current
from ...manifest import ImageSpec, Repo
from ...manifest.registries import Registries
from ...oci.credentials import CredentialStore
from ...progress import Sink
from ..model import record as records
from ..model.line import Line
from ..model.pool import EndpointPool
from ..model.record import ReleaseRecord
from ..publishing.publish import Options
from . import stages
from .context import Outcome, ReleaseContext, StageResult, Status, done

T = TypeVar("T")
STAGES = ("validate", "render", "lock", "preflight", "build", "test", "evaluate", "scan", "publish", "verify",
          "notes", "record")  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Summary:
    ref: str
    dry_run: bool
    stages: tuple[StageResult, ...]
    record: dict[str, Any] | None
    notes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "dry_run": self.dry_run,
            "stages": [s.to_json() for s in self.stages],
            "record": self.record,
            "notes": list(self.notes),
        }


class Reporter:
    """Stage by stage: CI log groups on GitHub Actions and GitLab, plain lines elsewhere."""

    def __init__(self, write: Sink, ci: str = "") -> None:
        self.write = write
        self.github = ci == "github"
        self.gitlab = ci == "gitlab"

    def start(self, name: str) -> None:
        if self.github:
            self.write(f"::group::{name}")
        elif self.gitlab:
            self.write(f"\x1b[0Ksection_start:{int(time.time())}:{name}[collapsed=true]\r\x1b[0K{name}")
        else:
            self.write(f"==> {name}")

    def end(self, result: StageResult) -> None:
        line = f"    {result.name}: {result.status} in {result.seconds:.1f} s — {result.detail}"
        if self.github:
            self.write("::endgroup::")
        elif self.gitlab:
            self.write(f"\x1b[0Ksection_end:{int(time.time())}:{result.name}\r\x1b[0K")
        self.write(line)

    def fail(self, name: str, error: ReleaseError) -> None:
        if self.github:
            self.write("::endgroup::")
            self.write(f"::error title=xpu-release {name} failed::{error.message.splitlines()[0]}")
        self.write(f"    {name}: FAILED")


@dataclass(frozen=True, kw_only=True)
class Choices:
    """What the person (or job) running a release chose: who builds it (``builder``, for the
    provenance), whether anything changes (``dry_run``), the vulnerability gate's policy, and a
    skipped evaluation's reason (``no_evaluate``)."""

    builder: str
    dry_run: bool = False
    gate: GatePolicy | None = None
    no_evaluate: str | None = None


class Release:
    """One release, stage by stage: the first three work out the ``ReleaseContext``
    (``context.py``), the others (``stages.py``) are handed it."""

    def __init__(self, repo: Repo, ref: str, registries: Registries, credentials: CredentialStore,
                 options: Options, reporter: Reporter, chosen: Choices) -> None:  # fmt: skip
        self.repo = repo
        self.gate = chosen.gate or GatePolicy()
        self.no_evaluate = chosen.no_evaluate
        self.builder = chosen.builder
        self.ref = ref
        self.registries = registries
        self.credentials = credentials
        self.options = options
        self.reporter = reporter
        self.dry_run = chosen.dry_run
        self.results: list[StageResult] = []
        self.failed: tuple[str, ReleaseError] | None = None
        self._engine: Engine | None = None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = Engine.connect()
        return self._engine

    def stage(self, name: str, run: Callable[[], Outcome[T]]) -> T:
        self.reporter.start(name)
        started = time.monotonic()
        try:
            outcome = run()
        except ReleaseError as exc:
            self.reporter.fail(name, exc)
            self.failed = (name, exc)
            raise
        result = StageResult(
            name=name,
            status=outcome.status,
            seconds=round(time.monotonic() - started, 3),
            detail=outcome.detail,
        )
        self.results.append(result)
        self.reporter.end(result)
        return outcome.value

    def failure_summary(self) -> dict[str, Any]:
        """What CI needs when a stage failed: the stages that ran, and which one failed, why."""
        assert self.failed is not None
        name, exc = self.failed
        return {
            "ref": self.ref,
            "dry_run": self.dry_run,
            "stages": [s.to_json() for s in self.results],
            "failed": {"stage": name, "error": exc.message, "exit_code": exc.exit_code},
            # A release the evaluation gate stopped writes no record: what it measured is here.
            "evaluation": exc.evaluation if isinstance(exc, PerformanceRegression) else None,
            "record": None,
            "notes": [],
        }

    def context(self) -> ReleaseContext:
        """Validate, render check and lock check: what the release knows, worked out once. One
        endpoint pool for the run: build avoidance, publish and verify ask through the same
        clients, so each endpoint authenticates once."""
        spec: ImageSpec = self.stage("validate", self._validate)
        rendered = self.stage("render", lambda: self._render(spec))
        locks = self.stage("lock", lambda: self._lock(spec))
        pool = EndpointPool(spec, self.registries, self.credentials, on_line=self.reporter.write)
        form = image_layers(self.repo.root, spec)
        each = tuple(BuildInputs.of(spec, rendered, locks.of(p), p, form) for p in spec.platforms)
        # The floating tags it moves: the line rule (line.py), asked when they move.
        options = replace(self.options, line=Line(self.repo), form=form)
        return ReleaseContext(repo=self.repo, inputs=each[0], registries=self.registries, pool=pool,
                              options=options, gate=self.gate, builder=self.builder,
                              on_line=self.reporter.write, no_evaluate=self.no_evaluate,
                              each=each if spec.platformed else ())  # fmt: skip

    def run(self) -> Summary:
        ctx = self.context()
        if self.dry_run:
            self.stage("preflight", lambda: stages.preflight(ctx, lambda: self.engine))
            for name, detail in stages.planned(ctx, self.engine):
                self.stage(name, lambda d=detail: Outcome(status=Status.PLANNED, detail=d, value=None))  # type: ignore[misc]
            return Summary(ref=ctx.spec.ref, dry_run=True, stages=tuple(self.results), record=None, notes=())
        # Where the record and the notes go, checked before anything is built or published.
        records.writable(records.default_path(self.repo.root, ctx.spec.image, ctx.spec.version), ctx.spec.ref,
                         self.repo.root)  # fmt: skip
        engine = self.engine
        if ctx.each:
            record = self._platforms(ctx, engine)
        else:
            image_id = self.stage("build", lambda: stages.build(ctx, engine))
            self.stage("test", lambda: stages.test(ctx, engine, image_id))
            evaluation = self.stage("evaluate", lambda: stages.evaluate(ctx, engine, image_id))
            evidence = self.stage("scan", lambda: stages.scan(ctx, engine, image_id))
            docs = stages.documents(ctx, image_id, evidence)
            record = self.stage("publish", lambda: stages.publish(ctx, engine, docs))
            record = replace(record, scan=evidence.gated.entry, evaluation=evaluation)
        self.stage("verify", lambda: stages.verify(ctx, record))
        written: list[Path] = self.stage("notes", lambda: stages.notes(ctx, record))
        self.stage("record", lambda: stages.record(ctx, record))
        self.reporter.write(f"released {ctx.spec.ref} as {record.digest}")
        return Summary(ref=ctx.spec.ref, dry_run=False, stages=tuple(self.results), record=record.to_json(),
                       notes=tuple(str(p) for p in written))  # fmt: skip

    def _platforms(self, ctx: ReleaseContext, engine: Engine) -> ReleaseRecord:
        """Build, test and scan of a platformed release: each stage for every platform's image
        (the first failure stops the release, naming the platform: nothing is published); the
        evaluation measures the first platform's; then one index of them all is published."""
        contexts = ctx.per_platform()
        ids = self.stage("build", lambda: stages.each([(c, None) for c in contexts],
                                                      lambda c, _: stages.build(c, engine)))  # fmt: skip
        pairs = list(zip(contexts, ids, strict=True))
        self.stage("test", lambda: stages.each(pairs, lambda c, i: stages.test(c, engine, i)))
        evaluation = self.stage("evaluate", lambda: stages.evaluate(contexts[0], engine, ids[0]))
        scanned = self.stage("scan", lambda: stages.each(pairs, lambda c, i: stages.scan(c, engine, i)))
        builds = [stages.platform_build(c, i, e) for (c, i), e in zip(pairs, scanned, strict=True)]
        record = self.stage("publish", lambda: stages.publish(ctx, engine, builds))
        # the record's gate: every platform's findings (each platform's VEX is its own gate's)
        return replace(record, scan=merged_entry([e.gated.entry for e in scanned]), evaluation=evaluation)

    # --- the stages that make the context -----------------------------------------------------

    def _validate(self) -> Outcome[ImageSpec]:
        spec = self.repo.load_ref(self.ref)
        image_layers(self.repo.root, spec)  # its prefetch profile, an input too, read before anything runs
        return done(f"{spec.manifest_path} (sha256 {spec.content_hash[:12]})", spec)

    def _render(self, spec: ImageSpec) -> Outcome[Rendered]:
        rendered = require_current(self.repo.root, spec, self.registries)
        return done(f"{self.repo.rel(rendered.path)} is current", rendered)

    def _lock(self, spec: ImageSpec) -> Outcome[Locks]:
        locks = load_locks(self.repo.root, spec)
        if not spec.platformed:
            return done(f"{len(locks.of(spec.platforms[0]).layers)} layers locked", locks)
        each = "; ".join(f"{p}: {len(lock.layers)}" for p, lock in locks.by_platform)
        return done(f"layers locked ({each})", locks)
