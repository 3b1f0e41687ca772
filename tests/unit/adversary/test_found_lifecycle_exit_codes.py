"""docs/using/lifecycle.md: withdraw and reinstate exit "10 when no endpoint answers" (and 7 when
an endpoint failed). With every endpoint down, both exited 7 ("not every endpoint is done"), so a
pipeline cannot tell a registry outage (retry later) from a half-done withdrawal (rerun now).
Likewise every endpoint refusing our credentials was exit 7 "rerun to finish" (a rerun cannot
finish it) where the same command without a release record says exit 8, as every other command
does: each endpoint's error is flattened into a PublishError."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..release.line import Channel, channel, manifests, publish, recorded
from .lifecycle_kit import at

COMMANDS = [["withdraw", "demo:1.1", "--reason", "bad"], ["reinstate", "demo:1.1"]]


@pytest.fixture
def line(repo: Path, tmp_path: Path) -> Iterator[Channel]:
    """demo 1.0 and 1.1 published at every endpoint, 1.1 recorded here."""
    manifests(repo, ["1.0", "1.1"])
    with channel(repo, tmp_path, "production") as ch:
        recorded(ch, "1.1", publish(ch, ["1.0", "1.1"], tmp_path / "spool").digests["1.1"])
        yield ch


@pytest.mark.parametrize("args", COMMANDS)
def test_when_no_endpoint_answers_withdraw_and_reinstate_exit_10(line: Channel, args: list[str]) -> None:
    for state in line.states.values():
        state.faults.unavailable = 10**6  # every endpoint answers 503, always

    result = at(line, *args)

    assert result.exit_code == 10, result.stderr


@pytest.mark.parametrize("args", COMMANDS)
def test_when_every_endpoint_refuses_our_credentials_withdraw_and_reinstate_exit_8(
    line: Channel, args: list[str]
) -> None:
    result = at(line, *args, password="not-the-password\n")

    assert result.exit_code == 8, result.stderr
