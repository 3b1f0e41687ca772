"""The recipes of docs/recipes.md, tried as written where no engine is needed: each test takes a
recipe's section of the page, writes the files it shows into a temporary copy of the repository,
runs the commands it shows, and checks what the page says they do (its output blocks word for
word). A recipe's engine steps (lock, build, release) are the integration tests' to try."""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess
from datetime import date
from pathlib import Path

import pytest
from click.testing import Result

from xpu_release.evidence.osv import Advisories
from xpu_release.evidence.scan import gate_failure, scan
from xpu_release.evidence.signing import envelope, load_signer, load_verifier, signed_by
from xpu_release.evidence.vex import read_vex
from xpu_release.manifest import ImageSpec, Repo

from .helpers import run

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "recipes.md").read_text(encoding="utf-8")
TODAY = date(2026, 12, 5)
HIGH = [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:R/S:U/C:H/I:H/A:N"}]  # 8.1


def section(title: str) -> str:
    """The recipe under ``## title``, up to the next one."""
    return PAGE.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def files(text: str) -> dict[str, str]:
    """The files a recipe shows: fenced blocks whose info string names a path (```yaml PATH)."""
    return {path: body for _, path, body in re.findall(r"```(\w+) (\S+)\n(.*?)```", text, flags=re.S)}


def outputs(text: str) -> list[str]:
    """What a recipe shows a command printing: its ```text blocks."""
    return re.findall(r"```text\n(.*?)```", text, flags=re.S)


def step(text: str, command: str) -> list[str]:
    """``command`` as the recipe writes it (it must be there), as arguments for the CLI."""
    assert command in text, command
    argv = shlex.split(command)
    assert argv[0] == "xpu-release"
    return argv[1:]


def write(repo: Path, shown: dict[str, str]) -> None:
    for path, body in shown.items():
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body, encoding="utf-8")


def test_bump_one_pin(repo: Path) -> None:
    text = section("Bump one pin")
    manifest = "manifests/training-cpu-pytorch/25.04.yaml"

    bumped = run(
        repo,
        *step(text, "xpu-release new-version training-cpu-pytorch:25.04 --from 25.03 --set accelerate=1.6.0"),
    )
    changes = run(repo, *step(text, "xpu-release diff training-cpu-pytorch:25.03 training-cpu-pytorch:25.04"))
    unlocked = run(repo, *step(text, "xpu-release release training-cpu-pytorch:25.04"))

    assert bumped.exit_code == 0, bumped.stderr
    assert (repo / manifest).read_text() == files(text)[manifest]
    assert (repo / "images" / "training-cpu-pytorch" / "25.04" / "Dockerfile").is_file()
    assert changes.stdout == outputs(text)[0]
    assert "does not lock" in text
    assert unlocked.exit_code == 4  # stopped at the lock stage: nothing built
    assert f"error: {unlocked.stderr.split('error: ', 1)[1]}" == outputs(text)[1]


def test_add_an_image_family(repo: Path) -> None:
    text = section("Add an image family")
    shown = files(text)
    definition = "images/inference-cpu-pytorch/image.yaml"
    write(repo, shown)

    rendered = run(repo, *step(text, "xpu-release render inference-cpu-pytorch:25.03"))
    valid = run(repo, *step(text, "xpu-release validate"))
    order = run(repo, *step(text, "xpu-release order inference-cpu-pytorch:25.03 pytorch-cpu-sdk:2.13.0"))
    (repo / definition).write_text(shown[definition].replace("template: Dockerfile.j2\n", ""))
    untemplated = run(repo, "render", "inference-cpu-pytorch:25.03")

    assert rendered.exit_code == 0, rendered.stderr
    assert (repo / "images" / "inference-cpu-pytorch" / "25.03" / "Dockerfile").is_file()
    assert valid.exit_code == 0, valid.stderr
    assert order.stdout == outputs(text)[0]
    assert untemplated.exit_code == 2
    assert "missing required key 'template'" in untemplated.stderr
    assert "missing required key 'template'" in text
    smoke = ast.parse(shown["images/inference-cpu-pytorch/tests/test_inference.py"])
    tests = [f for f in smoke.body if isinstance(f, ast.FunctionDef) and f.name.startswith("test_")]
    assert [[a.arg for a in f.args.args] for f in tests] == [["host", "spec"]]


