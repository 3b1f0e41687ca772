"""``-o FILE`` / ``--sarif FILE`` through a symbolic link. getting-started.md: "a symbolic link is
refused (exit 13), never followed to replace what it leads to ... /dev/stdout and /dev/fd/N work
as in a shell". ``guard.named`` lets a link through when ``path.absolute()`` starts with ``/dev/``
or ``/proc/``, but ``absolute()`` does not resolve ``..``: ``/dev/../<anywhere>/link`` passes the
check, and the link is followed (the data appended to the file it leads to). ``/proc/self/cwd/``
leads anywhere too, and ``/dev/shm`` is a world-writable folder where anyone plants links."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from ..helpers import run


@pytest.mark.parametrize(
    "spelled",
    [lambda link: f"/dev/..{link}", lambda link: f"/proc/self/cwd/{link.name}"],
    ids=["/dev/../LINK", "/proc/self/cwd/LINK"],
)
def test_a_link_named_through_dev_or_proc_is_still_a_link(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelled: object
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    victim.chmod(0o600)
    link = tmp_path / "out.json"
    link.symlink_to(victim)
    monkeypatch.chdir(tmp_path)

    result = run(repo, "schema", "-o", spelled(link))  # type: ignore[operator]

    assert result.exit_code == 13, result.output  # today: 0, "wrote /dev/../…/out.json"
    assert victim.read_text() == "keep me"  # today: the schema appended to it
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert link.is_symlink()
