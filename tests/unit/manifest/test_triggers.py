"""What CI runs for: tags → NAME:VERSION, and the release matrix a change touches."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ..helpers import run, write_manifest
from ..image.kit import KIT


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.fixture
def gitrepo(repo: Path) -> Path:
    git(repo, "init", "-q", "-b", "main")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    git(repo, "tag", "base")
    return repo


@pytest.mark.parametrize(
    ("tag", "ref"),
    [
        ("training-xpu-pytorch/25.03", "training-xpu-pytorch:25.03"),
        ("training-xpu-pytorch-25.03", "training-xpu-pytorch:25.03"),
        ("refs/tags/training-cpu-pytorch/25.03", "training-cpu-pytorch:25.03"),
    ],
)
def test_from_tag_maps_both_spellings(repo: Path, tag: str, ref: str) -> None:
    result = run(repo, "from-tag", tag)

    assert result.exit_code == 0, result.stderr
    assert result.stdout == ref + "\n"


@pytest.mark.parametrize(
    ("tag", "code", "message"),
    [
        ("v1.0", 3, "is not NAME/VERSION or NAME-VERSION"),
        ("training-gpu-pytorch/25.03", 11, "has no manifests"),
        ("training-xpu-pytorch/25.09", 11, "no manifest manifests/training-xpu-pytorch/25.09.yaml"),
    ],
)
def test_from_tag_fails_clearly(repo: Path, tag: str, code: int, message: str) -> None:
    result = run(repo, "from-tag", tag)

    assert result.exit_code == code
    assert message in result.stderr


def test_from_tag_json_names_each_declared_platform_for_a_ci_job_each(repo: Path) -> None:
    """CI's tag pipeline runs a job per platform of the tagged release: ``from-tag --json`` lists
    them in the manifest's order, each with the tag its image has in the engine."""
    write_manifest(repo, "kit", "25.03", KIT)

    platformed = run(repo, "from-tag", "kit/25.03", "--json")
    single = run(repo, "from-tag", "training-cpu-pytorch/25.03", "--json")

    assert platformed.exit_code == 0, platformed.stderr
    assert json.loads(platformed.stdout)["platforms"] == [
        {"platform": "linux/amd64", "slug": "linux-amd64", "local_ref": "kit:25.03"},
        {"platform": "linux/arm64", "slug": "linux-arm64", "local_ref": "kit:25.03-arm64"},
    ]
    assert json.loads(single.stdout)["platforms"] == [  # no platforms: linux/amd64 alone
        {"platform": "linux/amd64", "slug": "linux-amd64", "local_ref": "training-cpu-pytorch:25.03"}
    ]


def test_changed_lists_a_bumped_manifest_and_its_children(gitrepo: Path) -> None:
    write_manifest(
        gitrepo,
        "training-xpu-pytorch",
        "25.04",
        'image: training-xpu-pytorch\nversion: "25.04"\nextends: "25.03"\n',
    )
    git(gitrepo, "add", "-A")
    git(gitrepo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "25.04")
    git(gitrepo, "tag", "after-25.04")
    path = gitrepo / "manifests" / "training-xpu-pytorch" / "25.03.yaml"
    path.write_text(path.read_text().replace("version: 0.7.3", "version: 0.7.4"))

    result = run(gitrepo, "changed", "--since", "after-25.04", "--json")

    assert json.loads(result.stdout) == ["training-xpu-pytorch:25.03", "training-xpu-pytorch:25.04"]


def test_changed_counts_a_new_manifest_nobody_has_added_yet(gitrepo: Path) -> None:
    write_manifest(
        gitrepo,
        "training-cpu-pytorch",
        "25.04",
        'image: training-cpu-pytorch\nversion: "25.04"\nextends: "25.03"\n'
        "components:\n  accelerate: {version: 1.6.0}\n",
    )

    result = run(gitrepo, "changed", "--since", "HEAD", "--json")

    assert json.loads(result.stdout) == ["training-cpu-pytorch:25.04"]


def test_changed_after_a_template_edit_is_everything(gitrepo: Path) -> None:
    (gitrepo / "templates" / "partials" / "labels.j2").write_text("# edited\n")

    result = run(gitrepo, "changed", "--since", "base")

    # parents first: the SDK before training-cpu-pytorch, which builds on it
    assert result.stdout.split() == [
        "pytorch-cpu-sdk:2.13.0",
        "training-xpu-pytorch:25.03",
        "training-cpu-pytorch:25.03",
    ]


def test_changed_after_an_image_file_edit_is_every_version_of_that_image(gitrepo: Path) -> None:
    path = gitrepo / "images" / "training-cpu-pytorch" / "image.yaml"
    path.write_text(path.read_text() + "# edited\n")

    result = run(gitrepo, "changed", "--since", "base")

    assert result.stdout.split() == ["training-cpu-pytorch:25.03"]


def test_changed_with_nothing_changed_is_empty(gitrepo: Path) -> None:
    result = run(gitrepo, "changed", "--since", "base", "--json")

    assert result.exit_code == 0
    assert json.loads(result.stdout) == []


def test_changed_since_an_unknown_ref_says_so(gitrepo: Path) -> None:
    result = run(gitrepo, "changed", "--since", "no-such-ref")

    assert result.exit_code == 3
    assert "git cannot compare with 'no-such-ref'" in result.stderr


@pytest.mark.parametrize(
    "since",
    [
        "--output={out}",
        "--output={out}/x",
        "-c core.pager={out}",
        "--exec={out}",
        "-o{out}",
        "--ext-diff",
        "",
        "   ",
        "base\x00--output={out}",
        "base\n--output={out}",
    ],
)
def test_changed_since_is_a_revision_never_an_option(gitrepo: Path, tmp_path: Path, since: str) -> None:
    out = tmp_path / "written-by-git"
    before = sorted(p.name for p in tmp_path.iterdir())

    result = run(gitrepo, "changed", "--since", since.format(out=out))

    assert result.exit_code == 3, result.output
    assert "--since" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # git wrote nothing anywhere
    assert not list(tmp_path.glob("written-by-git*"))


def test_changed_since_an_unknown_revision_names_it_in_one_line(gitrepo: Path) -> None:
    result = run(gitrepo, "changed", "--since", "no-such-branch")

    assert result.exit_code == 3
    assert "'no-such-branch': --since names no commit" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_changed_outside_git_says_so_in_one_line(repo: Path) -> None:
    result = run(repo, "changed", "--since", "HEAD")

    assert result.exit_code == 3
    assert "is not a git checkout" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_changed_without_git_on_path_is_a_configuration_error(
    gitrepo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))

    result = run(gitrepo, "changed", "--since", "base")

    assert result.exit_code == 3
    assert "git is not on PATH" in result.stderr
