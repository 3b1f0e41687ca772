"""What CI runs for: a pushed git tag → NAME:VERSION, and the releases a change touches."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from ..errors import ConfigError, NotFoundError
from ..files import kind_of
from ..guard.shown import quoted
from . import Repo
from .order import build_order, descendants

TAG_RX = re.compile(
    r"(?:refs/tags/)?(?P<image>[a-z0-9]+(?:[._\-][a-z0-9]+)*?)[/\-](?P<version>[0-9][A-Za-z0-9_.\-]{0,127})"
)


def ref_from_tag(repo: Repo, tag: str) -> str:
    """``training-xpu-pytorch/25.03`` or ``training-xpu-pytorch-25.03`` → ``training-xpu-pytorch:25.03``."""
    m = TAG_RX.fullmatch(tag.strip()) if len(tag) <= 300 else None
    if not m:
        msg = f"tag {quoted(tag)} is not NAME/VERSION or NAME-VERSION (e.g. training-xpu-pytorch/25.03)"
        raise ConfigError(msg)
    image, version = m["image"], m["version"]
    if image not in repo.images():
        msg = f"tag {tag!r} names image {image!r}, which has no manifests (known: {', '.join(repo.images())})"
        raise NotFoundError(msg)
    if kind_of(repo.manifest_path(image, version)) == "missing":
        known = ", ".join(repo.versions(image))
        msg = f"tag {tag!r}: no manifest manifests/{image}/{version}.yaml (versions: {known})"
        raise NotFoundError(msg)
    spec = repo.load(image, version)
    if (spec.image, spec.version) != (image, version):
        msg = f"tag {tag!r} and manifest {spec.manifest_path} disagree ({spec.ref})"
        raise ConfigError(msg)
    return spec.ref


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        msg = "git is not on PATH: `changed` compares commits with it; install git"
        raise ConfigError(msg) from None


def _first_line(text: str) -> str:
    """git's one relevant line (its ``fatal:``/``error:`` line), never a page of usage."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    relevant = [line for line in lines if line.startswith(("fatal:", "error:"))]
    return (relevant or lines or ["(no message)"])[0][:300]


def resolve_revision(root: Path, since: str) -> str:
    """The commit ``since`` names, checked as a revision before it reaches any other git call:
    user text is never read as an option (``--output=…``, ``-c…``)."""
    shown = since if len(since) <= 80 else since[:77] + "..."
    if not since.strip():
        msg = "--since is empty: name a git revision (a branch, a tag or a commit), e.g. --since origin/main"
        raise ConfigError(msg)
    if since.startswith("-") or any(c in since for c in "\x00\n\r"):
        msg = (
            f"--since {shown!r} is not a git revision (it would be read as an option); "
            "name a branch, tag or commit"
        )
        raise ConfigError(msg)
    inside = _git(root, "rev-parse", "--is-inside-work-tree")
    if inside.returncode != 0:
        msg = f"{root} is not a git checkout: `changed` needs one ({_first_line(inside.stderr)})"
        raise ConfigError(msg)
    proc = _git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{since}^{{commit}}")
    if proc.returncode != 0 or not proc.stdout.strip():
        msg = (
            f"git cannot compare with {shown!r}: --since names no commit in {root}; "
            "fetch it first or name a branch, tag or commit"
        )
        raise ConfigError(msg)
    return proc.stdout.strip()


def _changed_files(root: Path, since: str) -> list[str]:
    commit = resolve_revision(root, since)
    proc = _git(root, "diff", "--name-only", f"{commit}...HEAD", "--")
    if proc.returncode != 0:
        msg = f"git cannot compare with {since[:80]!r}: {_first_line(proc.stderr)}"
        raise ConfigError(msg)
    dirty = _git(root, "diff", "--name-only", "HEAD", "--")
    # A new manifest nobody has added yet counts too: it is a release someone is about to make.
    untracked = _git(root, "ls-files", "--others", "--exclude-standard")
    return sorted(set(proc.stdout.split()) | set(dirty.stdout.split()) | set(untracked.stdout.split()))


def changed_refs(repo: Repo, since: str) -> list[str]:
    """Every NAME:VERSION whose manifest (or a parent's), template or image files changed, and
    every release that builds on one of those (its base is their image): parents first."""
    files = _changed_files(repo.root, since)
    everything = any(f.startswith("templates/") or f == "registries.yaml" for f in files)
    direct: set[str] = set()
    for f in files:
        parts = f.split("/")
        if parts[0] == "manifests" and len(parts) == 3 and parts[2].endswith(".yaml"):
            direct.add(f"{parts[1]}:{parts[2][:-5]}")
        elif parts[0] == "images" and len(parts) >= 3:
            if parts[2] in ("tests", "image.yaml"):
                direct.update(f"{parts[1]}:{v}" for v in repo.versions(parts[1]))
            else:
                direct.add(f"{parts[1]}:{parts[2]}")
    touched = set()
    for ref in repo.refs():
        image, version = ref.split(":")
        if everything or ref in direct or _inherits_from(repo, image, version, direct):
            touched.add(ref)
    affected = descendants(repo, touched)
    return [ref for wave in build_order(repo, sorted(affected)) for ref in wave]


def _inherits_from(repo: Repo, image: str, version: str, refs: set[str]) -> bool:
    seen = set()
    parent = repo.load(image, version).extends
    while parent and parent not in seen:
        if f"{image}:{parent}" in refs:
            return True
        seen.add(parent)
        parent = repo.load(image, parent).extends
    return False
