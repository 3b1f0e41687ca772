"""docs/using/lifecycle.md: withdraw and reinstate exit "10 when no endpoint answers" (and 7 when
an endpoint failed). With every endpoint down, both exited 7 ("not every endpoint is done"), so a
pipeline cannot tell a registry outage (retry later) from a half-done withdrawal (rerun now).
Likewise every endpoint refusing our credentials was exit 7 "rerun to finish" (a rerun cannot
finish it) where the same command without a release record says exit 8, as every other command
does: each endpoint's error is flattened into a PublishError."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..helpers import run
from ..release.line import LOGIN, PASSWORD, channel, manifests, publish, recorded

VERSIONS = ["1.0", "1.1"]


@pytest.mark.parametrize("args", [["withdraw", "demo:1.1", "--reason", "bad"], ["reinstate", "demo:1.1"]])
def test_when_no_endpoint_answers_withdraw_and_reinstate_exit_10(
    repo: Path, tmp_path: Path, args: list[str]
) -> None:
    manifests(repo, VERSIONS)
    with channel(repo, tmp_path, "production") as ch:
        digests = publish(ch, VERSIONS, tmp_path / "spool").digests
        recorded(ch, "1.1", digests["1.1"])
        for state in ch.states.values():
            state.faults.unavailable = 10**6  # every endpoint answers 503, always

        result = run(repo, "--registries", str(ch.file), *args, *LOGIN, input=PASSWORD)

    assert result.exit_code == 10, result.stderr


@pytest.mark.parametrize("args", [["withdraw", "demo:1.1", "--reason", "bad"], ["reinstate", "demo:1.1"]])
def test_when_every_endpoint_refuses_our_credentials_withdraw_and_reinstate_exit_8(
    repo: Path, tmp_path: Path, args: list[str]
) -> None:
    manifests(repo, VERSIONS)
    with channel(repo, tmp_path, "production") as ch:
        digests = publish(ch, VERSIONS, tmp_path / "spool").digests
        recorded(ch, "1.1", digests["1.1"])

        result = run(repo, "--registries", str(ch.file), *args, "--username", "u", "--password-stdin",
                     input="not-the-password\n")  # fmt: skip

    assert result.exit_code == 8, result.stderr
