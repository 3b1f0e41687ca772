"""``withdraw`` and ``reinstate`` at three fake endpoints (a public registry and two VPC
regions): the floating tag goes back to the newest release of the line that is not withdrawn,
everywhere, the version tag stays, the notice is attached by digest at every endpoint; reinstate
undoes it; both are safe to rerun, and a run killed halfway converges when it is run again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.evidence.lifecycle import in_force, notices_at
from xpu_release.release.steering import withdraw as steering

from ..helpers import run
from .line import LOGIN, PASSWORD, Channel, channel, manifests, publish, recorded

VERSIONS = ["1.0", "1.1", "1.2"]


@pytest.fixture
def line(repo: Path, tmp_path: Path) -> Iterator[tuple[Channel, dict[str, str]]]:
    """demo 1.0, 1.1 and 1.2 published at every endpoint, ``latest`` on 1.2."""
    manifests(repo, VERSIONS)
    with channel(repo, tmp_path, "production") as ch:
        yield ch, publish(ch, VERSIONS, tmp_path / "spool").digests


def cli(ch: Channel, *args: str) -> tuple[int, str, str]:
    result = run(ch.root, "--registries", str(ch.file), *args, *LOGIN, input=PASSWORD)
    return result.exit_code, result.stdout, result.stderr


def notices(ch: Channel, digest: str) -> dict[str, list[str]]:
    """Each endpoint's notices of ``digest``, by kind and reason."""
    out = {}
    for ep in ch.endpoints():
        found = notices_at(ch.client(ep), ch.repo(ep), digest)
        out[ep.name] = [f"{n.kind}:{n.reason}" for n in found]
    return out


def withdrawn_everywhere(ch: Channel, digest: str) -> bool:
    return all(in_force(notices_at(ch.client(ep), ch.repo(ep), digest)) for ep in ch.endpoints())


def test_withdraw_moves_latest_back_everywhere_and_leaves_the_version_tag(
    line: tuple[Channel, dict[str, str]],
) -> None:
    ch, digests = line

    code, out, err = cli(ch, "withdraw", "demo:1.2", "--reason", "it crashes on start", "--json")

    assert code == 0, err
    report = json.loads(out)
    assert set(ch.served("latest").values()) == {digests["1.1"]}
    assert set(ch.served("1.2").values()) == {digests["1.2"]}  # pinned users are not broken
    assert all(ch.client(ep).get_manifest(ch.repo(ep), digests["1.2"]) for ep in ch.endpoints())
    assert notices(ch, digests["1.2"]) == {name: ["withdrawal:it crashes on start"] for name in ch.states}
    assert sorted(report["attached"]) == sorted(ch.states)
    assert [(t["endpoint"], t["version"]) for t in report["tags"]] == [(n, "1.1") for n in ch.states]
    assert report["withdrawn"][0]["by"].startswith("urn:xpu-release:host:")  # the CI identity


def test_a_rerun_of_withdraw_adds_no_notice_and_moves_nothing(line: tuple[Channel, dict[str, str]]) -> None:
    ch, digests = line
    first = cli(ch, "withdraw", "demo:1.2", "--reason", "it crashes on start", "--json")
    again = cli(ch, "withdraw", "demo:1.2", "--reason", "another reason", "--json")

    assert first[0] == again[0] == 0, again[2]
    report = json.loads(again[1])
    assert report["made"] is None
    assert report["attached"] == []
    assert report["tags"] == []
    assert notices(ch, digests["1.2"]) == {name: ["withdrawal:it crashes on start"] for name in ch.states}


def test_reinstate_undoes_it(line: tuple[Channel, dict[str, str]]) -> None:
    ch, digests = line
    cli(ch, "withdraw", "demo:1.2", "--reason", "it crashes on start")

    code, out, err = cli(ch, "reinstate", "demo:1.2")
    again = cli(ch, "reinstate", "demo:1.2", "--json")

    assert code == 0, err
    assert set(ch.served("latest").values()) == {digests["1.2"]}
    assert not any(in_force(notices_at(ch.client(ep), ch.repo(ep), digests["1.2"])) for ep in ch.endpoints())
    assert sorted(notices(ch, digests["1.2"])["public"]) == [
        "reinstatement:",
        "withdrawal:it crashes on start",
    ]
    assert "not withdrawn" in out
    assert again[0] == 0
    assert json.loads(again[1])["made"] is None  # nothing in force: nothing to reinstate


