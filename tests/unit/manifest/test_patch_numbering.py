"""Patch releases are numbered after the release they patch and before its next regular
version, for YY.MM and SemVer lines alike; a manifest that says it is a patch is held to it;
a line's floating tag is the line's version and ``-latest``; the SLA policy is inherited."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpu_release.manifest import Repo
from xpu_release.manifest.lines import (
    later_patch_tags,
    line_of,
    line_tag,
    line_versions,
    newest_of_line,
    next_patch,
)
from xpu_release.manifest.patchformat import numbering_problem, split_patch
from xpu_release.manifest.versions import version_key

from ..helpers import run, write_manifest

CPU = "training-cpu-pytorch"
SDK = "pytorch-cpu-sdk"
PATCH = "release:\n  patch:\n    fixes: []\n"


def patch_of(repo: Path, image: str, version: str, extends: str, extra: str = "") -> None:
    write_manifest(
        repo, image, version, f'image: {image}\nversion: "{version}"\nextends: "{extends}"\n{extra}{PATCH}'
    )


@pytest.mark.parametrize(
    "ordered",
    [
        ["25.03", "25.03.1", "25.03.2", "25.03.10", "25.04"],  # YY.MM: a patch sorts before the next month
        ["2.13.0", "2.13.0.1", "2.13.0.2", "2.13.1", "2.14.0"],  # SemVer: before the next patch version
        ["24.12", "24.12.1", "25.01"],
    ],
)
def test_a_patch_sorts_after_its_release_and_before_the_next_regular_version(ordered: list[str]) -> None:
    assert sorted(reversed(ordered), key=version_key) == ordered


def test_the_next_patch_of_a_release_is_its_version_and_one_more_number(repo: Path) -> None:
    r = Repo(repo)
    assert next_patch(r, r.load(CPU, "25.03")) == "25.03.1"
    assert next_patch(r, r.load(SDK, "2.13.0")) == "2.13.0.1"

    patch_of(repo, CPU, "25.03.1", "25.03")
    r = Repo(repo)

    assert next_patch(r, r.load(CPU, "25.03")) == "25.03.2"
    assert next_patch(r, r.load(CPU, "25.03.1")) == "25.03.2"  # a patch of a patch stays on the line
    assert line_of(r.load(CPU, "25.03.1")) == "25.03"
    assert line_versions(r, CPU, "25.03") == ["25.03", "25.03.1"]


def test_the_tags_that_name_a_later_patch_of_the_line_are_found_among_a_registrys(repo: Path) -> None:
    patch_of(repo, CPU, "25.03.1", "25.03")
    r = Repo(repo)
    tags = ("latest", "25.03", "25.03-latest", "25.03.1", "25.03.2", "25.03.10", "25.030", "25.04",
            "25.04.1", "sha256-" + "0" * 64 + ".sbom", "25.03.x")  # fmt: skip

    assert later_patch_tags(tags, r.load(CPU, "25.03")) == ["25.03.1", "25.03.2", "25.03.10"]
    assert later_patch_tags(tags, r.load(CPU, "25.03.1")) == ["25.03.2", "25.03.10"]
    assert later_patch_tags(tags, r.load(SDK, "2.13.0")) == []


def test_a_release_that_is_not_a_patch_is_a_line_of_its_own(repo: Path) -> None:
    write_manifest(repo, CPU, "25.03.1", f'image: {CPU}\nversion: "25.03.1"\nextends: "25.03"\n')
    r = Repo(repo)

    assert line_of(r.load(CPU, "25.03.1")) == "25.03.1"  # no release.patch: not a patch
    assert line_versions(r, CPU, "25.03") == ["25.03"]
    assert newest_of_line(r, r.load(CPU, "25.03"))
    assert next_patch(r, r.load(CPU, "25.03")) == "25.03.2"  # its file name is taken all the same


def test_the_line_tag_is_the_lines_version_and_latest(repo: Path) -> None:
    patch_of(repo, CPU, "25.03.1", "25.03")
    r = Repo(repo)

    assert line_tag(r.load(CPU, "25.03")) == "25.03-latest"
    assert line_tag(r.load(CPU, "25.03.1")) == "25.03-latest"
    assert not newest_of_line(r, r.load(CPU, "25.03"))
    assert newest_of_line(r, r.load(CPU, "25.03.1"))


@pytest.mark.parametrize(
    ("version", "extends", "problem"),
    [
        ("25.04", "25.03", "names no release of this image before its last number"),
        ("25.03.01", "25.03", "names no release"),
        ("26.01.1", "25.03", "names no release"),
        ("25.03.2", "25.03.3", "extends 25.03 or an earlier patch of it, not '25.03.3'"),
    ],
)
def test_a_manifest_that_says_it_is_a_patch_is_numbered_as_one(
    repo: Path, version: str, extends: str, problem: str
) -> None:
    patch_of(repo, CPU, "25.03.3", "25.03")
    patch_of(repo, CPU, version, extends)

    result = run(repo, "validate", f"{CPU}:{version}")

    assert result.exit_code == 2
    assert f"manifests/{CPU}/{version}.yaml" in result.stderr
    assert "release.patch: a patch" in result.stderr
    assert problem in result.stderr


def test_numbering_rules_read_without_a_repository() -> None:
    assert split_patch("25.03.2") == ("25.03", 2)
    assert split_patch("25.03.0") is None  # patch numbers start at 1, without a leading 0
    assert numbering_problem("25.03.2", "25.03.1", lambda v: v == "25.03") is None
    assert numbering_problem("25.03.2", "25.03.2", lambda v: v == "25.03") is not None
    assert numbering_problem("25.03.2", None, lambda v: v == "25.03") is not None


def test_the_sla_policy_defaults_to_aws_and_is_inherited_key_by_key(repo: Path) -> None:
    write_manifest(
        repo,
        CPU,
        "25.04",
        f'image: {CPU}\nversion: "25.04"\nextends: "25.03"\nsecurity: {{sla_days: {{high: 7, low: 90}}}}\n',
    )
    write_manifest(
        repo,
        CPU,
        "25.05",
        f'image: {CPU}\nversion: "25.05"\nextends: "25.04"\nsecurity: {{sla_days: {{low: null}}}}\n',
    )
    r = Repo(repo)

    assert dict(r.load(CPU, "25.03").sla_days) == {"critical": 14, "high": 28, "medium": 180, "low": None}
    assert dict(r.load(CPU, "25.04").sla_days) == {"critical": 14, "high": 7, "medium": 180, "low": 90}
    assert dict(r.load(CPU, "25.05").sla_days) == {"critical": 14, "high": 7, "medium": 180, "low": None}
