"""After ``withdraw`` the floating tags serve "the newest release of the line that is not
withdrawn" (docs/using/lifecycle.md). Then a patch of that release (its security fix) is
released: ``promote`` (and ``publish``, through the same ``plan.moving``) moves ``latest`` only
for "the newest version of the image" by manifest, which is still the withdrawn 1.1, so
``latest`` stayed on the unpatched 1.0 while 1.0.1, the newest release not withdrawn, carried
``latest`` in its floating tags. No command puts it right: a rerun of ``withdraw 1.1`` moves only
tags that serve 1.1. Users of ``latest`` keep the vulnerable image.

A release that becomes the newest one not withdrawn gets the floating tags it carries."""

from __future__ import annotations

from pathlib import Path

from ..helpers import write_manifest
from ..release.line import IMAGE, publish
from .lifecycle_kit import at, promote, two_channels


def test_the_patch_of_the_release_latest_fell_back_to_takes_latest(repo: Path, tmp_path: Path) -> None:
    with two_channels(repo, tmp_path, ["1.0", "1.1"]) as (staging, prod):
        write_manifest(repo, IMAGE, "1.0.1", f'image: {IMAGE}\nversion: "1.0.1"\nextends: "1.0"\n'
                       "release:\n  patch:\n    fixes: []\n")  # fmt: skip
        digests = publish(staging, ["1.0", "1.1", "1.0.1"], tmp_path / "spool", latest=False).digests
        publish(prod, ["1.0", "1.1"], tmp_path / "spool")  # production: latest on 1.1
        withdrawn = at(prod, "withdraw", "demo:1.1", "--reason", "it crashes on start")
        fell_back = set(prod.served("latest").values())

        promoted = promote(staging, prod, "demo:1.0.1")
        latest = set(prod.served("latest").values())

    assert withdrawn.exit_code == 0, withdrawn.stderr
    assert fell_back == {digests["1.0"]}
    assert promoted.exit_code == 0, promoted.stderr
    assert latest == {digests["1.0.1"]}, (
        "latest stays on 1.0 although its patch 1.0.1 is the newest release not withdrawn"
    )
