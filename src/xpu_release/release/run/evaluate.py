"""``evaluate``: the end-to-end performance evaluation of a built, smoke-tested image, a stage of
its own between ``test`` and ``scan`` (and the ``evaluate`` command alone).

This module finds what the image is compared with, as the manifest's ``evaluation.against``
says: its **base** (the digest the lock pins; pulled if the engine lacks it) and the **previous**
release, the one it ``extends:`` (by the image id its release record says was tested, else a
local image of that tag, else pulled by the digest its record says was published). A reference
that cannot be had, or that carries another build of the workload, is reported as not measured,
never silently dropped. Then it measures (``image/experiment.py``), compares
(``image/evaluation.py``) and says what stops the release.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from ...errors import NotFoundError, ReleaseError
from ...guard.limits import MAX_RECORD_BYTES
from ...guard.reading import Refused, read_json
from ...guard.shown import shown
from ...guard.writing import write_bytes
from ...image.baseimage import pinned_ref, pull_auth
from ...image.bounded import Containers, Limits
from ...image.engine import ImageInfo
from ...image.evaluation import NOT_COMPARED, THIS, Comparison, Reference, compare, decided, entry, method
from ...image.experiment import Arm, Measurement, Runner, measure
from ...image.lock import Lock
from ...image.served import Served
from ...image.workload import carried, serves
from ...labels import WORKLOAD_LABEL_PREFIX
from ...manifest import ImageSpec, Repo
from ...manifest.evaluation import PLAIN, EvaluationSpec
from ...manifest.registries import Registries
from ...oci.credentials import CredentialStore
from ...progress import Sink
from ...settings import cache_dir
from ..model import record as records
from ..model import recordschema


class EvalEngine(Protocol):
    """What the stage asks of the engine about images (``Engine``; a fake in the tests)."""

    def image(self, ref: str) -> ImageInfo | None: ...
    def pull(self, ref: str, auth: dict[str, str] | None = None) -> None: ...


@dataclass(frozen=True, kw_only=True)
class Evaluated:
    entry: dict[str, Any]  # the record's evaluation
    comparisons: tuple[Comparison, ...]
    detail: str  # the stage's line

    @property
    def stops(self) -> tuple[Comparison, ...]:
        return tuple(c for c in self.comparisons if c.stops)


def _pulled(engine: EvalEngine, ref: str, auth: dict[str, str] | None) -> ImageInfo | str:
    """The image at ``ref``, pulled if the engine lacks it; or why it cannot be had."""
    info = engine.image(ref)
    if info is not None:
        return info
    try:
        engine.pull(ref, auth)
    except ReleaseError as exc:
        return f"not in the engine, and pulling {ref} failed: {shown(exc.message.splitlines()[0], 200)}"
    return engine.image(ref) or f"pulling {ref} gave no image"


def _base(spec: ImageSpec, registries: Registries, lock: Lock, engine: EvalEngine,
          credentials: CredentialStore) -> Reference:  # fmt: skip
    ref = pinned_ref(spec, registries, lock)
    name = spec.base.release_ref or f"{spec.base.repository}:{spec.base.tag}"
    got = _pulled(engine, ref, pull_auth(spec, registries, credentials))
    if isinstance(got, str):
        return Reference(role="base", ref=name, missing=got)
    return Reference(role="base", ref=name, image_id=got.id)


def _previous(repo: Repo, spec: ImageSpec, engine: EvalEngine, credentials: CredentialStore) -> Reference:
    assert spec.extends is not None
    name = f"{spec.image}:{spec.extends}"
    try:
        rec = records.read_optional(records.default_path(repo.root, spec.image, spec.extends))
    except ReleaseError as exc:
        return Reference(role="previous", ref=name, missing=shown(exc.message.splitlines()[0], 200))
    if rec is not None and (info := engine.image(rec.tested_image_id)) is not None:
        return Reference(role="previous", ref=name, image_id=info.id)
    if (info := engine.image(name)) is not None:
        return Reference(role="previous", ref=f"{name} (local image)", image_id=info.id)
    served = next((e for e in (rec.endpoints if rec else ()) if e.digest), None)
    if served is None:
        why = "not in the engine, and no release record says where it is served"
        return Reference(role="previous", ref=name, missing=why)
    creds = credentials.for_host(served.host)
    where = f"{served.version_ref.rpartition(':')[0]}@{served.digest}"
    got = _pulled(engine, where, creds.docker_auth() if creds else None)
    if isinstance(got, str):
        return Reference(role="previous", ref=name, missing=got)
    return Reference(role="previous", ref=name, image_id=got.id)


def against_image(spec: ImageSpec, engine: EvalEngine, image_id: str, ref: str) -> Reference:
    """``--against REF``: an image the engine holds, instead of the manifest's references; named
    by its role when it is one (``named``), and compared only if it carries this image's very
    workload, as the manifest's references are."""
    info = engine.image(ref)
    if info is None:
        msg = f"--against {ref}: no such image in the engine; build or pull it first"
        raise NotFoundError(msg)
    return _same_workload(
        spec, engine, image_id, named(spec, Reference(role="against", ref=ref, image_id=info.id))
    )


