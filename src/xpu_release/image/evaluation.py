"""What an evaluation found, from its measurements (``experiment.py``) and the manifest's
``evaluation:``: the comparisons, the gate's conclusion and the record's entry. Pure: the same
figures give the same comparisons, so the notes rendered from a record never change.

Two kinds of comparison, as the seed's notes have two tables:

- **like with like** (镜像对比基础镜像&迭代评估): each variant in this image against the same
  variant in each image it is compared with (its base, the release it extends). These are gated:
  a regression beyond the threshold over its whole interval stops the release, unless the
  manifest accepts it (``evaluation.accepted``, with a reason).
- **each optimisation's contribution** (核心组件E2E性能贡献分析): each variant against the plain
  workload in this image. Reported, never gated: an optimisation may trade speed for memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import EvaluationFailed
from ..manifest.evaluation import MAX_ROUNDS, PLAIN, EvaluationSpec
from .bootstrap import (
    CONFIDENCE,
    RESAMPLES,
    SEED,
    Better,
    Incomparable,
    Judgement,
    Verdict,
    judge,
    looks,
    median,
    per_look,
)
from .experiment import ArmRuns, Measurement
from .workload import serves

SERVED = "one container an arm, asked each round"  # the record's method.runs of a served workload

THIS = "this"
NOT_COMPARED = "not compared"  # measured, but no comparison with another image could be judged


def confidence_of(ev: EvaluationSpec) -> float:
    """The confidence of each look of ``ev``'s evaluation (``bootstrap.per_look``)."""
    return per_look(len(looks(ev.rounds, ev.max_rounds)))


def method(ev: EvaluationSpec) -> dict[str, Any]:
    """How the figures were compared, as the record says it."""
    return {"statistic": "median of the rounds' ratios", "interval": "paired percentile bootstrap",
            "confidence": round(confidence_of(ev), 6), "overall_confidence": CONFIDENCE,
            "looks": list(looks(ev.rounds, ev.max_rounds)), "resamples": RESAMPLES, "seed": SEED,
            "runs": SERVED if serves(ev.carry, ev.command) else "a container a run"}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Reference:
    """An image this one is compared with: ``role`` base or previous, ``ref`` as people name it;
    ``missing`` says why it was not measured (None: it was)."""

    role: str
    ref: str
    image_id: str | None = None
    missing: str | None = None
    asked: bool = False  # named by a person (``evaluate --against``): every variant is compared with it

    def compares(self, ev: EvaluationSpec, variant: str) -> bool:
        """Whether ``variant`` is compared with this image: every one when a person named it,
        else as the manifest says (``EvaluationSpec.compares``)."""
        return self.asked or ev.compares(variant, self.role)


@dataclass(frozen=True, kw_only=True)
class Comparison:
    variant: str
    against: str  # base, previous, or plain (a contribution: this variant against the plain workload)
    against_ref: str
    judgement: Judgement | None = None
    note: str | None = None  # why there is no judgement
    accepted: str | None = None  # the manifest's reason, for an accepted regression
    undecided_fails: bool = False  # the manifest's ``undecided: fail``, for a gated comparison

    @property
    def regression(self) -> bool:
        return self.judgement is not None and self.judgement.verdict == Verdict.REGRESSION

    @property
    def gated(self) -> bool:
        return self.against != PLAIN

    @property
    def undecided(self) -> bool:
        return self.judgement is not None and not self.judgement.verdict.decided

    @property
    def stops(self) -> bool:
        if not self.gated:
            return False
        return (self.regression and self.accepted is None) or (self.undecided and self.undecided_fails)

    def said(self, metric: str, threshold_percent: int) -> str:
        """One line: the variant, what it is compared with, the ratio and its interval."""
        head = f"{self.variant} against {self.against_ref}"
        j = self.judgement
        if j is None:
            return f"{head}: {self.note}"
        figure = f"{metric} {j.ratio:.2f}x [{j.low:.2f}, {j.high:.2f}]"
        line = f"{head}: {figure}, {WORDS[j.verdict]} ({j.rounds} rounds)"
        if j.verdict == Verdict.UNDECIDED:
            more = (
                f"about {j.rounds_needed} rounds would decide it"
                if j.rounds_needed
                else f"more rounds than the manifest takes (at most {MAX_ROUNDS}) would be needed to decide"
            )
            line += f": the interval straddles the {threshold_percent} % threshold; {more}"
        if self.accepted:
            line += f"; accepted: {self.accepted}"
        return line


WORDS = {  # each verdict as the stage's lines say it: "no regression shown" is not "within"
    Verdict.REGRESSION: "regression beyond the threshold",
    Verdict.UNDECIDED: "undecided",
    Verdict.WITHIN: "within the threshold both ways",
    Verdict.NO_REGRESSION: "no regression shown (it may be better)",
    Verdict.IMPROVEMENT: "improvement beyond the threshold",
}


