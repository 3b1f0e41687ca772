"""Session 8 of the adversary: which image is the release (``served_release``), the floating tags
of a withdrawn line, the VEX ``promote`` reads in staging, and what ``shown``/``aligned`` let
through. Each test is a reproduction: it fails until the behaviour it names holds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.evidence.attachment import Attachment
from xpu_release.evidence.referrers import EMPTY, _upload, artifact_manifest, descriptor, referrers_tag
from xpu_release.evidence.vex import CONTEXT
from xpu_release.guard.shown import shown_lines
from xpu_release.oci.model import OCI_INDEX
from xpu_release.oci.registry import Manifest, sha256_digest

from .. import fake_registry
from ..helpers import run, write_manifest
from ..release import test_promote as tp
from ..release.line import LOGIN, PASSWORD, Channel, channel, image_of, manifests, publish, recorded
from ..release.test_promote import evidence, nothing_at_production, promote  # channels: conftest
from ..release.test_withdraw import VERSIONS, cli, notices


def _vex(statements: list[dict[str, object]]) -> bytes:
    document = {"@context": CONTEXT, "statements": statements}
    return json.dumps({"predicateType": "https://openvex.dev/ns", "predicate": document}).encode()


def _exception(name: str = "CVE-2026-0001", review_by: str = "2026-01-31") -> dict[str, object]:
    return {"vulnerability": {"name": name}, "status": "not_affected",
            "justification": "vulnerable_code_not_present", "review_by": review_by}  # fmt: skip


@pytest.fixture
def line(repo: Path, tmp_path: Path) -> Iterator[tuple[Channel, dict[str, str]]]:
    """demo 1.0, 1.1 and 1.2 published at every endpoint, ``latest`` on 1.2 (test_withdraw's)."""
    manifests(repo, VERSIONS)
    with channel(repo, tmp_path, "production") as ch:
        yield ch, publish(ch, VERSIONS, tmp_path / "spool").digests


# --- 1. which image is the release ------------------------------------------------------------


def test_withdraw_refuses_a_record_whose_image_no_version_tag_serves(
    line: tuple[Channel, dict[str, str]],
) -> None:
    # Seen: the record of demo:1.2 names 1.1's image (held by digest everywhere, served at no
    # 1.2 tag). `withdraw demo:1.2` exits 0 saying "demo:1.2 (<1.1's digest>): withdrawn": the
    # withdrawal lands on demo:1.1's image, and latest stays on the 1.2 image, not withdrawn.
    # promote refuses such a record (exit 7, "an image that is not the tested release"); withdraw
    # should too, changing nothing.
    ch, digests = line
    recorded(ch, "1.2", digests["1.1"])

    code, _, err = cli(ch, "withdraw", "demo:1.2", "--reason", "it crashes on start")

    assert code == 7, err
    assert notices(ch, digests["1.1"]) == {name: [] for name in ch.states}  # 1.1 is not withdrawn


def test_withdraw_with_a_record_refuses_a_region_serving_another_image_at_the_version_tag(
    line: tuple[Channel, dict[str, str]],
) -> None:
    # Seen: with a record naming 1.2's image, a region whose 1.2 tag serves another image (a
    # release half done) is withdrawn anyway, exit 0; the region's 1.2 tag keeps serving an image
    # that is not withdrawn. Without the record the same state is exit 7 "finish its release
    # first" (lifecycle.md: endpoints that serve different images there are a release half done:
    # the command changes nothing, exit 7).
    ch, digests = line
    recorded(ch, "1.2", digests["1.2"])
    region = list(ch.states.values())[-1]
    repo = ch.repo(ch.endpoints()[-1])
    region.manifests[(repo, "1.2")] = region.manifests[(repo, digests["1.1"])]

    code, _, err = cli(ch, "withdraw", "demo:1.2", "--reason", "it crashes on start")

    assert code == 7, err
    assert notices(ch, digests["1.2"]) == {name: [] for name in ch.states}


# --- 2. floating tags of a withdrawn line -----------------------------------------------------


def test_reinstate_never_moves_latest_back_over_a_newer_release_whose_manifest_is_broken(
    line: tuple[Channel, dict[str, str]], tmp_path: Path
) -> None:
    # Seen: 1.2 withdrawn, 1.3 published after (latest on 1.3), then 1.3's manifest in the
    # repository becomes invalid. `reinstate demo:1.2` skips 1.3 as "no candidate" and moves
    # latest from 1.3 back onto 1.2 at every endpoint, exit 0. (past_withdrawn keeps every tag
    # where it is when a newer manifest cannot be read; steering does the opposite.)
    ch, _ = line
    assert cli(ch, "withdraw", "demo:1.2", "--reason", "bad")[0] == 0
    manifests(ch.root, ["1.3"])
    newer = publish(ch, ["1.3"], tmp_path / "spool").digests["1.3"]
    write_manifest(ch.root, "demo", "1.3", "image: demo\nversion: '1.3'\nbogus: [\n")

    cli(ch, "reinstate", "demo:1.2")

    assert set(ch.served("latest").values()) == {newer}


# --- 3. the VEX promote reads -------------------------------------------------------------------


def _add_vex(ch: Channel, version: str, payload: bytes, spool: Path) -> None:
    """A second VEX of ours attached to ``version``'s image at every endpoint (listed after the
    first in the referrers tag's index, as a registry with the referrers API may list it)."""
    _, image = image_of(version)
    att = artifact_manifest(Attachment(kind="vex", payload=payload), image, "2026-02-01T00:00:00Z")
    spool.mkdir(parents=True, exist_ok=True)
    for ep in ch.endpoints():
        client, repo = ch.client(ep), ch.repo(ep)
        _upload(client, repo, EMPTY, spool, None)
        _upload(client, repo, payload, spool, None)
        client.put_manifest(repo, att.digest, att)
        tag = referrers_tag(image.digest)
        found = client.get_manifest(repo, tag)
        assert found is not None
        index = json.loads(found.body)
        index["manifests"].append(descriptor(att).to_json())
        body = json.dumps(index).encode()
        client.put_manifest(repo, tag, Manifest(digest=sha256_digest(body), media_type=OCI_INDEX, body=body))


def test_promote_refuses_an_expired_exception_in_any_vex_staging_lists(
    channels: tuple[Channel, Channel, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Seen: _reviews reads only found.ours("vex")[:1]. With two VEX referrers, one without
    # exceptions listed first and one whose exception was due on 2026-01-31 second, promote
    # exits 0 and copies the release. Which VEX is first is the registry's order (watch's SBOM
    # reader says the API and the tag schema list them in opposite orders).
    staging, prod, digests = channels
    monkeypatch.setattr(tp, "vex", lambda _: _vex([]))
    evidence(staging, "1.1", tmp_path / "spool")
    _add_vex(staging, "1.1", _vex([_exception()]), tmp_path / "spool2")

    code, _, err = promote(staging, prod)

    assert code == 14, err
    assert nothing_at_production(prod, digests["1.1"])


def test_promote_refuses_a_vex_exception_beyond_the_review_horizon(
    channels: tuple[Channel, Channel, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Seen: a VEX whose exception has review_by 9999-12-31 is promoted (exit 0). vex.py says a
    # date further ahead than the review horizon is refused "so no exception escapes review for
    # a century"; promote reads the VEX without `today`, so the horizon is never asked.
    staging, prod, digests = channels
    monkeypatch.setattr(tp, "vex", lambda _: _vex([_exception(review_by="9999-12-31")]))
    evidence(staging, "1.1", tmp_path / "spool")

    code, _, err = promote(staging, prod)

    assert code == 14, err
    assert nothing_at_production(prod, digests["1.1"])


def test_promote_quoting_a_vex_vulnerability_forges_no_line(
    channels: tuple[Channel, Channel, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Seen: the vulnerability name of an expired exception is put raw into the exit-14 message;
    # shown_lines keeps the message's line breaks, so a name "CVE-1\nerror: ..." prints a line
    # of the VEX author's choosing on stderr (and a name of many newlines, that many lines).
    staging, prod, _ = channels
    forged = "CVE-2026-0001\nerror: forged by the VEX" + "\n" * 50
    monkeypatch.setattr(tp, "vex", lambda _: _vex([_exception(name=forged)]))
    evidence(staging, "1.1", tmp_path / "spool")

    code, _, err = promote(staging, prod)

    assert code == 14, err
    assert "\nerror: forged by the VEX" not in err
    assert len(err.splitlines()) < 10


# --- 4. what is shown -----------------------------------------------------------------------------


EVIL_DIGEST = "\x1b]0;owned\x07\x1b[2J\x9b31m ok"  # a Docker-Content-Digest header (latin-1)


def test_the_status_table_escapes_outside_text_in_its_cells(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Seen: a registry answering with a Docker-Content-Digest header holding an OSC sequence
    # (retitles the terminal) and a C1 CSI. The error row's cell in `status`'s table (stdout) is
    # the raw message "public: manifest ns/demo:1.0 claims \x1b]0;owned\x07\x9b31m…": aligned
    # neither escapes nor uses `shown`. (stderr escapes it; the table does not.)
    manifests(repo, ["1.0"])
    with channel(repo, tmp_path, "production") as ch:
        publish(ch, ["1.0"], tmp_path / "spool")
        public, region = ch.endpoints()[0].host, ch.endpoints()[1].host
        short = tmp_path / "short.yaml"  # short names: the cut leaves room for the header
        short.write_text(
            "registries:\n  hub: {host: '127.0.0.1:1', insecure: true}\n"
            f"  public: {{host: '{public}', insecure: true, namespace: ns}}\n"
            f"  vpc: {{hosts: {{a: '{region}'}}, regions: [a], insecure: true, namespace: ns}}\n"
        )
        real = fake_registry.Handler._send

        def send(self, code, body=b"", headers=None, **kw):  # type: ignore[no-untyped-def]
            if headers and "Docker-Content-Digest" in headers and "/manifests/" in self.path:
                headers = {**headers, "Docker-Content-Digest": EVIL_DIGEST}
            return real(self, code, body, headers, **kw)

        monkeypatch.setattr(fake_registry.Handler, "_send", send)
        result = run(repo, "--registries", str(short), "status", "demo:1.0", *LOGIN, input=PASSWORD)

    assert result.exit_code == 7, result.output
    assert "claims" in result.stdout  # the error row is in the table
    assert not any(ch in result.stdout for ch in "\x1b\x07\x9b")


@pytest.mark.parametrize("limit", [20, 40, 60, 62])
def test_shown_lines_cuts_a_long_line_whatever_the_limit(limit: int) -> None:
    # Seen: _middle's tail is limit // 3 - 20, zero or negative below 63: line[-0:] is the whole
    # line, so a 1000-character line "cut" to 60 comes back 1062 characters long.
    out = shown_lines("a" * 500 + "b" * 500, limit)

    assert len(out) <= limit + 40
