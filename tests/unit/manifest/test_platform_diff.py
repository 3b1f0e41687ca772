"""``diff`` between releases that declare platforms (issue 43): a platform added or removed is a
change of section ``platforms``, and a component's version on a platform where it differs from
the component's version (``platform_versions``) is compared on that platform too. Releases
without platforms diff as before."""

from __future__ import annotations

from pathlib import Path

from xpu_release.manifest import Repo
from xpu_release.manifest.diff import diff

from ..helpers import MINIMAL, write_manifest

KIT = """\
image: kit
version: "{version}"
title: {{en: kit, zh: kit}}
scenario: [training]
framework: pytorch
{platforms}accelerator: {{name: CPU, kind: cpu}}
base: {{registry: hub, repository: debian/bookworm-python, tag: "12", python: /usr/bin/python3}}
components:
  torch: {{kind: pip, version: {torch}{arm64}}}
"""


def kit(root: Path, version: str, torch: str, *, arm64: str | None = None, both: bool = True) -> None:
    write_manifest(root, "kit", version, KIT.format(
        version=version, torch=torch,
        platforms="platforms: [linux/amd64, linux/arm64]\n" if both else "",
        arm64=f", platform_versions: {{linux/arm64: {arm64}}}" if arm64 else "",
    ))  # fmt: skip


def changes(root: Path, old: str, new: str) -> list[tuple[str, str, str, str | None, str | None]]:
    repo = Repo(root)
    found = diff(repo.load("kit", old), repo.load("kit", new))
    return [(c.section, c.name, c.kind, c.old, c.new) for c in found]


def test_a_platform_version_that_moves_is_a_change_on_that_platform(tmp_path: Path) -> None:
    kit(tmp_path, "25.03", "2.13.0+cpu", arm64="2.13.0")
    kit(tmp_path, "25.04", "2.13.1+cpu", arm64="2.13.1")

    assert changes(tmp_path, "25.03", "25.04") == [
        ("components", "torch", "upgraded", "2.13.0+cpu", "2.13.1+cpu"),
        ("components", "torch (linux/arm64)", "upgraded", "2.13.0", "2.13.1"),
    ]


def test_a_platform_version_equal_to_the_component_version_on_both_sides_is_no_extra_change(
    tmp_path: Path,
) -> None:
    kit(tmp_path, "25.03", "2.13.0")
    kit(tmp_path, "25.04", "2.13.1")

    assert changes(tmp_path, "25.03", "25.04") == [("components", "torch", "upgraded", "2.13.0", "2.13.1")]


def test_a_platform_added_and_removed_is_said(tmp_path: Path) -> None:
    kit(tmp_path, "25.03", "2.13.0", both=False)
    kit(tmp_path, "25.04", "2.13.0")
    kit(tmp_path, "25.05", "2.13.0", both=False)

    assert changes(tmp_path, "25.03", "25.04") == [("platforms", "linux/arm64", "added", None, "linux/arm64")]
    assert changes(tmp_path, "25.04", "25.05") == [
        ("platforms", "linux/arm64", "removed", "linux/arm64", None)
    ]


def test_releases_without_platforms_diff_as_before(tmp_path: Path) -> None:
    write_manifest(tmp_path, "demo", "1.0", MINIMAL)
    write_manifest(tmp_path, "demo", "1.1", MINIMAL.replace('version: "1.0"', 'version: "1.1"')
                   .replace("1.16.0", "1.17.0"))  # fmt: skip
    repo = Repo(tmp_path)

    found = diff(repo.load("demo", "1.0"), repo.load("demo", "1.1"))

    assert [(c.section, c.name, c.old, c.new) for c in found] == [("components", "six", "1.16.0", "1.17.0")]
