"""A withdrawal that lands while a release moves its floating tags (another CI job, another
runner: nothing serialises them) must not leave ``latest`` on the withdrawn release.

``promote`` (and ``publish``) look for a withdrawal once, before anything is copied, and move the
floating tags last, much later; ``withdraw`` moves only the tags that serve the release *when it
looks*. A ``withdraw`` that runs in between finds ``latest`` still on the older release, moves
nothing, exits 0; then the promotion moves ``latest`` onto the release just withdrawn, and exits 0
too. Both commands say they succeeded; every user pulling ``latest`` gets the withdrawn image.
Whichever finishes last must leave the floating tags off a withdrawn release, or fail saying
what to rerun."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpu_release.release.publishing.tags import TagRules

from ..release.line import publish
from .lifecycle_kit import at, promote, two_channels


def test_a_withdrawal_landing_during_a_promotion_does_not_end_with_latest_on_the_withdrawn_release(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with two_channels(repo, tmp_path, ["1.0", "1.1"]) as (staging, prod):
        digests = publish(staging, ["1.0", "1.1"], tmp_path / "spool").digests
        publish(prod, ["1.0"], tmp_path / "spool")  # production: 1.0, latest on it
        real = TagRules.move_floating
        withdrawn: list[int] = []

        def a_withdraw_runs_meanwhile(self, source, tags):  # type: ignore[no-untyped-def]
            # the version tags are written and verified; another job withdraws 1.1 now
            withdrawn.append(at(prod, "withdraw", "demo:1.1", "--reason", "it crashes on start").exit_code)
            return real(self, source, tags)

        monkeypatch.setattr(TagRules, "move_floating", a_withdraw_runs_meanwhile)
        promoted = promote(staging, prod)
        latest = set(prod.served("latest").values())

    assert withdrawn == [0]
    assert digests["1.1"] not in latest or promoted.exit_code != 0, (
        "both commands exited 0 and latest serves the withdrawn release"
    )
