"""Found by the adversary (#39): patch numbering on a line whose version is not all numbers.

docs/using/watching.md: "Versions sort so that a patch comes after the release it patches and
before the next regular version, for YY.MM and SemVer lines alike". ``version_key`` sorts a
version that is not all numbers as text, so on a line such as ``25.03-py3`` (NGC's naming) or
``2.14.0-rc.1`` (SemVer), the tenth patch sorts *before* the ninth:

- ``watch`` calls ``25.03-py3.10`` "superseded by 25.03-py3.9" (it is the newer, and it is not
  checked), and ``25.03-py3.9`` is checked instead;
- a release of ``25.03-py3.10`` moves neither ``latest`` nor ``25.03-py3-latest`` (``plan``:
  "stay where they are: 25.03-py3.9 is newer"): a user who follows the line never gets the
  tenth patch's fix, and releasing ``.9`` again would move the tags back to it."""

from __future__ import annotations

import json
import shutil

import pytest

from xpu_release.manifest import Repo
from xpu_release.manifest.lines import newest_of_line, next_patch

from ..helpers import run
from ..release.published_kit import CPU, TRAINING, World, sbom

LINE = "25.03-py3"


def line_with_ten_patches(w: World) -> None:
    text = (
        (w.root / "manifests" / CPU / "25.03.yaml")
        .read_text()
        .replace('version: "25.03"', f'version: "{LINE}"')
    )
    (w.root / "manifests" / CPU / f"{LINE}.yaml").write_text(text)
    shutil.copytree(w.root / "images" / CPU / "25.03", w.root / "images" / CPU / LINE)
    for n in range(1, 11):
        w.patch_manifest(CPU, f"{LINE}.{n}", LINE if n == 1 else f"{LINE}.{n - 1}")


@pytest.mark.timeout(60)
def test_the_tenth_patch_of_a_line_that_is_not_all_numbers_comes_after_the_ninth(published: World) -> None:
    line_with_ten_patches(published)
    repo = Repo(published.root)

    assert run(published.root, "validate").exit_code == 0
    assert next_patch(repo, repo.load(CPU, LINE)) == f"{LINE}.11"
    assert repo.versions(CPU)[-1] == f"{LINE}.10"  # today: .9
    assert newest_of_line(repo, repo.load(CPU, f"{LINE}.10"))  # today: False (.9 is "newer")
    assert not newest_of_line(repo, repo.load(CPU, f"{LINE}.9"))


@pytest.mark.timeout(60)
def test_a_release_of_the_tenth_patch_moves_the_lines_tag(published: World) -> None:
    line_with_ten_patches(published)

    result = run(
        published.root, "--registries", str(published.registries), "plan", f"{CPU}:{LINE}.10", "--json"
    )

    assert result.exit_code == 0, result.output
    # today: [] ("latest, 25.03-py3-latest stay where they are: training-cpu-pytorch:25.03-py3.9 is newer")
    assert f"{LINE}-latest" in json.loads(result.stdout)["moves"]


@pytest.mark.timeout(60)
def test_watch_checks_the_tenth_patch_not_the_ninth(published: World) -> None:
    line_with_ten_patches(published)
    published.publish(CPU, f"{LINE}.9", sbom(*TRAINING), salt="9")
    published.publish(CPU, f"{LINE}.10", sbom(*TRAINING), salt="10")

    result = run(published.root, "--registries", str(published.registries), "watch", f"{CPU}:{LINE}.9",
                 f"{CPU}:{LINE}.10", "--advisories", str(published.osv), "--json")  # fmt: skip

    found = {r["ref"]: r for r in json.loads(result.stdout)["releases"]}
    # today: .10 "superseded by .9", and .9 "up to date"
    assert found[f"{CPU}:{LINE}.10"]["state"] == "up to date"
    assert found[f"{CPU}:{LINE}.9"]["state"] == "superseded"
    assert found[f"{CPU}:{LINE}.9"]["superseded_by"] == f"{CPU}:{LINE}.10"
