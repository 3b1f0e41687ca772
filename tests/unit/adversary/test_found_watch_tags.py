"""Found by the adversary (#39): a line's floating tag that is another release's version tag.

The line's tag of ``25.03`` is ``25.03-latest``; a version may be named ``25.03-latest`` too
(``validate``: "4 manifests valid"). Then ``plan training-cpu-pytorch:25.03`` moves
``25.03-latest``: the version tag of the release ``25.03-latest``, which "never moves". The two
names must not meet: ``validate`` names the version that is a line's tag (or a line's tag that
is a version is not moved)."""

from __future__ import annotations

import json
import shutil

import pytest

from ..helpers import run
from ..release.published_kit import CPU, World


@pytest.mark.timeout(60)
def test_a_lines_tag_never_moves_a_version_tag(published: World) -> None:
    text = (published.root / "manifests" / CPU / "25.03.yaml").read_text()
    named = text.replace('version: "25.03"', 'version: "25.03-latest"')
    (published.root / "manifests" / CPU / "25.03-latest.yaml").write_text(named)
    shutil.copytree(
        published.root / "images" / CPU / "25.03", published.root / "images" / CPU / "25.03-latest"
    )

    validated = run(published.root, "validate")
    planned = run(published.root, "--registries", str(published.registries), "plan", f"{CPU}:25.03", "--json")

    moves = json.loads(planned.stdout)["moves"] if planned.exit_code == 0 else []
    # today: validate exit 0 and the plan of 25.03 moves "25.03-latest", a version tag
    assert validated.exit_code != 0 or "25.03-latest" not in moves, (validated.output, moves)
