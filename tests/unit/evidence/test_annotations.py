"""The image manifest's standard annotations (``org.opencontainers.image.*``) are a pure
function of the release's declared inputs: nothing in them depends on git history, so the same
tree gives the same digest clean, dirty, under another commit and outside git (issue 50)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from xpu_release.evidence.annotations import image_annotations
from xpu_release.image.lock import load_lock
from xpu_release.manifest import Repo
from xpu_release.release.publishing.manifests import Blob, image_manifest

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
    assert image_annotations(repo, spec, lock) == notes  # the same inputs, the same annotations


def manifest_digest(root: Path) -> str:
    """The digest of REF's image manifest as publish makes it over a fixed config and layer:
    everything in it that the repository decides."""
    spec = Repo(root).load_ref(REF)
    layers = [
        Blob(digest="sha256:" + "1" * 64, size=3, media_type="application/vnd.oci.image.layer.v1.tar+gzip")
    ]
    return image_manifest(b"{}", layers, image_annotations(root, spec, load_lock(root, spec))).digest


def test_the_same_tree_gives_the_same_digest_clean_dirty_under_another_commit_shallow_and_outside_git(
    repo: Path, tmp_path: Path
) -> None:
    folder = repo / "images" / "training-cpu-pytorch" / "25.03"
    clean = manifest_digest(repo)

    (repo / "README.md").write_text("an unrelated change, not committed\n")
    dirty_elsewhere = manifest_digest(repo)
    (folder / "NOTES.txt").write_text("an untracked file in the image's own folder\n")
    dirty_inside = manifest_digest(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a commit that touches the image's folder")
    later = manifest_digest(repo)
    git(repo, "commit", "-q", "--allow-empty", "-m", "and one after it")
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], check=True)
    plain = tmp_path / "plain"
    shutil.copytree(repo, plain, ignore=shutil.ignore_patterns(".git"))

    assert dirty_elsewhere == clean
    assert dirty_inside == clean
    assert later == clean
    assert manifest_digest(shallow) == clean
    assert manifest_digest(plain) == clean


def test_an_input_that_changes_changes_the_digest(repo: Path) -> None:
    before = manifest_digest(repo)
    manifest = repo / "manifests" / "training-cpu-pytorch" / "25.03.yaml"
    manifest.write_text(manifest.read_text().replace('version: "25.03"', 'version: "25.03"\n# a comment'))
    assert manifest_digest(repo) == before  # a comment is no input

    lock = repo / "images" / "training-cpu-pytorch" / "25.03" / "requirements.lock"
    text = lock.read_text()
    old = text.split("@sha256:", 1)[1][:64]
    lock.write_text(text.replace(old, "0" * 64))
    assert manifest_digest(repo) != before  # another base is another image


def test_the_manifest_carries_them_sorted_and_without_them_is_unchanged() -> None:
    layers = [
        Blob(digest="sha256:" + "1" * 64, size=3, media_type="application/vnd.oci.image.layer.v1.tar+gzip")
    ]

    bare = image_manifest(b"{}", layers)
    annotated = image_manifest(b"{}", layers, {"org.opencontainers.image.version": "1", "a": "b"})

    assert "annotations" not in json.loads(bare.body)
    assert list(json.loads(annotated.body)["annotations"]) == ["a", "org.opencontainers.image.version"]
    assert annotated.digest != bare.digest
