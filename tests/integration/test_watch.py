"""Releases that stay safe after they ship (issue #39), on the stack: `watch` re-reads what the
registry serves, `patch` prepares the next patch release, `release` ships only what changed, and
`watch --release` does it all for what needs it, parents first.

- An advisory (high, fixed in a newer accelerate) against the published training-cpu-pytorch
  25.03: `watch` exits 15 naming it, its fix and its SLA; the patch 25.03.1 ships the new
  accelerate and shares every other layer with 25.03; `latest` serves it, `25.03` keeps its digest;
  `watch` is quiet after.
- A base that moves: a small family (an SDK-like image on a hub tag of its own, and an image built
  on that release) stands in for pytorch-cpu-sdk and training-cpu-pytorch, where rebuilding the
  1.2 GB images twice would add nothing but minutes: the tag moves, `watch` names the SDK and,
  through it, the child; `watch --release` patches both, parents first; a second run publishes
  nothing and says why for each.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from .conftest import NO_EVALUATE, SDK, Cli
from .test_publish import endpoint_client, registries_file, served

pytestmark = pytest.mark.integration

CPU = "training-cpu-pytorch:25.03"
HIGH = "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N"
HUB = "127.0.0.1:15000"


@pytest.fixture(scope="module")
def repo_copy(fixture_cli: Cli, tmp_path_factory: pytest.TempPathFactory) -> Cli:
    """The session's repository copy, copied again: patches write manifests into it."""
    root = tmp_path_factory.mktemp("watch") / "repo"
    shutil.copytree(fixture_cli.root, root, ignore=shutil.ignore_patterns("out", "__pycache__"))
    return Cli(root=root, env=fixture_cli.env)


def advisory(rid: str, cve: str, package: str, fixed: str, days_ago: int = 3) -> dict[str, Any]:
    when = (datetime.now(UTC) - timedelta(days=days_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"schema_version": "1.6.0", "id": rid, "aliases": [cve], "summary": f"{rid}, made for the test",
            "modified": when, "published": when, "severity": [{"type": "CVSS_V3", "score": HIGH}],
            "affected": [{"package": {"ecosystem": "PyPI", "name": package}, "ranges": [
                {"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": fixed}]}]}]}  # fmt: skip


def layers(cli: Cli, regs: Path, image: str, tag: str) -> list[str]:
    client, repo = endpoint_client(cli, regs, "public", image)
    manifest = client.get_manifest(repo, tag)
    assert manifest is not None
    return [d.digest for d in manifest.layers]


def test_an_advisory_is_watched_patched_released_and_watch_is_quiet_after(
    repo_copy: Cli, tmp_path: Path
) -> None:
    cli = repo_copy
    regs = registries_file(tmp_path / "regs.yaml", "p" + uuid.uuid4().hex[:10])
    osv = tmp_path / "osv"
    osv.mkdir()
    at = ("--registries", str(regs))
    cli.run(*at, "release", SDK, "--no-scan", "the watch test gates the training image", *NO_EVALUATE,
            check=True, timeout=1800)  # fmt: skip
    cli.run(*at, "release", CPU, "--advisories", str(osv), *NO_EVALUATE, check=True, timeout=1800)
    before = served(cli, regs, "25.03", "training-cpu-pytorch")
    quiet = cli.run(*at, "watch", CPU, "--advisories", str(osv))

    (osv / "accelerate.json").write_text(
        json.dumps(advisory("TEST-W-1", "CVE-2099-0301", "accelerate", "1.6.0"))
    )
    watched = cli.run(*at, "watch", "--advisories", str(osv), "--json")
    patched = cli.run(*at, "patch", CPU, "--advisories", str(osv), "--json", timeout=1800)
    ref = json.loads(patched.stdout)["ref"] if patched.returncode == 0 else ""
    released = cli.run(*at, "release", ref, "--advisories", str(osv), "--json", *NO_EVALUATE, timeout=1800)
    after = cli.run(*at, "watch", "--advisories", str(osv), "--json")

    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert watched.returncode == 15, watched.stdout[-3000:] + watched.stderr[-3000:]
    answer = json.dumps(json.loads(watched.stdout))
    assert "CVE-2099-0301" in answer
    assert "1.6.0" in answer  # its fix
    assert "sla" in answer.lower()
    assert patched.returncode == 0, patched.stderr[-3000:]
    assert ref == "training-cpu-pytorch:25.03.1"
    assert released.returncode == 0, released.stderr[-3000:]
    new = served(cli, regs, "25.03.1", "training-cpu-pytorch")
    assert len(set(new.values())) == 1
    assert None not in new.values()
    assert served(cli, regs, "latest", "training-cpu-pytorch") == new
    assert served(cli, regs, "25.03-latest", "training-cpu-pytorch") == new
    assert served(cli, regs, "25.03", "training-cpu-pytorch") == before  # never moves
    old_layers, new_layers = (
        layers(cli, regs, "training-cpu-pytorch", "25.03"),
        layers(cli, regs, "training-cpu-pytorch", "25.03.1"),
    )
    changed = [d for d in new_layers if d not in old_layers]
    # accelerate's layer and the pip constraints file's (which names every pin): nothing else
    assert len(changed) == 2, (old_layers, new_layers)
    assert len(new_layers) == len(old_layers)
    sbom = cli.run(*at, "sbom", "training-cpu-pytorch:25.03.1", check=True).stdout
    assert "pkg:pypi/accelerate@1.6.0" in sbom
    assert "pkg:pypi/accelerate@1.5.2" not in sbom
    out = cli.root / "out" / "releases" / "training-cpu-pytorch"
    for lang in ("en", "zh"):
        notes = (out / f"25.03.1.{lang}.md").read_text()
        assert "CVE-2099-0301" in notes, lang
        assert "1.5.2" in notes, lang
        assert "1.6.0" in notes, lang
    assert after.returncode == 0, after.stdout[-3000:] + after.stderr[-3000:]
    assert "superseded" in after.stdout


