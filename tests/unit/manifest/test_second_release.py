"""The second release: what `new-version` writes tells the truth about the version it is.

A child manifest inherits what it does not say; anything that names the version follows the
version, a moved pin is shown as the new pin, an artifact never keeps another file's checksum,
and prose that held for the parent only is not carried along unnoticed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ..helpers import run, write_manifest

XPU = "training-xpu-pytorch"
CPU = "training-cpu-pytorch"


def bump(repo: Path, *sets: str, version: str = "25.04", parent: str = "25.03") -> None:
    args = [a for s in sets for a in ("--set", s)]
    result = run(repo, "new-version", f"{XPU}:{version}", "--from", parent, *args)
    assert result.exit_code == 0, result.stderr


def notes(repo: Path, version: str, lang: str) -> str:
    result = run(repo, "notes", f"{XPU}:{version}", "--lang", lang)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


# --- the bump itself ---------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_new_release_notes_are_titled_with_the_new_version(repo: Path, lang: str) -> None:
    bump(repo, "vllm=0.8.0", "ray=2.44.0")

    text = notes(repo, "25.04", lang)

    assert text.startswith(f"# {XPU} 25.04\n")
    assert "25.03" not in text.split("\n")[0]


def test_a_title_the_child_writes_itself_is_kept(repo: Path) -> None:
    write_manifest(
        repo,
        XPU,
        "25.04",
        f'image: {XPU}\nversion: "25.04"\nextends: "25.03"\n'
        "title: {en: April special, zh: 四月特别版}\ncomponents:\n  vllm: {version: 0.8.0}\n",
    )

    assert notes(repo, "25.04", "en").startswith("# April special\n")


def test_a_bumped_component_is_shown_with_its_new_pin_not_the_inherited_noted_as(repo: Path) -> None:
    bump(repo, "ray=2.44.0")

    text = notes(repo, "25.04", "en")
    diff = run(repo, "diff", f"{XPU}:25.03", f"{XPU}:25.04")

    assert "ray 2.44.0" in text  # Contents
    assert "ray 2.43<" not in text
    assert "ray 2.43 |" not in text
    assert "~ ray 2.43 → 2.44.0" in diff.stdout
    assert "2.43 → 2.43" not in diff.stdout


def test_an_unbumped_component_keeps_its_noted_as(repo: Path) -> None:
    bump(repo, "vllm=0.8.0")

    assert "ray 2.43<br>" in notes(repo, "25.04", "en")


def test_an_artifact_bump_through_set_is_refused_with_the_fix(repo: Path) -> None:
    result = run(repo, "new-version", f"{XPU}:25.04", "--from", "25.03", "--set", "accl-p=v1.5.0")

    assert result.exit_code == 3
    assert "accl-p is an artifact" in result.stderr
    assert "url and" in result.stderr
    assert "sha256" in result.stderr
    assert not (repo / "manifests" / XPU / "25.04.yaml").exists()


def test_an_artifact_version_moved_by_hand_without_its_url_and_sha256_fails_validate(repo: Path) -> None:
    write_manifest(
        repo,
        XPU,
        "25.04",
        f'image: {XPU}\nversion: "25.04"\nextends: "25.03"\ncomponents:\n  accl-p:\n    version: v1.5.0\n',
    )

    result = run(repo, "validate")

    assert result.exit_code == 2
    assert f"manifests/{XPU}/25.04.yaml:6:14: components.accl-p.version:" in result.stderr
    assert "inherits the url and sha256 of v1.4.3-8" in result.stderr


def test_an_artifact_with_a_new_url_needs_its_own_sha256(repo: Path) -> None:
    write_manifest(
        repo,
        XPU,
        "25.04",
        f'image: {XPU}\nversion: "25.04"\nextends: "25.03"\ncomponents:\n  accl-p:\n'
        "    version: v1.5.0\n    url: https://artifacts.registry.invalid/accl-p/v1.5.0/accl-p.tar.gz\n",
    )

    result = run(repo, "validate")

    assert result.exit_code == 2
    assert "components.accl-p.url: a new url for accl-p needs its own sha256" in result.stderr


def test_an_artifact_bump_with_url_and_sha256_is_valid(repo: Path) -> None:
    write_manifest(
        repo,
        XPU,
        "25.04",
        f'image: {XPU}\nversion: "25.04"\nextends: "25.03"\ncomponents:\n  accl-p:\n'
        "    version: v1.5.0\n    url: https://artifacts.registry.invalid/accl-p/v1.5.0/accl-p.tar.gz\n"
        "    sha256: null\n",
    )

    assert run(repo, "validate").exit_code == 0


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["vllm=0.7.3"], "already pins vllm 0.7.3; this --set changes nothing"),
        (["vllm=0.8.0", "vllm=0.8.1"], "vllm is set twice"),
        (["vlm=0.8.0"], "has no component 'vlm'; did you mean 'vllm'?"),
        (["ppu-sdk=1.5.0"], "change base.tag"),
    ],
)
def test_a_set_that_is_a_mistake_is_refused(repo: Path, sets: list[str], message: str) -> None:
    args = [a for s in sets for a in ("--set", s)]

    result = run(repo, "new-version", f"{XPU}:25.04", "--from", "25.03", *args)

    assert result.exit_code == 3
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_a_release_with_nothing_changed_says_none_under_main_features_and_validate_notices(
    repo: Path,
) -> None:
    bump(repo)

    text = notes(repo, "25.04", "en")
    result = run(repo, "validate")

    features = text.split("### Main Features\n", 1)[1].split("###", 1)[0]
    assert features.strip() == "- (none)"
    assert result.exit_code == 0
    assert "25.04 changes no pin and has no release.highlights" in result.stderr


# --- prose that belongs to one release ------------------------------------------------------


def test_a_known_issue_scoped_to_a_version_leaves_the_notes_of_later_releases(repo: Path) -> None:
    bump(repo, "vllm=0.8.0")

    assert "max-num-batched-tokens" in notes(repo, "25.03", "en")
    assert "max-num-batched-tokens" not in notes(repo, "25.04", "en")
    assert "max-num-batched-tokens" not in notes(repo, "25.04", "zh")
    diff = run(repo, "diff", f"{XPU}:25.03", f"{XPU}:25.04").stdout
    assert "known_issues - vLLM 0.7.3 needs --max-num-batched-tokens" in diff


def test_a_scoped_known_issue_stays_while_its_range_holds(repo: Path) -> None:
    bump(repo, "ray=2.44.0")

    assert "max-num-batched-tokens" in notes(repo, "25.04", "en")


def test_validate_notices_inherited_prose_that_names_a_version_the_release_no_longer_has(
    repo: Path,
) -> None:
    manifest = repo / "manifests" / XPU / "25.03.yaml"
    unscoped = re.sub(r'  - applies: \{vllm: "==0.7.3"\}.*\n    title:', "  - title:", manifest.read_text())
    manifest.write_text(unscoped)
    bump(repo, "vllm=0.8.0")

    result = run(repo, "validate")

    assert result.exit_code == 0
    assert (
        "'vLLM 0.7.3 needs --max-num-batched-tokens', inherited by 25.04, names vllm 0.7.3, "
        "but 25.04 has 0.8.0" in result.stderr
    )
    assert f"manifests/{XPU}/25.03.yaml:" in result.stderr  # where the prose is written
    assert "notices to check" in result.stderr


def test_prose_marked_only_in_a_release_is_not_inherited_and_the_child_is_told(repo: Path) -> None:
    edit(
        repo / "manifests" / XPU / "25.03.yaml",
        "  - title:\n      en: End-to-end performance evaluation",
        '  - only_in: "25.03"\n    title:\n      en: End-to-end performance evaluation',
    )
    bump(repo, "vllm=0.8.0")

    result = run(repo, "validate")

    assert "End-to-end performance evaluation" in notes(repo, "25.03", "en")
    assert "End-to-end performance evaluation" not in notes(repo, "25.04", "en")
    assert "'End-to-end performance evaluation' holds for 25.03 only; 25.04 does not inherit it" in (
        result.stderr
    )


def test_inherited_prose_naming_the_parent_release_is_noticed(repo: Path) -> None:
    edit(
        repo / "manifests" / XPU / "25.03.yaml",
        "With the cloud-native AI benchmarking tool CNP",
        "The tests below are based on 25.03. With the cloud-native AI benchmarking tool CNP",
    )
    bump(repo, "vllm=0.8.0")

    result = run(repo, "validate")

    assert "names release 25.03: mark it only_in: '25.03'" in result.stderr


def test_a_bad_version_range_is_located(repo: Path) -> None:
    edit(repo / "manifests" / XPU / "25.03.yaml", '{vllm: "==0.7.3"}', '{vllm: "0.7.3 or so"}')

    result = run(repo, "validate")

    assert result.exit_code == 2
    lines = (repo / "manifests" / XPU / "25.03.yaml").read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "0.7.3 or so" in text)
    assert f"manifests/{XPU}/25.03.yaml:{line}:21: known_issues[2].applies.vllm:" in result.stderr


def test_diff_shows_prose_added_reworded_and_removed(repo: Path) -> None:
    write_manifest(
        repo,
        CPU,
        "25.04",
        f'image: {CPU}\nversion: "25.04"\nextends: "25.03"\ncomponents:\n  accelerate: {{version: 1.6.0}}\n'
        "usage_advice:\n  - {en: Use it for CPU work., zh: 用于CPU。}\n"
        "release:\n  bug_fixes:\n    - {en: Fixed the thing., zh: 修复了问题。}\n",
    )

    result = run(repo, "diff", f"{CPU}:25.03", f"{CPU}:25.04", "--json")

    kinds = {(c["section"], c["kind"], c["id"]) for c in json.loads(result.stdout)}
    assert ("components", "upgraded", "accelerate") in kinds
    assert ("usage_advice", "added", "Use it for CPU work.") in kinds
    assert (
        "usage_advice",
        "removed",
        next(k[2] for k in kinds if k[:2] == ("usage_advice", "removed")),
    ) in kinds
    assert ("bug_fixes", "added", "Fixed the thing.") in kinds
