"""``promote`` refuses "a release withdrawn there [at staging] or at a target (exit 16)", but it
read the notices of one staging endpoint only: the one it copies from. A withdrawal that reached
the other staging endpoints but not that one (a ``withdraw`` that failed at it, exit 7, "rerun to
finish") was not seen: the withdrawn release was promoted to production and ``latest`` moved
onto it at every endpoint. A withdrawal in force at any staging endpoint must refuse the
promotion with nothing copied."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpu_release.errors import WireError
from xpu_release.release import withdraw as steering

from ..helpers import run
from ..release.line import LOGIN, PASSWORD, channel, manifests, publish

VERSIONS = ["1.0", "1.1"]


def test_a_release_withdrawn_at_any_staging_endpoint_is_not_promoted(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifests(repo, VERSIONS)
    with (
        channel(repo, tmp_path, "staging", "staging") as staging,
        channel(repo, tmp_path, "production") as prod,
    ):
        digests = publish(staging, VERSIONS, tmp_path / "spool").digests
        real = steering.attach
        first = staging.endpoints()[0]  # the endpoint promote copies from

        def fails_at_first(client, repo_, subject, attachments, **kwargs):  # type: ignore[no-untyped-def]
            if client.endpoint.name == first.name:
                msg = f"{first.host}: connection reset"
                raise WireError(msg, temporary=True)
            return real(client, repo_, subject, attachments, **kwargs)

        monkeypatch.setattr(steering, "attach", fails_at_first)
        withdrawn = run(repo, "--registries", str(staging.file), "withdraw", "demo:1.1", "--reason", "bad",
                        *LOGIN, input=PASSWORD)  # fmt: skip
        monkeypatch.setattr(steering, "attach", real)

        promote = ("promote", "demo:1.1", "--from", str(staging.file))
        promoted = run(repo, "--registries", str(prod.file), *promote, *LOGIN, input=PASSWORD)

        at_production = {ep.name: prod.client(ep).head_manifest(prod.repo(ep), digests["1.1"])
                         for ep in prod.endpoints()}  # fmt: skip
        latest = set(prod.served("latest").values())

    assert withdrawn.exit_code == 7  # in force at two of the three staging endpoints
    assert promoted.exit_code == 16, promoted.stdout
    assert "withdrawn" in promoted.stderr
    assert set(at_production.values()) == {None}  # nothing copied
    assert digests["1.1"] not in latest
