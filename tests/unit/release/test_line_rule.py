"""The line rule (``release/model/line.py``): which floating tags a publish of a release moves, as a
table of line states. Every command that publishes or copies a release asks this one function
(``release``, ``publish``, ``promote``, and the release of a patch ``watch --release`` makes), so
after ``withdraw 1.1`` a ``release`` of the patch 1.0.1 moves ``latest`` exactly as ``publish``
and ``promote`` do (issue 49)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from xpu_release.manifest import Repo
from xpu_release.manifest.registries import load_registries
from xpu_release.oci.channel import ASKING, VERIFYING
from xpu_release.oci.credentials import Credentials, CredentialStore
from xpu_release.release.model import line
from xpu_release.release.model.pool import EndpointPool

from ..helpers import run, write_manifest
from .line import IMAGE, LOGIN, PASSWORD, Channel, channel, manifests, moves, pool_of, publish

SRC = Path(line.__file__).resolve().parents[2]
PATCH = "release:\n  patch:\n    fixes: []\n"

# (manifests, published, withdrawn, the release asked about, the tags it moves)
STATES = [
    (["1.0"], ["1.0"], [], "1.0", ("latest", "1.0-latest")),
    (["1.0", "1.1"], ["1.0", "1.1"], [], "1.0", ("1.0-latest",)),  # latest never backwards; its line's tag
    (["1.0", "1.1"], ["1.0", "1.1"], [], "1.1", ("latest", "1.1-latest")),
    (["1.0", "1.1", "1.0.1"], ["1.0", "1.1"], [], "1.0.1", ("1.0-latest",)),  # a patch of an older line
    (["1.0", "1.1", "1.0.1"], ["1.0", "1.1"], ["1.1"], "1.0.1", ("1.0-latest", "latest")),  # 1.1 withdrawn
    # 1.1 withdrawn, 1.0.1 not published: 1.0 is the newest release that serves (withdraw put them there)
    (["1.0", "1.1", "1.0.1"], ["1.0", "1.1"], ["1.1"], "1.0", ("latest", "1.0-latest")),
    (["1.0", "1.1", "1.0.1"], ["1.0", "1.1", "1.0.1"], ["1.1"], "1.0", ()),  # 1.0.1 published: it holds them
    (
        ["1.0", "1.1"],
        ["1.0", "1.1"],
        ["1.1"],
        "1.0",
        ("latest", "1.0-latest"),
    ),  # a rerun of 1.0 takes latest back
    (["1.0", "1.1", "1.2"], ["1.0", "1.1", "1.2"], ["1.2"], "1.0", ("1.0-latest",)),  # 1.1 keeps latest
    # 1.2 has a manifest but is not published: it holds nothing yet, its own publish moves latest on
    (["1.0", "1.1", "1.2"], ["1.0", "1.1"], [], "1.1", ("latest", "1.1-latest")),
    # 1.1 withdrawn, 1.2 not published: 1.0 is where withdraw puts latest
    (["1.0", "1.1", "1.2"], ["1.0", "1.1"], ["1.1"], "1.0", ("latest", "1.0-latest")),
]


@pytest.mark.parametrize(("versions", "published", "withdrawn", "asked", "moved"), STATES)
def test_the_tags_a_release_moves_in_each_state_of_its_line(
    repo: Path, tmp_path: Path, versions: list[str], published: list[str], withdrawn: list[str], asked: str,
    moved: tuple[str, ...],
) -> None:  # fmt: skip
    manifests(repo, [v for v in versions if v.count(".") == 1])
    for v in versions:
        if v.count(".") == 2:
            write_manifest(
                repo, IMAGE, v, f'image: {IMAGE}\nversion: "{v}"\nextends: "{v.rsplit(".", 1)[0]}"\n{PATCH}'
            )
    with channel(repo, tmp_path, "production") as ch:
        publish(ch, published, tmp_path / "spool")
        for v in withdrawn:
            done = run(ch.root, "--registries", str(ch.file), "withdraw", f"{IMAGE}:{v}", "--reason", "bad",
                       *LOGIN, input=PASSWORD)  # fmt: skip
            assert done.exit_code == 0, done.stderr
        registries = load_registries(ch.root, str(ch.file))
        hosts = frozenset(ep.host for ep in registries.publish_endpoints())
        creds = CredentialStore(
            explicit=Credentials(username="u", password="the-password"), release_hosts=hosts
        )
        pool = EndpointPool(Repo(ch.root).load(IMAGE, asked), registries, creds, VERIFYING)

        assert set(line.Line(Repo(ch.root)).moves(pool)) == set(moved)


def test_a_newer_version_without_floating_tags_keeps_latest_off_an_older_release(
    repo: Path, tmp_path: Path
) -> None:
    # No newer release carries latest, so none left it: it stays where the manifests put it
    # (found by the stack's test_evaluate: a rerun of 25.03 beside a 25.05 with no floating tags).
    manifests(repo, ["1.0"])
    write_manifest(repo, IMAGE, "1.1", f'image: {IMAGE}\nversion: "1.1"\nextends: "1.0"\nfloating_tags: []\n')
    with channel(repo, tmp_path, "production") as ch:
        publish(ch, ["1.0"], tmp_path / "spool")
        registries = load_registries(ch.root, str(ch.file))
        hosts = frozenset(ep.host for ep in registries.publish_endpoints())
        creds = CredentialStore(
            explicit=Credentials(username="u", password="the-password"), release_hosts=hosts
        )
        pool = EndpointPool(Repo(ch.root).load(IMAGE, "1.0"), registries, creds, VERIFYING)

        assert line.Line(Repo(ch.root)).moves(pool) == ("1.0-latest",)


def _calls(name: str) -> set[str]:
    """The modules of src/ that call ``name``."""
    found = set()
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if called == name:
                    found.add(path.relative_to(SRC).as_posix())
    return found


def test_the_floating_tags_a_publish_moves_are_decided_in_one_place() -> None:
    # The manifests' rule and the withdrawals' are combined by line.py alone, which alone moves
    # floating tags onto a release; `plan` and a dry run of `publish` (plan.py) say what the
    # manifests alone would move, before any endpoint is asked. Every command that publishes or
    # copies a release hands the rule down (Line), never a list of tags worked out on its own.
    assert _calls("past_withdrawn") == {"release/model/line.py"}
    assert _calls("moving") <= {"release/model/line.py", "release/model/plan.py"}
    assert _calls("move_floating") == {"release/model/line.py"}
    assert _calls("Line") == {"release/run/pipeline.py", "cli/publishing.py", "release/steering/promote.py"}


def test_a_dry_run_of_publish_says_the_tags_the_publish_will_move(repo: Path, tmp_path: Path) -> None:
    # A new maintainer's reading (session 8): after `withdraw 1.1`, `publish 1.0.1 --dry-run`
    # said latest stays (the manifests' half of the rule) while the publish moved it.
    manifests(repo, ["1.0", "1.1"])
    write_manifest(repo, IMAGE, "1.0.1", f'image: {IMAGE}\nversion: "1.0.1"\nextends: "1.0"\n{PATCH}')
    with channel(repo, tmp_path, "production") as ch:
        publish(ch, ["1.0", "1.1"], tmp_path / "spool")
        withdrawn = run(ch.root, "--registries", str(ch.file), "withdraw", f"{IMAGE}:1.1", "--reason", "bad",
                        *LOGIN, input=PASSWORD)  # fmt: skip
        dry = run(ch.root, "--registries", str(ch.file), "publish", f"{IMAGE}:1.0.1", "--dry-run", "--json",
                  *LOGIN, input=PASSWORD)  # fmt: skip
        registries = load_registries(ch.root, str(ch.file))
        hosts = frozenset(ep.host for ep in registries.publish_endpoints())
        creds = CredentialStore(
            explicit=Credentials(username="u", password="the-password"), release_hosts=hosts
        )
        pool = EndpointPool(Repo(ch.root).load(IMAGE, "1.0.1"), registries, creds, VERIFYING)
        rule = line.Line(Repo(ch.root)).moves(pool)

    assert withdrawn.exit_code == 0, withdrawn.stderr
    assert dry.exit_code == 0, dry.stderr
    planned = json.loads(dry.stdout)
    assert set(planned["moves"]) == set(rule) == {"latest", "1.0-latest"}
    assert planned["moves_floating"] is True  # latest moves, though 1.1 is a newer version
    assert planned["withdrawals_unasked"] is None


@pytest.mark.parametrize(
    ("versions", "published"),
    [(["1.0", "1.1"], ["1.0", "1.1"]), (["1.0", "1.1", "1.2"], ["1.0", "1.1"])],
    ids=["the newest withdrawn", "a newer manifest not published yet"],
)
def test_withdraw_and_reinstate_put_latest_where_the_line_rule_gives_it(
    repo: Path, tmp_path: Path, versions: list[str], published: list[str]
) -> None:
    # A new maintainer's reading (session 14): with 1.2's manifest in the repository and not
    # published, `withdraw 1.1` moved latest to 1.0, which the line rule then would not give it.
    manifests(repo, versions)
    with channel(repo, tmp_path, "production") as ch:
        digests = publish(ch, published, tmp_path / "spool").digests
        version_of = {d: v for v, d in digests.items()}
        steps = {}
        for action, reason in (("withdraw", ("--reason", "bad")), ("reinstate", ())):
            done = run(ch.root, "--registries", str(ch.file), action, f"{IMAGE}:1.1", *reason, *LOGIN,
                       input=PASSWORD)  # fmt: skip
            assert done.exit_code == 0, done.stderr
            serving = {version_of.get(d or "") for d in ch.served("latest").values()}
            # A withdrawn release is given no tag whatever the rule says: publish refuses it first.
            standing = [v for v in published if not (action == "withdraw" and v == "1.1")]
            steps[action] = (serving, {v for v in standing if "latest" in moves(ch, v)})

    assert steps["withdraw"] == ({"1.0"}, {"1.0"})
    assert steps["reinstate"] == ({"1.1"}, {"1.1"})


def test_a_plan_whose_endpoints_cannot_say_shows_the_manifests_answer_and_why(
    repo: Path, tmp_path: Path
) -> None:
    # One answer for both dry runs (release and publish): a plan moves nothing, so an endpoint
    # that cannot say whether 1.1 is withdrawn fails nothing there; the publish asks again.
    manifests(repo, ["1.0", "1.1"])
    write_manifest(repo, IMAGE, "1.0.1", f'image: {IMAGE}\nversion: "1.0.1"\nextends: "1.0"\n{PATCH}')
    with channel(repo, tmp_path, "production") as ch:
        publish(ch, ["1.0", "1.1"], tmp_path / "spool")
        done = run(ch.root, "--registries", str(ch.file), "withdraw", f"{IMAGE}:1.1", "--reason", "bad",
                   *LOGIN, input=PASSWORD)  # fmt: skip
        asked = _planned(ch, "1.0.1")
        list(ch.states.values())[-1].faults.unavailable = 10_000  # a region down
        down = _planned(ch, "1.0.1")

    assert done.exit_code == 0, done.stderr
    assert asked == line.Planned(moves=("1.0-latest", "latest"))
    assert down.moves == line.forward(Repo(repo), Repo(repo).load(IMAGE, "1.0.1")) == ("1.0-latest",)
    assert down.unasked is not None
    assert "whether demo:1.1 is withdrawn cannot be told" in down.unasked


def _planned(ch: Channel, version: str) -> line.Planned:
    return line.Line(Repo(ch.root)).planned(pool_of(ch, version, ASKING))