def _judged(
    subject: ArmRuns | None, reference: ArmRuns | None, ev: EvaluationSpec, warmup: int
) -> Judgement | str:
    """The judgement of ``subject`` against ``reference``, or why there is none."""
    for arm, whose in ((subject, "this image"), (reference, "the image compared with")):
        if arm is None:
            return f"not run in {whose}"
        if arm.unsupported is not None:
            return f"cannot run in {arm.arm.ref}: {arm.unsupported}"
    assert subject is not None
    assert reference is not None
    mine, theirs = subject.figures(ev.metric, warmup), reference.figures(ev.metric, warmup)
    try:
        better: Better = "higher" if ev.better == "higher" else "lower"
        return judge(mine, theirs, better=better, threshold=ev.threshold, confidence=confidence_of(ev))
    except Incomparable as exc:  # the workload's figures, not a comparison: the evaluation fails
        msg = f"{subject.arm.label} against {reference.arm.label}: {ev.metric}: {exc}"
        raise EvaluationFailed(msg) from None


def compare(
    measured: Measurement, ev: EvaluationSpec, references: tuple[Reference, ...]
) -> tuple[Comparison, ...]:
    """Every comparison: like with like against each reference (gated), then each variant's
    contribution in this image (not gated)."""
    variants = [PLAIN, *(v.name for v in ev.variants)]
    out: list[Comparison] = []
    for ref in references:
        for name in (n for n in variants if ref.compares(ev, n)):
            if ref.missing is not None:
                out.append(Comparison(variant=name, against=ref.role, against_ref=ref.ref, note=ref.missing))
                continue
            got = _judged(measured.of(THIS, name), measured.of(ref.role, name), ev, measured.warmup_rounds)
            accepted = ev.acceptance(name, ref.role)
            if isinstance(got, str):
                out.append(Comparison(variant=name, against=ref.role, against_ref=ref.ref, note=got))
            else:
                reason = (
                    accepted.reason if accepted is not None and got.verdict == Verdict.REGRESSION else None
                )
                out.append(Comparison(variant=name, against=ref.role, against_ref=ref.ref, judgement=got,
                                      accepted=reason, undecided_fails=ev.undecided == "fail"))  # fmt: skip
    for name in variants[1:]:
        got = _judged(measured.of(THIS, name), measured.of(THIS, PLAIN), ev, measured.warmup_rounds)
        if isinstance(got, str):
            out.append(Comparison(variant=name, against=PLAIN, against_ref=PLAIN, note=got))
        else:
            out.append(Comparison(variant=name, against=PLAIN, against_ref=PLAIN, judgement=got))
    return tuple(out)


def decided(comparisons: tuple[Comparison, ...]) -> bool:
    """Whether every gated comparison that could be judged has the gate's answer: the
    sequential evaluation's question at each look."""
    return all(not c.undecided for c in comparisons if c.gated)


def entry(measured: Measurement, ev: EvaluationSpec, references: tuple[Reference, ...],
          comparisons: tuple[Comparison, ...], *, this_ref: str, this_id: str) -> dict[str, Any]:  # fmt: skip
    """The record's ``evaluation``: every round's figures of every arm, how they were measured
    and what they say; the notes are rendered from it alone."""
    images: dict[str, dict[str, str | None]] = {THIS: {"ref": this_ref, "id": this_id}}
    images.update({r.role: {"ref": r.ref, "id": r.image_id, "missing": r.missing} for r in references})
    status, reason = conclusion(comparisons)
    return {
        "status": status,
        "reason": reason,
        "metric": ev.metric,
        "better": ev.better,
        "threshold_percent": ev.threshold_percent,
        "command": list(ev.command),
        "method": method(ev),
        "rounds": measured.rounds,
        "looked": list(measured.looked),
        "starved": list(measured.starved),
        "undecided_policy": ev.undecided,
        "warmup_rounds": measured.warmup_rounds,
        "stopped_early": measured.stopped_early,
        "cpuset": measured.limits.cpuset,
        "memory_mb": measured.limits.memory_mb,
        "seconds": measured.seconds,
        "images": images,
        "arms": [_arm(a, ev.metric, measured.warmup_rounds) for a in measured.arms],
        "comparisons": [_comparison(c) for c in comparisons],
    }  # fmt: skip


