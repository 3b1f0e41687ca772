"""``withdraw`` and ``reinstate`` with the line's floating tag (#39's ``<line>-latest`` with #40):
a withdrawn patch gives its line's tag back to the newest release of that line that is not
withdrawn (the release it patches), at every endpoint, and leaves ``latest`` (on a newer line)
alone; ``reinstate`` moves the line's tag back onto the patch."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..helpers import write_manifest
from .line import IMAGE, Channel, channel, image_of, manifests, publish
from .test_withdraw import cli


@pytest.fixture
def lines(repo: Path, tmp_path: Path) -> Iterator[tuple[Channel, dict[str, str]]]:
    """demo 1.0, its patch 1.0.1 and 1.1 published at every endpoint, as publish leaves them:
    ``latest`` and ``1.1-latest`` on 1.1, ``1.0-latest`` on 1.0.1."""
    manifests(repo, ["1.0", "1.1"])
    write_manifest(repo, IMAGE, "1.0.1", f'image: {IMAGE}\nversion: "1.0.1"\nextends: "1.0"\n'
                   "release:\n  patch:\n    fixes: []\n")  # fmt: skip
    with channel(repo, tmp_path, "production") as ch:
        digests = publish(ch, ["1.0", "1.0.1", "1.1"], tmp_path / "spool").digests
        for ep in ch.endpoints():
            client = ch.client(ep)
            client.put_manifest(ch.repo(ep), "1.0-latest", image_of("1.0.1")[1])
            client.put_manifest(ch.repo(ep), "1.1-latest", image_of("1.1")[1])
        yield ch, digests


def test_a_withdrawn_patch_gives_its_lines_tag_back_to_the_release_it_patches(
    lines: tuple[Channel, dict[str, str]],
) -> None:
    ch, digests = lines

    code, out, err = cli(ch, "withdraw", "demo:1.0.1", "--reason", "it crashes on start", "--json")

    assert code == 0, err
    assert set(ch.served("1.0-latest").values()) == {digests["1.0"]}
    assert set(ch.served("latest").values()) == {digests["1.1"]}  # another line's: not this one's to move
    assert set(ch.served("1.0.1").values()) == {digests["1.0.1"]}  # pinned users are not broken
    moved = [(t["endpoint"], t["ref"].rpartition(":")[2], t["version"]) for t in json.loads(out)["tags"]]
    assert sorted(moved) == sorted((name, "1.0-latest", "1.0") for name in ch.states)


def test_reinstating_the_patch_moves_its_lines_tag_back_onto_it(
    lines: tuple[Channel, dict[str, str]],
) -> None:
    ch, digests = lines
    cli(ch, "withdraw", "demo:1.0.1", "--reason", "it crashes on start")

    code, _, err = cli(ch, "reinstate", "demo:1.0.1")

    assert code == 0, err
    assert set(ch.served("1.0-latest").values()) == {digests["1.0.1"]}
    assert set(ch.served("latest").values()) == {digests["1.1"]}
