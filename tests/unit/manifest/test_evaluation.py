"""The manifest's ``evaluation:`` (manifest/evaluation.py): validated with file:line like the
rest, its values constrained tokens (none becomes a Dockerfile instruction), its rules each
tested, its defaults stated once, and inherited through ``extends:`` except the regressions a
release accepts, which are its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpu_release.manifest import Repo

from ..helpers import MINIMAL, run, write_manifest

F = "manifests/demo/1.0.yaml"
EVALUATION = """\
evaluation:
  carry: xpu-bench
  command: [xpu-bench, --steps, "30"]
  metric: tokens_per_second
  better: higher
  variants:
    - name: +CkptOpt
      env: {CHECKPOINT_OPTIMIZATION: "true"}
"""


def validate(repo: Path, text: str) -> tuple[int, str]:
    write_manifest(repo, "demo", "1.0", text)
    result = run(repo, "validate", "demo:1.0")
    return result.exit_code, result.stderr


def test_a_declared_evaluation_is_valid_with_its_defaults(repo: Path) -> None:
    code, err = validate(repo, MINIMAL + EVALUATION)
    assert code == 0, err
    ev = Repo(repo).load("demo", "1.0").evaluation
    assert ev is not None
    assert ev.command == ("xpu-bench", "--steps", "30")
    assert (ev.against, ev.threshold, ev.rounds, ev.warmup_rounds) == (("base", "previous"), 0.1, 5, 1)
    assert (ev.budget_seconds, ev.cpus, ev.memory_mb) == (600, 2, 2048)
    assert [(v.name, v.env) for v in ev.variants] == [("+CkptOpt", (("CHECKPOINT_OPTIMIZATION", "true"),))]


# A variant is compared with the references both it and the evaluation name: (its `against`,
# the evaluation's, compared with base, with previous). A release that extends one and narrows the
# evaluation's `against` keeps the variants it inherits valid, each compared with what is left.
# (An image a person names with `evaluate --against` is compared with every variant:
# Reference.asked.)
NAMED = [
    ("[previous]", "[base, previous]", (False, True)),
    ("[base]", "[previous]", (False, False)),
    ("[]", "[base, previous]", (False, False)),
]


@pytest.mark.parametrize(
    ("variant", "evaluation", "compared"), NAMED, ids=[f"{v}-of-{e}" for v, e, _ in NAMED]
)
def test_a_variant_may_name_what_it_is_compared_with(
    repo: Path, variant: str, evaluation: str, compared: tuple[bool, bool]
) -> None:
    text = EVALUATION.replace('"true"}', f'"true"}}\n      against: {variant}\n  against: {evaluation}')
    code, err = validate(repo, MINIMAL + text)
    assert code == 0, err
    ev = Repo(repo).load("demo", "1.0").evaluation
    assert ev is not None
    assert (ev.compares("+CkptOpt", "base"), ev.compares("+CkptOpt", "previous")) == compared
    assert [ev.compares("plain", role) for role in ("base", "previous")] == [
        role in evaluation for role in ("base", "previous")
    ]


# (case, the evaluation's text replacing a line of EVALUATION, the located message)
ACCEPTS = "better: higher\n  accepted: [{variant: +Fast, against: base, reason: known}]"
NOT_COMPARED = (
    "better: higher\n  against: [base]\n  accepted: [{variant: plain, against: previous, reason: x}]"
)
MALFORMED = [
    ("shell-in-command", ('"30"]', '"30", "$(reboot)"]'),
     f"{F}:14:39: evaluation.command[3]: '$(reboot)' is not a command argument"),
    ("newline-in-command", ('"30"]', '"30\\nRUN rm -rf /"]'),
     "evaluation.command[2]: contains U+000A (LINE FEED); a line break or control character is never"),
    ("variant-name", ("+CkptOpt", "CkptOpt"),
     f"{F}:18:13: evaluation.variants[0].name: 'CkptOpt' is not a variant name"),
    ("env-quote", ('"true"', "'tr\"ue'"),
     "evaluation.variants[0].env.CHECKPOINT_OPTIMIZATION: 'tr\"ue' is not a safe value"),
    ("carry-unknown", ("carry: xpu-bench", "carry: ljperf"),
     f"{F}:13:10: evaluation.carry: string 'ljperf' is not one of xpu-bench"),
    ("better", ("better: higher", "better: faster"),
     "evaluation.better: string 'faster' is not one of higher, lower"),
    ("unknown-key", ("better: higher", "better: higher\n  treshold_percent: 5"),
     "unknown key 'treshold_percent'; did you mean 'threshold_percent'?"),
    ("threshold-range", ("better: higher", "better: higher\n  threshold_percent: 0"),
     "evaluation.threshold_percent: 0 is out of range: 1 to 90"),
    ("rounds-too-few", ("better: higher", "better: higher\n  rounds: 4"),
     "evaluation.rounds: 4 is out of range: 5 to 50"),
    ("empty-command", ('[xpu-bench, --steps, "30"]', "[]"),
     f"{F}:14:12: evaluation.command: is empty; give the workload's command"),
    ("variant-twice", ("  variants:\n", "  variants:\n    - {name: +CkptOpt, env: {}}\n"),
     "evaluation.variants[1].name: '+CkptOpt' is named twice"),
    ("accepted-unknown-variant", ("better: higher", ACCEPTS),
     "evaluation.accepted[0].variant: '+Fast' is no variant (have: +CkptOpt, plain)"),
    ("accepted-not-compared", ("better: higher", NOT_COMPARED),
     "evaluation.accepted[0].against: the evaluation is not compared with previous (against: base)"),
    ("variant-against-unknown", ('"true"}', '"true"}\n      against: [sdk]'),
     "evaluation.variants[0].against[0]: string 'sdk' is not one of base, previous"),
    ("accepted-variant-not-compared",
     ('"true"}', '"true"}\n      against: [previous]\n'
                 "  accepted: [{variant: +CkptOpt, against: base, reason: x}]"),
     "evaluation.accepted[0].against: the variant +CkptOpt is not compared with base (against: previous)"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "edit", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_evaluation_is_located_and_refused(
    repo: Path, case: str, edit: tuple[str, str], message: str
) -> None:
    assert edit[0] in EVALUATION, case
    code, err = validate(repo, MINIMAL + EVALUATION.replace(*edit))
    assert code == 2, err
    assert message in err
    assert "Traceback" not in err


def child(repo: Path, text: str) -> None:
    write_manifest(repo, "demo", "1.1", f'image: demo\nversion: "1.1"\nextends: "1.0"\n{text}')


ACCEPTING = (
    EVALUATION
    + "  accepted:\n    - {variant: plain, against: base, reason: 'the new SDK is slower, known'}\n"
)


def test_a_release_that_extends_inherits_the_evaluation_but_not_what_it_accepted(repo: Path) -> None:
    write_manifest(repo, "demo", "1.0", MINIMAL + ACCEPTING)
    child(repo, "components: {six: {version: 1.17.0}}\n")
    loaded = Repo(repo)
    parent, kid = loaded.load("demo", "1.0").evaluation, loaded.load("demo", "1.1").evaluation
    assert parent is not None
    assert kid is not None
    assert parent.acceptance("plain", "base") is not None
    assert kid.accepted == ()
    assert kid.variants == parent.variants
    assert kid.command == parent.command
    notices = [str(n) for n in loaded.notices("demo", "1.1")]
    assert any("1.1 does not inherit them" in n for n in notices), notices
    # The parent, resolved again, still accepts what it accepted.
    assert Repo(repo).load("demo", "1.0").evaluation == parent


def test_a_release_may_accept_its_own_and_change_what_it_inherits(repo: Path) -> None:
    write_manifest(repo, "demo", "1.0", MINIMAL + EVALUATION)
    accepts = "  accepted: [{variant: +CkptOpt, against: previous, reason: recompute costs time}]\n"
    child(repo, "components: {six: {version: 1.17.0}}\nevaluation:\n  rounds: 7\n" + accepts)
    kid = Repo(repo).load("demo", "1.1").evaluation
    assert kid is not None
    assert kid.rounds == 7
    assert kid.metric == "tokens_per_second"
    accepted = kid.acceptance("+CkptOpt", "previous")
    assert accepted is not None
    assert accepted.reason == "recompute costs time"


def test_a_release_may_drop_the_evaluation(repo: Path) -> None:
    write_manifest(repo, "demo", "1.0", MINIMAL + EVALUATION)
    child(repo, "components: {six: {version: 1.17.0}}\nevaluation: null\n")
    assert Repo(repo).load("demo", "1.1").evaluation is None


def test_only_the_carried_workload_reaches_the_dockerfile(repo: Path) -> None:
    write_manifest(repo, "demo", "1.0", MINIMAL + EVALUATION)
    result = run(repo, "render", "demo:1.0")
    assert result.exit_code == 0, result.stderr
    dockerfile = (repo / "images" / "demo" / "1.0" / "Dockerfile").read_text()
    assert "COPY workloads/xpu-bench /out/usr/local/bin/xpu-bench" in dockerfile
    assert "COPY --from=workload /out/ /" in dockerfile
    assert 'io.xpu-release.workload.xpu-bench="sha256:' in dockerfile
    assert "--steps" not in dockerfile
    assert "CHECKPOINT_OPTIMIZATION" not in dockerfile