def test_withdrawing_twice_in_a_row_walks_down_the_line(line: tuple[Channel, dict[str, str]]) -> None:
    ch, digests = line

    cli(ch, "withdraw", "demo:1.2", "--reason", "bad")
    code, _, err = cli(ch, "withdraw", "demo:1.1", "--reason", "bad too")
    reinstated = cli(ch, "reinstate", "demo:1.2")

    assert code == 0, err
    assert reinstated[0] == 0, reinstated[2]
    assert set(ch.served("latest").values()) == {digests["1.2"]}  # the newest not withdrawn again
    assert withdrawn_everywhere(ch, digests["1.1"])


def test_reinstate_never_moves_latest_back_over_a_newer_release(
    line: tuple[Channel, dict[str, str]], tmp_path: Path
) -> None:
    ch, digests = line
    cli(ch, "withdraw", "demo:1.1", "--reason", "bad")  # latest is on 1.2: it stays there
    manifests(ch.root, ["1.3"])
    newer = publish(ch, ["1.3"], tmp_path / "spool").digests["1.3"]

    code, _, err = cli(ch, "reinstate", "demo:1.1")

    assert code == 0, err
    assert set(ch.served("latest").values()) == {newer}
    assert set(ch.served("1.1").values()) == {digests["1.1"]}


def test_withdrawing_the_only_release_of_the_line_leaves_latest_and_says_so(
    repo: Path, tmp_path: Path
) -> None:
    manifests(repo, ["1.0"])
    with channel(repo, tmp_path, "production") as ch:
        digest = publish(ch, ["1.0"], tmp_path / "spool").digests["1.0"]

        code, out, err = cli(ch, "withdraw", "demo:1.0", "--reason", "bad")

        assert code == 0, err
        assert "latest stays on it: no other release of the line is served there" in out
        assert set(ch.served("latest").values()) == {digest}
        assert withdrawn_everywhere(ch, digest)


@pytest.mark.parametrize("reason", ["", " ", "a\nb", "x" * 501, "bidi \u202e"])
def test_a_reason_that_is_not_one_line_is_refused_before_anything_is_asked(
    line: tuple[Channel, dict[str, str]], reason: str
) -> None:
    ch, digests = line

    code, _, err = cli(ch, "withdraw", "demo:1.2", "--reason", reason)

    assert code == 3, err
    assert "--reason" in err
    assert not withdrawn_everywhere(ch, digests["1.2"])


# --- interrupted --------------------------------------------------------------------------------


