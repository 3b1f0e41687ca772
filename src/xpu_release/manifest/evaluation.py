"""The manifest's ``evaluation:`` section: the end-to-end performance evaluation a release runs
after its smoke test (the seed's "E2E性能收益评估"), declared once: its format (``EVALUATION``),
its cross-key rules (``RULES``, run by ``rules.check``) and its value (``EvaluationSpec``).

The workload is a command run in throwaway containers of the image, never a Dockerfile
instruction: only ``carry`` reaches the Dockerfile, and it is one of a fixed list of names. Every
other value is a constrained token all the same (an argument, a variable's name and value).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .tokens import ENV_NAME, SAFE_VALUE
from .types import Checker, Enum, Int, List, Map, Nullable, Obj, Str, Text

PLAIN = "plain"  # the workload with no variant's environment: what a variant is named by in `accepted`
AGAINST = ("base", "previous")  # the image's base; the release this one extends
# Measured rounds: the fewest whose 95 % interval (a paired percentile bootstrap of a ratio of
# medians) holds the true ratio about as often as it says (simulated: ~75 % at 3 rounds, ~87 %
# at 4, ~93 % at 5 and more), and the most one evaluation may take.
MIN_ROUNDS, MAX_ROUNDS = 5, 50
# Rounds are added, look after look, while a gated comparison is undecided, up to ``max_rounds``
# (default: this many, or ``rounds`` if more); what an undecided one does at the end, ``undecided``.
DEFAULT_MAX_ROUNDS = 20
DEFAULTS = {"against": AGAINST, "threshold_percent": 10, "rounds": 5, "warmup_rounds": 1,
            "budget_seconds": 600, "cpus": 2, "memory_mb": 2048, "undecided": "pass"}  # fmt: skip

ARGUMENT = Str(
    pattern=r"[A-Za-z0-9_./:=+,@%\-]+",
    what="a command argument",
    hint="one token of letters, digits and _ . / : = + , @ % - ; no spaces, quotes or $",
    max_len=200,
)
VARIANT_NAME = Str(
    pattern=r"\+[A-Za-z0-9._+\-]{1,39}",
    what="a variant name",
    hint="as the seed writes them: '+' then letters, digits and . _ + - (e.g. +CompilerOpt+CkptOpt)",
    max_len=40,
)
VARIANT = Obj(
    fields={
        "name": VARIANT_NAME,
        "env": Map(value=SAFE_VALUE, key=ENV_NAME, description="The variables that switch it on."),
        "against": List(
            item=Enum(choices=AGAINST),
            unique=True,
            description="The images this variant is compared with, of those the evaluation's `against` "
            "names (default: all of them; a role the evaluation does not name is not compared; [] "
            "compares it only with the plain workload in this image). An image it is not compared "
            "with does not run it.",
        ),
    },
    required=("name", "env"),
    description="The workload with one optimisation switched on by its environment.",
)
ACCEPTED = Obj(
    fields={
        "variant": Str(pattern=rf"{PLAIN}|{VARIANT_NAME.pattern}", what="'plain' or a variant name"),
        "against": Enum(choices=AGAINST),
        "reason": Text(max_len=300, description="Why the release accepts it; said in the notes."),
    },
    required=("variant", "against", "reason"),
    description="A regression this release knowingly accepts (held for this release only).",
)
EVALUATION = Nullable(
    inner=Obj(
        fields={
            "carry": Enum(
                choices=("xpu-bench",),
                description="A workload of xpu-release's the image carries: xpu-bench (the CPU "
                "family's stand-in for ljperf), installed as /usr/local/bin/xpu-bench.",
            ),
            "command": List(
                item=ARGUMENT,
                max_items=32,
                description="The workload's command in the image (no shell); it prints "
                "its figures as one JSON object on its last line of stdout.",
            ),
            "metric": Str(
                pattern=r"[a-z][a-z0-9_]{0,63}",
                what="a metric name",
                description="The figure of the workload's JSON line that is compared.",
            ),
            "better": Enum(choices=("higher", "lower"), description="Which way the metric improves."),
            "threshold_percent": Int(
                minimum=1,
                maximum=90,
                description="A regression is worse by more than this, over its whole interval (default 10).",
            ),
            "against": List(
                item=Enum(choices=AGAINST),
                unique=True,
                description="Compared with: the base image, the release this one extends (default both).",
            ),
            "variants": List(item=VARIANT, max_items=8, description="Each optimisation, switched on alone."),
            "rounds": Int(
                minimum=MIN_ROUNDS,
                maximum=MAX_ROUNDS,
                description="Measured rounds before the first look at the comparisons, 5 to 50 (default 5).",
            ),
            "max_rounds": Int(
                minimum=MIN_ROUNDS,
                maximum=MAX_ROUNDS,
                description="Rounds the evaluation may go on to, look after look, while a gated comparison "
                "is undecided and the budget allows (default 20, at least `rounds`).",
            ),
            "undecided": Enum(
                choices=("pass", "fail"),
                description="What a gated comparison still undecided at the end does: `pass` (said in bold "
                "in the notes and the record) or `fail` (stops the release, exit 17). Default: pass.",
            ),
            "warmup_rounds": Int(
                minimum=0, maximum=5, description="Rounds run first, not measured (default 1)."
            ),
            "budget_seconds": Int(
                minimum=10, maximum=7200, description="The stage's time budget (default 600)."
            ),
            "cpus": Int(minimum=1, maximum=256, description="CPUs of each container (a CPU set; default 2)."),
            "memory_mb": Int(
                minimum=256, maximum=1 << 20, description="Memory of each container (default 2048)."
            ),
            "accepted": List(item=ACCEPTED, max_items=20, description="Regressions this release accepts."),
        },
        required=("command", "metric", "better"),
    ),
    description="The end-to-end performance evaluation after the smoke test (null: none).",
)


@dataclass(frozen=True, kw_only=True)
class Variant:
    name: str
    env: tuple[tuple[str, str], ...] = ()
    against: tuple[str, ...] | None = None  # None: the evaluation's ``against``


@dataclass(frozen=True, kw_only=True)
class Accepted:
    variant: str
    against: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class EvaluationSpec:
    """What ``evaluation:`` declares, with its defaults."""

    carry: str | None
    command: tuple[str, ...]
    metric: str
    better: str  # "higher" or "lower"
    threshold_percent: int
    against: tuple[str, ...]
    variants: tuple[Variant, ...]  # the declared ones; the plain workload is always run too
    rounds: int  # before the first look
    max_rounds: int  # the most, look after look
    undecided: str  # "pass" or "fail": what a gated comparison undecided at the end does
    warmup_rounds: int
    budget_seconds: int
    cpus: int
    memory_mb: int
    accepted: tuple[Accepted, ...]

    @property
    def threshold(self) -> float:
        return self.threshold_percent / 100

    def compares(self, variant: str, role: str) -> bool:
        """Whether ``variant`` (or the plain workload) is compared with the manifest's reference
        ``role``: one the evaluation names and the variant too (every one, unless it says). An
        image a person names (``evaluate --against``) is compared with every variant: see
        ``image.evaluation.Reference.asked``."""
        declared = next((v.against for v in self.variants if v.name == variant), None)
        return role in self.against and (declared is None or role in declared)

    def acceptance(self, variant: str, against: str) -> Accepted | None:
        return next((a for a in self.accepted if (a.variant, a.against) == (variant, against)), None)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvaluationSpec:
        get = {**DEFAULTS, **{k: v for k, v in d.items() if v is not None}}
        return cls(
            carry=d.get("carry"),
            command=tuple(d["command"]),
            metric=d["metric"],
            better=d["better"],
            threshold_percent=int(get["threshold_percent"]),
            against=tuple(get["against"]),
            variants=tuple(
                Variant(
                    name=v["name"],
                    env=tuple(v["env"].items()),
                    against=None if v.get("against") is None else tuple(v["against"]),
                )
                for v in d.get("variants") or ()
            ),
            rounds=int(get["rounds"]),
            max_rounds=int(d.get("max_rounds") or max(DEFAULT_MAX_ROUNDS, int(get["rounds"]))),
            undecided=str(get["undecided"]),
            warmup_rounds=int(get["warmup_rounds"]),
            budget_seconds=int(get["budget_seconds"]),
            cpus=int(get["cpus"]),
            memory_mb=int(get["memory_mb"]),
            accepted=tuple(
                Accepted(variant=a["variant"], against=a["against"], reason=a["reason"])
                for a in d.get("accepted") or ()
            ),
        )


# --- the rules (run by rules.check on a manifest whose shape passed) ----------------------------


def each_variant_is_named_once(data: dict[str, Any], c: Checker) -> None:
    seen: set[str] = set()
    for i, variant in enumerate((data.get("evaluation") or {}).get("variants") or ()):
        if variant["name"] in seen:
            c.fail(("evaluation", "variants", i, "name"), f"{variant['name']!r} is named twice")
        seen.add(variant["name"])


def no_fewer_rounds_at_most_than_at_first(data: dict[str, Any], c: Checker) -> None:
    ev = data.get("evaluation") or {}
    first, most = ev.get("rounds") or DEFAULTS["rounds"], ev.get("max_rounds")
    if most is not None and most < first:
        c.fail(("evaluation", "max_rounds"), f"is {most}, fewer than rounds ({first}); give at least {first}")


def a_command_to_run(data: dict[str, Any], c: Checker) -> None:
    if (ev := data.get("evaluation")) is not None and not ev["command"]:
        c.fail(("evaluation", "command"), "is empty; give the workload's command, e.g. [xpu-bench]")


def an_accepted_regression_is_one_the_evaluation_can_find(data: dict[str, Any], c: Checker) -> None:
    """``accepted`` names a variant the evaluation runs and a comparison it makes."""
    ev = data.get("evaluation") or {}
    variants = {v["name"]: v for v in ev.get("variants") or ()}
    names = {PLAIN, *variants}
    # As EvaluationSpec reads it: absent or null is the default, an empty list compares with nothing.
    against = AGAINST if ev.get("against") is None else tuple(ev["against"])
    for i, entry in enumerate(ev.get("accepted") or ()):
        if entry["variant"] not in names:
            known = ", ".join(sorted(names))
            c.fail(
                ("evaluation", "accepted", i, "variant"),
                f"{entry['variant']!r} is no variant (have: {known})",
            )
        declared = (variants.get(entry["variant"]) or {}).get("against")
        if entry["against"] not in against:
            compared = ", ".join(against) or "none"
            said = f"the evaluation is not compared with {entry['against']} (against: {compared})"
            c.fail(("evaluation", "accepted", i, "against"), said)
        elif declared is not None and entry["against"] not in declared:
            compared = ", ".join(declared) or "none"
            said = f"the variant {entry['variant']} is not compared with {entry['against']}"
            said += f" (against: {compared})"
            c.fail(("evaluation", "accepted", i, "against"), said)
        elif entry["against"] == "previous" and not data.get("extends"):
            said = "this release extends no release: there is no previous release to compare with"
            c.fail(("evaluation", "accepted", i, "against"), said)


RULES = (
    each_variant_is_named_once,
    a_command_to_run,
    an_accepted_regression_is_one_the_evaluation_can_find,
    no_fewer_rounds_at_most_than_at_first,
)
