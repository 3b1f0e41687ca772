"""The stages of a release after its inputs are known (``pipeline.py`` runs them in order): each
reads the ``ReleaseContext`` and what the stages before it handed on, and hands back an
``Outcome``. None of them works out again what the context holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ...errors import PerformanceRegression, PublishError, ReleaseError, VerifyFailed
from ...evidence.attest import Documents, image_sbom
from ...evidence.scan import Gated, plan_of_gate, run_gate
from ...evidence.vex import published_at
from ...guard.generated import write_generated
from ...image.build import Building, build_image
from ...image.engine import Engine
from ...image.evaluation import skipped
from ...image.smoke import already_tested, smoke_test
from ...labels import INPUTS_LABEL
from ...settings import cache_dir
from ..model import record as records
from ..model.line import Planned
from ..model.plan import floating_tags
from ..model.serving import pull_published, status
from ..publishing.documents import gate_vex
from ..publishing.indexpublish import PlatformBuild, publish_index
from ..publishing.publish import failure_report
from ..publishing.publish import publish as publish_image
from ..publishing.verify import verify as verify_blobs
from .context import Outcome, ReleaseContext, Status, done
from .evaluate import evaluate_image, gate_failure, measured_before, references, remember
from .notes import notes_path, render_notes
from .preflight import preflight as preflight_checks
from .preflight import verdict

LANGUAGES = ("zh", "en")
A = TypeVar("A")
T = TypeVar("T")


def build(ctx: ReleaseContext, engine: Engine) -> Outcome[str]:
    """The image id: pulled from an endpoint that serves the same inputs, else built (skipped
    when the engine holds an image of these inputs)."""
    pulled = pull_published(ctx.pool, ctx.inputs.digest, engine, ctx.on_line)
    if pulled is not None:
        detail = f"{pulled[:19]} from an endpoint that serves it (same inputs)"
        return Outcome(status=Status.PULLED, detail=detail, value=pulled)
    how = Building(builder=ctx.builder, credentials=ctx.pool.credentials, codec=ctx.options.codec)
    built = build_image(ctx.repo.root, ctx.inputs, ctx.registries, engine, how, ctx.on_line)
    state = Status.SKIPPED if built.skipped else Status.DONE
    return Outcome(
        status=state, detail=f"{built.image_id[:19]} ({built.size / 1e6:.0f} MB)", value=built.image_id
    )


def test(ctx: ReleaseContext, engine: Engine, image_id: str) -> Outcome[None]:
    if already_tested(ctx.repo.root, ctx.spec, image_id):
        return Outcome(
            status=Status.SKIPPED, detail=f"{image_id[:19]} already passed these checks", value=None
        )
    result = smoke_test(ctx.repo.root, ctx.spec, ctx.inputs.lock, engine, on_line=ctx.on_line,
                        platform=ctx.inputs.platform)  # fmt: skip
    return done(f"{result.passed} checks passed", None)


def evaluate(ctx: ReleaseContext, engine: Engine, image_id: str) -> Outcome[dict[str, Any] | None]:
    """The performance evaluation: the record's entry (None: the manifest declares none); a
    regression the manifest does not accept stops the release."""
    if ctx.no_evaluate is not None:
        return Outcome(status=Status.SKIPPED, detail=f"--no-evaluate: {ctx.no_evaluate}",
                       value=skipped(ctx.no_evaluate))  # fmt: skip
    spec = ctx.spec
    if spec.evaluation is None:
        return Outcome(status=Status.SKIPPED, detail="the manifest declares no evaluation", value=None)
    lock, creds = ctx.inputs.lock, ctx.pool.credentials
    refs = references(ctx.repo, spec, ctx.registries, lock, engine, creds, image_id)
    before = measured_before(spec, image_id, refs)
    if before is not None:
        kept = f"measured before for these very images ({before.get('rounds')} rounds): kept"
        return Outcome(status=Status.SKIPPED, detail=kept, value=before)
    evaluated = evaluate_image(spec, engine, image_id, refs, on_line=ctx.on_line)
    if evaluated is None:
        against = ", ".join(spec.evaluation.against)
        missing = "; ".join(f"{r.ref}: {r.missing}" for r in refs)
        none = f"against {against}, and {spec.version} extends no release"
        why = f"nothing to compare with: {missing or none}"
        return Outcome(status=Status.SKIPPED, detail=why, value=skipped(why))
    if evaluated.stops:
        raise PerformanceRegression(gate_failure(spec, evaluated), evaluation=evaluated.entry)
    remember(spec, image_id, refs, evaluated.entry)
    return done(evaluated.detail, evaluated.entry)


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """What the scan stage hands on: the image's SBOM (made once: the gate scans it, publish
    attaches these very bytes) and what the gate concluded."""

    sbom: bytes
    gated: Gated


def scan(ctx: ReleaseContext, engine: Engine, image_id: str) -> Outcome[Evidence]:
    spec, lock = ctx.spec, ctx.inputs.lock
    sbom = image_sbom(ctx.repo, spec, lock, engine, image_id)
    where = published_at(spec.image, (t.endpoint for t in ctx.pool.plan.targets))
    gated = run_gate(ctx.repo, spec, sbom, ctx.gate, cache=cache_dir(), repositories=where)
    state = Status.DONE if gated.result is not None else Status.SKIPPED
    return Outcome(status=state, detail=gated.detail, value=Evidence(sbom=sbom, gated=gated))


def platform_build(ctx: ReleaseContext, image_id: str, evidence: Evidence) -> PlatformBuild:
    """One platform's image of a platformed release (``ctx``: that platform's), as publish takes it."""
    docs = documents(ctx, image_id, evidence)
    return PlatformBuild(platform=ctx.inputs.platform, documents=docs, inputs=ctx.inputs.digest)


def each(
    pairs: Sequence[tuple[ReleaseContext, A]], run: Callable[[ReleaseContext, A], Outcome[T]]
) -> Outcome[tuple[T, ...]]:
    """One stage for every platform's image (``pairs``: each platform's context and what the stage
    before handed on for it), in the manifest's order: the first failure stops it, its message
    naming the platform; the report's line says each platform's outcome."""
    outcomes = []
    for ctx, value in pairs:
        platform = ctx.inputs.platform
        ctx.on_line(f"  {platform}")
        try:
            outcomes.append((platform, run(ctx, value)))
        except ReleaseError as exc:
            exc.message = f"{platform}: {exc.message}"
            exc.args = (exc.message,)
            raise
    status = Status.DONE if any(o.status == Status.DONE for _, o in outcomes) else outcomes[0][1].status
    detail = "; ".join(f"{p}: {o.detail}" for p, o in outcomes)
    return Outcome(status=status, detail=detail, value=tuple(o.value for _, o in outcomes))


def documents(ctx: ReleaseContext, image_id: str, evidence: Evidence) -> Documents:
    """The documents publish attaches, from the SBOM the gate scanned and the VEX of its result."""
    vex = gate_vex(ctx.repo, ctx.spec, evidence.gated.result)
    return Documents(repo=ctx.repo, spec=ctx.spec, lock=ctx.inputs.lock, image_id=image_id,
                     sbom=evidence.sbom, builder=ctx.builder, vex=vex)  # fmt: skip


def publish(
    ctx: ReleaseContext, engine: Engine, docs: Documents | Sequence[PlatformBuild]
) -> Outcome[records.ReleaseRecord]:
    """The image (``docs``: its documents), or of a platformed release one index of every
    platform's image (``docs``: each platform's build), at every endpoint."""
    if isinstance(docs, Documents):
        result = publish_image(
            ctx.pool, engine, docs.image_id, ctx.inputs.digest, ctx.options, ctx.on_line, docs
        )
    else:
        result = publish_index(ctx.pool, engine, docs, ctx.options, ctx.on_line, ctx.builder)
    if not result.complete:
        # Kept so a rerun (and CI's artifacts) can see which endpoints are done; a complete
        # record is written by the last stage.
        records.keep(
            result, records.default_path(ctx.repo.root, ctx.spec.image, ctx.spec.version), ctx.repo.root
        )
        raise PublishError(failure_report(result, rerun="release"))
    moved = sum(1 for e in result.endpoints if e.status == "verified")
    return done(f"{result.digest} at {len(result.endpoints)} endpoints ({moved} updated)", result)


def verify(ctx: ReleaseContext, record: records.ReleaseRecord) -> Outcome[None]:
    """Every endpoint serves the record's digest, with every blob, through the run's pool."""
    spec = ctx.spec
    rows = status(ctx.pool, record)
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
    platforms = {p.platform: p.attachments for p in record.platforms}
    blobs = verify_blobs(
        ctx.pool, record.digest, deep=False, attachments=record.attachments, platforms=platforms
    )
    if not blobs.ok:
        listing = "\n".join(f"  {f.endpoint}: {f.what}: {f.problem}" for f in blobs.findings)
        msg = f"after publishing, blobs of {record.digest} are wrong:\n{listing}"
        raise VerifyFailed(msg)
    kinds = " and ".join(record.attachments) or "nothing"
    return done(
        f"{len(rows)} refs serve {record.digest}; {kinds} attached; {blobs.blobs_checked} blobs", None
    )


def notes(ctx: ReleaseContext, record: records.ReleaseRecord) -> Outcome[list[Path]]:
    written = []
    for lang in LANGUAGES:
        text = render_notes(ctx.repo, ctx.spec, ctx.registries, lang, record).text
        path = notes_path(ctx.repo.root, ctx.spec, lang)
        write_generated(path, text.encode(), root=ctx.repo.root, what="release notes")
        written.append(path)
    return done(", ".join(ctx.repo.rel(p) for p in written), written)


def record(ctx: ReleaseContext, record: records.ReleaseRecord) -> Outcome[None]:
    path = records.default_path(ctx.repo.root, ctx.spec.image, ctx.spec.version)
    records.keep(record, path, ctx.repo.root)
    return done(ctx.repo.rel(path), None)


# --- a dry run ---------------------------------------------------------------------------------


def preflight(ctx: ReleaseContext, connect: Callable[[], Engine]) -> Outcome[None]:
    """What the real run needs from the world (engine, base, files, endpoints, credentials),
    checked read-only; fails as the real run would."""
    checks = preflight_checks(
        ctx.spec, ctx.inputs.lock, ctx.registries, ctx.pool.credentials, connect=connect
    )
    for c in checks:
        ctx.on_line(f"    {c.line()}")
    error = verdict(checks)
    if error is not None:
        raise error
    return done(f"{len(checks)} checks passed", None)


def planned(ctx: ReleaseContext, engine: Engine) -> list[tuple[str, str]]:
    """What each stage after the lock would do, as a dry run says it."""
    spec, repo = ctx.spec, ctx.repo
    plan = ctx.pool.plan
    moving = ctx.options.line.planned(ctx.pool) if ctx.options.line is not None else Planned(moves=())
    moved = moving.moves
    stay = ", ".join(t for t in floating_tags(spec) if t not in moved)
    floating = f"; then {', '.join(moved)}" if moved else ""
    floating += f"; {stay} stay (a newer release holds them)" if stay else ""
    if moving.unasked:
        floating += f" (by the manifests alone: the withdrawals could not be asked: {moving.unasked})"
    builds = [(c.inputs.platform, _plan_of_build(c, engine)) for c in ctx.per_platform()]
    build_plan = "; ".join(f"{p}: {b}" for p, b in builds) if ctx.each else builds[0][1]
    index = f"one image index of {', '.join(p.name for p in spec.platforms)} at " if ctx.each else ""
    return [
        ("build", build_plan),
        ("test", "would run the smoke checks in a throwaway container"),
        ("evaluate", _plan_of_evaluation(ctx)),
        ("scan", plan_of_gate(ctx.gate)),
        ("publish", index + "; ".join(t.version_ref for t in plan.targets) + floating),
        ("verify", f"would check {len(plan.targets) * (1 + len(moved))} refs"),
        ("notes", ", ".join(repo.rel(notes_path(repo.root, spec, lang)) for lang in LANGUAGES)),
        ("record", repo.rel(records.default_path(repo.root, spec.image, spec.version))),
    ]


def _plan_of_build(ctx: ReleaseContext, engine: Engine) -> str:
    """Up to date (the engine holds an image of these inputs at the platform's tag), or would build."""
    inputs = ctx.inputs.digest
    try:
        existing = engine.image(ctx.inputs.ref)
    except ReleaseError:
        existing = None
    if existing is not None and existing.labels.get(INPUTS_LABEL) == inputs:
        return f"up to date ({existing.id[:19]})"
    return f"would build (inputs {inputs[:12]})"


def _plan_of_evaluation(ctx: ReleaseContext) -> str:
    ev = ctx.spec.evaluation
    if ctx.no_evaluate is not None:
        return f"would skip: --no-evaluate: {ctx.no_evaluate}"
    if ev is None:
        return "the manifest declares no evaluation"
    rounds = f"{ev.warmup_rounds}+{ev.rounds} rounds within {ev.budget_seconds} s"
    against = ", ".join(ev.against)
    return f"would run `{' '.join(ev.command)}`, {1 + len(ev.variants)} variants, against {against}: {rounds}"