def _gate_records(folder: Path) -> Path:
    """An advisory for transformers 4.49.0 (high, fixed in 4.50.0), as OSV writes one."""
    folder.mkdir(parents=True)
    events = [{"introduced": "0"}, {"fixed": "4.50.0"}]
    affected = {"package": {"ecosystem": "PyPI", "name": "transformers"},
                "ranges": [{"type": "ECOSYSTEM", "events": events}]}  # fmt: skip
    record = {"schema_version": "1.6.0", "id": "PYSEC-2026-1", "aliases": ["CVE-2026-0001"],
              "summary": "made for the recipes' test", "severity": HIGH, "affected": [affected]}  # fmt: skip
    (folder / "PYSEC-2026-1.json").write_text(json.dumps(record))
    return folder


SBOM = json.dumps({"components": [{"purl": "pkg:pypi/transformers@4.49.0"}, {"purl": "pkg:pypi/ray@2.43.0"}]})


def test_add_a_vex_exception(repo: Path, tmp_path: Path) -> None:
    text = section("Add a VEX exception")
    path = "images/training-cpu-pytorch/vex.openvex.json"
    write(repo, files(text))
    spec = Repo(repo).load_ref("training-cpu-pytorch:25.03")
    advisories = Advisories([_gate_records(tmp_path / "osv")], tmp_path / "cache")

    valid = run(repo, *step(text, "xpu-release validate"))
    statements, problems = read_vex(repo / path, path)
    without = scan(spec, SBOM.encode(), advisories, (), today=TODAY)
    excepted = scan(spec, SBOM.encode(), advisories, statements, today=TODAY)
    document = json.loads(files(text)[path])
    del document["statements"][0]["review_by"]
    (repo / path).write_text(json.dumps(document, indent=2))
    unreviewed = run(repo, "validate")

    assert valid.exit_code == 0, valid.stderr
    assert problems == []
    assert not without.passed
    assert [f.ids[0] for f in without.blocking] == ["CVE-2026-0001"]
    assert excepted.passed
    assert excepted.findings[0].exception is not None
    assert excepted.findings[0].exception.where == f"{path}:8"
    assert unreviewed.exit_code == 2
    assert "an exception needs review_by" in unreviewed.stderr


def test_release_parents_first(repo: Path) -> None:
    text = section("Release parents first")
    write(repo, files(text))
    child = repo / "manifests" / "training-cpu-pytorch" / "25.04.yaml"

    bumped = run(
        repo,
        *step(text, "xpu-release new-version training-cpu-pytorch:25.04 --from 25.03 --set accelerate=1.6.0"),
    )
    edit = re.search(r"^echo '(.*)' >> (\S+)$", text, flags=re.M)  # the one line a person adds
    assert edit is not None
    assert repo / edit[2] == child
    child.write_text(child.read_text() + edit[1] + "\n")
    order = run(repo, *step(text, "xpu-release order training-cpu-pytorch:25.04 pytorch-cpu-sdk:2.13.1"))
    assert 'xpu-release render "$ref"' in text  # the loop renders each, in that order
    rendered = [run(repo, "render", ref) for ref in order.stdout.split()]
    valid = run(repo, "validate")

    assert bumped.exit_code == 0, bumped.stderr
    assert Repo(repo).load_ref("training-cpu-pytorch:25.04").base.release_ref == "pytorch-cpu-sdk:2.13.1"
    assert order.exit_code == 0, order.stderr
    assert order.stdout == outputs(text)[0]
    assert [r.exit_code for r in rendered] == [0, 0]
    assert "FROM" in (repo / "images" / "pytorch-cpu-sdk" / "2.13.1" / "Dockerfile").read_text()
    assert valid.exit_code == 0, valid.stderr


def test_rotate_the_signing_key(tmp_path: Path) -> None:
    text = section("Rotate the signing key")
    commands = [line for line in text.splitlines() if line.startswith("openssl ")]
    for line in commands:  # the new key as the recipe makes it, and the old one made the same way
        for year in ("2027", "2026"):
            subprocess.run(
                shlex.split(line.replace("2027", year)), cwd=tmp_path, check=True, capture_output=True
            )
    new, old = load_signer(str(tmp_path / "key-2027.pem")), load_signer(str(tmp_path / "key-2026.pem"))
    statement = b'{"_type":"https://in-toto.io/Statement/v1"}'

    assert len(commands) == 2
    assert new is not None
    assert old is not None
    signed_new, signed_old = envelope(statement, new), envelope(statement, old)
    assert signed_by(signed_new, load_verifier(str(tmp_path / "key-2027.pub")))
    assert not signed_by(signed_new, load_verifier(str(tmp_path / "key-2026.pub")))
    assert not signed_by(signed_old, load_verifier(str(tmp_path / "key-2027.pub")))
    assert "--signing-key key-2027.pem" in text
    assert "--key key-2027.pub" in text