def named(spec: ImageSpec, ref: Reference) -> Reference:
    """An image compared with by ``--against`` (role ``against``) that is this release's base or
    the release it extends, by name: given that role, so that the manifest's ``accepted`` (which
    names base and previous) holds for it as it does in ``release``; asked for all the same, so
    that every variant is compared with it, whatever the manifest compares with that role."""
    if ref.role != "against":
        return ref
    roles = {f"{spec.image}:{spec.extends}": "previous"} if spec.extends else {}
    roles[spec.base.release_ref or f"{spec.base.repository}:{spec.base.tag}"] = "base"
    return replace(ref, role=roles.get(ref.ref, ref.role), asked=True)


def _same_workload(spec: ImageSpec, engine: EvalEngine, image_id: str, ref: Reference) -> Reference:
    """``ref`` as measured only if it carries the very workload this image carries (by the
    label the build gives it): a workload that changed would not measure the images."""
    workload = carried(spec)
    if workload is None or ref.image_id is None:
        return ref
    label = f"{WORKLOAD_LABEL_PREFIX}{workload.name}"
    mine = ((engine.image(image_id) or _NONE).labels or {}).get(label)
    theirs = ((engine.image(ref.image_id) or _NONE).labels or {}).get(label)
    if theirs == mine:
        return ref
    said = f"carries another {workload.name} ({(theirs or 'none')[:19]}; this image {(mine or 'none')[:19]})"
    return replace(ref, image_id=None, missing=f"{said}: their figures are not comparable")


_NONE = ImageInfo(id="", tags=(), labels={}, size=0, repo_digests=(), env=())


def references(repo: Repo, spec: ImageSpec, registries: Registries, lock: Lock, engine: EvalEngine,
               credentials: CredentialStore, image_id: str) -> tuple[Reference, ...]:  # fmt: skip
    ev = spec.evaluation
    assert ev is not None
    found = []
    if "base" in ev.against:
        found.append(_base(spec, registries, lock, engine, credentials))
    if "previous" in ev.against and spec.extends:
        found.append(_previous(repo, spec, engine, credentials))
    return tuple(_same_workload(spec, engine, image_id, r) for r in found)


def limits_for(ev: EvaluationSpec, runner: Runner) -> Limits:
    cpus = max(1, min(ev.cpus, runner.cpu_count()))
    return Limits(cpuset="0" if cpus == 1 else f"0-{cpus - 1}", memory_mb=ev.memory_mb)


