"""Found by review (issue 41): ``evaluation.accepted`` entries that name a comparison the
evaluation never makes pass ``validate``. The rule
(manifest/evaluation.py ``an_accepted_regression_is_one_the_evaluation_can_find``) reads an empty
``against: []`` as the default (both), while the evaluation it describes compares with nothing
(``EvaluationSpec.from_dict`` keeps the empty list); and it takes ``against: previous`` in a
release that extends none. An accepted regression that can never be found is a manifest mistake
the user must hear about with file:line, like a variant that does not exist (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..helpers import run

SDK = "manifests/pytorch-cpu-sdk/2.13.0.yaml"  # extends no release; against: [previous]
TRAINING = "manifests/training-cpu-pytorch/25.03.yaml"  # against: [base, previous]


@pytest.mark.parametrize(
    ("manifest", "change", "ref"),
    [
        (TRAINING, ("  against: [base, previous]\n", "  against: []\n  accepted:\n"
                    "    - {variant: plain, against: base, reason: slower on purpose}\n"),
         "training-cpu-pytorch:25.03"),
        (SDK, ("  against: [previous]\n", "  against: [previous]\n  accepted:\n"
               "    - {variant: plain, against: previous, reason: slower on purpose}\n"),
         "pytorch-cpu-sdk:2.13.0"),
    ],
    ids=["against-nothing", "previous-of-a-release-that-extends-none"],
)  # fmt: skip
def test_an_accepted_regression_the_evaluation_cannot_find_is_refused(
    repo: Path, manifest: str, change: tuple[str, str], ref: str
) -> None:
    path = repo / manifest
    text = path.read_text(encoding="utf-8")
    assert change[0] in text
    path.write_text(text.replace(change[0], change[1]), encoding="utf-8")
    got = run(repo, "validate", ref)
    assert got.exit_code == 2, got.output
    assert f"{manifest}:" in got.output
    assert "evaluation.accepted[0].against" in got.output
