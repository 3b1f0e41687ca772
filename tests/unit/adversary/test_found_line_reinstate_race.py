"""A newer release reinstated while a release moves its floating tags (found by an adversary
reading the line rule, issue 49): ``promote`` of the patch 1.0.1 worked out which tags it takes
before it copied anything, when 1.1 was withdrawn; a ``reinstate demo:1.1`` that ran meanwhile
put ``latest`` back on 1.1, and the promotion then moved it onto 1.0.1, backwards, both exiting 0.
The line rule is asked when the tags move and again after: the run that passes a newer release
over says so (exit 7) with what moves the tags forward again."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpu_release.release.publishing.tags import TagRules

from ..helpers import write_manifest
from ..release.line import IMAGE, publish
from .lifecycle_kit import at, promote, two_channels

PATCH = 'image: demo\nversion: "1.0.1"\nextends: "1.0"\nrelease:\n  patch:\n    fixes: []\n'


def test_a_reinstatement_landing_during_a_promotion_never_leaves_latest_behind_it(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with two_channels(repo, tmp_path, ["1.0", "1.1"]) as (staging, prod):
        write_manifest(staging.root, IMAGE, "1.0.1", PATCH)
        write_manifest(prod.root, IMAGE, "1.0.1", PATCH)
        digests = publish(staging, ["1.0", "1.1", "1.0.1"], tmp_path / "spool").digests
        publish(prod, ["1.0", "1.1"], tmp_path / "spool")
        assert at(prod, "withdraw", "demo:1.1", "--reason", "bad").exit_code == 0
        real = TagRules.move_floating
        reinstated: list[int] = []

        def a_reinstate_runs_meanwhile(self, source, tags):  # type: ignore[no-untyped-def]
            if not reinstated:
                reinstated.append(at(prod, "reinstate", "demo:1.1").exit_code)
            return real(self, source, tags)

        monkeypatch.setattr(TagRules, "move_floating", a_reinstate_runs_meanwhile)
        promoted = promote(staging, prod, "demo:1.0.1")
        latest = set(prod.served("latest").values())

    assert reinstated == [0]
    if latest != {digests["1.1"]}:  # latest passed 1.1 over: the promotion must not say it succeeded
        assert promoted.exit_code == 7, promoted.output
        assert "while a newer release of its line came back" in promoted.stderr
