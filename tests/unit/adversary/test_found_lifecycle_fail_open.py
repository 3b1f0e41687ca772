"""The withdrawal check fails open. ``notices_in`` passes over a notice that is listed but cannot
be read ("it says nothing"), so when a registry fails to serve a withdrawal notice at the moment
``promote`` looks for one (a 503 after the retries, a connection reset), the release counts as
not withdrawn: it was copied to production and ``latest`` moved onto it, exit 0. A check that
refuses must not turn into a pass because the registry did not answer: it must refuse, or fail
saying it could not tell, with nothing copied. (``withdrawal_in_force``, which ``publish`` asks
before it moves the floating tags, passes over an endpoint that does not answer the same way.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from xpu_release.errors import WireError
from xpu_release.evidence import lifecycle

from ..release.line import publish
from .lifecycle_kit import at, promote, two_channels


def test_a_withdrawal_notice_the_registry_fails_to_serve_does_not_let_a_promotion_through(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with two_channels(repo, tmp_path, ["1.0", "1.1"]) as (staging, prod):
        digests = publish(staging, ["1.0", "1.1"], tmp_path / "spool").digests
        withdrawn = at(staging, "withdraw", "demo:1.1", "--reason", "it crashes on start")
        real = lifecycle.fetch_attachment

        def notices_unavailable(client, repo_, desc, kind):  # type: ignore[no-untyped-def]
            if kind == "withdrawal":
                msg = f"{client.endpoint.name}: GET /v2/{repo_}/manifests/{desc.digest} answered 503"
                raise WireError(msg, status=503, temporary=True)
            return real(client, repo_, desc, kind)

        monkeypatch.setattr(lifecycle, "fetch_attachment", notices_unavailable)
        promoted = promote(staging, prod)
        monkeypatch.setattr(lifecycle, "fetch_attachment", real)
        copied = [prod.client(ep).head_manifest(prod.repo(ep), digests["1.1"]) for ep in prod.endpoints()]

    assert withdrawn.exit_code == 0, withdrawn.stderr
    assert promoted.exit_code != 0, "a withdrawn release was promoted because its notice was not served"
    assert copied == [None, None, None]