def test_an_endpoint_failing_while_notices_are_attached_moves_no_tag_and_a_rerun_finishes(
    line: tuple[Channel, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    ch, digests = line
    real = steering.attach
    region = ch.endpoints()[2]

    def failing(client, repo, subject, attachments, **kwargs):  # type: ignore[no-untyped-def]
        if client.endpoint.name == region.name:
            from xpu_release.errors import WireError

            msg = f"{region.host}: connection reset"
            raise WireError(msg, temporary=True)
        return real(client, repo, subject, attachments, **kwargs)

    monkeypatch.setattr(steering, "attach", failing)
    code, _, err = cli(ch, "withdraw", "demo:1.2", "--reason", "it crashes on start")
    first = notices(ch, digests["1.2"])
    latest_after_failure = set(ch.served("latest").values())
    monkeypatch.setattr(steering, "attach", real)
    rerun = cli(ch, "withdraw", "demo:1.2", "--reason", "a second reason, never used", "--json")

    assert code == 7
    assert "rerun `xpu-release withdraw demo:1.2` to finish" in err
    assert first[region.name] == []
    assert latest_after_failure == {digests["1.2"]}  # tags last: none moved anywhere
    assert rerun[0] == 0, rerun[2]
    assert json.loads(rerun[1])["made"] is None  # the first run's notice, the same bytes everywhere
    assert notices(ch, digests["1.2"]) == {name: ["withdrawal:it crashes on start"] for name in ch.states}
    assert set(ch.served("latest").values()) == {digests["1.1"]}


def test_a_withdraw_killed_while_it_moves_the_tags_converges_on_a_rerun(
    line: tuple[Channel, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    ch, digests = line
    real = steering._point
    moved: list[str] = []

    def killed_after_one(*args, **kwargs):  # type: ignore[no-untyped-def]
        if moved:
            raise KeyboardInterrupt  # the runner is killed here
        real(*args, **kwargs)
        moved.append(args[-1])

    monkeypatch.setattr(steering, "_point", killed_after_one)
    code, _, _ = cli(ch, "withdraw", "demo:1.2", "--reason", "it crashes on start")
    halfway = ch.served("latest")
    monkeypatch.setattr(steering, "_point", real)
    rerun = cli(ch, "withdraw", "demo:1.2", "--reason", "it crashes on start")

    assert code == 130
    assert sorted(halfway.values()) == sorted([digests["1.1"], digests["1.2"], digests["1.2"]])
    assert rerun[0] == 0, rerun[2]
    assert set(ch.served("latest").values()) == {digests["1.1"]}
    assert set(ch.served("1.2").values()) == {digests["1.2"]}


# --- who says so ----------------------------------------------------------------------------------


def test_status_verify_list_and_the_next_notes_say_it_is_withdrawn(
    line: tuple[Channel, dict[str, str]],
) -> None:
    from xpu_release.release.model.record import read

    ch, digests = line
    path = recorded(ch, "1.2", digests["1.2"])
    manifests(ch.root, ["1.3"])
    cli(ch, "withdraw", "demo:1.2", "--reason", "it crashes on start")

    status = cli(ch, "status", "demo:1.2")
    status_json = json.loads(cli(ch, "status", "demo:1.2", "--json")[1])
    verified = cli(ch, "verify", "demo:1.2")
    listed = run(ch.root, "list")
    notes = run(ch.root, "--registries", str(ch.file), "notes", "demo:1.3", "--lang", "en")
    zh = run(ch.root, "--registries", str(ch.file), "notes", "demo:1.3", "--lang", "zh")

    assert status[0] == 0, status[2]
    assert "withdrawn " in status[1]
    assert "it crashes on start" in status[1]
    rows = [r for r in status_json["endpoints"] if r["tag"] == "1.2"]
    assert [r["withdrawn"]["reason"] for r in rows] == ["it crashes on start"] * 3
    assert verified[0] == 0, verified[2]  # withdrawn is not broken: it is served, and says so
    assert "demo:1.2: withdrawn " in verified[1]
    assert read(path).withdrawn is not None
    assert "demo:1.2  (extends" not in listed.stdout
    assert "demo:1.2  withdrawn " in listed.stdout
    assert "1.2 was withdrawn on " in notes.stdout
    assert ": it crashes on start. Use this release instead." in notes.stdout
    assert "1.2已于" in zh.stdout


def test_without_a_record_endpoints_that_serve_different_images_withdraw_nothing(
    line: tuple[Channel, dict[str, str]],
) -> None:
    # Which image is the release is one answer (model/pool.served_release): with no record, the
    # one digest every endpoint serves. A region whose 1.2 tag holds another image is a release
    # half done, never "the first endpoint's digest" withdrawn while the others serve another.
    ch, digests = line
    region = list(ch.states.values())[-1]
    repo = ch.repo(ch.endpoints()[-1])
    region.manifests[(repo, "1.2")] = region.manifests[(repo, digests["1.1"])]

    code, _, err = cli(ch, "withdraw", "demo:1.2", "--reason", "it crashes on start")

    assert code == 7, err
    assert "serve different images at demo:1.2" in err
    assert "finish its release first" in err
    assert not any(withdrawn_everywhere(ch, d) for d in digests.values())
    assert all(notices(ch, d) == {ep.name: [] for ep in ch.endpoints()} for d in digests.values())


def test_list_never_takes_a_record_it_cannot_read_as_not_withdrawn(
    line: tuple[Channel, dict[str, str]],
) -> None:
    # A new maintainer's reading (session 14): a damaged record left `list` silent, as if the
    # release were not withdrawn; "cannot tell" is said, and `status` named as what asks.
    ch, digests = line
    path = recorded(ch, "1.2", digests["1.2"])
    path.write_text("{ not json")

    listed = run(ch.root, "list")
    as_json = run(ch.root, "list", "--json")

    assert listed.exit_code == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith("demo:1.2 "))
    assert "withdrawn: cannot tell from its record" in row
    assert "`xpu-release status demo:1.2` asks" in row
    entry = next(e for e in json.loads(as_json.stdout) if e["ref"] == "demo:1.2")
    assert entry["withdrawn"] is None
    assert entry["record_unreadable"]
    assert next(e for e in json.loads(as_json.stdout) if e["ref"] == "demo:1.1")["record_unreadable"] is None


@pytest.mark.parametrize("command", ["verify", "status"])
def test_a_record_of_another_release_is_refused_never_held_against_the_endpoints(
    line: tuple[Channel, dict[str, str]], command: str
) -> None:
    # A new maintainer's reading (session 14): `verify demo:1.2 --record <1.1's record>` held
    # 1.2's endpoints against 1.1's digest and said they differ.
    ch, digests = line
    other = recorded(ch, "1.1", digests["1.1"])

    code, out, err = cli(ch, command, "demo:1.2", "--record", str(other))

    assert code == 3, err
    assert "is the record of demo:1.1, not of demo:1.2" in err
    assert out == ""  # nothing compared
