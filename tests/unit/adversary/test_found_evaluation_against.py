"""Found by review (issue 41): ``xpu-release evaluate REF --against REF`` (docs/using/evaluation.md
gives ``evaluate training-cpu-pytorch:25.04 --against training-cpu-pytorch:25.03``). Its
comparisons have the role ``against``, which ``evaluation.accepted`` cannot name (base or
previous only): a regression the manifest accepts against the very release it extends still
stops the command (exit 17), and the message tells the user to add
``{variant: plain, against: against, reason: <why>}``, which ``validate`` refuses."""

from __future__ import annotations

import re
from pathlib import Path

from xpu_release.image.evaluation import Reference
from xpu_release.manifest import Repo
from xpu_release.release.run.evaluate import Evaluated, evaluate_image, gate_failure

from ..helpers import run
from ..release.test_evaluate import IDS, REF, Fake, slower_release

PREVIOUS = Reference(role="against", ref=REF, image_id=IDS["previous"])


def against(repo: Path, ref: str) -> Evaluated:
    spec = Repo(repo).load_ref(ref)
    fake = Fake(speed={IDS["this"]: 550.0, IDS["previous"]: 1000.0})
    got = evaluate_image(spec, fake, IDS["this"], (PREVIOUS,), on_line=lambda _: None, runner=fake)
    assert got is not None
    return got


def test_the_entry_a_stopped_evaluation_suggests_is_one_the_manifest_accepts(repo: Path) -> None:
    ref = slower_release(repo, accepted=False)
    got = against(repo, ref)
    assert got.stops
    message = gate_failure(Repo(repo).load_ref(ref), got)
    suggested = re.search(r"evaluation\.accepted: (\[\{.*\}\])", message)
    assert suggested is not None, message
    entry = suggested.group(1).replace("<why>", "measured on purpose")
    path = repo / "manifests" / "training-cpu-pytorch" / "25.04.yaml"
    path.write_text(
        path.read_text(encoding="utf-8") + f"evaluation:\n  accepted: {entry}\n", encoding="utf-8"
    )
    validated = run(repo, "validate", ref)
    assert validated.exit_code == 0, f"suggested {entry}; validate says: {validated.output}"


def test_a_regression_accepted_against_the_release_it_extends_is_accepted_when_named_with_against(
    repo: Path,
) -> None:
    # 25.04 extends 25.03 and accepts its regression against it (previous): the same images,
    # the same comparison, named on the command line, must not stop where `release` publishes.
    ref = slower_release(repo, accepted=True)
    got = against(repo, ref)
    plain = next(c for c in got.comparisons if c.variant == "plain")
    assert plain.regression
    assert not plain.stops, plain.said("tokens_per_second", 10)