def evaluate_image(spec: ImageSpec, engine: Any, image_id: str, refs: tuple[Reference, ...], *,
                   on_line: Sink, runner: Runner | None = None) -> Evaluated | None:  # fmt: skip
    """Measure and compare in the engine's containers (``runner``: else ``bounded.Containers`` of
    the engine's client); None when there is nothing to compare (no reference, no variant)."""
    ev = spec.evaluation
    assert ev is not None
    refs = tuple(named(spec, r) for r in refs)
    variants = [(PLAIN, ()), *((v.name, v.env) for v in ev.variants)]
    measured_refs = [r for r in refs if r.image_id is not None and r.missing is None]
    if not measured_refs and not ev.variants:
        return None
    arms = [Arm(image=THIS, ref=spec.ref, image_id=image_id, variant=n, env=e) for n, e in variants]
    arms += [Arm(image=r.role, ref=r.ref, image_id=str(r.image_id), variant=n, env=e)
             for r in measured_refs for n, e in variants if r.compares(ev, n)]  # fmt: skip
    if runner is None:
        with runner_for(engine.client, ev) as made:
            return _measured(spec, image_id, refs, arms, made, on_line)
    return _measured(spec, image_id, refs, arms, runner, on_line)


def runner_for(client: Any, ev: EvaluationSpec) -> AbstractContextManager[Runner]:
    """The engine as ``ev``'s arms run in it: one container an arm (``Served``) when the command
    runs the carried workload, else one a run; every container gone when the block ends."""
    return Served(client) if serves(ev.carry, ev.command) else nullcontext(Containers(client))


def _measured(spec: ImageSpec, image_id: str, refs: tuple[Reference, ...], arms: list[Arm], runner: Runner,
              on_line: Sink) -> Evaluated:  # fmt: skip
    ev = spec.evaluation
    assert ev is not None
    limits = limits_for(ev, runner)
    on_line(f"evaluating {spec.ref}: {len(arms)} arms, {ev.warmup_rounds}+{ev.rounds} rounds (up to "
            f"{ev.max_rounds} until decided), CPU set {limits.cpuset}, {limits.memory_mb} MB, budget "
            f"{ev.budget_seconds} s")  # fmt: skip
    measured = measure(runner, arms, ev, limits, on_line=on_line, required=arms[0],
                       decided=lambda so_far: decided(compare(so_far, ev, refs)))  # fmt: skip
    comparisons = compare(measured, ev, refs)
    for c in comparisons:
        on_line(f"    {c.said(ev.metric, ev.threshold_percent)}")
    recorded = entry(measured, ev, refs, comparisons, this_ref=spec.ref, this_id=image_id)
    gated = [c for c in comparisons if c.judgement is not None and c.against != PLAIN]
    worst = min(gated, key=lambda c: _goodness(c, ev), default=None)
    detail = f"{len(gated)} comparisons in {measured.rounds} rounds ({measured.seconds:.0f} s)"
    if measured.starved:
        detail += f"; {len(measured.starved)} starved round(s) run again"
    open_ = [c for c in gated if c.undecided]
    if open_:
        detail += f"; {len(open_)} UNDECIDED ({_what_would_decide(open_, measured)})"
    if worst is not None and worst.judgement is not None:
        detail += f"; lowest {worst.variant} against {worst.against_ref}: {worst.judgement.ratio:.2f}x"
    accepted = sum(1 for c in comparisons if c.accepted)
    if accepted:
        detail += f"; {accepted} regression(s) accepted"
    if recorded["status"] == NOT_COMPARED:
        detail = f"NOT COMPARED: {recorded['reason']}; {detail}"
    return Evaluated(entry=recorded, comparisons=comparisons, detail=detail)


def _what_would_decide(undecided: list[Comparison], measured: Measurement) -> str:
    """The widest interval of ``undecided``, and the rounds (and seconds, at this run's pace)
    that would likely decide every one."""
    judged = [c.judgement for c in undecided if c.judgement is not None]
    widest = max(judged, key=lambda j: j.high - j.low)
    spread = f"widest interval [{widest.low:.2f}, {widest.high:.2f}]"
    needed = [j.rounds_needed for j in judged]
    if any(n is None for n in needed):
        return f"{spread}; more rounds than the manifest may take would be needed"
    most = max(n for n in needed if n is not None)
    # A measured round's pace (its runs' own seconds), and the start before the first measured
    # round once (the warm-up, and with served arms their import and compile).
    per_round = sum(statistics.fmean(a.seconds[measured.warmup_rounds :] or [0.0]) for a in measured.arms)
    start = max(measured.seconds - measured.rounds * per_round, 0.0)
    return f"{spread}; about {most} rounds, some {start + most * per_round:.0f} s of budget, would decide it"