def test_read_a_failed_gate(tmp_path: Path) -> None:
    text = section("Read a failed gate")
    vex = tmp_path / "images" / "training-cpu-pytorch" / "vex.openvex.json"
    vex.parent.mkdir(parents=True)
    vex.write_text(json.dumps({
        "@context": "https://openvex.dev/ns/v0.2.0", "@id": "https://example.invalid/vex/1",
        "author": "release engineering", "timestamp": "2026-12-05T00:00:00Z", "version": 1,
        "statements": [{"vulnerability": {"name": "CVE-2026-0009"},
                        "products": [{"@id": "pkg:oci/training-cpu-pytorch",
                                      "subcomponents": [{"@id": "pkg:pypi/torch"}]}],
                        "status": "not_affected", "justification": "component_not_present",
                        "review_by": "2027-03-31"}]}, indent=2))  # fmt: skip
    statements, _ = read_vex(vex, "images/training-cpu-pytorch/vex.openvex.json")
    spec = Repo(ROOT).load_ref("training-cpu-pytorch:25.03")
    result = scan(spec, SBOM.encode(), Advisories([_gate_records(tmp_path / "osv")], tmp_path / "cache"),
                  statements, today=TODAY)  # fmt: skip

    assert not result.passed
    assert outputs(text)[0] == f"error: {gate_failure(result)}\n"
    finding = result.to_json()["findings"][0]
    for field in ("id", "aliases", "package", "installed", "fixed", "severity", "vex", "note", "blocking"):
        assert field in finding
        assert f"`{field}`" in text
    assert "stale_exceptions" in result.to_json()
    assert "`stale_exceptions[]`" in text


def test_withdraw_a_bad_release(repo: Path, tmp_path: Path) -> None:
    from .release.line import LOGIN, PASSWORD, channel, publish

    text = section("Withdraw a bad release")
    run(repo, "new-version", "training-cpu-pytorch:25.04", "--from", "25.03", "--set", "accelerate=1.6.0")
    with channel(repo, tmp_path, "production", image="training-cpu-pytorch") as ch:
        digests = publish(ch, ["25.03", "25.04"], tmp_path / "spool").digests

        def as_written(command: str) -> Result:
            return run(repo, "--registries", str(ch.file), *step(text, command), *LOGIN, input=PASSWORD)

        reason = '"accelerate 1.6.0 hangs on start; use 25.03"'
        withdrawn = as_written(f"xpu-release withdraw training-cpu-pytorch:25.04 --reason {reason}")
        latest_after_withdraw = set(ch.served("latest").values())
        status = as_written("xpu-release status training-cpu-pytorch:25.04")
        reinstated = as_written("xpu-release reinstate training-cpu-pytorch:25.04")

        assert withdrawn.exit_code == 0, withdrawn.stderr
        assert latest_after_withdraw == {digests["25.03"]}
        assert set(ch.served("25.04").values()) == {digests["25.04"]}  # the version tag stays
        assert status.exit_code == 0, status.stderr
        assert "accelerate 1.6.0 hangs on start; use 25.03" in status.stdout
        assert reinstated.exit_code == 0, reinstated.stderr
        assert set(ch.served("latest").values()) == {digests["25.04"]}