# --- a base that moves -----------------------------------------------------------------------


def family(root: Path, base_repo: str) -> None:
    """An SDK-like image (its pip into the base interpreter, on a hub tag of its own) and an image
    built on its release: the shape of pytorch-cpu-sdk and training-cpu-pytorch, small."""
    common = ("scenario: [training]\nframework: pytorch\naccelerator: {name: CPU, kind: cpu}\n"
              "tools: [python3]\nfloating_tags: [latest]\n")  # fmt: skip
    manifests = {
        "wsdk": ('image: wsdk\nversion: "1.0"\ntitle: {en: wsdk 1.0, zh: wsdk 1.0}\n' + common
                 + f'base: {{registry: hub, repository: {base_repo}, tag: "12", python: /usr/bin/python3}}\n'
                 "pip: {install: system}\ncomponents:\n  six: {kind: pip, name: six, version: 1.16.0}\n"
                 "release: {upgraded: [six]}\n"),
        "wapp": ('image: wapp\nversion: "1.0"\ntitle: {en: wapp 1.0, zh: wapp 1.0}\n' + common
                 + 'base: {image: wsdk, version: "1.0", component: six, python: /usr/bin/python3, '
                 "provides: [six]}\ncomponents:\n  six: {kind: base, name: six, version: 1.16.0}\n"
                 "  idna: {kind: pip, name: idna, version: '3.10'}\nrelease: {upgraded: [idna]}\n"),
    }  # fmt: skip
    for image, text in manifests.items():
        (root / "manifests" / image).mkdir(parents=True)
        (root / "manifests" / image / "1.0.yaml").write_text(text)
        (root / "images" / image).mkdir(parents=True)
        (root / "images" / image / "image.yaml").write_text("template: Dockerfile.j2\n")


def docker(*args: str, stdin: str | None = None) -> str:
    return subprocess.run(["docker", *args], input=stdin, capture_output=True, text=True, check=True).stdout


def test_a_moved_base_patches_the_sdk_then_its_child_and_a_second_run_publishes_nothing(
    repo_copy: Cli, tmp_path: Path
) -> None:
    cli = repo_copy
    name = "w" + uuid.uuid4().hex[:10]
    base_repo = f"debian/bookworm-python-{name}"
    hub_ref = f"{HUB}/base/{base_repo}:12"
    docker("pull", "-q", f"{HUB}/base/debian/bookworm-python:12")
    docker("tag", f"{HUB}/base/debian/bookworm-python:12", hub_ref)
    docker("push", "-q", hub_ref)
    family(cli.root, base_repo)
    regs = registries_file(tmp_path / "regs.yaml", name)
    at = ("--registries", str(regs))
    nothing = tmp_path / "osv"
    nothing.mkdir()
    for ref in ("wsdk:1.0", "wapp:1.0"):
        cli.run(*at, "lock", ref, check=True, timeout=1800)
        cli.run(*at, "render", ref, check=True)
        cli.run(*at, "release", ref, "--advisories", str(nothing), check=True, timeout=1800)
    sdk_before = served(cli, regs, "1.0", "wsdk")
    # The hub's tag moves: another image there (a label more; nothing fetched).
    docker("build", "-q", "-t", hub_ref, "-", stdin=f"FROM {hub_ref}\nLABEL io.xpu-test.moved={name}\n")
    docker("push", "-q", hub_ref)

    watched = cli.run(*at, "watch", "wsdk:1.0", "wapp:1.0", "--advisories", str(nothing), "--json")
    done = cli.run(*at, "watch", "--release", "--advisories", str(nothing), timeout=3600)
    again = cli.run(*at, "watch", "--release", "--advisories", str(nothing))

    assert watched.returncode == 15, watched.stdout[-3000:] + watched.stderr[-3000:]
    said = watched.stdout
    assert "moved" in said
    assert "wsdk:1.0" in said
    assert "wapp:1.0" in said
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    summary = done.stdout + done.stderr
    assert summary.index("wsdk:1.0.1") < summary.index("wapp:1.0.1")  # parents first
    for image in ("wsdk", "wapp"):
        patch = served(cli, regs, "1.0.1", image)
        assert len(set(patch.values())) == 1, image
        assert None not in patch.values(), image
        assert served(cli, regs, "latest", image) == patch, image
    assert served(cli, regs, "1.0", "wsdk") == sdk_before
    wapp = (cli.root / "manifests" / "wapp" / "1.0.1.yaml").read_text()
    assert "1.0.1" in wapp  # built on the SDK's patch
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    quiet = again.stdout + again.stderr
    assert "nothing needs a patch" in quiet
    assert not (cli.root / "manifests" / "wsdk" / "1.0.2.yaml").exists()
    assert not (cli.root / "manifests" / "wapp" / "1.0.2.yaml").exists()
