"""``xpu-release docs`` writes its pages the guarded way: a page there keeps its mode (never
widened to 0644), a new page is readable by others, and a link at a page's name is replaced,
never written through."""

from __future__ import annotations

import stat
from pathlib import Path

from ..helpers import run


def test_a_stale_page_is_rewritten_keeping_its_mode_and_a_new_one_is_0644(repo: Path) -> None:
    folder = repo / "docs" / "reference"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "commands.md").write_text("stale\n")
    (folder / "commands.md").chmod(0o600)
    (folder / "settings.md").unlink(missing_ok=True)

    result = run(repo, "docs")

    assert result.exit_code == 0, result.output
    assert (folder / "commands.md").read_text() != "stale\n"
    assert stat.S_IMODE((folder / "commands.md").stat().st_mode) == 0o600
    assert stat.S_IMODE((folder / "settings.md").stat().st_mode) == 0o644
    assert run(repo, "docs", "--check").exit_code == 0


def test_a_link_at_a_pages_name_is_replaced_and_the_file_it_leads_to_is_untouched(
    repo: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.md"
    victim.write_text("precious\n")
    victim.chmod(0o600)
    page = repo / "docs" / "reference" / "exit-codes.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.unlink(missing_ok=True)
    page.symlink_to(victim)

    result = run(repo, "docs")

    assert result.exit_code == 0, result.output
    assert victim.read_text() == "precious\n"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert not page.is_symlink()
