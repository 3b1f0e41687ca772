"""What the lifecycle findings (issue 40) share: a line of ``demo`` releases at a staging and a
production channel of fake registries, and a command run at a channel as a user types it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from click.testing import Result

from ..helpers import run
from ..release.line import PASSWORD, Channel, channel, manifests


@contextmanager
def two_channels(repo: Path, tmp_path: Path, versions: list[str]) -> Iterator[tuple[Channel, Channel]]:
    """Manifests of ``demo`` ``versions``; a staging channel and a production one, both empty."""
    manifests(repo, versions)
    with (
        channel(repo, tmp_path, "staging", "staging") as staging,
        channel(repo, tmp_path, "production") as prod,
    ):
        yield staging, prod


def at(ch: Channel, *args: str, password: str = PASSWORD) -> Result:
    """``xpu-release --registries <ch> ARGS``, logged in with ``password`` on stdin."""
    return run(ch.root, "--registries", str(ch.file), *args, "--username", "u", "--password-stdin",
               input=password)  # fmt: skip


def promote(staging: Channel, prod: Channel, ref: str = "demo:1.1") -> Result:
    return at(prod, "promote", ref, "--from", str(staging.file))
