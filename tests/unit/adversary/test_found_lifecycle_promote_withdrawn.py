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
from xpu_release.release.steering import withdraw as steering

from ..release.line import publish
from .lifecycle_kit import at, promote, two_channels


def test_a_release_withdrawn_at_any_staging_endpoint_is_not_promoted(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with two_channels(repo, tmp_path, ["1.0", "1.1"]) as (staging, prod):
        digests = publish(staging, ["1.0", "1.1"], tmp_path / "spool").digests
        real = steering.attach
        first = staging.endpoints()[0]  # the endpoint promote copies from

        def fails_at_first(client, repo_, subject, attachments, **kwargs):  # type: ignore[no-untyped-def]
            if client.endpoint.name == first.name:
                msg = f"{first.host}: connection reset"
                raise WireError(msg, temporary=True)
            return real(client, repo_, subject, attachments, **kwargs)

        monkeypatch.setattr(steering, "attach", fails_at_first)
        withdrawn = at(staging, "withdraw", "demo:1.1", "--reason", "bad")
        monkeypatch.setattr(steering, "attach", real)

        promoted = promote(staging, prod)

        at_production = [
            prod.client(ep).head_manifest(prod.repo(ep), digests["1.1"]) for ep in prod.endpoints()
        ]
        latest = set(prod.served("latest").values())

    assert withdrawn.exit_code == 7  # in force at two of the three staging endpoints
    assert promoted.exit_code == 16, promoted.stdout
    assert "withdrawn" in promoted.stderr
    assert at_production == [None, None, None]  # nothing copied
    assert digests["1.1"] not in latest
