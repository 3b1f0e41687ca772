"""``release`` (alias ``build-release``): every stage in order, stopping at the first failure.

validate → render check → lock check → build → smoke test → scan → publish → verify → notes → record.
A smoke-test failure publishes nothing. A rerun resumes: the build is skipped by its inputs
hash, a passed smoke test by its marker, publish per endpoint.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from ..errors import PublishError, ReleaseError, VerifyFailed
from ..evidence.attest import Documents
from ..evidence.scan import GatePolicy, plan_of_gate, run_gate
from ..evidence.vexdoc import ReleaseVex
from ..image.build import build_image, inputs_sha256
from ..image.engine import Engine
from ..image.lock import Lock, load_lock
from ..image.render import require_current
from ..image.smoke import already_tested, smoke_test
from ..labels import INPUTS_LABEL
from ..manifest import ImageSpec, Repo
from ..manifest.registries import Registries
from ..oci.credentials import CredentialStore
from ..progress import Sink
from ..settings import cache_dir
from . import record as records
from .documents import gate_vex
from .notes import notes_path, render_notes
from .plan import floating_tags, make_plan, moving
from .preflight import preflight, verdict
from .publish import Options, failure_report, publish
from .serving import pull_published, status
from .verify import verify

T = TypeVar("T")
STAGES = ("validate", "render", "lock", "preflight", "build", "test", "scan", "publish", "verify", "notes",
          "record")  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class StageResult:
    name: str
    status: str  # done, skipped, planned
    seconds: float
    detail: str


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
            "stages": [s.__dict__ for s in self.stages],
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


class Release:
    def __init__(self, repo: Repo, ref: str, registries: Registries, credentials: CredentialStore,
                 options: Options, reporter: Reporter, *, dry_run: bool, builder: str,
                 gate: GatePolicy | None = None) -> None:  # fmt: skip
        self.repo = repo
        self.gate = gate or GatePolicy()
        self.builder = builder
        self.ref = ref
        self.registries = registries
        self.credentials = credentials
        self.options = options
        self.reporter = reporter
        self.dry_run = dry_run
        self.results: list[StageResult] = []
        self.failed: tuple[str, ReleaseError] | None = None
        self._engine: Engine | None = None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = Engine.connect()
        return self._engine

    def stage(self, name: str, run: Callable[[], tuple[str, str, T]]) -> T:
        self.reporter.start(name)
        started = time.monotonic()
        try:
            status_, detail, value = run()
        except ReleaseError as exc:
            self.reporter.fail(name, exc)
            self.failed = (name, exc)
            raise
        result = StageResult(
            name=name, status=status_, seconds=round(time.monotonic() - started, 3), detail=detail
        )
        self.results.append(result)
        self.reporter.end(result)
        return value

    def failure_summary(self) -> dict[str, Any]:
        """What CI needs when a stage failed: the stages that ran, and which one failed, why."""
        assert self.failed is not None
        name, exc = self.failed
        return {
            "ref": self.ref,
            "dry_run": self.dry_run,
            "stages": [s.__dict__ for s in self.results],
            "failed": {"stage": name, "error": exc.message, "exit_code": exc.exit_code},
            "record": None,
            "notes": [],
        }

    def run(self) -> Summary:
        root = self.repo.root
        line = self.reporter.write
        spec: ImageSpec = self.stage("validate", lambda: self._validate())

        def render_check() -> tuple[str, str, str]:
            rendered = require_current(root, spec)
            return "done", f"{self.repo.rel(rendered.path)} is current", rendered.text

        dockerfile = self.stage("render", render_check)

        def lock_check() -> tuple[str, str, Lock]:
            lock = load_lock(root, spec)
            return "done", f"{len(lock.layers)} layers locked", lock

        lock = self.stage("lock", lock_check)
        if self.dry_run:
            self.stage("preflight", lambda: self._preflight(spec, lock))
            return self._plan(spec, inputs_sha256(spec, dockerfile, lock))

        image_id: str = self.stage("build", lambda: self._build(spec, dockerfile, lock))
        self.stage("test", lambda: self._test(spec, image_id))
        gated = self.stage(
            "scan",
            lambda: run_gate(
                self.repo, spec, self.engine, image_id, self.gate, builder=self.builder, cache=cache_dir()
            ),
        )
        vex = gate_vex(self.repo, spec, gated.result)
        record = replace(self.stage("publish", lambda: self._publish(spec, vex)), scan=gated.entry)
        self.stage("verify", lambda: self._verify(spec, record))
        written = self.stage("notes", lambda: self._notes(spec, record))
        path = records.default_path(root, spec.image, spec.version)

        def write_record() -> tuple[str, str, None]:
            records.keep(record, path)
            return "done", self.repo.rel(path), None

        self.stage("record", write_record)
        line(f"released {spec.ref} as {record.digest}")
        return Summary(ref=spec.ref, dry_run=False, stages=tuple(self.results), record=record.to_json(),
                       notes=tuple(str(p) for p in written))  # fmt: skip

    # --- stages ---------------------------------------------------------------------------

    def _validate(self) -> tuple[str, str, ImageSpec]:
        spec = self.repo.load_ref(self.ref)
        return "done", f"{spec.manifest_path} (sha256 {spec.content_hash[:12]})", spec

    def _build(self, spec: ImageSpec, dockerfile: str, lock: Lock) -> tuple[str, str, str]:
        pulled = pull_published(spec, inputs_sha256(spec, dockerfile, lock), self.engine, self.registries,
                                self.credentials, self.reporter.write)  # fmt: skip
        if pulled is not None:
            return "pulled", f"{pulled[:19]} from an endpoint that serves it (same inputs)", pulled
        built = build_image(self.repo.root, spec, self.registries, self.engine, builder=self.builder,
                            on_line=self.reporter.write, codec=self.options.codec)  # fmt: skip
        state = "skipped" if built.skipped else "done"
        return state, f"{built.image_id[:19]} ({built.size / 1e6:.0f} MB)", built.image_id

    def _test(self, spec: ImageSpec, image_id: str) -> tuple[str, str, None]:
        if already_tested(self.repo.root, spec, image_id):
            return "skipped", f"{image_id[:19]} already passed these checks", None
        result = smoke_test(self.repo.root, spec, self.engine, on_line=self.reporter.write)
        return "done", f"{result.passed} checks passed", None

    def _publish(self, spec: ImageSpec, vex: ReleaseVex | None) -> tuple[str, str, records.ReleaseRecord]:
        documents = Documents(repo=self.repo, spec=spec, engine=self.engine, builder=self.builder, vex=vex)
        result = publish(
            spec, self.registries, self.engine, self.credentials, self.options, self.reporter.write, documents
        )
        if not result.complete:
            # Kept so a rerun (and CI's artifacts) can see which endpoints are done; a complete
            # record is written by the last stage.
            records.keep(result, records.default_path(self.repo.root, spec.image, spec.version))
            raise PublishError(failure_report(result))
        moved = sum(1 for e in result.endpoints if e.status == "verified")
        return "done", f"{result.digest} at {len(result.endpoints)} endpoints ({moved} updated)", result

    def _verify(self, spec: ImageSpec, record: records.ReleaseRecord) -> tuple[str, str, None]:
        rows = status(spec, self.registries, self.credentials, record)
        # Floating tags are held to the release only where it moved them: with a newer version
        # published, they stay on that one.
        moved = set(record.floating_moved)
        rows = [r for r in rows if r.tag == spec.version or r.ref in moved]
        wrong = [r for r in rows if not r.matches]
        if wrong:
            listing = "\n".join(f"  {r.ref}: serves {r.serves or r.error or 'nothing'}" for r in wrong)
            msg = f"after publishing, not every endpoint serves {record.digest}:\n{listing}"
            raise VerifyFailed(msg)
        # Every blob of the manifest exists at every endpoint with its size (`verify --deep`
        # hashes them too).
        blobs = verify(spec, self.registries, self.credentials, record.digest, deep=False,
                       attachments=record.attachments)  # fmt: skip
        if not blobs.ok:
            listing = "\n".join(f"  {f.endpoint}: {f.what}: {f.problem}" for f in blobs.findings)
            msg = f"after publishing, blobs of {record.digest} are wrong:\n{listing}"
            raise VerifyFailed(msg)
        kinds = " and ".join(record.attachments) or "nothing"
        detail = f"{len(rows)} refs serve {record.digest}; {kinds} attached; {blobs.blobs_checked} blobs"
        return "done", detail, None

    def _notes(self, spec: ImageSpec, record: records.ReleaseRecord) -> tuple[str, str, list[Path]]:
        written = []
        for lang in ("zh", "en"):
            notes = render_notes(self.repo, spec, self.registries, lang, record)
            path = notes_path(self.repo.root, spec, lang)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(notes.text, encoding="utf-8")
            written.append(path)
        return "done", ", ".join(self.repo.rel(p) for p in written), written

    def _preflight(self, spec: ImageSpec, lock: Lock) -> tuple[str, str, None]:
        """What the real run needs from the world (engine, base, files, endpoints, credentials),
        checked read-only; fails as the real run would."""
        checks = preflight(spec, lock, self.registries, self.credentials, connect=lambda: self.engine)
        for c in checks:
            self.reporter.write(f"    {c.line()}")
        error = verdict(checks)
        if error is not None:
            raise error
        return "done", f"{len(checks)} checks passed", None

    def _plan(self, spec: ImageSpec, inputs: str) -> Summary:
        try:
            existing = self.engine.image(spec.ref)
        except ReleaseError:
            existing = None
        same = existing is not None and existing.labels.get(INPUTS_LABEL) == inputs
        plan = make_plan(spec, self.registries)
        moved = moving(spec, newest=self.options.move_floating, newest_of_line=self.options.move_line)
        stay = ", ".join(t for t in floating_tags(spec) if t not in moved)
        floating = (f"; then {', '.join(moved)}" if moved else "") + (f"; {stay} stay (newer versions exist)"
                                                                      if stay else "")  # fmt: skip
        planned = [
            (
                "build",
                f"up to date ({existing.id[:19]})"
                if same and existing
                else f"would build (inputs {inputs[:12]})",
            ),
            ("test", "would run the smoke checks in a throwaway container"),
            ("scan", plan_of_gate(self.gate)),
            ("publish", "; ".join(t.version_ref for t in plan.targets) + floating),
            ("verify", f"would check {len(plan.targets) * (1 + len(moved))} refs"),
            (
                "notes",
                ", ".join(self.repo.rel(notes_path(self.repo.root, spec, lang)) for lang in ("zh", "en")),
            ),
            ("record", self.repo.rel(records.default_path(self.repo.root, spec.image, spec.version))),
        ]
        for name, detail in planned:
            self.stage(name, lambda d=detail: ("planned", d, None))  # type: ignore[misc]
        return Summary(ref=spec.ref, dry_run=True, stages=tuple(self.results), record=None, notes=())
