"""The notes of a patch release say why it exists, from its ``release.patch``, in the seed's
format and in both languages: what it patches and where its base moved (Main Features), each
advisory fixed with its id, package and old → new version, then what it does not fix yet and
why (Bug Fixes); diff names the advisories fixed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..helpers import run, write_manifest

CPU, SDK = "training-cpu-pytorch", "pytorch-cpu-sdk"
OLD, NEW = "sha256:" + "a" * 64, "sha256:" + "b" * 64
PATCH = f"""\
image: {CPU}
version: "25.03.1"
extends: "25.03"
base: {{version: "2.13.0.1"}}
components:
  accelerate: {{version: "1.6.0"}}
release:
  patch:
    fixes:
    - {{id: CVE-2026-0001, aliases: [GHSA-aaaa-bbbb-cccc], package: accelerate, severity: high, old: 1.5.2,
       new: 1.6.0, by: component}}
    base:
      old: {{ref: "{SDK}:2.13.0", digest: "{OLD}"}}
      new: {{ref: "{SDK}:2.13.0.1", digest: "{NEW}"}}
    open:
    - {{id: CVE-2026-0002, package: ray, installed: 2.43.0, severity: medium, why: no-fix}}
    - {{id: CVE-2026-0003, package: transformers, installed: 4.49.0, severity: high, why: not-on-index,
       fix: 4.99.0}}
"""


@pytest.fixture
def patched(repo: Path) -> Path:
    write_manifest(
        repo,
        SDK,
        "2.13.0.1",
        f'image: {SDK}\nversion: "2.13.0.1"\nextends: "2.13.0"\nrelease:\n  patch:\n    fixes: []\n',
    )
    write_manifest(repo, CPU, "25.03.1", PATCH)
    return repo


def notes(repo: Path, lang: str) -> str:
    result = run(repo, "notes", f"{CPU}:25.03.1", "--lang", lang)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def section(text: str, heading: str, after: str) -> list[str]:
    body = text[text.index(f"### {heading}\n") : text.index(f"### {after}\n" if after else "## Contents")]
    return [line for line in body.splitlines() if line.startswith("- ")]


def test_the_english_notes_of_a_patch_say_why_it_exists(patched: Path) -> None:
    text = notes(patched, "en")

    assert section(text, "Main Features", "Bug Fixes") == [
        f"- This release patches {CPU} 25.03: it fixes what is listed under Bug Fixes.",
        f"- Base image {SDK}:2.13.0 → {SDK}:2.13.0.1: `{OLD}` → `{NEW}`.",
        "- accelerate 1.5.2 → 1.6.0, with the features and bug fixes of those versions.",
    ]
    assert section(text, "Bug Fixes", "") == [
        "- Fixed CVE-2026-0001 in accelerate: 1.5.2 → 1.6.0 (high).",
        "- Not fixed yet: CVE-2026-0002 in ray 2.43.0 (medium): no version fixes it yet.",
        "- Not fixed yet: CVE-2026-0003 in transformers 4.49.0 (high): its fix, 4.99.0, is not on the "
        "package index yet.",
    ]


def test_the_chinese_notes_of_a_patch_say_it_in_the_seeds_format(patched: Path) -> None:
    text = notes(patched, "zh")

    assert section(text, "Main Features", "Bugs Fix") == [
        f"- 本版本为{CPU} 25.03的补丁版本，修复内容见Bugs Fix。",
        f"- 基础镜像{SDK}:2.13.0更新为{SDK}:2.13.0.1：`{OLD}` → `{NEW}`。",
        "- accelerate 1.5.2 → 1.6.0，合入对应版本功能和Bug fix。",
    ]
    assert section(text, "Bugs Fix", "") == [
        "- 修复accelerate的CVE-2026-0001（high）：1.5.2 → 1.6.0。",
        "- 尚未修复：ray 2.43.0的CVE-2026-0002（medium）：暂无修复版本。",
        "- 尚未修复：transformers 4.49.0的CVE-2026-0003（high）：修复版本4.99.0尚未发布到软件源。",
    ]
    assert "（暂无）" not in text.split("## Contents")[0]


def test_a_base_tag_that_moved_is_named_once_with_both_digests(repo: Path) -> None:
    text = PATCH.replace(f'"{SDK}:2.13.0.1"', f'"{SDK}:2.13.0"').replace('base: {version: "2.13.0.1"}\n', "")
    write_manifest(repo, CPU, "25.03.1", text)

    assert f"- Base image {SDK}:2.13.0 updated: `{OLD}` → `{NEW}`." in notes(repo, "en")
    assert f"- 基础镜像{SDK}:2.13.0更新：`{OLD}` → `{NEW}`。" in notes(repo, "zh")


def test_diff_of_a_release_and_its_patch_names_each_advisory_fixed(patched: Path) -> None:
    text = run(patched, "diff", f"{CPU}:25.03", f"{CPU}:25.03.1").stdout
    listed = json.loads(run(patched, "diff", f"{CPU}:25.03", f"{CPU}:25.03.1", "--json").stdout)

    assert "security     - accelerate CVE-2026-0001 (1.5.2 → 1.6.0, fixed)" in text
    assert [(c["section"], c["id"], c["kind"]) for c in listed if c["section"] == "security"] == [
        ("security", "CVE-2026-0001", "removed")
    ]


def test_diff_reads_the_latest_rescan_of_each_release_where_there_is_one(patched: Path) -> None:
    from datetime import UTC, datetime

    from xpu_release.release.model.history import append

    now = datetime(2026, 12, 3, tzinfo=UTC)
    ray = {"id": "CVE-2026-0009", "package": "ray", "installed": "2.43.0", "severity": "high"}
    at = {"checked_at": "2026-12-03T00:00:00Z", "scanned": True}  # an entry as watch writes one
    append(patched, CPU, "25.03", {"ref": f"{CPU}:25.03", "state": "needs a patch", **at,
                                   "findings": [ray]}, now)  # fmt: skip
    append(patched, CPU, "25.03.1", {"ref": f"{CPU}:25.03.1", "state": "up to date", **at,
                                     "findings": []}, now)  # fmt: skip

    text = run(patched, "diff", f"{CPU}:25.03", f"{CPU}:25.03.1").stdout

    assert "security     - accelerate CVE-2026-0001 (1.5.2 → 1.6.0, fixed)" in text
    assert "security     - ray CVE-2026-0009 (2.43.0, fixed)" in text