def conclusion(comparisons: tuple[Comparison, ...]) -> tuple[str, str]:
    """The evaluation's status and why: failed (a regression stops it), passed, or not compared
    (no comparison with another image was judged: every image compared with was missing or
    carried another workload, or the manifest names none). Not compared stops nothing (the docs:
    an image that cannot be had is reported, never a failure), but is said as loudly as a
    failure: in the stage's line, the record and the notes."""
    stops = [c for c in comparisons if c.stops]
    undecided = [c for c in comparisons if c.gated and c.undecided]
    if stops:
        regressions = sum(1 for c in stops if c.regression)
        said = [f"{regressions} regression(s) beyond the threshold"] if regressions else []
        if len(stops) > regressions:
            said.append(f"{len(stops) - regressions} comparison(s) undecided (evaluation.undecided: fail)")
        return "failed", "; ".join(said)
    gated = [c for c in comparisons if c.gated]
    if not any(c.judgement is not None for c in gated):
        why = "; ".join(dict.fromkeys(f"{c.against_ref}: {c.note}" for c in gated)) or "it names no image"
        return NOT_COMPARED, f"compared with no other image ({why})"
    if undecided:
        return "passed", (f"no regression stops it, but {len(undecided)} comparison(s) are UNDECIDED: passed "
                          "by evaluation.undecided: pass, not shown to be free of a regression")  # fmt: skip
    return "passed", "no regression stops it"


def _arm(a: ArmRuns, metric: str, warmup: int) -> dict[str, Any]:
    figures = a.figures(metric, warmup)
    return {"image": a.arm.image, "ref": a.arm.ref, "variant": a.arm.variant, "env": dict(a.arm.env),
            "unsupported": a.unsupported, "workload_sha256": a.workload_sha256,
            "median": round(median(figures), 6) if figures else None,
            "warmup": [r[metric] for r in a.runs[:warmup]], "figures": list(figures),
            "runs": a.runs, "seconds": a.seconds}  # fmt: skip


def _comparison(c: Comparison) -> dict[str, Any]:
    j = c.judgement
    judged: dict[str, Any] = dict.fromkeys(("ratio", "low", "high", "verdict", "rounds", "rounds_needed"))
    if j is not None:
        judged = {
            "ratio": round(j.ratio, 6),
            "low": round(j.low, 6),
            "high": round(j.high, 6),
            "verdict": str(j.verdict),
            "rounds": j.rounds,
            "rounds_needed": j.rounds_needed,
        }
    return {"variant": c.variant, "against": c.against, "against_ref": c.against_ref, **judged,
            "note": c.note, "accepted": c.accepted}  # fmt: skip


# The entry's shape, as the record checks it on every read (release/model/record.py) and as a kept
# evaluation must have to be taken again (release/run/evaluate.py): every field the notes, ``diff``
# and a rerun read has its type.
_STR, _OPT_STR, _NUMBERS = (
    {"type": "string"},
    {"type": ["string", "null"]},
    {"type": "array", "items": {"type": "number"}},
)
_OPT_NUMBER = {"type": ["number", "null"]}
_COUNT = {"type": "integer", "minimum": 0}
MEASURED = ("passed", "failed", NOT_COMPARED)  # the statuses of an evaluation that measured
# What the notes and ``diff`` read of a measured evaluation: one edited down to its status is
# refused (exit 12), never rendered with holes.
READ_BY_THE_NOTES = ["metric", "better", "threshold_percent", "command", "method", "rounds", "warmup_rounds",
                     "cpuset", "memory_mb", "images", "arms", "comparisons"]  # fmt: skip
EVALUATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["status", "reason"],
    "if": {"properties": {"status": {"enum": list(MEASURED)}}},
    "then": {"required": READ_BY_THE_NOTES},
    "properties": {
        "status": {"enum": [*MEASURED, "skipped"]}, "reason": _STR, "metric": _STR,
        "better": {"enum": ["higher", "lower"]}, "threshold_percent": {"type": "integer"},
        "command": {"type": "array", "items": _STR}, "method": {"type": "object", "properties": {
            "confidence": {"type": "number", "exclusiveMinimum": 0, "maximum": 1}}},
        "rounds": _COUNT, "warmup_rounds": _COUNT, "cpuset": _STR, "memory_mb": _COUNT,
        "images": {"type": "object", "additionalProperties": {
            "type": "object", "properties": {"ref": _STR, "id": _OPT_STR, "missing": _OPT_STR}}},
        "arms": {"type": "array", "items": {
            "type": "object", "required": ["image", "ref", "variant", "figures"],
            "properties": {"image": _STR, "ref": _STR, "variant": _STR, "unsupported": _OPT_STR,
                           "figures": _NUMBERS, "warmup": _NUMBERS, "median": _OPT_NUMBER},
        }},
        "comparisons": {"type": "array", "items": {
            "type": "object",
            "required": ["variant", "against", "against_ref", "ratio", "low", "high", "verdict"],
            "properties": {"variant": _STR, "against": _STR, "against_ref": _STR, "ratio": _OPT_NUMBER,
                           "low": _OPT_NUMBER, "high": _OPT_NUMBER,
                           "verdict": {"enum": [None, *(str(v) for v in Verdict)]},
                           "rounds_needed": {"type": ["integer", "null"]}, "note": _OPT_STR,
                           "accepted": _OPT_STR},
        }},
    },
}  # fmt: skip


def skipped(reason: str) -> dict[str, Any]:
    """The record's entry of a release that skipped the stage (``--no-evaluate REASON``)."""
    return {"status": "skipped", "reason": reason}