def test_promote_from_staging(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from xpu_release.evidence.referrers import list_referrers

    from .release.line import LOGIN, PASSWORD, channel, publish

    text = section("Promote from staging")
    monkeypatch.chdir(repo)  # `--from registries.staging.yaml` is the fake staging channel written here
    staging_file = repo / "registries.staging.yaml"
    with (
        channel(
            repo, tmp_path, "staging", "egslingjun-staging", "training-cpu-pytorch", staging_file
        ) as staging,
        channel(repo, tmp_path, "production", "egslingjun", "training-cpu-pytorch") as prod,
    ):
        digest = publish(staging, ["25.03"], tmp_path / "spool").digests["25.03"]
        tried = step(
            text, "xpu-release --registries registries.staging.yaml verify training-cpu-pytorch:25.03 --deep"
        )
        in_staging = run(repo, *tried, *LOGIN, input=PASSWORD)
        promote = step(text, "xpu-release promote training-cpu-pytorch:25.03 --from registries.staging.yaml")
        promoted = run(repo, "--registries", str(prod.file), *promote, *LOGIN, input=PASSWORD)
        check = step(text, "xpu-release verify training-cpu-pytorch:25.03 --deep")
        verified = run(repo, "--registries", str(prod.file), *check, *LOGIN, input=PASSWORD)

        assert in_staging.exit_code == 0, in_staging.stderr
        assert promoted.exit_code == 0, promoted.stderr
        assert verified.exit_code == 0, verified.stderr
        assert set(prod.served("25.03").values()) == set(prod.served("latest").values()) == {digest}
        for a, b in zip(staging.endpoints(), prod.endpoints(), strict=True):
            ours = list_referrers(prod.client(b), prod.repo(b), digest).descriptors
            theirs = list_referrers(staging.client(a), staging.repo(a), digest).descriptors
            assert sorted(d.digest for d in ours) == sorted(d.digest for d in theirs)
        for exit_code in ("exit 16", "exit 14", "exit 9"):
            assert exit_code in text


def test_patch_a_release_a_new_advisory_hits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from xpu_release.image.lock import Lock, load_lock, pins_sha256

    from .release.published_kit import CPU, TRAINING, Calendar, sbom, world

    text = section("Patch a release a new advisory hits")
    manifest = "manifests/training-cpu-pytorch/25.03.1.yaml"
    with world(tmp_path) as w:
        w.released()  # the SDK and 25.03 served as a user pulls them, with their SBOMs
        w.advisory("CVE-2026-0001", "accelerate", "1.6.0", aliases=("GHSA-aaaa-bbbb-cccc",))  # high
        Calendar(monkeypatch, "2026-12-03")
        parent = load_lock(w.root, Repo(w.root).load(CPU, "25.03"), current=False)

        def relocked(_root: Path, spec: ImageSpec, *_: object, **__: object) -> object:
            class Relocked:  # lock's own resolution asks the index (the network): stood in for
                lock = Lock(pins_sha256=pins_sha256(spec), layers=parent.layers, base=parent.base,
                            provided=parent.provided)  # fmt: skip

            return Relocked()

        monkeypatch.setattr("xpu_release.image.index.offers", lambda _spec, name, version: True)
        monkeypatch.setattr("xpu_release.image.relock.relock", relocked)

        def as_written(command: str) -> Result:
            argv = [str(w.osv) if a == ".cache/osv" else a for a in step(text, command)]
            return run(w.root, "--registries", str(w.registries), *argv)

        watched = as_written("xpu-release watch training-cpu-pytorch:25.03 --advisories .cache/osv")
        patched = as_written("xpu-release patch training-cpu-pytorch:25.03 --advisories .cache/osv")
        assert "xpu-release release training-cpu-pytorch:25.03.1 --advisories .cache/osv" in text
        fixed = tuple(("accelerate", "1.6.0") if n == "accelerate" else (n, v) for n, v in TRAINING)
        w.publish(CPU, "25.03.1", sbom(*fixed), salt="25.03.1")  # what that release publishes
        after = as_written("xpu-release watch training-cpu-pytorch:25.03 --advisories .cache/osv")

        assert watched.exit_code == 15, watched.stderr
        assert watched.stdout == outputs(text)[0]
        assert patched.exit_code == 0, patched.stderr
        assert patched.stdout == "training-cpu-pytorch:25.03.1\n"
        assert (w.root / manifest).read_text() == files(text)[manifest]
        assert (w.root / "images" / CPU / "25.03.1" / "Dockerfile").is_file()
        assert after.exit_code == 0, after.stderr
        assert after.stdout == outputs(text)[1]
    assert "xpu-release watch --release --advisories .cache/osv" in text


@pytest.mark.parametrize(
    "title",
    ["Bump one pin", "Add an image family", "Add a VEX exception", "Release parents first",
     "Finish a half-published release", "Withdraw a bad release", "Promote from staging",
     "Rotate the signing key", "Read a failed gate", "Patch a release a new advisory hits"],
)  # fmt: skip
def test_every_recipe_says_how_it_was_tried(title: str) -> None:
    text = section(title)
    tried = text.split("> **Tried:**", 1)[1]

    assert "tests/" in tried or "by hand on" in tried
    if "to be tried on the stack" not in tried:
        # Checked here, engine-free; or, where nothing of it runs without registries, tried by
        # hand on the local stack (when) and run by the integration suite (which tests).
        on_the_stack = re.search(r"on the local stack on \d{4}-\d{2}-\d{2}", tried) is not None
        assert "test_recipes.py" in tried or (on_the_stack and "tests/integration/" in tried)