def _goodness(c: Comparison, ev: EvaluationSpec) -> float:
    assert c.judgement is not None
    return c.judgement.ratio if ev.better == "higher" else 1 / c.judgement.ratio


def gate_failure(spec: ImageSpec, evaluated: Evaluated) -> str:
    """What a stopped release says: each regression, and how to accept one knowingly."""
    ev = spec.evaluation
    assert ev is not None
    lines = [f"the evaluation gate stops {spec.ref}: nothing is published"]
    for c in evaluated.stops:
        why = (f"beyond the threshold of {ev.threshold_percent} % over its whole interval" if c.regression
               else f"undecided, and {spec.manifest_path} says evaluation.undecided: fail (raise "
               "evaluation.budget_seconds or max_rounds to decide it)")  # fmt: skip
        lines.append(f"  {c.said(ev.metric, ev.threshold_percent)}; {why}")
    first = next((c for c in evaluated.stops if c.regression and acceptable(spec, c.against)), None)
    if first is not None:
        lines.append(
            f"  to accept it knowingly, add to {spec.manifest_path}: evaluation.accepted: "
            f"[{{variant: {first.variant}, against: {first.against}, reason: <why>}}]"
        )
    if any(c.regression and not acceptable(spec, c.against) for c in evaluated.stops):
        lines.append(
            f"  a regression against an image the manifest does not compare with (against: "
            f"{', '.join(ev.against) or 'none'}) cannot be accepted in it: evaluation.accepted names "
            "its base or the release it extends"
        )
    return "\n".join(lines)


def acceptable(spec: ImageSpec, role: str) -> bool:
    """``evaluation.accepted`` may name a comparison with ``role`` (validate's rule)."""
    ev = spec.evaluation
    assert ev is not None
    return role in ev.against and (role != "previous" or spec.extends is not None)


# --- measured before ------------------------------------------------------------------------------
#
# A rerun of a release (a CI retry, a publish that failed at one endpoint) evaluates the very same
# images with the very same evaluation: it takes what was measured then, kept in the cache by all
# of that, instead of measuring again (and the notes, rendered from it, stay the same).


def _key(spec: ImageSpec, image_id: str, refs: tuple[Reference, ...]) -> str:
    assert spec.evaluation is not None
    basis = {"evaluation": asdict(spec.evaluation), "image": image_id, "method": method(spec.evaluation),
             "references": [[r.role, r.ref, r.image_id, r.missing] for r in refs]}  # fmt: skip
    return hashlib.sha256(json.dumps(basis, sort_keys=True).encode()).hexdigest()


def measured_before(spec: ImageSpec, image_id: str, refs: tuple[Reference, ...]) -> dict[str, Any] | None:
    """The entry of a passed evaluation of these very images and evaluation (None: none kept).
    The cache is a file on a runner's disk: read bounded, and taken only with the shape the
    record checks (``recordschema.is_evaluation``); anything else is measured again."""
    path = _cached(spec, image_id, refs)
    try:
        data = read_json(path, what="a kept evaluation", limit=MAX_RECORD_BYTES, error=Refused)
    except Refused:
        return None  # none, or damaged: measured again
    ok = (
        recordschema.is_evaluation(data)
        and data.get("status") == "passed"
        and (data.get("images") or {}).get(THIS, {}).get("id") == image_id
    )
    return data if ok else None


def remember(spec: ImageSpec, image_id: str, refs: tuple[Reference, ...], entry: dict[str, Any]) -> None:
    write_bytes(_cached(spec, image_id, refs), json.dumps(entry, sort_keys=True).encode(), within=cache_dir(),
                what="evaluation")  # fmt: skip


def _cached(spec: ImageSpec, image_id: str, refs: tuple[Reference, ...]) -> Path:
    return cache_dir() / "evaluated" / f"{_key(spec, image_id, refs)}.json"
