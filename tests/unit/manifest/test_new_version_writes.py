"""``new-version`` writes the new manifest the guarded way: whole (a temporary of the run's own,
put in place once written), never over a file or through a link at its name, and no temporary
left beside it."""

from __future__ import annotations

from pathlib import Path

from ..helpers import run

XPU = "training-xpu-pytorch"


def test_a_link_at_the_new_manifests_name_is_left_alone_and_nothing_is_made_where_it_leads(
    repo: Path, tmp_path: Path
) -> None:
    planted = repo / "manifests" / XPU / "25.04.yaml"
    planted.symlink_to(tmp_path / "elsewhere.yaml")

    result = run(repo, "new-version", f"{XPU}:25.04", "--from", "25.03", "--set", "vllm=0.8.0")

    assert result.exit_code == 3, result.output
    assert "already exists" in result.stderr
    assert not (tmp_path / "elsewhere.yaml").exists()
    assert planted.is_symlink()


def test_the_new_manifest_is_put_in_place_with_no_temporary_beside_it(repo: Path) -> None:
    folder = repo / "manifests" / XPU
    before = sorted(p.name for p in folder.iterdir())

    result = run(repo, "new-version", f"{XPU}:25.04", "--from", "25.03", "--set", "vllm=0.8.0")

    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in folder.iterdir()) == sorted([*before, "25.04.yaml"])
    assert (folder / "25.04.yaml").stat().st_mode & 0o777 == 0o644
