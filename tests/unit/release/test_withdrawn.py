"""``withdrawn.py``: whether a release is withdrawn, asked failing closed, and the floating tags a
release takes when every newer release carrying them is withdrawn (what ``publish`` and
``promote`` add to the tags they move)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpu_release.errors import PublishError, StackError
from xpu_release.manifest import Repo
from xpu_release.manifest.registries import load_registries
from xpu_release.oci.channel import VERIFYING
from xpu_release.oci.credentials import Credentials, CredentialStore
from xpu_release.release.model.pool import EndpointPool
from xpu_release.release.model.withdrawn import past_withdrawn, withdrawal_in_force

from ..helpers import run, write_manifest
from .line import IMAGE, LOGIN, PASSWORD, Channel, channel, manifests, publish, recorded


def line_with_a_patch(repo: Path) -> None:
    """demo 1.0 and 1.1, and the patch 1.0.1 of 1.0 (its manifest only)."""
    manifests(repo, ["1.0", "1.1"])
    write_manifest(repo, IMAGE, "1.0.1", f'image: {IMAGE}\nversion: "1.0.1"\nextends: "1.0"\n'
                   "release:\n  patch:\n    fixes: []\n")  # fmt: skip


def pool_of(ch: Channel, version: str) -> tuple[Repo, EndpointPool]:
    repo = Repo(ch.root)
    registries = load_registries(ch.root, str(ch.file))
    hosts = frozenset(ep.host for ep in registries.publish_endpoints())
    creds = CredentialStore(explicit=Credentials(username="u", password="the-password"), release_hosts=hosts)
    return repo, EndpointPool(repo.load(IMAGE, version), registries, creds, VERIFYING)


def test_a_patch_takes_latest_only_once_every_newer_release_is_withdrawn_everywhere(
    repo: Path, tmp_path: Path
) -> None:
    line_with_a_patch(repo)
    with channel(repo, tmp_path, "production") as ch:
        publish(ch, ["1.0", "1.1"], tmp_path / "spool")
        manifests_, pool = pool_of(ch, "1.0.1")
        before = past_withdrawn(manifests_, pool)
        withdrawn = run(ch.root, "--registries", str(ch.file), "withdraw", "demo:1.1", "--reason", "bad",
                        *LOGIN, input=PASSWORD)  # fmt: skip
        after = past_withdrawn(manifests_, pool)

    assert withdrawn.exit_code == 0, withdrawn.stderr
    assert before == ()  # 1.1 serves latest and is not withdrawn: latest stays
    assert after == ("latest",)  # 1.0-latest: no newer release carries it (the manifests' rule moves it)


@pytest.mark.parametrize(("down", "error"), [(1, PublishError), (3, StackError)])
def test_an_endpoint_that_cannot_say_is_not_a_release_not_withdrawn(
    repo: Path, tmp_path: Path, down: int, error: type[Exception]
) -> None:
    manifests(repo, ["1.0"])
    with channel(repo, tmp_path, "production") as ch:
        digest = publish(ch, ["1.0"], tmp_path / "spool").digests["1.0"]
        for state in list(ch.states.values())[:down]:
            state.faults.unavailable = 10**6
        _, pool = pool_of(ch, "1.0")
        with pytest.raises(error, match=r"whether demo:1\.0 is withdrawn cannot be told"):
            withdrawal_in_force(pool, digest, then="nothing moved")


@pytest.mark.parametrize(("action", "past"), [("withdraw", "withdrawn"), ("reinstate", "reinstated")])
def test_a_release_no_endpoint_holds_is_said_in_words(
    repo: Path, tmp_path: Path, action: str, past: str
) -> None:
    manifests(repo, ["1.0"])
    with channel(repo, tmp_path, "production") as ch:
        recorded(ch, "1.0", "sha256:" + "ab" * 32)  # a record naming an image no endpoint serves
        reason = ("--reason", "bad") if action == "withdraw" else ()
        done = run(
            ch.root, "--registries", str(ch.file), action, f"{IMAGE}:1.0", *reason, *LOGIN, input=PASSWORD
        )

    assert done.exit_code == 11, done.output
    assert f"nothing was {past} anywhere" in done.stderr


@pytest.mark.parametrize(("down", "error"), [(1, PublishError), (3, StackError)])
def test_a_newer_release_whose_endpoints_cannot_say_keeps_the_tags_where_they_are_saying_so(
    repo: Path, tmp_path: Path, down: int, error: type[Exception]
) -> None:
    # Every endpoint that answers says 1.1 is withdrawn; one that cannot say is not "withdrawn
    # there" (which would move latest back onto 1.0.1) nor silently "not withdrawn": the rule
    # stops, naming the release and what was not done.
    line_with_a_patch(repo)
    with channel(repo, tmp_path, "production") as ch:
        publish(ch, ["1.0", "1.1"], tmp_path / "spool")
        withdrawn = run(ch.root, "--registries", str(ch.file), "withdraw", "demo:1.1", "--reason", "bad",
                        *LOGIN, input=PASSWORD)  # fmt: skip
        for state in list(ch.states.values())[-down:]:
            state.faults.unavailable = 10**6
        manifests_, pool = pool_of(ch, "1.0.1")
        with pytest.raises(error, match=r"whether demo:1\.1 is withdrawn cannot be told; no floating tag"):
            past_withdrawn(manifests_, pool)

    assert withdrawn.exit_code == 0, withdrawn.stderr
