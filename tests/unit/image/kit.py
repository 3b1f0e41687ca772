"""``kit:25.03``, a release for linux/amd64 and linux/arm64 (issue 43), as the build and publish
tests use it: its manifest, rendered, and its lock written with a section per platform, the base
pinned by its index (``INDEX``) and by each platform's image (``ON_AMD64``, ``ON_ARM64``); its
layers lock nothing (no layer to fetch)."""

from __future__ import annotations

import shutil
from pathlib import Path

from xpu_release.image.lock import Lock, Locks, pins_sha256
from xpu_release.image.relock import write_lock
from xpu_release.manifest import Repo
from xpu_release.manifest.platforms import AMD64, ARM64

from ..helpers import run, write_manifest

ROOT = Path(__file__).resolve().parents[3]
REF = "kit:25.03"
INDEX, ON_AMD64, ON_ARM64 = ("sha256:" + c * 64 for c in "1ab")
KIT = """\
image: kit
version: "25.03"
title: {en: kit, zh: kit}
scenario: [training]
framework: pytorch
platforms: [linux/amd64, linux/arm64]
accelerator: {name: CPU, kind: cpu}
base: {registry: hub, repository: debian/bookworm-python, tag: "12", python: /usr/bin/python3}
components:
  torch: {kind: pip, version: 2.13.0+cpu, platform_versions: {linux/arm64: 2.13.0}}
"""


def locked_kit(root: Path) -> None:
    """kit:25.03 in a new repository at ``root`` (this one's templates and registries file),
    rendered and locked for both platforms. Run with the test's own cache in use."""
    shutil.copytree(ROOT / "templates", root / "templates")
    shutil.copy(ROOT / "registries.yaml", root / "registries.yaml")
    write_manifest(root, "kit", "25.03", KIT)
    assert run(root, "render", REF).exit_code == 0
    spec = Repo(root).load_ref(REF)
    pin = "debian/bookworm-python:12@"
    sections = tuple(
        (p, Lock(pins_sha256=pins_sha256(spec), layers=(), base=pin + d))
        for p, d in ((AMD64, ON_AMD64), (ARM64, ON_ARM64))
    )
    write_lock(
        root,
        spec,
        Locks(pins_sha256=pins_sha256(spec), base=pin + INDEX, by_platform=sections, platformed=True),
    )
