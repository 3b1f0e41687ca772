"""The image manifest's standard annotations (``org.opencontainers.image.*``) are a pure
function of the release's inputs: the revision is the commit that last changed the image's
build directory, not HEAD, so a later commit elsewhere leaves the digest alone."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from xpu_release.errors import ConfigError
from xpu_release.evidence.annotations import build_revision, image_annotations
from xpu_release.image.lock import load_lock
from xpu_release.manifest import Repo
from xpu_release.release.manifests import Blob, image_manifest

ROOT = Path(__file__).resolve().parents[3]
REF = "training-cpu-pytorch:25.03"


def git(root: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "PATH": "/usr/bin:/bin"}  # fmt: skip
    done = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True, env=env
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for name in ("manifests", "templates", "images", "schema"):
        shutil.copytree(ROOT / name, root / name)
    shutil.copy(ROOT / "registries.yaml", root / "registries.yaml")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the images")
    return root


def test_the_annotations_name_the_version_the_epoch_and_the_locked_base(repo: Path) -> None:
    spec = Repo(repo).load_ref(REF)
    lock = load_lock(repo, spec)

    notes = image_annotations(repo, spec, lock)

    assert notes["org.opencontainers.image.version"] == "25.03"
    assert notes["org.opencontainers.image.created"].endswith("Z")
    assert notes["org.opencontainers.image.base.digest"] == lock.base_digest
    assert notes["org.opencontainers.image.base.name"] == lock.base.partition("@")[0]
    assert notes["org.opencontainers.image.revision"] == git(repo, "rev-parse", "HEAD")
    assert image_annotations(repo, spec, lock) == notes  # the same inputs, the same annotations


def test_a_later_commit_that_leaves_the_build_directory_alone_keeps_the_revision(repo: Path) -> None:
    spec = Repo(repo).load_ref(REF)
    first = git(repo, "rev-parse", "HEAD")
    (repo / "README.md").write_text("elsewhere\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "docs")

    assert build_revision(repo, spec) == first
    (repo / "images" / "training-cpu-pytorch" / "25.03" / "Dockerfile").write_text("# changed\n", "utf-8")
    assert build_revision(repo, spec) == ""  # uncommitted: no commit holds what is built
    git(repo, "commit", "-q", "-am", "the image")
    assert build_revision(repo, spec) == git(repo, "rev-parse", "HEAD")


def test_outside_git_there_is_no_revision(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    shutil.copytree(ROOT / "manifests", root / "manifests")
    spec = Repo(ROOT).load_ref(REF)

    assert build_revision(root, spec) == ""


def test_a_shallow_clone_that_cuts_the_commit_off_is_refused(repo: Path, tmp_path: Path) -> None:
    spec = Repo(repo).load_ref(REF)
    (repo / "README.md").write_text("later\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "later")
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], check=True)

    with pytest.raises(ConfigError) as refused:
        build_revision(shallow, spec)

    assert "shallow" in refused.value.message
    assert "fetch-depth: 0" in refused.value.message


def test_the_manifest_carries_them_sorted_and_without_them_is_unchanged() -> None:
    layers = [
        Blob(digest="sha256:" + "1" * 64, size=3, media_type="application/vnd.oci.image.layer.v1.tar+gzip")
    ]

    bare = image_manifest(b"{}", layers)
    annotated = image_manifest(b"{}", layers, {"org.opencontainers.image.version": "1", "a": "b"})

    assert "annotations" not in json.loads(bare.body)
    assert list(json.loads(annotated.body)["annotations"]) == ["a", "org.opencontainers.image.version"]
    assert annotated.digest != bare.digest
