"""``evaluate REF --against REF``: an image named on the command line is compared as the
manifest's references are. When it is this release's base or the release it extends it takes
that role (the manifest's ``accepted`` holds for it, and a stopped comparison suggests an entry
``validate`` takes); any other image is compared and gated, but its regression cannot be accepted
in the manifest, and the message says so instead of suggesting an entry validate refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpu_release.image.evaluation import Reference
from xpu_release.manifest import Repo
from xpu_release.release.run.evaluate import evaluate_image, gate_failure, named

from .test_evaluate import IDS, Fake, slower_release


@pytest.mark.parametrize(
    ("ref", "role"),
    [("training-cpu-pytorch:25.03", "previous"), ("pytorch-cpu-sdk:2.13.0", "base"),
     ("training-cpu-pytorch:25.02", "against")],
)  # fmt: skip
def test_an_image_named_on_the_command_line_takes_the_role_it_has(repo: Path, ref: str, role: str) -> None:
    spec = Repo(repo).load_ref(slower_release(repo, accepted=False))
    assert named(spec, Reference(role="against", ref=ref, image_id=IDS["previous"])).role == role


def test_a_regression_against_another_image_cannot_be_accepted_and_the_message_says_so(repo: Path) -> None:
    ref = slower_release(repo, accepted=True)
    spec = Repo(repo).load_ref(ref)
    other = Reference(role="against", ref="training-cpu-pytorch:25.02", image_id=IDS["previous"])
    fake = Fake(speed={IDS["this"]: 550.0, IDS["previous"]: 1000.0})
    got = evaluate_image(spec, fake, IDS["this"], (other,), on_line=lambda _: None, runner=fake)
    assert got is not None
    assert any(c.variant == "plain" for c in got.stops)  # accepted against previous, not this one
    message = gate_failure(spec, got)
    assert "against: against" not in message
    assert "cannot be accepted in it" in message
